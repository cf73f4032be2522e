//! Section 5: the PostgreSQL store against bare `tokio-postgres` on the same server.
//!
//! The server is `BATON_BENCH_PG`, else `BATON_TEST_PG`, else
//! `postgres://postgres@127.0.0.1:5432/test`. Each run makes two fresh schemas, one for
//! baton's store and one for the bare baseline (`baton_postgres::bench`: baton's migration
//! applied verbatim, plain driver statements), and drops both at the end. A server that cannot
//! be reached skips the section with one line.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context as _, anyhow, ensure};
use baton_core::{RunId, TenantId, Timestamp};
use baton_postgres::PgStore;
use baton_postgres::bench::{Bare, BareRun, Method, Row};
use baton_store::{NewEntry, NewRun, Store};
use serde_json::json;
use tokio::runtime::Runtime;

use crate::{Fill, Report, Target, Unit, bare_row, list, median, on_worker, thousands};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// How much of the PostgreSQL section to do.
#[derive(Clone, Copy)]
struct PgSizes {
    batch: usize,
    batch_rounds: usize,
    batches_per_round: usize,
    batch_warmup: usize,
    /// Batches each side writes before the next side's turn.
    batch_chunk: usize,
    single_rounds: usize,
    single_per_round: usize,
    single_warmup: usize,
    /// Messages each side writes before the next side's turn.
    single_chunk: usize,
    tasks: usize,
    task_batch: usize,
    task_rounds: usize,
    task_batches_per_round: usize,
}

impl PgSizes {
    fn new(quick: bool) -> Self {
        if quick {
            PgSizes {
                batch: 100,
                batch_rounds: 2,
                batches_per_round: 2,
                batch_warmup: 1,
                batch_chunk: 1,
                single_rounds: 2,
                single_per_round: 20,
                single_warmup: 5,
                single_chunk: 10,
                tasks: 8,
                task_batch: 10,
                task_rounds: 1,
                task_batches_per_round: 3,
            }
        } else {
            PgSizes {
                batch: 100,
                batch_rounds: 7,
                batches_per_round: 30,
                batch_warmup: 3,
                batch_chunk: 3,
                single_rounds: 7,
                single_per_round: 400,
                single_warmup: 50,
                single_chunk: 25,
                tasks: 8,
                task_batch: 10,
                task_rounds: 5,
                task_batches_per_round: 40,
            }
        }
    }
}

/// The server named by the environment.
pub(crate) fn server_url() -> String {
    ["BATON_BENCH_PG", "BATON_TEST_PG"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

/// `url` with `schema=NAME` added to its query.
fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}schema={schema}")
}

/// A driver error as the bench reports it.
fn bare(e: Box<dyn std::error::Error + Send + Sync>) -> anyhow::Error {
    anyhow!(e)
}

/// The PostgreSQL section: prints its lines, adds its figures, drops its schemas.
pub(crate) fn section(
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let sizes = PgSizes::new(quick);
    let url = server_url();
    let shown = baton_postgres::redact(&url);
    writeln!(out, "\n[5] postgres: {shown}")?;
    out.flush()?;
    // tokio-postgres needs the I/O and time drivers, which the SQLite sections do without.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime for postgres")?;

    let probe_url = url.clone();
    let probe = on_worker(&rt, async move {
        let client = baton_postgres::bench::connect(&probe_url)
            .await
            .map_err(bare)?;
        let (version, sync) = baton_postgres::bench::server(&client).await.map_err(bare)?;
        Ok((client, version, sync))
    });
    let (admin, version, sync) = match probe {
        Ok(found) => found,
        Err(err) => return skip(report, out, &shown, &format!("{err:#}")),
    };
    let id = uuid::Uuid::now_v7().simple().to_string();
    let schemas = Schemas {
        baton: format!("baton_bench_{id}"),
        bare: format!("baton_bench_{id}_bare"),
    };
    writeln!(
        out,
        "    server {version}, synchronous_commit={sync}; schemas {} (baton) and {} (bare)",
        schemas.baton, schemas.bare
    )?;
    out.flush()?;

    let measured = measure(&rt, &url, &schemas, &sizes, report, out);
    let dropped = on_worker(&rt, {
        let schemas = schemas.clone();
        async move {
            let names = [schemas.baton.as_str(), schemas.bare.as_str()];
            baton_postgres::bench::drop_schemas(&admin, &names)
                .await
                .map_err(bare)
                .context("dropping the bench schemas")
        }
    });
    measured?;
    dropped?;
    out.flush()?;
    Ok(())
}

