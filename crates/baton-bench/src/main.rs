//! baton's benchmark: the figures issue 2 sets bars for, measured on temp-file SQLite stores
//! through the public [`Store`] API, each printed with its target and PASS or MISS.
//!
//! 1. **Batch append**: `Store::append` with batches of 100 realistic messages of about 1 KiB
//!    (user and assistant text, some `tool_use`/`tool_result` pairs), in messages per second.
//! 2. **Single-message append**: one message per `Store::append`, awaited in sequence, against a
//!    bare rusqlite loop on a second file with the same schema (the migration is included
//!    verbatim), the same durability settings (WAL, `synchronous = NORMAL`, foreign keys on)
//!    and the same statements per transaction (`BEGIN IMMEDIATE`, select the run row, insert
//!    the pre-serialized history row, update `last_seq`, commit). The ratio baton/bare is
//!    baton's own overhead: serialization, `spawn_blocking` and the writer mutex. Rounds
//!    alternate which side goes first; medians are reported. Attribution lines time each part
//!    of that overhead alone (serializing, a no-op `spawn_blocking`, the bare transaction sent
//!    through `spawn_blocking` or `block_in_place`).
//! 3. **Context assembly**: `Store::context` on a run of 100,000 rows whose active summary
//!    covers all but the last 50, and on a run of 1,000 rows with the same tail (each in its
//!    own file), calls interleaved; median and p90, and the ratio of medians (O(tail)).
//! 4. **Summary install**: successive `install_summary` calls on one run, each on the previous
//!    version with the cut 10 further and a few claims; median latency and installs per
//!    second, the number of messages in the protocol window each install reads, and the same
//!    series on a ten-times longer run to show how install cost follows that window.
//! 5. **PostgreSQL append** (issue 3; module `postgres`): on the server `BATON_BENCH_PG`, else
//!    `BATON_TEST_PG`, else `postgres://postgres@127.0.0.1:5432/test`, in a fresh schema per
//!    run (dropped at the end), `PgStore`'s `Store::append` against bare `tokio-postgres` in a
//!    second schema with baton's migration applied verbatim. (a) Batches of 100 of the same
//!    messages as 1, against the bare transaction (`BEGIN`, the pre-serialized rows, update
//!    `last_seq`, `COMMIT`) with the rows written by baton's `unnest` insert, a multi-row
//!    `VALUES` insert and binary `COPY`; the ratio is baton over the fastest (target >= 0.5).
//!    (b) One message per call against the bare single-row transaction, and the bare one with
//!    baton's run-row `SELECT … FOR UPDATE` added for attribution. (c) Eight tasks appending
//!    batches of 10 to eight runs at once, total messages per second, and one task alone.
//!    Sides take turns every few batches or messages, each turn starting one side further on;
//!    medians of rounds are reported. A server that cannot be reached skips the section with
//!    one `postgres: skipped (…)` line and the bench goes on.
//! 6. **Import and recall** (issue 4; module `import`, run before 5 so that PostgreSQL comes
//!    last): the shared corpus (`../shared/corpus` beside the workspace) imported through the
//!    pipeline `baton import` runs (walk in path order, read, `baton_import::detect`, `parse`,
//!    `Transcript::to_import`, then `Store::import`, one transaction per file), into a fresh
//!    database file and tenant each round; the median end-to-end time (target: the whole corpus
//!    in under 10 s), MiB and stored messages per second, and each part timed alone (read,
//!    detect, parse, `to_import` and its redaction, digests and tokenization, the store), so
//!    the total can be attributed. Tokens are counted as `baton import` counts them by default
//!    (the vocabulary of each transcript's model), so the import time includes tokenization.
//!    Then recall on the imported run with the most messages: the first `Store::search` (which
//!    indexes the whole run), repeated searches (limit 20) for two-word phrases taken from its
//!    own messages at several seqs, one of their words alone and one phrase it does not hold,
//!    median (target <= 10 ms) and p90, and `read_range` of one seq. A missing corpus skips the
//!    section with one `import: skipped (…)` line.
//! 7. **Token counts** (issue 5; module `tokens`, run after 6): every message of the corpus
//!    counted by the byte-based proxy, `o200k_base` and `cl100k_base`; per real vocabulary, the
//!    proxy's total ratio and the median and p90 of its per-message relative error (messages of
//!    at least 20 real tokens), and each counter's throughput in MiB/s of message JSON. No
//!    targets: the proxy's error is reported. `--quick` counts a sixth of the files. A missing
//!    corpus skips the section with one `tokens: skipped (…)` line.
//! 8. **Compaction** (issue 5, its three bars; module `compaction`, run after 7): (a) replay of
//!    the corpus's longest Claude Code session, imported as `baton import` imports it, under
//!    `none`, `sliding`, `budget`, `clear-tool-results` and `structured` with the configuration
//!    `baton replay --budget 12000` builds (12,000 tokens: about a tenth of the 115k its full
//!    context reaches): total input tokens against `none` (target >= 5x for `budget` and
//!    `structured`), peak context (target <= the budget), `structured`'s constraint probes
//!    (empty on this session, so the same replay over every Claude Code session of the corpus
//!    carries the target, 100%) and the paths and commands it keeps (target >= 90%).
//!    (b) Planning as `baton_runtime::compact` plans (`context_meta`, the view, `plan`) for
//!    `budget` and `structured` on a run of 100,000 rows whose summary covers all but the last
//!    50 and on one of 1,000 rows with the same tail: median (target <= 5 ms) and p90, and the
//!    ratio of medians (target <= 2: O(tail)). (c) `budget` as a per-step context policy against
//!    LangChain's `trim_messages` (`../shared/peers/trim_messages_bench.py`, run in a virtual
//!    environment the bench makes once outside the repo) on every prefix of the three largest
//!    Claude Code sessions at 8k, 32k and 100k tokens: steps per second and their ratio (target:
//!    median over sessions x budgets >= 20x), and the outputs with an orphan `tool_result` or a
//!    dangling `tool_use` the cut made (ours: target 0). A peer that cannot run is skipped with
//!    one `peer: skipped (…)` line; `--quick` skips it and runs ours on one session. A missing
//!    corpus skips (a) and (c) with one line each.
//! 9. **Cache** (issue 7; module `cache`), 10. **SQLite ledger** (issue 8; module `ledger`),
//!    11. **PostgreSQL ledger** (issue 3; module `pg_ledger`): each module's docs say what it
//!    measures and against what.
//! 12. **Gateway** (issue 9; module `gateway`): baton's gateway against the LiteLLM proxy on
//!     the same mock upstream with the same client, in one run: requests per second on hits
//!     and misses (target ≥ 10×), added latency (hits: p99 ≤ 1 ms), upstream calls per burst
//!     of 50 identical requests (target 1). About four minutes, two of them LiteLLM's;
//!     `--only gateway` runs it alone.
//! 14. **Usage** (issue 17; module `usage`): baton's daily and session usage reports of the
//!     Claude Code corpus against `npx ccusage@20.0.24` on the same files laid out as
//!     `~/.claude/projects`: days and sessions that agree to the token, the ones that differ
//!     (ccusage's bugs, accounted for by `crates/baton-usage/tests/it/ccusage.rs`), and costs
//!     (target: within 1% where the tokens agree). Skipped with one line without `npx`.
//! 15. **Watch** (issue 17; module `watch`): the corpus's largest Claude Code session written
//!     into a folder `baton_watch::watch` follows, in bursts of lines; the latency from a write
//!     to the run's growth in the store, median and worst (target: worst < 1 s).
//! 16. **Dashboard** (issue 21; module `ui`): each page of `/ui` rendered in process on a
//!     store of 1,000+ runs (the corpus imported, topped up) and a 5,000-message run: median
//!     server time (target < 200 ms) and the largest page (target ≤ 1 MB).
//! 17. **MCP** (issue 19; module `mcp`): `search` and `recall` through `baton_mcp::Baton::call`
//!     on the corpus and on 100,000 generated messages: p95 (targets: search < 60 ms, recall
//!     < 10 ms).
//! 18. **Replay** (issue 18; module `replay`): the corpus's Claude Code and Codex sessions as
//!     gateway traffic against the scripted upstream: captured runs against direct imports,
//!     capture time by conversation length, and managed context at a 32k budget (refusals,
//!     peak upstream input, prefix bytes changed between compactions, prompt-cache share).
//!
//! Every store call runs in a task on a worker thread of a tokio multi-thread runtime, where a
//! server's handlers run; times come from `std::time::Instant`.
//!
//! Run it with `cargo run --release -p baton-bench` (about five minutes on two cores, four of
//! them the gateway section's; the first run also spends a few minutes creating the peers'
//! virtual environment, with LiteLLM).
//! `--quick` runs every measurement at a small size (the CI smoke test, about five seconds even
//! in a debug build; its figures are not comparable with the targets), and `--json` adds one JSON
//! object with every figure as the last line of output. `--only append,single,…` runs the named
//! sections alone, in their usual order (names: `SECTIONS`). The process exits 0 whether figures
//! pass or miss, 1 when a measurement fails, 2 on a usage error.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail, ensure};
use baton_core::{
    Claim, ClaimKind, ContentBlock, Message, Role, RunId, Seq, SummaryId, TenantId, Timestamp,
};
use baton_sqlite::SqliteStore;
use baton_sqlite::bench::{Bare, Row as BareRow};
use baton_store::{Candidate, Install, NewEntry, NewRun, Store};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

