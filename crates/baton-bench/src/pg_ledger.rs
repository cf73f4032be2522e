//! Section 11: the idempotency ledger on PostgreSQL (issue 3): `begin` + `complete` pairs per
//! second with 8 and 32 workers, against `pgbench`'s built-in `simple-update` transactions per
//! second at the same client count, on the same server, in the same run. Target: ≥ 0.5.
//!
//! Both sides measure tables with statistics: `pgbench -i` analyzes its own, and the ledger's
//! are analyzed after an untimed warm-up of begin + complete pairs (what autovacuum would do on
//! a server that runs it; this one has it off). The warm-up also opens the pool's connections,
//! as `pgbench` reports its rate without its connection time. Before schema version 9 the
//! ledger's extra indexes on status and expiry let each pooled connection keep plans made on
//! nearly empty, unanalyzed tables that walked all of the tenant's operations (the foreign-key
//! check of every `begin` among them): 8 workers fell from about 1,000 to 300 pairs/s within
//! the five rounds. Version 9 dropped those indexes, so the primary key is the only path.
//!
//! Both sides run for the same time, in alternating rounds (medians), on their own schema (`pgbench -i` builds its tables under
//! a `search_path` the bench sets). A pair is two transactions, each committed (and so flushed,
//! with `synchronous_commit=on`); a `simple-update` transaction is one (an update, a select and
//! an insert). A missing `pgbench` or server skips the section with one line.

use std::io::Write;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_postgres::PgStore;
use baton_store::{Begin, LedgerStore, Publish};
use serde_json::json;

use crate::postgres::server_url;
use crate::{Report, Target, Unit, median};

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (secs, rounds) = if quick { (1, 1) } else { (2, 5) };
    writeln!(
        out,
        "\n[11] postgres ledger: begin + complete pairs vs pgbench simple-update TPS, 8 and 32 clients, {rounds} alternating rounds of {secs} s each (medians)"
    )?;
    out.flush()?;
    if Command::new("pgbench").arg("--version").output().is_err() {
        writeln!(out, "    skipped: pgbench is not installed")?;
        return Ok(());
    }
    let url = server_url();
    let base = url.split('?').next().unwrap_or(&url).to_owned();
    let schema = format!("baton_bench_pgbench_{}", uuid::Uuid::now_v7().simple());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let admin = rt
        .block_on(baton_postgres::bench::connect(&base))
        .map_err(|e| anyhow!(e))?;
    let measured = (|| -> anyhow::Result<()> {
        rt.block_on(baton_postgres::bench::create_schema(&admin, &schema))
            .map_err(|e| anyhow!(e))?;
        pgbench(&base, &schema, &["-i", "-s", "1", "-q"])?;
        for clients in [8usize, 32] {
            // Alternating rounds, medians: the server's fsync latency drifts on a small machine,
            // and each side should see the same drift.
            let ledger_url = format!("{base}?schema={schema}_ledger{clients}&pool_size={clients}");
            let store = rt.block_on(PgStore::connect(&ledger_url))?;
            let store = Arc::new(store);
            rt.block_on(pairs_per_second(
                store.clone(),
                clients,
                Duration::from_millis(500),
                "warm-up".to_owned(),
            ))?;
            let ledger = format!("{schema}_ledger{clients}");
            rt.block_on(baton_postgres::bench::analyze_ledger(&admin, &ledger))
                .map_err(|e| anyhow!(e))?;
            let (mut tps_rounds, mut pair_rounds) = (Vec::new(), Vec::new());
            for round in 0..rounds {
                tps_rounds.push(pgbench_tps(&base, &schema, clients, secs)?);
                let store = store.clone();
                pair_rounds.push(rt.block_on(pairs_per_second(
                    store,
                    clients,
                    Duration::from_secs(secs),
                    round.to_string(),
                ))?);
            }
            let (tps, pairs) = (median(&tps_rounds), median(&pair_rounds));
            let ratio = pairs / tps;
            writeln!(
                out,
                "    {clients:>2} clients: pgbench simple-update {tps:.0} tps; baton {pairs:.0} pairs/s, {ratio:.2}x"
            )?;
            let (key, label) = match clients {
                8 => ("pg_ledger_ratio_8", "pg ledger pairs vs pgbench, 8 clients"),
                _ => (
                    "pg_ledger_ratio_32",
                    "pg ledger pairs vs pgbench, 32 clients",
                ),
            };
            report.figure(key, label, ratio, Unit::Ratio, Some(Target::AtLeast(0.5)));
        }
        Ok(())
    })();
    let schemas = [
        schema.clone(),
        format!("{schema}_ledger8"),
        format!("{schema}_ledger32"),
    ];
    let names: Vec<&str> = schemas.iter().map(String::as_str).collect();
    let dropped = rt
        .block_on(baton_postgres::bench::drop_schemas(&admin, &names))
        .map_err(|e| anyhow!(e));
    measured?;
    dropped?;
    out.flush()?;
    Ok(())
}

async fn pairs_per_second(
    store: Arc<PgStore>,
    workers: usize,
    time: Duration,
    round: String,
) -> anyhow::Result<f64> {
    let tenant = TenantId::default_tenant();
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (store, tenant, done) = (store.clone(), tenant.clone(), done.clone());
        let round = round.clone();
        tasks.spawn(async move {
            let owner = format!("w{w}");
            let mut i = 0u64;
            while started.elapsed() < time {
                let key = format!("op-{round}-{w}-{i}");
                i += 1;
                let begun = store
                    .begin(
                        &tenant,
                        &key,
                        &RequestKey([7; 32]),
                        &owner,
                        Duration::from_secs(30),
                        Duration::from_secs(3600),
                        Timestamp::now(),
                    )
                    .await?;
                let Begin::Acquired { operation, .. } = begun else {
                    bail!("{key} was not acquired");
                };
                store
                    .publish(
                        &tenant,
                        &key,
                        operation.fence,
                        Publish::Complete(&json!({ "ok": i })),
                        false,
                        Timestamp::now(),
                    )
                    .await?
                    .map_err(|e| anyhow::anyhow!("{key}: {e:?}"))?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

fn pgbench(url: &str, schema: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("pgbench")
        .args(args)
        .arg(url)
        .env("PGOPTIONS", format!("-c search_path={schema}"))
        .output()
        .context("running pgbench")?;
    if !out.status.success() {
        bail!(
            "pgbench {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn pgbench_tps(url: &str, schema: &str, clients: usize, secs: u64) -> anyhow::Result<f64> {
    let c = clients.to_string();
    let t = secs.to_string();
    let text = pgbench(
        url,
        schema,
        &["-n", "-b", "simple-update", "-c", &c, "-j", "2", "-T", &t],
    )?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("tps = ")
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|n| n.parse::<f64>().ok())
        })
        .with_context(|| format!("no tps line in pgbench's output:\n{text}"))
}