fn skip(
    report: &mut Report,
    out: &mut impl Write,
    shown: &str,
    reason: &str,
) -> anyhow::Result<()> {
    writeln!(out, "postgres: skipped (cannot reach {shown}: {reason})")?;
    report.details.insert(
        "postgres".into(),
        json!({ "skipped": reason, "url": shown }),
    );
    out.flush()?;
    Ok(())
}

#[derive(Clone)]
struct Schemas {
    baton: String,
    bare: String,
}

fn rows_of(entries: &[NewEntry]) -> anyhow::Result<Vec<Row>> {
    entries.iter().map(bare_row).collect()
}

const METHODS: [Method; 3] = [Method::Unnest, Method::Values, Method::Copy];

/// How a bare method is named in the output, and in the JSON.
fn method_names(method: Method) -> (&'static str, &'static str) {
    match method {
        Method::Unnest => ("INSERT … SELECT FROM unnest", "unnest"),
        Method::Values => ("multi-row INSERT … VALUES", "values"),
        Method::Copy => ("COPY FROM STDIN (binary)", "copy_binary"),
    }
}

/// Checks a baton run ends at `expected`.
async fn check_run(
    store: &PgStore,
    tenant: &TenantId,
    run: &RunId,
    expected: u64,
    what: &str,
) -> anyhow::Result<()> {
    let last = store.run(tenant, run).await?.last_seq;
    ensure!(
        last.0 == expected,
        "postgres {what} bench: baton run ends at seq {last}, expected {expected}"
    );
    Ok(())
}

async fn check_bare(b: &Bare, run: &BareRun, what: &str) -> anyhow::Result<()> {
    let (last, count) = b.stored(run).await.map_err(bare)?;
    ensure!(
        last == run.last && count == run.last,
        "postgres {what} bench: bare run ends at seq {last} with {count} rows, expected {}",
        run.last
    );
    Ok(())
}

fn rate(messages: usize, since: Instant) -> f64 {
    messages as f64 / since.elapsed().as_secs_f64()
}

/// Messages per second, one entry per round.
#[derive(Default)]
struct BatchRates {
    baton: Vec<f64>,
    bare: [Vec<f64>; 3],
}

#[derive(Default)]
struct SingleRates {
    baton: Vec<f64>,
    bare: Vec<f64>,
    bare_locked: Vec<f64>,
    ratios: Vec<f64>,
}

struct Concurrent {
    rates: Vec<f64>,
    alone: Vec<f64>,
}

struct Measured {
    batch: BatchRates,
    single: SingleRates,
    concurrent: Concurrent,
}

