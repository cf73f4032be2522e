//! Section 8: compaction, the three bars of issue 5.
//!
//! **Replay.** The longest Claude Code session of the corpus (`SESSION`, 465 messages once
//! imported, 217 model calls) is imported as `baton import` imports it (`detect`, `parse`,
//! `Transcript::to_import` with the `--tokenizer auto` counter of its model, `Store::import`)
//! into a temp SQLite store, read back with `read_range`, and replayed by
//! `baton_compact::replay::replay` under `none`, `sliding`, `budget`, `clear-tool-results` and
//! `structured` with the configuration `baton replay --budget 12000` builds: `budget.max_tokens`
//! and the `summarize`/`structured` thresholds set to the budget, everything else (the default
//! trigger included) at its default, and the run's rules and goal as the fixed tokens (none for
//! an imported run). The budget, 12,000 tokens, is about a tenth of the 115k tokens the
//! session's full context reaches by its last call: the budget a cost-conscious agent would
//! hold, small enough that every strategy has to work on this run. Bars: `budget` and
//! `structured` send at least 5× fewer input tokens over the replay than `none`, and their
//! peak context stays within the budget; `structured` keeps every constraint probe (this
//! session holds no constraint sentence, so its probe is empty, which the printed line says;
//! the same replay of `structured` over every Claude Code session of the corpus gives the
//! figure that carries the target) and at least 90% of the paths and commands of what it
//! drops (issue 5, item 4).
//!
//! **Planning.** What `baton_runtime::compact` does before it admits a plan —
//! `Store::context_meta`, `ContextMeta::fixed_tokens`, `HistoryView::new(…).with_cleared(…)`,
//! `Strategy::plan` — timed per call for `budget` and `structured` (configured as above, so
//! both plan a cut: the 50-message tail holds about 12.8k tokens) on a run of 100,000 rows
//! whose summary covers all but the last 50 (built like section 3's), and on a run of 1,000
//! rows with the same tail; calls interleaved, median and p90. Bar: under 5 ms median at 100k,
//! and a ratio of medians 100k/1k within 2 (planning costs O(tail)).
//!
//! **Peer.** `budget` against LangChain's `trim_messages`, each as a per-step context policy
//! over the same three sessions (the three largest `claude-code-jsonl/*.jsonl` files by size,
//! the peer script's selection) at the script's budgets (8k, 32k, 100k): for every prefix of
//! `k` messages, `k = 1..N`, ours builds a `HistoryView` over the first `k` entries' stored
//! metadata (`EntryMeta` from `context_meta`, read once, as the peer's message list is built
//! once; no summary, no fixed tokens), plans `Budget { max_tokens: B, target_tokens: Some(B) }`
//! (target = max, so it cuts only as much as needed, as trimming does) and materializes the
//! kept messages; the peer (`../shared/peers/trim_messages_bench.py`, run by this bench in a
//! virtual environment of its own with `langchain-core`) calls `trim_messages(messages[:k],
//! strategy="last", …)`. The clock covers the whole loop of one session and budget on both
//! sides; checking the outputs is outside it. Token counts differ: the peer counts with
//! `count_tokens_approximately`, ours are the stored tiktoken counts, and the peer's message
//! list merges an assistant turn's blocks into one message and drops thinking, so the step
//! counts differ too; the comparison is throughput per step on the same sessions. The bar's
//! ratio is the median over the nine sessions × budgets of ours/peer steps per second (target
//! ≥ 20×). Outputs are checked with `ProtocolMap::analyze` on the kept window: one with an
//! orphan `tool_result`, or with a dangling `tool_use` that the uncut prefix does not have (so
//! a call awaiting its result at the tip is not blamed on the cut, as the peer script does), is
//! broken; ours must have none. Full mode runs each side 3 times (medians); `--quick` runs ours
//! once on the smallest of the three and skips the peer. The peer is skipped with one
//! `peer: skipped (…)` line, never failing the bench, when its script, Python, the virtual
//! environment or the install fails. The environment is made once and reused: at
//! `$BATON_BENCH_PEERS_VENV`, else `$XDG_CACHE_HOME/baton-peers-venv`, else
//! `/tmp/baton-peers-venv`.
//!
//! A missing corpus skips the replay and peer bars with one line each.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use baton_compact::audit::Share;
use baton_compact::config::CompactionConfig;
use baton_compact::replay::{Replay, ReplayReport, replay};
use baton_compact::strategies::Budget;
use baton_compact::{HistoryView, Strategy};
use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_core::{Entry, EntryMeta, Message, RunId, Seq, TenantId};
use baton_sqlite::SqliteStore;
use baton_store::{Reimport, Store};
use baton_tokens::TokenizerChoice;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use crate::import::{CORPUS, walk};
use crate::{
    Report, Target, Unit, median, ms, on_worker, percentile, short_count, summarized_run, thousands,
};

/// The session the replay bar replays: the corpus's longest Claude Code session.
const SESSION: &str = "claude-code-jsonl/marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl";

/// The replay's budget (`baton replay --budget 12000`); see the module docs for why.
const BUDGET: u64 = 12_000;

/// Every strategy the replay table shows, in `baton replay`'s order.
const REPLAYED: [&str; 5] = [
    "none",
    "sliding",
    "budget",
    "clear-tool-results",
    "structured",
];

/// Messages after the summary's coverage in the planning runs (section 3's tail).
const TAIL: u64 = 50;

/// Rows per append while filling the planning runs.
const FILL_BATCH: usize = 1_000;

/// The peer script's budgets.
const PEER_BUDGETS: [u64; 3] = [8_000, 32_000, 100_000];

/// How many of the largest Claude Code files the peer bar takes (the script's default).
const PEER_FILES: usize = 3;

/// The peer script, beside the corpus.
const PEER_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/peers/trim_messages_bench.py"
);