mod cache;
mod compaction;
mod continuity;
mod gateway;
mod import;
mod import_cli;
mod ledger;
mod mcp;
mod peers;
mod pg_ledger;
mod postgres;
mod replay;
mod tokens;
mod ui;
mod usage;
mod watch;

const USAGE: &str = "usage: baton-bench [--quick] [--json] [--only SECTION,...]

  --quick   every measurement at a small size (CI smoke test; figures not comparable)
  --json    also print one JSON object with every figure, as the last line
  --only    run these sections alone: append, single, context, install, import, tokens,
            compaction, continuity, cache, ledger, postgres, pg_ledger, gateway, usage,
            watch, ui, mcp
  -h, --help  this text";

/// mimalloc instead of glibc's allocator, as the `baton` binary the bench stands in for: a gateway request allocates and frees many small
/// buffers on threads that hand them to each other, where glibc's arenas spent a fifth of a
/// cache hit's CPU (see ARCHITECTURE.md, "Dependencies, and why").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            let _ = writeln!(std::io::stdout().lock(), "{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "baton-bench: error: {msg}\n{USAGE}"
            );
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let _ = writeln!(std::io::stderr().lock(), "baton-bench: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    quick: bool,
    json: bool,
    /// `--only a,b`: runs the named sections alone (to measure them without the others), in
    /// their usual order; empty runs them all.
    only: Vec<&'static str>,
}

/// The sections `--only` names, in the order they run.
const SECTIONS: [&str; 19] = [
    "append",
    "single",
    "context",
    "install",
    "import",
    "import_tree",
    "tokens",
    "compaction",
    "continuity",
    "cache",
    "ledger",
    "postgres",
    "pg_ledger",
    "gateway",
    "usage",
    "watch",
    "ui",
    "mcp",
    "replay",
];

/// `Ok(None)` asks for the help text.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        quick: false,
        json: false,
        only: Vec::new(),
    };
    let mut args = args;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => parsed.quick = true,
            "--only" => {
                let sections = args.next().unwrap_or_default();
                for section in sections.split(',') {
                    let Some(known) = SECTIONS.iter().find(|s| **s == section) else {
                        return Err(format!(
                            "--only {section:?}: expected sections among {}",
                            SECTIONS.join(", ")
                        ));
                    };
                    parsed.only.push(known);
                }
            }
            "--json" => parsed.json = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(parsed))
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Runs `task` on a runtime worker thread, where a server's handlers run; a future driven by
/// `block_on` itself would run on the calling thread instead.
fn on_worker<T, F>(rt: &Runtime, task: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: Future<Output = anyhow::Result<T>> + Send + 'static,
{
    rt.block_on(rt.spawn(task))
        .context("a benchmark task panicked")?
}

/// How much of everything to do.
#[derive(Clone, Copy)]
struct Sizes {
    batch: usize,
    batch_rounds: usize,
    batches_per_round: usize,
    batch_warmup: usize,
    single_rounds: usize,
    single_per_round: usize,
    single_warmup: usize,
    big_rows: u64,
    small_rows: u64,
    tail: u64,
    fill_batch: usize,
    context_reps: usize,
    context_warmup: usize,
    installs: u64,
    install_step: u64,
    install_rows: u64,
    install_long_rows: u64,
    /// Whether to run the peers' scripts.
    peer: bool,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                batch: 100,
                batch_rounds: 2,
                batches_per_round: 5,
                batch_warmup: 1,
                single_rounds: 3,
                single_per_round: 100,
                single_warmup: 20,
                big_rows: 5_000,
                small_rows: 1_000,
                tail: 50,
                fill_batch: 1_000,
                context_reps: 20,
                context_warmup: 3,
                installs: 20,
                install_step: 10,
                install_rows: 400,
                install_long_rows: 2_000,
                peer: false,
            }
        } else {
            Sizes {
                batch: 100,
                batch_rounds: 5,
                batches_per_round: 200,
                batch_warmup: 10,
                single_rounds: 7,
                single_per_round: 8_000,
                single_warmup: 500,
                big_rows: 100_000,
                small_rows: 1_000,
                tail: 50,
                fill_batch: 1_000,
                context_reps: 500,
                context_warmup: 20,
                installs: 100,
                install_step: 10,
                install_rows: 2_000,
                install_long_rows: 20_000,
                peer: true,
            }
        }
    }
}