fn measure(
    rt: &Runtime,
    url: &str,
    schemas: &Schemas,
    sizes: &PgSizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (bare_url, url, schemas, sizes) = (
        url.to_owned(),
        with_schema(url, &schemas.baton),
        schemas.clone(),
        *sizes,
    );
    let started = Instant::now();
    let m = on_worker(rt, async move {
        let store = PgStore::connect(&url)
            .await
            .context("connecting baton's store")?;
        let tenant = TenantId::default_tenant();
        let bare = Bare::open(&bare_url, &schemas.bare, tenant.as_str(), sizes.batch)
            .await
            .map_err(bare)?;
        let batch = batch_rounds(&store, &bare, &sizes).await?;
        let single = single_rounds(&store, &bare, &sizes).await?;
        let concurrent = concurrent_rounds(&store, &sizes).await?;
        Ok(Measured {
            batch,
            single,
            concurrent,
        })
    })?;
    let took = started.elapsed();

    // (a) batches
    let baton_med = median(&m.batch.baton);
    let bare_meds: Vec<f64> = m.batch.bare.iter().map(|r| median(r)).collect();
    let (best, best_med) = METHODS
        .iter()
        .zip(&bare_meds)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or((Method::Copy, f64::NAN), |(m, r)| (*m, *r));
    let (best_name, best_key) = method_names(best);
    writeln!(
        out,
        "    [5a] batches of {}, {} rounds of {} batches per side, sides taking turns every {} batches:",
        sizes.batch, sizes.batch_rounds, sizes.batches_per_round, sizes.batch_chunk
    )?;
    writeln!(
        out,
        "      baton Store::append:            {} msg/s",
        list(&m.batch.baton, |r| thousands(*r))
    )?;
    for (method, rates) in METHODS.iter().zip(&m.batch.bare) {
        writeln!(
            out,
            "      bare {:<28}  {} msg/s",
            method_names(*method).0,
            list(rates, |r| thousands(*r))
        )?;
    }
    writeln!(
        out,
        "      (bare: BEGIN, the rows pre-serialized, UPDATE last_seq, COMMIT; no run-row lock) fastest bare: {}",
        best_name
    )?;
    report.figure(
        "pg_append_batch_msgs_per_s",
        format!("5 pg append, batches of {}, baton (median)", sizes.batch),
        baton_med,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "pg_append_batch_bare_msgs_per_s",
        format!("5 pg same, bare {best_key} (median)"),
        best_med,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "pg_append_batch_ratio",
        "5 pg batch ratio baton/bare (of medians)",
        baton_med / best_med,
        Unit::Ratio,
        Some(Target::AtLeast(0.5)),
    );

    // (b) single messages
    let (s_baton, s_bare, s_locked) = (
        median(&m.single.baton),
        median(&m.single.bare),
        median(&m.single.bare_locked),
    );
    let us = |r: f64| 1e6 / r;
    writeln!(
        out,
        "    [5b] one message per transaction, {} rounds of {} per side, sides taking turns every {} messages:",
        sizes.single_rounds, sizes.single_per_round, sizes.single_chunk
    )?;
    writeln!(
        out,
        "      baton Store::append:            {} msg/s",
        list(&m.single.baton, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "      bare BEGIN/INSERT/UPDATE/COMMIT: {} msg/s",
        list(&m.single.bare, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "      bare + run-row SELECT … FOR UPDATE (baton's statements): {} msg/s",
        list(&m.single.bare_locked, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "      per message: baton {:.1} µs, bare {:.1} µs, bare with the lock {:.1} µs; per-round ratios {}",
        us(s_baton),
        us(s_bare),
        us(s_locked),
        list(&m.single.ratios, |r| format!("{r:.2}"))
    )?;
    report.figure(
        "pg_append_single_msgs_per_s",
        "5 pg append, 1 message per call, baton (median)",
        s_baton,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "pg_append_single_bare_msgs_per_s",
        "5 pg same, bare single-row transaction (median)",
        s_bare,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "pg_append_single_ratio",
        "5 pg single ratio baton/bare (of medians)",
        s_baton / s_bare,
        Unit::Ratio,
        None,
    );

    // (c) concurrent appenders
    let c_med = median(&m.concurrent.rates);
    let alone_med = median(&m.concurrent.alone);
    writeln!(
        out,
        "    [5c] {} tasks, each appending {} batches of {} to its own run, {} rounds: {} msg/s total",
        sizes.tasks,
        sizes.task_batches_per_round,
        sizes.task_batch,
        sizes.task_rounds,
        list(&m.concurrent.rates, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "      one task alone, same batches: {} msg/s; {} tasks give {:.1}x",
        list(&m.concurrent.alone, |r| thousands(*r)),
        sizes.tasks,
        c_med / alone_med
    )?;
    writeln!(out, "    postgres section took {:.1} s", took.as_secs_f64())?;
    report.figure(
        "pg_append_concurrent_msgs_per_s",
        format!(
            "5 pg append, {} tasks x batches of {} (median)",
            sizes.tasks, sizes.task_batch
        ),
        c_med,
        Unit::PerSecond("msg"),
        None,
    );

    let methods: serde_json::Map<String, serde_json::Value> = METHODS
        .iter()
        .zip(&m.batch.bare)
        .map(|(method, rates)| (method_names(*method).1.to_owned(), json!(rates)))
        .collect();
    report.details.insert(
        "postgres".into(),
        json!({
            "batch": sizes.batch,
            "batch_baton_rounds_msgs_per_s": m.batch.baton,
            "batch_bare_rounds_msgs_per_s": methods,
            "batch_bare_fastest": best_key,
            "single_baton_rounds_msgs_per_s": m.single.baton,
            "single_bare_rounds_msgs_per_s": m.single.bare,
            "single_bare_locked_rounds_msgs_per_s": m.single.bare_locked,
            "concurrent_tasks": sizes.tasks,
            "concurrent_batch": sizes.task_batch,
            "concurrent_rounds_msgs_per_s": m.concurrent.rates,
            "concurrent_one_task_msgs_per_s": m.concurrent.alone,
            "section_s": took.as_secs_f64(),
        }),
    );
    out.flush()?;
    Ok(())
}

/// (a): baton's batch append and the three bare methods, taking turns.
async fn batch_rounds(store: &PgStore, b: &Bare, sizes: &PgSizes) -> anyhow::Result<BatchRates> {
    let tenant = TenantId::default_tenant();
    let run = store.create_run(&tenant, &NewRun::default()).await?.id;
    let mut bare_runs = Vec::new();
    for method in METHODS {
        let id = format!("batch-{}", method_names(method).1);
        bare_runs.push(b.create_run(&id).await.map_err(bare)?);
    }
    let mut fill = Fill::new(51);
    let mut appended = 0;
    for _ in 0..sizes.batch_warmup {
        let entries = fill.realistic(sizes.batch);
        store.append(&tenant, &run, &entries).await?;
        let rows = rows_of(&entries)?;
        for (method, bare_run) in METHODS.iter().zip(&mut bare_runs) {
            b.batch(bare_run, &rows, *method, Timestamp::now().0)
                .await
                .map_err(bare)?;
        }
        appended += sizes.batch;
    }
    let mut rates = BatchRates::default();
    let per_round = sizes.batches_per_round * sizes.batch;
    for round in 0..sizes.batch_rounds {
        let batches: Vec<Vec<NewEntry>> = (0..sizes.batches_per_round)
            .map(|_| fill.realistic(sizes.batch))
            .collect();
        let rows: Vec<Vec<Row>> = batches
            .iter()
            .map(|b| rows_of(b))
            .collect::<anyhow::Result<_>>()?;
        // Side 0 is baton, sides 1..=3 the bare methods. The round goes chunk by chunk, every
        // side writing each chunk in turn, each chunk starting one side further on, so drift
        // in the server (checkpoints, fsync latency) hits every side alike.
        let mut secs = [0.0f64; METHODS.len() + 1];
        let chunk = sizes.batch_chunk.max(1);
        for (c, start_at) in (0..batches.len()).step_by(chunk).enumerate() {
            let range = start_at..(start_at + chunk).min(batches.len());
            for k in 0..=METHODS.len() {
                let side = (round + c + k) % (METHODS.len() + 1);
                let start = Instant::now();
                if side == 0 {
                    for batch in &batches[range.clone()] {
                        store.append(&tenant, &run, batch).await?;
                    }
                } else {
                    let (method, bare_run) = (METHODS[side - 1], &mut bare_runs[side - 1]);
                    for batch in &rows[range.clone()] {
                        b.batch(bare_run, batch, method, Timestamp::now().0)
                            .await
                            .map_err(bare)?;
                    }
                }
                secs[side] += start.elapsed().as_secs_f64();
            }
        }
        rates.baton.push(per_round as f64 / secs[0]);
        for (i, s) in secs[1..].iter().enumerate() {
            rates.bare[i].push(per_round as f64 / s);
        }
        appended += per_round;
    }
    check_run(store, &tenant, &run, appended as u64, "batch").await?;
    for bare_run in &bare_runs {
        ensure!(
            usize::try_from(bare_run.last).ok() == Some(appended),
            "postgres batch bench: bare run counted {} messages, expected {appended}",
            bare_run.last
        );
        check_bare(b, bare_run, "batch").await?;
    }
    Ok(rates)
}

/// (b): one message per transaction, baton, bare and bare with baton's run-row lock.
async fn single_rounds(store: &PgStore, b: &Bare, sizes: &PgSizes) -> anyhow::Result<SingleRates> {
    let tenant = TenantId::default_tenant();
    let run = store.create_run(&tenant, &NewRun::default()).await?.id;
    let (plain_id, locked_id) = ("single-plain", "single-locked");
    let mut plain = b.create_run(plain_id).await.map_err(bare)?;
    let mut locked = b.create_run(locked_id).await.map_err(bare)?;
    let mut fill = Fill::new(52);
    let n = sizes.single_per_round;
    let mut appended = 0;
    let mut rates = SingleRates::default();
    for round in 0..=sizes.single_rounds {
        // Round 0 warms every side up and is not recorded.
        let count = if round == 0 { sizes.single_warmup } else { n };
        let entries = fill.realistic(count);
        let rows = rows_of(&entries)?;
        // Chunk by chunk, every side in turn, each chunk starting one side further on.
        let mut secs = [0.0f64; 3];
        let chunk = sizes.single_chunk.max(1);
        for (c, start_at) in (0..count).step_by(chunk).enumerate() {
            let range = start_at..(start_at + chunk).min(count);
            for k in 0..3 {
                let side = (round + c + k) % 3;
                let start = Instant::now();
                match side {
                    0 => {
                        for e in &entries[range.clone()] {
                            store.append(&tenant, &run, std::slice::from_ref(e)).await?;
                        }
                    }
                    1 => {
                        for row in &rows[range.clone()] {
                            let now = Timestamp::now().0;
                            b.single(&mut plain, plain_id, row, false, now)
                                .await
                                .map_err(bare)?;
                        }
                    }
                    _ => {
                        for row in &rows[range.clone()] {
                            let now = Timestamp::now().0;
                            b.single(&mut locked, locked_id, row, true, now)
                                .await
                                .map_err(bare)?;
                        }
                    }
                }
                secs[side] += start.elapsed().as_secs_f64();
            }
        }
        let got = secs.map(|s| count as f64 / s);
        appended += count;
        if round > 0 {
            rates.baton.push(got[0]);
            rates.bare.push(got[1]);
            rates.bare_locked.push(got[2]);
            rates.ratios.push(got[0] / got[1]);
        }
    }
    check_run(store, &tenant, &run, appended as u64, "single").await?;
    check_bare(b, &plain, "single").await?;
    check_bare(b, &locked, "single").await?;
    Ok(rates)
}

/// Appends `batches` to `run` in sequence.
async fn append_all(store: PgStore, run: RunId, batches: Vec<Vec<NewEntry>>) -> anyhow::Result<()> {
    let tenant = TenantId::default_tenant();
    for batch in &batches {
        store.append(&tenant, &run, batch).await?;
    }
    Ok(())
}

/// (c): `tasks` tasks at once, each on its own run; and one task alone, for scale.
async fn concurrent_rounds(store: &PgStore, sizes: &PgSizes) -> anyhow::Result<Concurrent> {
    let tenant = TenantId::default_tenant();
    let mut runs = Vec::new();
    let mut fills = Vec::new();
    for i in 0..sizes.tasks {
        runs.push(store.create_run(&tenant, &NewRun::default()).await?.id);
        fills.push(Fill::new(60 + i as u64));
    }
    let per_task = sizes.task_batches_per_round * sizes.task_batch;
    let mut gen_batches = |fill: &mut Fill| -> Vec<Vec<NewEntry>> {
        (0..sizes.task_batches_per_round)
            .map(|_| fill.realistic(sizes.task_batch))
            .collect()
    };
    // Warm up every run's connection and statements.
    for (run, fill) in runs.iter().zip(&mut fills) {
        store
            .append(&tenant, run, &fill.realistic(sizes.task_batch))
            .await?;
    }
    let mut result = Concurrent {
        rates: Vec::new(),
        alone: Vec::new(),
    };
    for round in 0..sizes.task_rounds {
        let all: Vec<Vec<Vec<NewEntry>>> = fills.iter_mut().map(&mut gen_batches).collect();
        let mut alone_fill = Fill::new(1_000 + round as u64);
        let alone = gen_batches(&mut alone_fill);
        let concurrent = async {
            let start = Instant::now();
            let handles: Vec<_> = runs
                .iter()
                .zip(all)
                .map(|(run, batches)| tokio::spawn(append_all(store.clone(), run.clone(), batches)))
                .collect();
            for handle in handles {
                handle.await.context("an appender task panicked")??;
            }
            Ok::<_, anyhow::Error>(rate(per_task * sizes.tasks, start))
        };
        let single = async {
            let start = Instant::now();
            append_all(store.clone(), runs[0].clone(), alone).await?;
            Ok::<_, anyhow::Error>(rate(per_task, start))
        };
        if round % 2 == 0 {
            result.rates.push(concurrent.await?);
            result.alone.push(single.await?);
        } else {
            result.alone.push(single.await?);
            result.rates.push(concurrent.await?);
        }
    }
    for (i, run) in runs.iter().enumerate() {
        let alone = if i == 0 {
            per_task * sizes.task_rounds
        } else {
            0
        };
        let expected = sizes.task_batch + per_task * sizes.task_rounds + alone;
        check_run(store, &tenant, run, expected as u64, "concurrent").await?;
    }
    Ok(result)
}