/// The longest the peer script may take before it is stopped and skipped.
const PEER_TIMEOUT: Duration = Duration::from_secs(240);

/// What the bars that read the corpus share.
struct Ctx<'a> {
    rt: &'a Runtime,
    /// The section's store, where the sessions are imported.
    store: &'a SqliteStore,
    tenant: &'a TenantId,
    corpus: &'a Path,
    /// The bench's temp directory.
    dir: &'a Path,
    sizes: &'a Sizes,
}

/// How much of the section to do.
struct Sizes {
    replayed: &'static [&'static str],
    /// Replay `structured` over every Claude Code session too.
    corpus_replay: bool,
    plan_big: u64,
    plan_small: u64,
    plan_reps: usize,
    plan_warmup: usize,
    /// Rounds of our side of the peer bar (and the peer's `--runs`).
    peer_rounds: usize,
    /// Run our side on the smallest selected session only, and skip the peer.
    peer_quick: bool,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                replayed: &["none", "budget", "structured"],
                corpus_replay: false,
                plan_big: 5_000,
                plan_small: 1_000,
                plan_reps: 20,
                plan_warmup: 3,
                peer_rounds: 1,
                peer_quick: true,
            }
        } else {
            Sizes {
                replayed: &REPLAYED,
                corpus_replay: true,
                plan_big: 100_000,
                plan_small: 1_000,
                plan_reps: 200,
                plan_warmup: 20,
                peer_rounds: 3,
                peer_quick: false,
            }
        }
    }
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let sizes = Sizes::new(quick);
    writeln!(
        out,
        "\n[8] compaction: replay of the longest Claude Code session at a budget of {} tokens, planning on {} and {} rows, budget vs trim_messages",
        thousands(BUDGET as f64),
        thousands(sizes.plan_big as f64),
        thousands(sizes.plan_small as f64),
    )?;
    out.flush()?;
    let mut details = json!({ "budget": BUDGET });
    let corpus = std::fs::canonicalize(CORPUS).ok();
    let tenant = TenantId::new("bench-compaction")?;
    let store = {
        let path = dir.join("compaction.db");
        on_worker(rt, async move { Ok(SqliteStore::open(path).await?) })?
    };

    let ctx = corpus.as_deref().map(|corpus| Ctx {
        rt,
        store: &store,
        tenant: &tenant,
        corpus,
        dir,
        sizes: &sizes,
    });
    match &ctx {
        Some(ctx) => details["replay"] = replay_bar(ctx, report, out)?,
        None => {
            writeln!(out, "    replay: skipped (corpus not found at {CORPUS})")?;
            details["replay"] = json!({ "skipped": "corpus not found", "path": CORPUS });
        }
    }
    details["planning"] = planning_bar(rt, dir, &sizes, report, out)?;
    details["growth"] = growth_bar(quick, report, out)?;
    match &ctx {
        Some(ctx) => details["peer"] = peer_bar(ctx, report, out)?,
        None => {
            writeln!(out, "    peer: skipped (corpus not found at {CORPUS})")?;
            details["peer"] = json!({ "skipped": "corpus not found", "path": CORPUS });
        }
    }
    writeln!(
        out,
        "    compaction section took {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    report.details.insert("compaction".into(), details);
    out.flush()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Importing and configuring as the CLI does

/// Imports one transcript file as `baton import` does (detect, parse, `to_import` with the
/// `--tokenizer auto` counter of each transcript's model, one `Store::import`); the runs of its
/// transcripts, in order (found again when an earlier call imported them).
pub(crate) async fn import_file(
    store: &dyn Store,
    tenant: &TenantId,
    file: &Path,
) -> anyhow::Result<Vec<RunId>> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let path = std::fs::canonicalize(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string();
    let format = baton_import::detect(&bytes)
        .with_context(|| format!("{}: not a recognized transcript format", file.display()))?;
    let mut transcripts = baton_import::parse(format, &bytes)
        .with_context(|| format!("parsing {} as {}", file.display(), format.name()))?;
    let mut imports = Vec::with_capacity(transcripts.len());
    for transcript in &mut transcripts {
        let counter = baton_tokens::counter(
            TokenizerChoice::Auto,
            transcript.models.first().map(String::as_str),
        );
        imports.push(transcript.to_import(&path, None, &*counter).0);
    }
    let outcomes = store
        .import(tenant, imports, Reimport::No)
        .await
        .with_context(|| format!("importing {}", file.display()))?;
    Ok(outcomes.iter().map(|o| o.id().clone()).collect())
}

/// A run's whole history and the tokens its rules and goal take, as `baton replay` reads them.
pub(crate) async fn recorded(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
) -> anyhow::Result<(Vec<Entry>, u64)> {
    let record = store.run(tenant, run).await?;
    let entries = store.read_range(tenant, run, Seq(1), None).await?;
    let fixed = baton_core::context::assemble(&record, None, Vec::new()).tokens;
    Ok((entries, fixed))
}

/// The configuration `baton replay --strategies NAME --budget BUDGET` builds.
pub(crate) fn configured(
    name: &str,
    budget: u64,
) -> anyhow::Result<(CompactionConfig, Arc<dyn Strategy>)> {
    let config = CompactionConfig::named(name).with_budget(budget);
    let strategy = config.build()?;
    Ok((config, strategy))
}

/// `baton replay`'s replay of `entries` under `name` at `budget` (imported runs have no rules
/// or goal), counted with `counter`, with `probes` beside the old constraint probe.
pub(crate) fn replay_as_cli(
    run: &RunId,
    entries: &[Entry],
    name: &str,
    budget: u64,
    counter: Arc<dyn baton_core::tokens::TokenCounter>,
    probes: Vec<baton_compact::replay::Probe>,
) -> anyhow::Result<ReplayReport> {
    let (config, _) = configured(name, budget)?;
    let mut how = Replay::new(run.clone(), &config)?;
    how.counter = counter;
    how.extra_probes = probes;
    how.budget = Some(budget);
    Ok(replay(entries, &how))
}

/// The counter `baton replay` uses for a Claude Code session: `cl100k_base`.
fn claude_counter() -> Arc<dyn baton_core::tokens::TokenCounter> {
    baton_tokens::counter(TokenizerChoice::Auto, Some("claude"))
}

// ---------------------------------------------------------------------------------------------
// Bar 1: replay

fn replay_bar(ctx: &Ctx<'_>, report: &mut Report, out: &mut impl Write) -> anyhow::Result<Value> {
    let Ctx {
        rt,
        store,
        tenant,
        corpus,
        sizes,
        ..
    } = *ctx;
    let file = corpus.join(SESSION);
    let start = Instant::now();
    let (run, entries, fixed) = on_worker(rt, {
        let (store, tenant, file) = (store.clone(), tenant.clone(), file.clone());
        async move {
            let runs = import_file(&store, &tenant, &file).await?;
            let Some(run) = runs.into_iter().next() else {
                bail!("compaction bench: {} holds no transcript", file.display());
            };
            let (entries, fixed) = recorded(&store, &tenant, &run).await?;
            Ok((run, entries, fixed))
        }
    })?;
    let import_ms = ms(start.elapsed());
    let mut reports = Vec::new();
    for name in sizes.replayed {
        reports.push(replay_as_cli(
            &run,
            &entries,
            name,
            BUDGET,
            claude_counter(),
            Vec::new(),
        )?);
    }
    let find = |name: &str| reports.iter().find(|r| r.strategy == name);
    let (Some(none), Some(budget), Some(structured)) =
        (find("none"), find("budget"), find("structured"))
    else {
        bail!("compaction bench: the replay lacks none, budget or structured");
    };
    let none_total = none.total_input_tokens;
    let vs_none = |r: &ReplayReport| none_total as f64 / r.total_input_tokens.max(1) as f64;
    writeln!(
        out,
        "    replay: {} ({} messages, {} model calls, imported in {import_ms:.0} ms), budget {} tokens, fixed {fixed}; the full context peaks at {} tokens",
        file.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        entries.len(),
        none.steps.len(),
        thousands(BUDGET as f64),
        thousands(none.peak_context_tokens as f64),
    )?;
    writeln!(
        out,
        "      {:<20} {:>13} {:>8} {:>9} {:>8} {:>8} {:>12} {:>7} {:>9} {:>9}",
        "strategy",
        "input tokens",
        "vs none",
        "peak",
        "compact",
        "refused",
        "constraints",
        "paths",
        "commands",
        "replay ms"
    )?;
    for r in &reports {
        writeln!(
            out,
            "      {:<20} {:>13} {:>7.1}x {:>9} {:>8} {:>8} {:>12} {:>7} {:>9} {:>9.1}",
            r.strategy,
            r.total_input_tokens,
            vs_none(r),
            r.peak_context_tokens,
            r.compactions,
            r.refused,
            format!(
                "{}/{}",
                r.probes.constraints.kept, r.probes.constraints.total
            ),
            share_pct(&r.retention.paths),
            share_pct(&r.retention.commands),
            ms(r.duration),
        )?;
    }
    let constraints = structured.probes.constraints;
    if constraints.total == 0 {
        writeln!(
            out,
            "      structured constraint probes: 0/0 — this session holds no constraint sentence, so its probe is empty{}",
            if sizes.corpus_replay {
                "; the corpus-wide replay below carries the bar"
            } else {
                ""
            }
        )?;
    }

    for (r, key_ratio, key_peak, key_ms) in [
        (
            budget,
            "replay_budget_reduction",
            "replay_budget_peak_tokens",
            "replay_budget_ms",
        ),
        (
            structured,
            "replay_structured_reduction",
            "replay_structured_peak_tokens",
            "replay_structured_ms",
        ),
    ] {
        report.figure(
            key_ratio,
            format!("8 replay {}: input tokens none/{}", r.strategy, r.strategy),
            vs_none(r),
            Unit::Ratio,
            Some(Target::AtLeast(5.0)),
        );
        report.figure(
            key_peak,
            format!("8 replay {}: peak context", r.strategy),
            r.peak_context_tokens as f64,
            Unit::Count("tokens"),
            Some(Target::AtMost(BUDGET as f64)),
        );
        report.figure(
            key_ms,
            format!("8 replay {}: time", r.strategy),
            ms(r.duration),
            Unit::Millis,
            None,
        );
    }
    report.figure(
        "replay_structured_constraints",
        format!(
            "8 replay structured: constraint probes {}/{}",
            constraints.kept, constraints.total
        ),
        ratio_or_nan(&constraints),
        Unit::Ratio,
        (constraints.total > 0).then_some(Target::AtLeast(1.0)),
    );
    for (key, what, share) in [
        (
            "replay_structured_paths",
            "paths",
            structured.retention.paths,
        ),
        (
            "replay_structured_commands",
            "commands",
            structured.retention.commands,
        ),
    ] {
        report.figure(
            key,
            format!(
                "8 replay structured: {what} kept {}/{}",
                share.kept, share.total
            ),
            ratio_or_nan(&share),
            Unit::Ratio,
            (share.total > 0).then_some(Target::AtLeast(0.9)),
        );
    }

    let mut details = json!({
        "session": SESSION,
        "run": run,
        "messages": entries.len(),
        "model_calls": none.steps.len(),
        "fixed_tokens": fixed,
        "import_ms": import_ms,
        "strategies": reports.iter().map(|r| replay_json(r, none_total)).collect::<Vec<_>>(),
    });
    if sizes.corpus_replay {
        details["corpus"] = corpus_replay(ctx, report, out)?;
    }
    out.flush()?;
    Ok(details)
}

/// `structured` replayed over every Claude Code session of the corpus at the same budget: the
/// constraint probes and the retention, summed.
fn corpus_replay(
    ctx: &Ctx<'_>,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<Value> {
    let Ctx {
        rt,
        store,
        tenant,
        corpus,
        ..
    } = *ctx;
    let start = Instant::now();
    let mut files = Vec::new();
    walk(&corpus.join("claude-code-jsonl"), &mut files)?;
    files.retain(|f| f.extension().is_some_and(|e| e == "jsonl"));
    let histories = on_worker(rt, {
        let (store, tenant) = (store.clone(), tenant.clone());
        async move {
            let mut histories = Vec::new();
            for file in &files {
                for run in import_file(&store, &tenant, file).await? {
                    let (entries, fixed) = recorded(&store, &tenant, &run).await?;
                    histories.push((run, entries, fixed));
                }
            }
            Ok(histories)
        }
    })?;
    let (mut constraints, mut paths, mut commands) =
        (Share::default(), Share::default(), Share::default());
    let (mut with_constraints, mut compacted) = (0usize, 0usize);
    for (run, entries, fixed) in &histories {
        let _ = fixed;
        let r = replay_as_cli(
            run,
            entries,
            "structured",
            BUDGET,
            claude_counter(),
            Vec::new(),
        )?;
        constraints += r.probes.constraints;
        paths += r.retention.paths;
        commands += r.retention.commands;
        with_constraints += usize::from(r.probes.constraints.total > 0);
        compacted += usize::from(r.compactions > 0);
    }
    writeln!(
        out,
        "    structured over all {} Claude Code sessions of the corpus at the same budget ({compacted} of them compacted, {with_constraints} hold constraints): constraint probes {}/{}, paths {}/{}, commands {}/{} ({:.1} s with the imports)",
        histories.len(),
        constraints.kept,
        constraints.total,
        paths.kept,
        paths.total,
        commands.kept,
        commands.total,
        start.elapsed().as_secs_f64()
    )?;
    report.figure(
        "replay_corpus_structured_constraints",
        format!(
            "8 structured, {} CC sessions: constraints {}/{}",
            histories.len(),
            constraints.kept,
            constraints.total
        ),
        ratio_or_nan(&constraints),
        Unit::Ratio,
        (constraints.total > 0).then_some(Target::AtLeast(1.0)),
    );
    Ok(json!({
        "sessions": histories.len(),
        "sessions_compacted": compacted,
        "sessions_with_constraints": with_constraints,
        "constraint_probes": { "kept": constraints.kept, "total": constraints.total },
        "paths": { "kept": paths.kept, "total": paths.total },
        "commands": { "kept": commands.kept, "total": commands.total },
    }))
}

fn replay_json(r: &ReplayReport, none_total: u64) -> Value {
    json!({
        "strategy": r.strategy,
        "total_input_tokens": r.total_input_tokens,
        "full_input_tokens": r.total_full_tokens,
        "reduction": none_total as f64 / r.total_input_tokens.max(1) as f64,
        "peak_context_tokens": r.peak_context_tokens,
        "steps": r.steps.len(),
        "compactions": r.compactions,
        "refused": r.refused,
        "summary_tokens": r.summary_tokens,
        "constraint_probes": { "kept": r.probes.constraints.kept, "total": r.probes.constraints.total },
        "steps_over_budget": r.steps_over_budget,
        "peak_state_tokens": r.peak_state_tokens,
        "source_probes": { "kept": r.probes.sources.kept, "total": r.probes.sources.total },
        "retention": {
            "paths": r.retention.paths.ratio(),
            "commands": r.retention.commands.ratio(),
            "urls": r.retention.urls.ratio(),
            "numbers": r.retention.numbers.ratio(),
        },
        "duration_ms": ms(r.duration),
    })
}

fn share_pct(s: &Share) -> String {
    s.ratio()
        .map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", 100.0 * r))
}

/// `kept / total`, NaN (shown as n/a, `null` in JSON) when there was nothing to keep.
fn ratio_or_nan(s: &Share) -> f64 {
    s.ratio().unwrap_or(f64::NAN)
}

// ---------------------------------------------------------------------------------------------
// Bar 2: planning

/// The growth report's replay (`GET /v1/runs/{id}/growth?strategy=sliding`, `baton report
/// growth`) on a synthetic run of N and 4N messages: the time per message must not grow with
/// the run (issue 20: it was quadratic, 13.6 s at 10,000 messages).
fn growth_bar(quick: bool, report: &mut Report, out: &mut impl Write) -> anyhow::Result<Value> {
    let small: u64 = if quick { 1_000 } else { 2_500 };
    let big = small * 4;
    let time = |n: u64| -> anyhow::Result<f64> {
        let entries: Vec<Entry> = (1..=n)
            .map(|s| {
                let role = if s % 2 == 1 {
                    baton_core::Role::User
                } else {
                    baton_core::Role::Assistant
                };
                let text = if s % 7 == 1 {
                    format!("Do not touch /etc/app{s}.conf. Run cargo test -p app{s}. ")
                } else {
                    format!("Confirmed: the limit is {s} in src/limit{s}.rs. ")
                };
                Entry {
                    seq: Seq(s),
                    tokens: 50,
                    message: Message::text(role, text.repeat(5)),
                    created_at: baton_core::Timestamp(0),
                }
            })
            .collect();
        let (config, _) = configured("sliding", 8_000)?;
        let mut how = Replay::new(RunId::new("growth")?, &config)?;
        how.probes = false; // as the growth report replays
        let start = Instant::now();
        let r = replay(&entries, &how);
        ensure!(!r.steps.is_empty(), "the growth replay made no steps");
        Ok(start.elapsed().as_secs_f64())
    };
    let (t_small, t_big) = (time(small)?, time(big)?);
    let per_small = t_small / small as f64;
    let per_big = t_big / big as f64;
    let growth = per_big / per_small.max(f64::MIN_POSITIVE);
    writeln!(
        out,
        "    growth report (sliding): {} messages {:.1} ms, {} messages {:.1} ms: time per message x{growth:.2} at 4x the length (linear: about 1)",
        thousands(small as f64),
        t_small * 1000.0,
        thousands(big as f64),
        t_big * 1000.0,
    )?;
    report.figure(
        "growth_sliding_per_message_ratio",
        format!(
            "8 growth report sliding: time per message, {} vs {} messages",
            thousands(big as f64),
            thousands(small as f64)
        ),
        growth,
        Unit::Ratio,
        Some(Target::AtMost(2.0)),
    );
    Ok(
        json!({ "messages": [small, big], "seconds": [t_small, t_big], "per_message_ratio": growth }),
    )
}

/// One planning call as `baton_runtime::compact` makes it, up to the plan: its time, the plan's
/// kind and the tail's length.
async fn plan_once(
    store: &SqliteStore,
    tenant: &TenantId,
    run: &RunId,
    strategy: &dyn Strategy,
) -> anyhow::Result<(f64, &'static str, usize)> {
    let start = Instant::now();
    let meta = store.context_meta(tenant, run).await?;
    let fixed = meta.fixed_tokens();
    let view = HistoryView::new(meta.summary.as_ref(), &meta.tail, &meta.pins, fixed)
        .with_cleared(meta.run.cleared);
    let plan = strategy.plan(&view);
    let took = start.elapsed();
    Ok((ms(took), plan.kind(), meta.tail.len()))
}

fn planning_bar(
    rt: &Runtime,
    dir: &Path,
    sizes: &Sizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<Value> {
    let strategies = [
        configured("budget", BUDGET)?.1,
        configured("structured", BUDGET)?.1,
    ];
    let (big_rows, small_rows) = (sizes.plan_big, sizes.plan_small);
    let (reps, warmup) = (sizes.plan_reps, sizes.plan_warmup);
    let dir = dir.to_path_buf();
    let tenant = TenantId::default_tenant();
    let (times, kinds, tails) = on_worker(rt, async move {
        let big = SqliteStore::open(dir.join("compaction-plan-big.db")).await?;
        let small = SqliteStore::open(dir.join("compaction-plan-small.db")).await?;
        let (big_run, _, _) = summarized_run(&big, &tenant, big_rows, TAIL, FILL_BATCH).await?;
        let (small_run, _, _) =
            summarized_run(&small, &tenant, small_rows, TAIL, FILL_BATCH).await?;
        let runs = [(&big, &big_run), (&small, &small_run)];
        // times[strategy][run]
        let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
        let mut kinds = [[""; 2]; 2];
        let mut tails = [0usize; 2];
        for rep in 0..warmup + reps {
            for (s, strategy) in strategies.iter().enumerate() {
                // Alternate which run goes first, so drift hits both alike.
                for i in 0..2 {
                    let r = if rep % 2 == 0 { i } else { 1 - i };
                    let (store, run) = runs[r];
                    let (took, kind, tail) = plan_once(store, &tenant, run, &**strategy).await?;
                    if rep >= warmup {
                        times[s][r].push(took);
                    }
                    ensure!(
                        kinds[s][r].is_empty() || kinds[s][r] == kind,
                        "planning bench: {} planned {kind} after {}",
                        strategy.name(),
                        kinds[s][r]
                    );
                    kinds[s][r] = kind;
                    tails[r] = tail;
                }
            }
        }
        Ok((times, kinds, tails))
    })?;
    ensure!(
        tails.iter().all(|t| *t as u64 == TAIL),
        "planning bench: expected tails of {TAIL} messages, got {tails:?}"
    );
    let (big_k, small_k) = (short_count(big_rows), short_count(small_rows));
    writeln!(
        out,
        "    planning (context_meta + fixed tokens + HistoryView + plan, as baton_runtime::compact): runs of {big_k} and {small_k} rows, summary over all but the last {TAIL}, {reps} interleaved calls each"
    )?;
    let mut details = json!({
        "big_rows": big_rows,
        "small_rows": small_rows,
        "tail": TAIL,
        "calls": reps,
    });
    for (s, name) in ["budget", "structured"].into_iter().enumerate() {
        let [big, small] = &times[s];
        let (big_med, big_p90) = (median(big), percentile(big, 0.9));
        let (small_med, small_p90) = (median(small), percentile(small, 0.9));
        writeln!(
            out,
            "      {name:<10} plans {}: {big_k} median {big_med:.3} ms, p90 {big_p90:.3} ms; {small_k} median {small_med:.3} ms, p90 {small_p90:.3} ms; ratio {:.2}",
            kinds[s][0],
            big_med / small_med
        )?;
        let (key_med, key_p90, key_ratio) = match s {
            0 => (
                "plan_budget_big_median_ms",
                "plan_budget_big_p90_ms",
                "plan_budget_ratio",
            ),
            _ => (
                "plan_structured_big_median_ms",
                "plan_structured_big_p90_ms",
                "plan_structured_ratio",
            ),
        };
        report.figure(
            key_med,
            format!("8 plan {name}, {big_k} rows, {TAIL}-message tail: median"),
            big_med,
            Unit::Millis,
            Some(Target::AtMost(5.0)),
        );
        report.figure(
            key_p90,
            format!("8 plan {name}, {big_k} rows: p90"),
            big_p90,
            Unit::Millis,
            None,
        );
        report.figure(
            key_ratio,
            format!("8 plan {name}, ratio {big_k}/{small_k} (medians)"),
            big_med / small_med,
            Unit::Ratio,
            Some(Target::AtMost(2.0)),
        );
        details[name] = json!({
            "plan": kinds[s][0],
            "big_median_ms": big_med,
            "big_p90_ms": big_p90,
            "small_median_ms": small_med,
            "small_p90_ms": small_p90,
        });
    }
    out.flush()?;
    Ok(details)
}

// ---------------------------------------------------------------------------------------------
// Bar 3: budget against trim_messages

/// What the outputs of one session and budget held.
#[derive(Clone, Copy, Default)]
struct Checked {
    /// Outputs with a `tool_result` whose call is not in them.
    orphan: usize,
    /// Outputs with a `tool_use` whose result is not in them.
    dangling: usize,
    /// Of those, the ones whose uncut prefix has fewer such calls: the cut made them.
    dangling_by_cut: usize,
    /// Outputs still over the budget (the last unit alone is bigger).
    over_budget: usize,
    /// Outputs that kept every message.
    uncut: usize,
}

/// Our side for one session and budget.
struct Ours {
    steps: usize,
    seconds: Vec<f64>,
    checked: Checked,
}

impl Ours {
    fn steps_per_s(&self) -> f64 {
        self.steps as f64 / median(&self.seconds)
    }

    fn broken(&self) -> usize {
        self.checked.orphan + self.checked.dangling_by_cut
    }
}

/// The `k` where the output of each step `k = 1..N` starts: `budget` planned on the first `k`
/// entries' metadata, the kept messages materialized. Timed as one loop.
fn trim_steps(entries: &[Entry], metas: &[EntryMeta], budget: u64) -> (f64, Vec<usize>) {
    let strategy = Budget {
        max_tokens: budget,
        target_tokens: Some(budget),
    };
    let mut froms = Vec::with_capacity(metas.len());
    let start = Instant::now();
    for k in 1..=metas.len() {
        let view = HistoryView::new(None, &metas[..k], &[], 0);
        let plan = strategy.plan(&view);
        let from = plan.cut().map_or(0, |cut| view.count_through(cut));
        let kept: Vec<&Message> = entries[from..k].iter().map(|e| &e.message).collect();
        std::hint::black_box(&kept);
        froms.push(from);
    }
    (start.elapsed().as_secs_f64(), froms)
}

/// Orphan results and dangling calls in a window of history following `start`.
fn pairing(start: Seq, window: &[EntryMeta]) -> (usize, usize) {
    let events: Vec<ProtocolEvents> = window.iter().map(|m| m.events.clone()).collect();
    let map = ProtocolMap::analyze(start, &events);
    let orphan = map
        .problems()
        .iter()
        .filter(|p| matches!(p, Problem::OrphanResult { .. }))
        .count();
    let dangling = map
        .problems()
        .iter()
        .filter(|p| matches!(p, Problem::DanglingUse { .. }))
        .count();
    (orphan, dangling)
}

/// Checks every step's output against its uncut prefix.
fn check(metas: &[EntryMeta], froms: &[usize], budget: u64) -> Checked {
    let mut checked = Checked::default();
    for (i, &from) in froms.iter().enumerate() {
        let k = i + 1;
        let start = if from == 0 {
            Seq::ZERO
        } else {
            metas[from - 1].seq()
        };
        let (orphan, dangling) = pairing(start, &metas[from..k]);
        let (_, dangling_in) = pairing(Seq::ZERO, &metas[..k]);
        checked.orphan += usize::from(orphan > 0);
        checked.dangling += usize::from(dangling > 0);
        checked.dangling_by_cut += usize::from(dangling > dangling_in);
        let tokens: u64 = metas[from..k].iter().map(|m| u64::from(m.tokens)).sum();
        checked.over_budget += usize::from(tokens > budget);
        checked.uncut += usize::from(from == 0);
    }
    checked
}

/// The `n` largest `*.jsonl` files of the corpus's Claude Code directory, largest first (the
/// peer script's selection).
fn largest_sessions(corpus: &Path, n: usize) -> anyhow::Result<Vec<PathBuf>> {
    let dir = corpus.join("claude-code-jsonl");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_file() && path.extension().is_some_and(|e| e == "jsonl") {
            files.push((entry.metadata()?.len(), path));
        }
    }
    files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(files.into_iter().take(n).map(|(_, p)| p).collect())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

fn peer_bar(ctx: &Ctx<'_>, report: &mut Report, out: &mut impl Write) -> anyhow::Result<Value> {
    let Ctx {
        rt,
        store,
        tenant,
        corpus,
        dir,
        sizes,
    } = *ctx;
    let mut files = largest_sessions(corpus, PEER_FILES)?;
    if sizes.peer_quick {
        files = files.split_off(files.len().saturating_sub(1));
    }
    let histories = on_worker(rt, {
        let (store, tenant, files) = (store.clone(), tenant.clone(), files.clone());
        async move {
            let mut histories = Vec::new();
            for file in &files {
                let runs = import_file(&store, &tenant, file).await?;
                let Some(run) = runs.into_iter().next() else {
                    bail!("compaction bench: {} holds no transcript", file.display());
                };
                let entries = store.read_range(&tenant, &run, Seq(1), None).await?;
                let metas = store.context_meta(&tenant, &run).await?.tail;
                ensure!(
                    metas.len() == entries.len(),
                    "compaction bench: context_meta of {run} has {} entries, read_range {}",
                    metas.len(),
                    entries.len()
                );
                histories.push((file_name(file), entries, metas));
            }
            Ok(histories)
        }
    })?;
    writeln!(
        out,
        "    budget vs trim_messages: every prefix of {} at budgets {} ({} round{} each)",
        histories
            .iter()
            .map(|(f, e, _)| format!("{f} ({} messages)", e.len()))
            .collect::<Vec<_>>()
            .join(", "),
        PEER_BUDGETS.map(short_count).join("/"),
        sizes.peer_rounds,
        if sizes.peer_rounds == 1 { "" } else { "s" }
    )?;
    out.flush()?;

    // ours[session][budget]
    let ours_started = Instant::now();
    let mut ours: Vec<Vec<Ours>> = Vec::new();
    for (_, entries, metas) in &histories {
        let mut per_budget = Vec::new();
        for budget in PEER_BUDGETS {
            let mut seconds = Vec::new();
            let mut froms = Vec::new();
            for _ in 0..sizes.peer_rounds {
                let (secs, f) = trim_steps(entries, metas, budget);
                seconds.push(secs);
                froms = f;
            }
            per_budget.push(Ours {
                steps: metas.len(),
                seconds,
                checked: check(metas, &froms, budget),
            });
        }
        ours.push(per_budget);
    }

    let ours_s = ours_started.elapsed().as_secs_f64();
    let peer_started = Instant::now();
    let peer = if sizes.peer_quick {
        Err("--quick".to_owned())
    } else {
        run_peer(dir, sizes.peer_rounds)
    };
    let peer_s = peer_started.elapsed().as_secs_f64();
    let (peer, peer_json, skipped) = match peer {
        Ok(json) => (Some(peer_figures(&json, &histories)?), Some(json), None),
        Err(why) => (None, None, Some(why)),
    };

    let mut ratios = Vec::new();
    let mut details_sessions = Vec::new();
    for (s, (name, _, _)) in histories.iter().enumerate() {
        let mut budgets = serde_json::Map::new();
        for (b, budget) in PEER_BUDGETS.into_iter().enumerate() {
            let o = &ours[s][b];
            let p = peer.as_ref().and_then(|p| p[s][b]);
            if let Some(p) = p {
                ratios.push(o.steps_per_s() / p.steps_per_s);
            }
            budgets.insert(
                budget.to_string(),
                json!({
                    "steps": o.steps,
                    "seconds": o.seconds,
                    "steps_per_s": o.steps_per_s(),
                    "outputs_with_orphan_tool_result": o.checked.orphan,
                    "outputs_with_dangling_tool_use": o.checked.dangling,
                    "outputs_with_dangling_caused_by_cut": o.checked.dangling_by_cut,
                    "outputs_over_budget": o.checked.over_budget,
                    "outputs_uncut": o.checked.uncut,
                    "peer_steps_per_s": p.map(|p| p.steps_per_s),
                    "ratio": p.map(|p| o.steps_per_s() / p.steps_per_s),
                }),
            );
        }
        details_sessions
            .push(json!({ "file": name, "messages": ours[s][0].steps, "budgets": budgets }));
    }

    // Per budget: medians over the sessions.
    for (b, budget) in PEER_BUDGETS.into_iter().enumerate() {
        let ours_rates: Vec<f64> = ours.iter().map(|o| o[b].steps_per_s()).collect();
        let broken: usize = ours.iter().map(|o| o[b].broken()).sum();
        let over: usize = ours.iter().map(|o| o[b].checked.over_budget).sum();
        let outputs: usize = ours.iter().map(|o| o[b].steps).sum();
        let mut line = format!(
            "      {:>4}: budget {} steps/s, {broken} of {outputs} outputs with an orphan tool_result or a cut-made dangling tool_use, {over} over budget",
            short_count(budget),
            thousands(median(&ours_rates)),
        );
        if let Some(peer) = &peer {
            let rates: Vec<f64> = peer
                .iter()
                .filter_map(|p| p[b])
                .map(|p| p.steps_per_s)
                .collect();
            let per: Vec<f64> = ours
                .iter()
                .zip(peer)
                .filter_map(|(o, p)| p[b].map(|p| o[b].steps_per_s() / p.steps_per_s))
                .collect();
            let p_broken: usize = peer.iter().filter_map(|p| p[b]).map(|p| p.broken).sum();
            let p_empty: usize = peer
                .iter()
                .filter_map(|p| p[b])
                .map(|p| p.only_system)
                .sum();
            let p_outputs: usize = peer.iter().filter_map(|p| p[b]).map(|p| p.steps).sum();
            line.push_str(&format!(
                "; trim_messages {} steps/s, {p_broken} of {p_outputs} broken, {p_empty} left with the system message alone; ratio {:.0}x",
                thousands(median(&rates)),
                median(&per),
            ));
        }
        writeln!(out, "{line}")?;
    }

    let all_ours: Vec<f64> = ours.iter().flatten().map(Ours::steps_per_s).collect();
    let ours_broken: usize = ours.iter().flatten().map(Ours::broken).sum();
    report.figure(
        "peer_budget_steps_per_s",
        format!(
            "8 budget per step, {} sessions x 3 budgets (median)",
            histories.len()
        ),
        median(&all_ours),
        Unit::PerSecond("step"),
        None,
    );
    report.figure(
        "peer_budget_broken_outputs",
        "8 budget outputs: orphan/cut-made dangling",
        ours_broken as f64,
        Unit::Count("outputs"),
        Some(Target::AtMost(0.0)),
    );
    let mut details = json!({
        "files": histories.iter().map(|(f, _, _)| f.clone()).collect::<Vec<_>>(),
        "budgets": PEER_BUDGETS,
        "rounds": sizes.peer_rounds,
        "ours": details_sessions,
        "ratio_median": (!ratios.is_empty()).then(|| median(&ratios)),
        "ours_s": ours_s,
        "peer_s": peer_s,
        "ratios": ratios,
    });
    match (&peer, peer_json) {
        (Some(peer), Some(json)) => {
            let all_peer: Vec<f64> = peer
                .iter()
                .flatten()
                .flatten()
                .map(|p| p.steps_per_s)
                .collect();
            let peer_broken: usize = peer.iter().flatten().flatten().map(|p| p.broken).sum();
            report.figure(
                "peer_trim_steps_per_s",
                "8 trim_messages per step (median)",
                median(&all_peer),
                Unit::PerSecond("step"),
                None,
            );
            report.figure(
                "peer_ratio",
                format!(
                    "8 ratio budget/trim_messages steps/s (median of {})",
                    ratios.len()
                ),
                median(&ratios),
                Unit::Ratio,
                Some(Target::AtLeast(20.0)),
            );
            report.figure(
                "peer_trim_broken_outputs",
                "8 trim_messages outputs: orphan/trim-made dangling",
                peer_broken as f64,
                Unit::Count("outputs"),
                None,
            );
            writeln!(
                out,
                "      langchain-core {}, Python {}; ratio ours/peer per session and budget: {}; our side took {ours_s:.1} s with its checks, the peer script {peer_s:.1} s",
                json["langchain_core"].as_str().unwrap_or("?"),
                json["python"].as_str().unwrap_or("?"),
                ratios
                    .iter()
                    .map(|r| format!("{r:.0}x"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )?;
            details["peer"] = json;
        }
        _ => {
            let why = skipped.unwrap_or_default();
            writeln!(out, "      peer: skipped ({why})")?;
            details["peer"] = json!({ "skipped": why });
        }
    }
    out.flush()?;
    Ok(details)
}

/// The peer's figures for one session and budget.
#[derive(Clone, Copy)]
struct PeerFigures {
    steps: usize,
    steps_per_s: f64,
    /// Outputs with an orphan tool message plus those whose dangling calls trimming made.
    broken: usize,
    only_system: usize,
}

/// The peer's figures, `[session][budget]` in our sessions' order (`None` where its JSON has
/// no such session or budget).
fn peer_figures(
    json: &Value,
    histories: &[(String, Vec<Entry>, Vec<EntryMeta>)],
) -> anyhow::Result<Vec<[Option<PeerFigures>; 3]>> {
    let Some(sessions) = json["sessions"].as_array() else {
        bail!("peer: its JSON has no sessions");
    };
    let count = |v: &Value, key: &str| v[key].as_u64().unwrap_or(0) as usize;
    Ok(histories
        .iter()
        .map(|(name, _, _)| {
            let session = sessions
                .iter()
                .find(|s| s["file"].as_str() == Some(name.as_str()));
            PEER_BUDGETS.map(|budget| {
                let b = &session?["budgets"][budget.to_string()];
                Some(PeerFigures {
                    steps: count(b, "steps"),
                    steps_per_s: b["steps_per_s"].as_f64()?,
                    broken: count(b, "outputs_with_orphan_tool_msg")
                        + count(b, "outputs_with_dangling_caused_by_trim"),
                    only_system: count(b, "outputs_only_system_msg"),
                })
            })
        })
        .collect())
}

// ---------------------------------------------------------------------------------------------
// The peer script

/// Runs the peer script with `--runs runs`; its JSON, or why it could not.
fn run_peer(dir: &Path, runs: usize) -> Result<Value, String> {
    let python = crate::peers::python_with("langchain_core", "langchain-core")?;
    let runs = runs.to_string();
    let args = ["--runs", runs.as_str()];
    crate::peers::run(&python, PEER_SCRIPT, &args, dir, "peer-trim", PEER_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{ContentBlock, Role, Timestamp};

    fn entry(seq: u64, message: Message, tokens: u32) -> Entry {
        Entry {
            seq: Seq(seq),
            tokens,
            message,
            created_at: Timestamp(0),
        }
    }

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: "ls".into(),
                input: json!({}),
            }],
        }
    }

    fn answer(id: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.into(),
                content: vec![],
                is_error: false,
            }],
        }
    }

    #[test]
    fn trimming_by_budget_never_breaks_a_tool_pair() {
        let mut entries = Vec::new();
        for i in 0..20u64 {
            let id = format!("t{i}");
            entries.push(entry(3 * i + 1, Message::text(Role::User, "go on"), 10));
            entries.push(entry(3 * i + 2, call(&id), 30));
            entries.push(entry(3 * i + 3, answer(&id), 60));
        }
        let metas: Vec<EntryMeta> = entries.iter().map(EntryMeta::of).collect();
        let (_, froms) = trim_steps(&entries, &metas, 250);
        assert_eq!(froms.len(), entries.len());
        let checked = check(&metas, &froms, 250);
        assert_eq!(checked.orphan, 0);
        assert_eq!(checked.dangling_by_cut, 0);
        // Every step whose last message is a call awaits its result: dangling, not by the cut.
        assert_eq!(checked.dangling, 20);
        assert!(checked.uncut < entries.len());
        assert_eq!(checked.over_budget, 0);
    }

    #[test]
    fn a_cut_between_a_call_and_its_result_is_seen() {
        let entries = [
            entry(1, call("a"), 10),
            entry(2, answer("a"), 10),
            entry(3, Message::text(Role::User, "next"), 10),
        ];
        let metas: Vec<EntryMeta> = entries.iter().map(EntryMeta::of).collect();
        // Keeping [2, 3] leaves the result of `a` alone.
        let checked = check(&metas, &[0, 0, 1], 1_000);
        assert_eq!(checked.orphan, 1);
        // Keeping [2] of [1, 2]: the orphan; keeping [1] of [1, 2] drops the answer.
        let checked = check(&metas[..2], &[0, 1], 1_000);
        assert_eq!(checked.orphan, 1);
    }

    #[test]
    fn replay_configuration_is_the_clis() -> anyhow::Result<()> {
        let (config, strategy) = configured("budget", BUDGET)?;
        assert_eq!(strategy.name(), "budget");
        assert_eq!(strategy.limit(), Some(BUDGET));
        let structured: baton_compact::strategies::Structured = config.table("structured")?;
        assert_eq!(structured.threshold, BUDGET);
        Ok(())
    }
}