/// A bar a figure is held to.
#[derive(Clone, Copy)]
enum Target {
    AtLeast(f64),
    AtMost(f64),
}

impl Target {
    fn met(self, value: f64) -> bool {
        match self {
            Target::AtLeast(bound) => value >= bound,
            Target::AtMost(bound) => value <= bound,
        }
    }

    fn parts(self) -> (&'static str, f64) {
        match self {
            Target::AtLeast(bound) => (">=", bound),
            Target::AtMost(bound) => ("<=", bound),
        }
    }
}

#[derive(Clone, Copy)]
enum Unit {
    PerSecond(&'static str),
    Seconds,
    Millis,
    Ratio,
    /// A number of things (tokens, outputs).
    Count(&'static str),
}

impl Unit {
    fn name(self) -> String {
        match self {
            Unit::PerSecond(what) => format!("{what}/s"),
            Unit::Seconds => "s".into(),
            Unit::Millis => "ms".into(),
            Unit::Ratio => "ratio".into(),
            Unit::Count(what) => what.into(),
        }
    }

    /// The value with its unit; NaN (a share of nothing) as `n/a`.
    fn show(self, value: f64) -> String {
        if value.is_nan() {
            return "n/a".into();
        }
        match self {
            Unit::Count(what) => format!("{} {what}", thousands(value)),
            Unit::PerSecond(what) => format!("{} {what}/s", thousands(value)),
            Unit::Seconds => format!("{value:.2} s"),
            Unit::Millis => format!("{value:.3} ms"),
            Unit::Ratio => format!("{value:.2}"),
        }
    }
}

/// One reported figure.
struct Figure {
    key: &'static str,
    label: String,
    value: f64,
    unit: Unit,
    target: Option<Target>,
}

/// Everything reported, for the table and the JSON object.
#[derive(Default)]
struct Report {
    figures: Vec<Figure>,
    details: serde_json::Map<String, Value>,
}

impl Report {
    fn figure(
        &mut self,
        key: &'static str,
        label: impl Into<String>,
        value: f64,
        unit: Unit,
        target: Option<Target>,
    ) {
        self.figures.push(Figure {
            key,
            label: label.into(),
            value,
            unit,
            target,
        });
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let sizes = Sizes::new(args.quick);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let mode = if args.quick { "quick" } else { "default" };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .build()
        .context("starting the tokio runtime")?;
    let dir = tempfile::Builder::new()
        .prefix("baton-bench-")
        .tempdir()
        .context("creating the temp directory")?;

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "baton-bench: {mode} sizes, {profile} build, {cores} cores, tokio multi-thread runtime, files in {}",
        dir.path().display()
    )?;
    if args.quick {
        writeln!(
            out,
            "  (--quick: small sizes for smoke-testing; PASS/MISS below is not a verdict)"
        )?;
    }
    if profile == "debug" {
        writeln!(
            out,
            "  (debug build: figures are not comparable with the targets; use --release)"
        )?;
    }
    out.flush()?;

    let mut report = Report::default();
    let (dir, quick, r) = (dir.path(), args.quick, &mut report);
    for section in SECTIONS {
        if !args.only.is_empty() && !args.only.contains(&section) {
            continue;
        }
        match section {
            "append" => batch_append(&rt, dir, &sizes, r, &mut out)?,
            "single" => single_append(&rt, dir, &sizes, r, &mut out)?,
            "context" => context_assembly(&rt, dir, &sizes, r, &mut out)?,
            "install" => summary_installs(&rt, dir, &sizes, r, &mut out)?,
            "import" => import::section(&rt, dir, quick, r, &mut out)?,
            "import_tree" => import_cli::tree_section(dir, quick, r, &mut out)?,
            "tokens" => tokens::section(quick, r, &mut out)?,
            "compaction" => compaction::section(&rt, dir, quick, r, &mut out)?,
            "continuity" => continuity::section(&rt, dir, quick, r, &mut out)?,
            "cache" => cache::section(&rt, dir, quick, r, &mut out)?,
            "ledger" => ledger::section(&rt, dir, quick, r, &mut out)?,
            "postgres" => postgres::section(quick, r, &mut out)?,
            "pg_ledger" => pg_ledger::section(quick, r, &mut out)?,
            "gateway" => gateway::section(dir, quick, r, &mut out)?,
            "usage" => usage::section(r, &mut out)?,
            "watch" => watch::section(&rt, dir, quick, r, &mut out)?,
            "ui" => ui::section(&rt, dir, quick, r, &mut out)?,
            "mcp" => mcp::section(&rt, dir, quick, r, &mut out)?,
            _ => replay::section(dir, quick, r, &mut out)?,
        }
    }

    let elapsed = started.elapsed();
    print_table(&report, &mut out)?;
    writeln!(out, "total time {:.1} s", elapsed.as_secs_f64())?;

    if args.json {
        let figures: serde_json::Map<String, Value> = report
            .figures
            .iter()
            .map(|f| {
                let target = f.target.map(|t| {
                    let (op, bound) = t.parts();
                    json!({ "op": op, "bound": bound })
                });
                let value = json!({
                    "label": f.label,
                    "value": f.value,
                    "unit": f.unit.name(),
                    "target": target,
                    "pass": f.target.map(|t| t.met(f.value)),
                });
                (f.key.to_owned(), value)
            })
            .collect();
        let all_pass = report
            .figures
            .iter()
            .all(|f| f.target.is_none_or(|t| t.met(f.value)));
        let object = json!({
            "bench": "baton-bench",
            "mode": mode,
            "profile": profile,
            "cores": cores,
            "elapsed_s": elapsed.as_secs_f64(),
            "all_pass": all_pass,
            "figures": figures,
            "details": report.details,
        });
        writeln!(out, "{object}")?;
    }
    out.flush()?;
    Ok(())
}

fn print_table(report: &Report, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:<52} {:>18}   {:<16} result",
        "figure", "value", "target"
    )?;
    writeln!(out, "{}", "-".repeat(96))?;
    for f in &report.figures {
        let (target, verdict) = match f.target {
            Some(t) => {
                let (op, bound) = t.parts();
                let verdict = if t.met(f.value) { "PASS" } else { "MISS" };
                (format!("{op} {}", f.unit.show(bound)), verdict)
            }
            None => ("-".to_owned(), ""),
        };
        writeln!(
            out,
            "{:<52} {:>18}   {:<16} {verdict}",
            f.label,
            f.unit.show(f.value),
            target
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 1. Batch append

fn batch_append(
    rt: &Runtime,
    dir: &Path,
    sizes: &Sizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[1] append: batches of {} messages, {} rounds of {} batches, baton and bare rusqlite alternating",
        sizes.batch, sizes.batch_rounds, sizes.batches_per_round
    )?;
    let tenant = TenantId::default_tenant();
    let (path, setup_tenant) = (dir.join("append.db"), tenant.clone());
    let (sqlite, run) = on_worker(rt, async move {
        let sqlite = SqliteStore::open(path).await?;
        let run = sqlite
            .create_run(&setup_tenant, &NewRun::default())
            .await?
            .id;
        Ok((sqlite, run))
    })?;
    let mut bare = bare_open(&dir.join("bare-batch.db"), &tenant, &run)?;
    let baton = |batches: Vec<Vec<NewEntry>>| -> anyhow::Result<f64> {
        let (store, tenant, run) = (sqlite.clone(), tenant.clone(), run.clone());
        on_worker(rt, async move {
            let start = Instant::now();
            for batch in &batches {
                store.append(&tenant, &run, batch).await?;
            }
            Ok(batches.iter().map(Vec::len).sum::<usize>() as f64 / start.elapsed().as_secs_f64())
        })
    };
    let mut bare_loop = |batches: Vec<Vec<BareRow>>| -> anyhow::Result<f64> {
        let start = Instant::now();
        for batch in &batches {
            bare_append(&mut bare, batch)?;
        }
        Ok(batches.iter().map(Vec::len).sum::<usize>() as f64 / start.elapsed().as_secs_f64())
    };
    let rows_of = |batches: &[Vec<NewEntry>]| -> anyhow::Result<Vec<Vec<BareRow>>> {
        batches
            .iter()
            .map(|b| b.iter().map(bare_row).collect())
            .collect()
    };
    let mut fill = Fill::new(1);
    let mut generate =
        |n: usize| -> Vec<Vec<NewEntry>> { (0..n).map(|_| fill.realistic(sizes.batch)).collect() };
    let warm = generate(sizes.batch_warmup);
    let bare_warm = rows_of(&generate(sizes.batch_warmup))?;
    baton(warm)?;
    bare_loop(bare_warm)?;
    let (mut rates, mut bare_rates, mut ratios, mut bytes) = (vec![], vec![], vec![], (0, 0));
    for round in 0..sizes.batch_rounds {
        let batches = generate(sizes.batches_per_round);
        let bare_batches = rows_of(&generate(sizes.batches_per_round))?;
        for row in bare_batches.iter().flatten() {
            bytes.0 += row.message.len();
            bytes.1 += 1;
        }
        // Alternate which side goes first, so drift in the machine hits both alike.
        let (b, r) = if round % 2 == 0 {
            let b = baton(batches)?;
            (b, bare_loop(bare_batches)?)
        } else {
            let r = bare_loop(bare_batches)?;
            (baton(batches)?, r)
        };
        rates.push(b);
        bare_rates.push(r);
        ratios.push(b / r);
    }
    let expected =
        sizes.batch * (sizes.batch_warmup + sizes.batch_rounds * sizes.batches_per_round);
    let last = rt.block_on(sqlite.run(&tenant, &run))?.last_seq;
    let (bare_last, bare_rows) = bare.last_seq().map_err(|e| anyhow!("bare baseline: {e}"))?;
    ensure!(
        usize::try_from(last.0).ok() == Some(expected)
            && usize::try_from(bare_last).ok() == Some(expected)
            && bare_rows == bare_last,
        "append bench: baton ends at seq {last}, bare at {bare_last}, expected {expected}"
    );
    let (med, bare_med) = (median(&rates), median(&bare_rates));
    writeln!(
        out,
        "    baton:         {} msg/s",
        list(&rates, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "    bare rusqlite: {} msg/s",
        list(&bare_rates, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "    per-round ratios {}; mean serialized message {} B; bare: the same statements per batch (BEGIN IMMEDIATE, the run's row, one insert per message, last_seq, COMMIT), baton's schema, WAL, synchronous=NORMAL",
        list(&ratios, |r| format!("{r:.2}")),
        bytes.0 / bytes.1.max(1)
    )?;
    report.figure(
        "append_batch_msgs_per_s",
        format!("1 append, batches of {} (median)", sizes.batch),
        med,
        Unit::PerSecond("msg"),
        Some(Target::AtLeast(50_000.0)),
    );
    report.figure(
        "append_batch_bare_msgs_per_s",
        "1 same batches, bare rusqlite (median)",
        bare_med,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "append_batch_ratio",
        "1 ratio baton/bare (of medians)",
        med / bare_med,
        Unit::Ratio,
        Some(Target::AtLeast(0.8)),
    );
    let peer = if sizes.peer {
        sqlite_session(dir, out)
    } else {
        Err("--quick".to_owned())
    };
    match &peer {
        Ok(items) => {
            writeln!(
                out,
                "    peer, same run: Agents SDK SQLiteSession add_items, batches of 100 (100k items, median of 3): {} items/s; baton {:.1}x",
                thousands(*items),
                med / items
            )?;
            report.figure(
                "append_batch_peer_sqlite_session_items_per_s",
                "1 peer: Agents SDK SQLiteSession, batches of 100",
                *items,
                Unit::PerSecond("item"),
                None,
            );
        }
        Err(why) => writeln!(out, "    peer: skipped ({why})")?,
    }
    report.details.insert(
        "append_batch".into(),
        json!({
            "batch": sizes.batch,
            "rounds_msgs_per_s": rates,
            "bare_rounds_msgs_per_s": bare_rates,
            "round_ratios": ratios,
            "mean_message_bytes": bytes.0 / bytes.1.max(1),
            "peer_sqlite_session_items_per_s": peer.as_ref().ok(),
        }),
    );
    out.flush()?;
    Ok(())
}

/// The OpenAI Agents SDK's `SQLiteSession` batched `add_items` rate (100,000 items of about
/// 1 KiB in batches of 100, median of its runs), from `../shared/peers/sqlite_session_bench.py`
/// run in the peers' virtual environment; or why it could not run.
fn sqlite_session(dir: &Path, out: &mut impl Write) -> Result<f64, String> {
    let _ = writeln!(
        out,
        "    peer: running the Agents SDK SQLiteSession script (a minute or two)"
    );
    let _ = out.flush();
    let python = peers::python_with("agents", "openai-agents")?;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/peers/sqlite_session_bench.py"
    );
    let json = peers::run(
        &python,
        script,
        &["--runs", "3"],
        dir,
        "sqlite-session",
        Duration::from_secs(600),
    )?;
    json.pointer("/add_items/batch100_100000/items_per_s")
        .and_then(Value::as_f64)
        .ok_or_else(|| "no add_items.batch100_100000.items_per_s in its output".to_owned())
}

// ---------------------------------------------------------------------------------------------
// 2. Single-message append against bare rusqlite

/// A history row, serialized the way baton serializes it, for the bare loops.
fn bare_row(entry: &NewEntry) -> anyhow::Result<BareRow> {
    let ids = |ids: Vec<&str>| -> anyhow::Result<Option<String>> {
        Ok(if ids.is_empty() {
            None
        } else {
            Some(serde_json::to_string(&ids)?)
        })
    };
    Ok(BareRow {
        tokens: entry.tokens,
        tool_uses: ids(entry.message.tool_use_ids().collect())?,
        tool_results: ids(entry.message.tool_result_ids().collect())?,
        message: serde_json::to_string(&entry.message)?,
    })
}

/// The bare baseline of `path`: baton's schema and settings, no baton code.
fn bare_open(path: &Path, tenant: &TenantId, run: &RunId) -> anyhow::Result<Bare> {
    Bare::open(path, tenant.as_str(), run.as_str())
        .map_err(|e| anyhow!("bare baseline {}: {e}", path.display()))
}

/// `rows` in one bare transaction.
fn bare_append(bare: &mut Bare, rows: &[BareRow]) -> anyhow::Result<()> {
    bare.append(rows, Timestamp::now().0)
        .map_err(|e| anyhow!("bare baseline: {e}"))
}

fn single_append(
    rt: &Runtime,
    dir: &Path,
    sizes: &Sizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[2] append: one message per transaction, {} rounds of {} messages, baton and bare rusqlite alternating",
        sizes.single_rounds, sizes.single_per_round
    )?;
    let tenant = TenantId::default_tenant();
    let path = dir.join("single.db");
    let (sqlite, run) = on_worker(rt, async move {
        let sqlite = SqliteStore::open(path).await?;
        let run = sqlite
            .create_run(&TenantId::default_tenant(), &NewRun::default())
            .await?
            .id;
        Ok((sqlite, run))
    })?;
    let bare = Arc::new(Mutex::new(bare_open(&dir.join("bare.db"), &tenant, &run)?));

    // baton: one message per call, awaited in sequence by a task on a worker thread, as a
    // server's handler would; or by `block_on` on this thread, for comparison.
    let baton = |entries: Vec<NewEntry>, worker: bool| -> anyhow::Result<f64> {
        let (store, tenant, run) = (sqlite.clone(), tenant.clone(), run.clone());
        let task = async move {
            let start = Instant::now();
            for e in &entries {
                store.append(&tenant, &run, std::slice::from_ref(e)).await?;
            }
            Ok(entries.len() as f64 / start.elapsed().as_secs_f64())
        };
        if worker {
            on_worker(rt, task)
        } else {
            rt.block_on(task)
        }
    };
    // The baseline: the bare transactions in a plain loop on this thread.
    let bare_loop = |rows: Vec<BareRow>| -> anyhow::Result<f64> {
        let mut conn = bare
            .lock()
            .map_err(|_| anyhow!("bare connection lock poisoned"))?;
        let start = Instant::now();
        for row in &rows {
            bare_append(&mut conn, std::slice::from_ref(row))?;
        }
        Ok(rows.len() as f64 / start.elapsed().as_secs_f64())
    };
    // For attribution: the same bare transactions in baton's shape (a worker task, a mutex, one
    // hop per call), through `spawn_blocking` as baton does, or through `block_in_place`.
    let bare_shaped = |rows: Vec<BareRow>, hop: Hop| -> anyhow::Result<f64> {
        let conn = bare.clone();
        on_worker(rt, async move {
            let n = rows.len();
            let start = Instant::now();
            for row in rows {
                let conn = conn.clone();
                let job = move || -> anyhow::Result<()> {
                    let mut conn = conn
                        .lock()
                        .map_err(|_| anyhow!("bare connection lock poisoned"))?;
                    bare_append(&mut conn, std::slice::from_ref(&row))
                };
                match hop {
                    Hop::SpawnBlocking => tokio::task::spawn_blocking(job).await??,
                    Hop::BlockInPlace => tokio::task::block_in_place(job)?,
                }
            }
            Ok(n as f64 / start.elapsed().as_secs_f64())
        })
    };
    let rows_of = |entries: &[NewEntry]| -> anyhow::Result<Vec<BareRow>> {
        entries.iter().map(bare_row).collect()
    };

    let mut fill = Fill::new(2);
    let (n, half) = (sizes.single_per_round, sizes.single_per_round / 2);
    let warm = sizes.single_warmup;
    let (mut baton_appended, mut bare_appended) = (0, 0);
    baton(fill.realistic(warm), true)?;
    baton(fill.realistic(warm), false)?;
    bare_loop(rows_of(&fill.realistic(warm))?)?;
    bare_shaped(rows_of(&fill.realistic(warm))?, Hop::SpawnBlocking)?;
    bare_shaped(rows_of(&fill.realistic(warm))?, Hop::BlockInPlace)?;
    baton_appended += 2 * warm;
    bare_appended += 3 * warm;

    let mut rates = SingleRates::default();
    for round in 0..sizes.single_rounds {
        let baton_entries = fill.realistic(n);
        let bare_rows = rows_of(&fill.realistic(n))?;
        // Alternate which side goes first, so drift in the machine hits both alike.
        let (b, r) = if round.is_multiple_of(2) {
            let b = baton(baton_entries, true)?;
            (b, bare_loop(bare_rows)?)
        } else {
            let r = bare_loop(bare_rows)?;
            (baton(baton_entries, true)?, r)
        };
        rates.baton.push(b);
        rates.bare.push(r);
        rates.ratios.push(b / r);
        rates.caller.push(baton(fill.realistic(half), false)?);
        rates.spawn_blocking.push(bare_shaped(
            rows_of(&fill.realistic(half))?,
            Hop::SpawnBlocking,
        )?);
        rates.block_in_place.push(bare_shaped(
            rows_of(&fill.realistic(half))?,
            Hop::BlockInPlace,
        )?);
        baton_appended += n + half;
        bare_appended += n + 2 * half;
    }
    let baton_last = rt.block_on(sqlite.run(&tenant, &run))?.last_seq;
    let (bare_last, _) = bare
        .lock()
        .map_err(|_| anyhow!("bare connection lock poisoned"))?
        .last_seq()
        .map_err(|e| anyhow!("bare baseline: {e}"))?;
    ensure!(
        usize::try_from(baton_last.0).ok() == Some(baton_appended)
            && usize::try_from(bare_last).ok() == Some(bare_appended),
        "single-append bench: baton ended at seq {baton_last} (expected {baton_appended}), bare at {bare_last} (expected {bare_appended})"
    );
    let baton_mode = rt
        .block_on(sqlite.doctor())?
        .into_iter()
        .find_map(|(name, value)| (name == "journal_mode").then_some(value))
        .unwrap_or_default();

    // What serializing a message and a bare trip through the blocking pool cost on their own.
    let probe = fill.realistic(n);
    let (mut serialize_us, mut hop_us) = (Vec::new(), Vec::new());
    for _ in 0..sizes.single_rounds {
        let start = Instant::now();
        for e in &probe {
            std::hint::black_box(bare_row(e)?);
        }
        serialize_us.push(start.elapsed().as_secs_f64() * 1e6 / probe.len() as f64);
        hop_us.push(on_worker(rt, async move {
            let start = Instant::now();
            for _ in 0..n {
                tokio::task::spawn_blocking(|| std::hint::black_box(0u8)).await?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e6 / n as f64)
        })?);
    }

    let us = |rates: &[f64]| 1e6 / median(rates);
    let (baton_med, bare_med) = (median(&rates.baton), median(&rates.bare));
    writeln!(
        out,
        "    baton, task on a worker thread: {} msg/s",
        list(&rates.baton, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "    bare rusqlite, plain loop:      {} msg/s",
        list(&rates.bare, |r| thousands(*r))
    )?;
    writeln!(
        out,
        "    per-round ratios: {}; journal_mode baton={baton_mode} bare=wal, synchronous=NORMAL, foreign_keys=ON on both",
        list(&rates.ratios, |r| format!("{r:.2}"))
    )?;
    writeln!(
        out,
        "    per message: baton {:.1} µs, bare {:.1} µs, overhead {:.1} µs; attribution (medians, per message):",
        us(&rates.baton),
        us(&rates.bare),
        us(&rates.baton) - us(&rates.bare)
    )?;
    writeln!(
        out,
        "      serializing the message alone {:.1} µs; a no-op spawn_blocking round trip from a worker {:.1} µs",
        median(&serialize_us),
        median(&hop_us)
    )?;
    writeln!(
        out,
        "      the bare transaction sent from a worker through spawn_blocking + mutex {:.1} µs, through block_in_place {:.1} µs",
        us(&rates.spawn_blocking),
        us(&rates.block_in_place)
    )?;
    writeln!(
        out,
        "      baton's loop driven by block_on on the main thread instead of a worker {:.1} µs",
        us(&rates.caller)
    )?;
    report.figure(
        "append_single_msgs_per_s",
        "2 append, 1 message per call, baton (median)",
        baton_med,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "append_single_bare_msgs_per_s",
        "2 same transaction, bare rusqlite (median)",
        bare_med,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "append_single_ratio",
        "2 ratio baton/bare (of medians)",
        baton_med / bare_med,
        Unit::Ratio,
        Some(Target::AtLeast(0.8)),
    );
    report.details.insert(
        "append_single".into(),
        json!({
            "messages_per_round": n,
            "baton_rounds_msgs_per_s": rates.baton,
            "bare_rounds_msgs_per_s": rates.bare,
            "round_ratios": rates.ratios,
            "serialize_us_per_message": median(&serialize_us),
            "spawn_blocking_noop_round_trip_us": median(&hop_us),
            "bare_via_spawn_blocking_msgs_per_s": median(&rates.spawn_blocking),
            "bare_via_block_in_place_msgs_per_s": median(&rates.block_in_place),
            "baton_from_block_on_msgs_per_s": median(&rates.caller),
        }),
    );
    out.flush()?;
    Ok(())
}

/// How a bare transaction leaves the async task, in the attribution runs.
#[derive(Clone, Copy)]
enum Hop {
    SpawnBlocking,
    BlockInPlace,
}

/// Messages per second of each single-append variant, one entry per round.
#[derive(Default)]
struct SingleRates {
    baton: Vec<f64>,
    bare: Vec<f64>,
    ratios: Vec<f64>,
    caller: Vec<f64>,
    spawn_blocking: Vec<f64>,
    block_in_place: Vec<f64>,
}

// ---------------------------------------------------------------------------------------------
// 3. Context assembly

/// A run with `rows` plain-text messages and a summary covering all but the last `tail`.
async fn summarized_run(
    store: &dyn Store,
    tenant: &TenantId,
    rows: u64,
    tail: u64,
    fill_batch: usize,
) -> anyhow::Result<(RunId, Duration, Duration)> {
    let new = NewRun {
        id: None,
        goal: Some("make the test suite pass without touching the public API".into()),
        rules: Some("read-only outside src/; ask before deleting files".into()),
    };
    let run = store.create_run(tenant, &new).await?.id;
    let mut fill = Fill::new(rows);
    let start = Instant::now();
    while fill.next < rows {
        let n = usize::try_from((rows - fill.next).min(fill_batch as u64))?;
        store.append(tenant, &run, &fill.plain(n)).await?;
    }
    let filled = start.elapsed();
    let cut = Seq(rows - tail);
    let candidate = Candidate {
        base: None,
        cut,
        claims: claims(cut),
        meta: None,
    };
    let start = Instant::now();
    let installed = store.install_summary(tenant, &run, &candidate).await?;
    let install = start.elapsed();
    if let Install::Rejected(why) = installed {
        bail!("context bench: summary at {cut} on a {rows}-row run rejected: {why}");
    }
    Ok((run, filled, install))
}

fn context_assembly(
    rt: &Runtime,
    dir: &Path,
    sizes: &Sizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[3] context: runs of {} and {} rows, summary over all but the last {}, {} interleaved calls each",
        thousands(sizes.big_rows as f64),
        thousands(sizes.small_rows as f64),
        sizes.tail,
        sizes.context_reps
    )?;
    let tenant = TenantId::default_tenant();
    let (dir, sizes) = (dir.to_path_buf(), *sizes);
    let setup_tenant = tenant.clone();
    let (big, small, fill_big, install_big) = on_worker(rt, async move {
        let tenant = setup_tenant;
        let big = SqliteStore::open(dir.join("context-big.db")).await?;
        let small = SqliteStore::open(dir.join("context-small.db")).await?;
        let (big_run, fill_big, install_big) =
            summarized_run(&big, &tenant, sizes.big_rows, sizes.tail, sizes.fill_batch).await?;
        let (small_run, _, _) = summarized_run(
            &small,
            &tenant,
            sizes.small_rows,
            sizes.tail,
            sizes.fill_batch,
        )
        .await?;
        Ok(((big, big_run), (small, small_run), fill_big, install_big))
    })?;
    writeln!(
        out,
        "    filled {} rows in {:.2} s ({} msg/s, batches of {}); first summary install on it: {:.1} ms",
        thousands(sizes.big_rows as f64),
        fill_big.as_secs_f64(),
        thousands(sizes.big_rows as f64 / fill_big.as_secs_f64()),
        sizes.fill_batch,
        ms(install_big)
    )?;
    out.flush()?;

    let (big_ms, small_ms) = on_worker(rt, async move {
        let one = |store: &SqliteStore, run: &RunId| {
            let (store, run, tenant, tail) =
                (store.clone(), run.clone(), tenant.clone(), sizes.tail);
            async move {
                let start = Instant::now();
                let context = store.context(&tenant, &run).await?;
                let took = start.elapsed();
                ensure!(
                    context.messages.len() as u64 == tail && context.summary.is_some(),
                    "context bench: expected a summary and {tail} messages, got {} messages",
                    context.messages.len()
                );
                Ok::<_, anyhow::Error>(ms(took))
            }
        };
        for _ in 0..sizes.context_warmup {
            one(&big.0, &big.1).await?;
            one(&small.0, &small.1).await?;
        }
        let (mut big_ms, mut small_ms) = (Vec::new(), Vec::new());
        for _ in 0..sizes.context_reps {
            big_ms.push(one(&big.0, &big.1).await?);
            small_ms.push(one(&small.0, &small.1).await?);
        }
        Ok((big_ms, small_ms))
    })?;
    let (big_med, big_p90) = (median(&big_ms), percentile(&big_ms, 0.9));
    let (small_med, small_p90) = (median(&small_ms), percentile(&small_ms, 0.9));
    let big_k = short_count(sizes.big_rows);
    let small_k = short_count(sizes.small_rows);
    writeln!(
        out,
        "    {big_k}: median {big_med:.3} ms, p90 {big_p90:.3} ms, min {:.3} ms; {small_k}: median {small_med:.3} ms, p90 {small_p90:.3} ms",
        percentile(&big_ms, 0.0)
    )?;
    report.figure(
        "context_big_median_ms",
        format!(
            "3 context, {big_k} rows, {}-message tail: median",
            sizes.tail
        ),
        big_med,
        Unit::Millis,
        Some(Target::AtMost(2.0)),
    );
    report.figure(
        "context_big_p90_ms",
        format!("3 context, {big_k} rows: p90"),
        big_p90,
        Unit::Millis,
        None,
    );
    report.figure(
        "context_small_median_ms",
        format!("3 context, {small_k} rows: median"),
        small_med,
        Unit::Millis,
        None,
    );
    report.figure(
        "context_small_p90_ms",
        format!("3 context, {small_k} rows: p90"),
        small_p90,
        Unit::Millis,
        None,
    );
    report.figure(
        "context_ratio",
        format!("3 ratio {big_k}/{small_k} (medians)"),
        big_med / small_med,
        Unit::Ratio,
        Some(Target::AtMost(2.0)),
    );
    report.details.insert(
        "context".into(),
        json!({
            "big_rows": sizes.big_rows,
            "small_rows": sizes.small_rows,
            "tail": sizes.tail,
            "calls": sizes.context_reps,
            "fill_big_s": fill_big.as_secs_f64(),
            "first_install_big_ms": ms(install_big),
        }),
    );
    out.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// 4. Summary installs

/// A series of installs on one fresh run of `rows` messages.
struct Series {
    latencies_ms: Vec<f64>,
    /// Messages after the base's coverage, to the end of history, per install.
    windows: Vec<u64>,
}

async fn install_series(
    store: &dyn Store,
    tenant: &TenantId,
    rows: u64,
    installs: u64,
    step: u64,
    fill_batch: usize,
) -> anyhow::Result<Series> {
    let run = store.create_run(tenant, &NewRun::default()).await?.id;
    let mut fill = Fill::new(rows + 7);
    while fill.next < rows {
        let n = usize::try_from((rows - fill.next).min(fill_batch as u64))?;
        store.append(tenant, &run, &fill.realistic(n)).await?;
    }
    let mut base: Option<SummaryId> = None;
    let mut coverage = 0;
    let mut series = Series {
        latencies_ms: Vec::new(),
        windows: Vec::new(),
    };
    for k in 1..=installs {
        let cut = Seq(k * step);
        let candidate = Candidate {
            base,
            cut,
            claims: claims(cut),
            meta: None,
        };
        let start = Instant::now();
        let installed = store.install_summary(tenant, &run, &candidate).await?;
        let took = start.elapsed();
        match installed {
            Install::Installed(summary) => base = Some(summary.id),
            Install::Rejected(why) => bail!("install bench: install at {cut} rejected: {why}"),
        }
        series.latencies_ms.push(ms(took));
        series.windows.push(rows - coverage);
        coverage = cut.0;
    }
    Ok(series)
}

fn summary_installs(
    rt: &Runtime,
    dir: &Path,
    sizes: &Sizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[4] summary install: {} successive installs (base = previous, cut +{}, 3 claims) on a run of {} messages; again on {}",
        sizes.installs,
        sizes.install_step,
        thousands(sizes.install_rows as f64),
        thousands(sizes.install_long_rows as f64)
    )?;
    ensure!(
        sizes.installs * sizes.install_step <= sizes.install_rows,
        "install bench: {} installs of {} do not fit in {} rows",
        sizes.installs,
        sizes.install_step,
        sizes.install_rows
    );
    let (dir, sizes) = (dir.to_path_buf(), *sizes);
    let (short, long) = on_worker(rt, async move {
        let tenant = TenantId::default_tenant();
        let short_store = SqliteStore::open(dir.join("install.db")).await?;
        let long_store = SqliteStore::open(dir.join("install-long.db")).await?;
        let short = install_series(
            &short_store,
            &tenant,
            sizes.install_rows,
            sizes.installs,
            sizes.install_step,
            sizes.fill_batch,
        )
        .await?;
        let long = install_series(
            &long_store,
            &tenant,
            sizes.install_long_rows,
            sizes.installs,
            sizes.install_step,
            sizes.fill_batch,
        )
        .await?;
        Ok((short, long))
    })?;
    let med = median(&short.latencies_ms);
    let total_s: f64 = short.latencies_ms.iter().sum::<f64>() / 1e3;
    let per_s = short.latencies_ms.len() as f64 / total_s;
    let long_med = median(&long.latencies_ms);
    let window = |s: &Series| {
        let w: Vec<f64> = s.windows.iter().map(|w| *w as f64).collect();
        (
            s.windows.first().copied().unwrap_or(0),
            s.windows.last().copied().unwrap_or(0),
            median(&w),
        )
    };
    let (w_first, w_last, w_med) = window(&short);
    let (lw_first, lw_last, lw_med) = window(&long);
    writeln!(
        out,
        "    {} rows: median {med:.3} ms, p90 {:.3} ms, {:.0} installs/s; window read per install {} -> {} messages (median {w_med:.0}) while each cut advances {}",
        thousands(sizes.install_rows as f64),
        percentile(&short.latencies_ms, 0.9),
        per_s,
        thousands(w_first as f64),
        thousands(w_last as f64),
        sizes.install_step
    )?;
    writeln!(
        out,
        "    {} rows: median {long_med:.3} ms, p90 {:.3} ms; window {} -> {} (median {lw_med:.0}): {:.1}x the window costs {:.1}x the time",
        thousands(sizes.install_long_rows as f64),
        percentile(&long.latencies_ms, 0.9),
        thousands(lw_first as f64),
        thousands(lw_last as f64),
        lw_med / w_med,
        long_med / med
    )?;
    writeln!(
        out,
        "    (the window is every message after the base's coverage; an install reads only its rows that open or answer a tool call, 2 of every 5 here)"
    )?;
    report.figure(
        "install_median_ms",
        format!(
            "4 summary install, {} rows: median",
            short_count(sizes.install_rows)
        ),
        med,
        Unit::Millis,
        None,
    );
    report.figure(
        "install_per_s",
        format!(
            "4 summary installs, {} rows",
            short_count(sizes.install_rows)
        ),
        per_s,
        Unit::PerSecond("install"),
        None,
    );
    report.figure(
        "install_long_median_ms",
        format!(
            "4 summary install, {} rows: median",
            short_count(sizes.install_long_rows)
        ),
        long_med,
        Unit::Millis,
        None,
    );
    report.details.insert(
        "install".into(),
        json!({
            "installs": sizes.installs,
            "cut_step": sizes.install_step,
            "rows": sizes.install_rows,
            "window_messages_median": w_med,
            "window_messages_first": w_first,
            "window_messages_last": w_last,
            "long_rows": sizes.install_long_rows,
            "long_window_messages_median": lw_med,
            "long_median_ms": long_med,
        }),
    );
    out.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Messages

/// Deterministic generator of messages for a run, numbering them from seq 1.
struct Fill {
    state: u64,
    /// Messages generated so far: the seq of the last one.
    next: u64,
}

#[rustfmt::skip]
const WORDS: &[&str] = &[
    "the", "build", "fails", "because", "parser", "expects", "a", "token", "after", "function",
    "signature", "so", "we", "should", "check", "whether", "lexer", "emits", "newline", "before",
    "closing", "brace", "in", "test", "fixture", "and", "then", "rerun", "suite", "with",
    "verbose", "output", "error", "line", "column", "module", "import", "path", "resolves", "to",
    "wrong", "crate", "version", "lockfile", "pins", "older", "release", "which", "lacks",
    "method", "trait", "bound", "is", "not", "satisfied", "for", "type", "returned", "by",
    "iterator", "adapter", "consider", "adding", "clone", "borrow", "lifetime", "outlives",
];

impl Fill {
    fn new(seed: u64) -> Self {
        Fill {
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            next: 0,
        }
    }

    fn word(&mut self) -> &'static str {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        WORDS[(r >> 33) as usize % WORDS.len()]
    }

    /// About `bytes` bytes of prose.
    fn text(&mut self, bytes: usize) -> String {
        let mut s = String::with_capacity(bytes + 16);
        while s.len() < bytes {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(self.word());
        }
        s
    }

    /// `n` plain text messages, user and assistant alternating: every cut is safe.
    fn plain(&mut self, n: usize) -> Vec<NewEntry> {
        (0..n)
            .map(|_| {
                self.next += 1;
                let role = if self.next % 2 == 1 {
                    Role::User
                } else {
                    Role::Assistant
                };
                NewEntry::estimated(Message::text(role, self.text(1_000)))
            })
            .collect()
    }

    /// `n` messages in a cycle of five: user text, assistant text with a `tool_use`, user
    /// `tool_result`, assistant text, user text. A cut at a multiple of 5 is safe.
    fn realistic(&mut self, n: usize) -> Vec<NewEntry> {
        (0..n)
            .map(|_| {
                self.next += 1;
                let seq = self.next;
                let message = match seq % 5 {
                    1 => Message::text(Role::User, self.text(1_000)),
                    2 => Message {
                        role: Role::Assistant,
                        content: vec![
                            ContentBlock::Text {
                                text: self.text(850),
                            },
                            ContentBlock::ToolUse {
                                id: format!("toolu_{seq:08}"),
                                name: "read_file".into(),
                                input: json!({ "path": format!("src/module_{}.rs", seq % 97), "max_bytes": 4096 }),
                            },
                        ],
                    },
                    3 => Message {
                        role: Role::User,
                        content: vec![ContentBlock::ToolResult {
                            tool_use_id: format!("toolu_{:08}", seq - 1),
                            content: vec![ContentBlock::Text {
                                text: self.text(950),
                            }],
                            is_error: seq.is_multiple_of(7),
                        }],
                    },
                    4 => Message::text(Role::Assistant, self.text(1_000)),
                    _ => Message::text(Role::User, self.text(1_000)),
                };
                NewEntry::estimated(message)
            })
            .collect()
    }
}

/// A few claims citing seqs at or before `cut`.
fn claims(cut: Seq) -> Vec<Claim> {
    vec![
        Claim::new(
            ClaimKind::Goal,
            "make the test suite pass without touching the public API",
            Seq(1),
        ),
        Claim::new(
            ClaimKind::Verified,
            format!(
                "the parser error reproduces as of seq {}",
                cut.0.saturating_sub(3).max(1)
            ),
            Seq(cut.0.saturating_sub(3).max(1)),
        ),
        Claim::new(
            ClaimKind::NextStep,
            "rerun the suite with the lexer fix",
            cut,
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Numbers

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn median(values: &[f64]) -> f64 {
    let v = sorted(values);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile, `p` in `[0, 1]`.
fn percentile(values: &[f64], p: f64) -> f64 {
    let v = sorted(values);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = (p * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    baton_usage::table::thousands(value.round() as u64)
}

fn short_count(n: u64) -> String {
    if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

fn list<T>(values: &[T], show: impl Fn(&T) -> String) -> String {
    values.iter().map(show).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentile() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.9), 9.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 1.0), 10.0);
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }

    #[test]
    fn realistic_cycle_pairs_tool_calls_within_five() {
        let mut fill = Fill::new(1);
        let entries = fill.realistic(10);
        assert_eq!(
            entries[1].message.tool_use_ids().collect::<Vec<_>>(),
            ["toolu_00000002"]
        );
        assert_eq!(
            entries[2].message.tool_result_ids().collect::<Vec<_>>(),
            ["toolu_00000002"]
        );
        assert_eq!(fill.next, 10);
    }

    #[test]
    fn args() {
        let parse = |a: &[&str]| parse_args(a.iter().map(|s| s.to_string()));
        assert!(matches!(
            parse(&["--quick", "--json"]),
            Ok(Some(Args {
                quick: true,
                json: true,
                ..
            }))
        ));
        assert!(matches!(parse(&["--help"]), Ok(None)));
        assert!(parse(&["--nope"]).is_err());
        let only = parse(&["--only", "single,ledger"]).unwrap().unwrap().only;
        assert_eq!(only, ["single", "ledger"]);
        assert!(parse(&["--only", "single,nope"]).is_err());
    }
}
