//! Section 15: `baton watch` picks up an appended line (issue 17, target < 1 s).
//!
//! A real Claude Code session of the corpus (the largest, so each read parses and counts the
//! most) is written into a watched temp folder a few lines at a time, with `baton_watch::watch`
//! following it into a temp-file SQLite store, as `baton watch` does. Each latency is from the
//! write of a burst of lines to the moment the store's run holds more messages, polled every
//! millisecond from another task: the debounce, the read and parse of the whole file, the
//! token counts, and the import transaction. The figure is the median and the worst of the
//! bursts that grew the run; the target holds the worst.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use baton_core::TenantId;
use baton_sqlite::SqliteStore;
use baton_store::Store;

use crate::import::CORPUS;
use crate::{Report, Target, Unit};

/// The session followed: the corpus's largest Claude Code file.
const SESSION: &str = "marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl";

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let source = Path::new(CORPUS).join("claude-code-jsonl").join(SESSION);
    if !source.is_file() {
        writeln!(out, "\nwatch: skipped (corpus not found at {CORPUS})")?;
        return Ok(());
    }
    let text = std::fs::read_to_string(&source)?;
    let lines: Vec<&str> = text.lines().collect();
    let (start, bursts) = if quick {
        (lines.len() - 40, 8)
    } else {
        (lines.len() / 2, 30)
    };
    writeln!(
        out,
        "\n[15] watch: {SESSION} ({:.1} MiB) written into a watched folder from line {start}, {bursts} bursts of lines; latency from the write to the run's growth in the store",
        text.len() as f64 / (1024.0 * 1024.0)
    )?;
    out.flush()?;

    let tree = dir.join("watch-tree");
    std::fs::create_dir_all(&tree)?;
    let file = tree.join("session.jsonl");
    std::fs::write(&file, format!("{}\n", lines[..start].join("\n")))?;
    let db = dir.join("watch.db");
    let latencies = rt.block_on(async {
        let store = SqliteStore::open(&db).await?;
        let tenant = TenantId::default_tenant();
        let config = baton_watch::Config::new(vec![tree.clone()], dir.join("watch-state.json"));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let watching = {
            let (store, tenant) = (store.clone(), tenant.clone());
            tokio::spawn(async move {
                baton_watch::watch(
                    &store,
                    &tenant,
                    &config,
                    async {
                        stop_rx.await.ok();
                    },
                    |_| {},
                )
                .await
            })
        };
        let stored = || async {
            let runs = store.list_runs(&tenant).await.unwrap_or_default();
            runs.first().map_or(0, |r| r.last_seq.0)
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while stored().await == 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut latencies = Vec::new();
        let mut at = start;
        let step = (lines.len() - start) / bursts;
        for _ in 0..bursts {
            let before = stored().await;
            let end = (at + step.max(1)).min(lines.len());
            let mut f = std::fs::OpenOptions::new().append(true).open(&file)?;
            let wrote = Instant::now();
            for line in &lines[at..end] {
                writeln!(f, "{line}")?;
            }
            drop(f);
            at = end;
            // A burst may hold only the still-open end of a response: it grows nothing yet.
            let give_up = wrote + Duration::from_secs(5);
            loop {
                if stored().await > before {
                    latencies.push(wrote.elapsed());
                    break;
                }
                if Instant::now() > give_up {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let _ = stop_tx.send(());
        watching.await??;
        anyhow::Ok(latencies)
    })?;
    if latencies.is_empty() {
        writeln!(out, "  no burst grew the run")?;
        return Ok(());
    }
    let mut sorted = latencies.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2].as_secs_f64() * 1000.0;
    let worst = sorted[sorted.len() - 1].as_secs_f64() * 1000.0;
    writeln!(
        out,
        "  {} bursts grew the run: median {median:.0} ms, worst {worst:.0} ms (50 ms quiet + read, parse, count and import of the whole file)",
        latencies.len()
    )?;
    report.figure(
        "watch_pickup_median_ms",
        "15 watch: appended line to stored, median",
        median,
        Unit::Millis,
        None,
    );
    report.figure(
        "watch_pickup_worst_ms",
        "15 watch: appended line to stored, worst",
        worst,
        Unit::Millis,
        Some(Target::AtMost(1000.0)),
    );
    Ok(())
}
