//! Section 10: the idempotency ledger (issue 8): `begin` + `complete` pairs per second with 1,
//! 8 and 32 concurrent workers on one SQLite store, against the bare limit measured in the same
//! run: a rusqlite loop that inserts a row and updates it, each in its own `BEGIN IMMEDIATE`
//! transaction, with the same durability settings (WAL, `synchronous = NORMAL`)
//! (`baton_sqlite::bench::BareLedger`). Target: ≥ 0.6 of the bare rate (issue 16).
//!
//! baton's pair writes what the bare loop writes, one row each (schema 13 keeps the live attempt
//! in the operation's row): `begin` inserts the operation, `complete` updates it under its fence
//! and reads it back (`RETURNING`); its rows are wider, and checked. A lone call runs on
//! its caller's thread; calls that find the writing connection busy go to the store's writer
//! thread. Workers in one process share that one writer connection, so concurrency buys no
//! parallel writes on SQLite, but the writer commits the calls queued together in one
//! transaction (group commit).

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_sqlite::SqliteStore;
use baton_sqlite::bench::BareLedger;
use baton_store::{Begin, LedgerStore, Publish};
use serde_json::json;
use tokio::runtime::Runtime;

use crate::{Report, Target, Unit, on_worker};

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (pairs, rounds) = if quick { (400, 1) } else { (4_000, 3) };
    writeln!(
        out,
        "\n[10] ledger: begin + complete pairs on SQLite, 1/8/32 concurrent workers, against a bare insert + update loop ({pairs} pairs each, {rounds} rounds alternating with the bare loop, fresh files each)"
    )?;
    out.flush()?;
    let mut details = Vec::new();
    for workers in [1usize, 8, 32] {
        // Bare and baton side by side, alternating which goes first, so drift in a shared
        // machine hits both alike; the figure is the median of the rounds' ratios.
        let (mut rates, mut bares, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let bare_path = dir.join(format!("ledger-bare-{workers}-{round}.db"));
            let path = dir.join(format!("ledger-{workers}-{round}.db"));
            let baton = || on_worker(rt, async move { baton_pairs(&path, pairs, workers).await });
            let (rate, bare) = if round % 2 == 0 {
                let bare = bare_pairs(&bare_path, pairs)?;
                (baton()?, bare)
            } else {
                let rate = baton()?;
                (rate, bare_pairs(&bare_path, pairs)?)
            };
            rates.push(rate);
            bares.push(bare);
            ratios.push(rate / bare);
        }
        let ratio = crate::median(&ratios);
        writeln!(
            out,
            "  {workers:>2} workers: baton {} pairs/s, bare {} pairs/s, ratios {}; median {ratio:.2}x bare",
            crate::list(&rates, |r| format!("{r:.0}")),
            crate::list(&bares, |r| format!("{r:.0}")),
            crate::list(&ratios, |r| format!("{r:.2}")),
        )?;
        let (key, label): (&'static str, String) = match workers {
            1 => ("ledger_ratio_1", "ledger pairs vs bare, 1 worker".into()),
            8 => ("ledger_ratio_8", "ledger pairs vs bare, 8 workers".into()),
            _ => ("ledger_ratio_32", "ledger pairs vs bare, 32 workers".into()),
        };
        report.figure(key, label, ratio, Unit::Ratio, Some(Target::AtLeast(0.6)));
        details.push(json!({ "workers": workers, "baton_pairs_per_s": rates, "bare_pairs_per_s": bares, "ratios": ratios }));
    }
    report.details.insert("ledger".into(), json!(details));
    out.flush()?;
    Ok(())
}

async fn baton_pairs(path: &Path, pairs: usize, workers: usize) -> anyhow::Result<f64> {
    let store = Arc::new(SqliteStore::open(path).await?);
    let tenant = TenantId::default_tenant();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (store, tenant) = (store.clone(), tenant.clone());
        let share = pairs / workers + usize::from(w < pairs % workers);
        tasks.spawn(async move {
            let owner = format!("w{w}");
            for i in 0..share {
                let key = format!("op-{w}-{i}");
                let now = Timestamp::now();
                let begun = store
                    .begin(
                        &tenant,
                        &key,
                        &RequestKey([7; 32]),
                        &owner,
                        Duration::from_secs(30),
                        Duration::from_secs(3600),
                        now,
                    )
                    .await?;
                let Begin::Acquired { operation, .. } = begun else {
                    anyhow::bail!("{key} was not acquired");
                };
                let result = json!({ "ok": i });
                store
                    .publish(
                        &tenant,
                        &key,
                        operation.fence,
                        Publish::Complete(&result),
                        false,
                        Timestamp::now(),
                    )
                    .await?
                    .map_err(|e| anyhow::anyhow!("{key}: {e:?}"))?;
            }
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(pairs as f64 / started.elapsed().as_secs_f64())
}

fn bare_pairs(path: &Path, pairs: usize) -> anyhow::Result<f64> {
    let mut bare = BareLedger::open(path).map_err(|e| anyhow::anyhow!("bare ledger: {e}"))?;
    let started = Instant::now();
    for i in 0..pairs {
        bare.pair(i, Timestamp::now().0)
            .map_err(|e| anyhow::anyhow!("bare ledger: {e}"))?;
    }
    Ok(pairs as f64 / started.elapsed().as_secs_f64())
}
