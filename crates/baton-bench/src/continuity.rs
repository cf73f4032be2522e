//! Section 13: continuity (issue 15) — a working state that keeps the current task, stays
//! bounded and holds the budget, graded by probes the extractor does not write (`baton-probes`).
//!
//! Every Claude Code and Codex file of the shared corpus is imported as `baton import` imports
//! it, into one store. Then:
//!
//! - **(a) Long sessions.** Every imported run of at least 100 messages is replayed as
//!   `baton replay --budget B --strategies budget,structured` replays it (the run's `auto`
//!   tokenizer, the default trigger, the clearing layer, the state cap a fifth of B), at B =
//!   8,000, 12,000 and 32,000. Per run and budget: the reduction of input tokens against the
//!   full transcript, the peak context, the steps over the budget, the largest working state
//!   against its cap, and `baton-probes`' four probes, summed over every compaction and the
//!   final context. Bars: 0 steps over the budget for both strategies; at every budget,
//!   `structured`'s reduction over all the runs (their input tokens summed) at least `budget`'s
//!   (the runs where it is not, one by one, are counted and printed beside it: a run whose
//!   newest units alone fill the budget is clipped to it under both, and there the state is
//!   `structured`'s fixed cost); `structured`'s state never over its cap; its
//!   probes 100% of instructions, 100% of in-progress plan items, at least 95% of modified
//!   files, 100% of unresolved problems.
//! - **(b) The marathon.** The seven longest imported runs (by messages) appended in order
//!   into one run (each message with its stored token count), replayed under `structured` and
//!   `budget` at 32,000: the working state's size per quarter of the run (mean and largest),
//!   the peak context, and the compactions refused for lack of room (a summary not smaller
//!   than what it replaces, a context that would not shrink). Bars: peak at most 32,000, state
//!   at most its cap, 0 refused for lack of room.
//! - **(c) Beside Claude Code.** In every Claude Code session that holds a compaction of Claude
//!   Code's own with its summary, at that compaction's seq: Claude Code's summary against
//!   baton's working state of the same history (`structured`'s offline state written in one
//!   compaction through that seq, its cap set to the summary's own size, so ours is never
//!   larger): tokens (`cl100k_base`), and `baton_probes::coverage` of each text — the history's
//!   paths named, commands present whole, user messages verbatim. Bars: ours ≤ its tokens;
//!   ours ≥ 95% of paths, ≥ 90% of commands, 100% of user messages.
//!
//! Planning's O(tail) bar (< 5 ms median at 100,000 rows) is section 8's (b).
//! `--quick` replays the long runs at 12,000 only and skips the marathon's `budget`.
//! A missing corpus skips the section with one line.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use baton_compact::audit::Share;
use baton_compact::replay::{Probe, ReplayReport};
use baton_compact::{Offline, SummaryRequest};
use baton_core::context::render_state;
use baton_core::tokens::TokenCounter;
use baton_core::{Entry, RunId, TenantId};
use baton_sqlite::SqliteStore;
use baton_store::{NewEntry, NewRun, Store};
use baton_tokens::TokenizerChoice;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

use crate::compaction::{recorded, replay_as_cli};
use crate::import::{CORPUS, walk};
use crate::{Report, Target, Unit, on_worker};

/// The budgets of the long-session bar.
const BUDGETS: [u64; 3] = [8_000, 12_000, 32_000];

/// The marathon's budget.
const MARATHON_BUDGET: u64 = 32_000;

/// How many runs the marathon appends.
const MARATHON_RUNS: usize = 7;

/// The shortest run the long-session bar replays.
const LONG: usize = 100;

/// The probes `baton-probes` writes, as replay's extra probes (what `baton replay` passes).
fn independent() -> Probe {
    Arc::new(|history, cut, context| {
        let found = baton_probes::probe(history, cut, &context.text());
        let share = |s: baton_probes::Share| Share {
            kept: u32::try_from(s.kept).unwrap_or(u32::MAX),
            total: u32::try_from(s.total).unwrap_or(u32::MAX),
        };
        vec![
            ("instructions".to_owned(), share(found.instructions)),
            ("plan_items".to_owned(), share(found.plan_items)),
            ("modified_files".to_owned(), share(found.modified_files)),
            (
                "unresolved_problems".to_owned(),
                share(found.unresolved_problems),
            ),
        ]
    })
}

/// One imported run.
struct Imported {
    run: RunId,
    name: String,
    entries: Vec<Entry>,
    model: Option<String>,
    /// Claude Code's own compactions, with their summaries.
    points: Vec<baton_probes::CompactionPoint>,
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[13] continuity: the working state against independent probes on every Claude Code and Codex session of 100+ messages, the marathon, and Claude Code's own summaries"
    )?;
    let Ok(corpus) = std::fs::canonicalize(CORPUS) else {
        writeln!(
            out,
            "    continuity: skipped (corpus not found at {CORPUS})"
        )?;
        return Ok(());
    };
    let store = {
        let path = dir.join("continuity.db");
        on_worker(rt, async move { Ok(SqliteStore::open(path).await?) })?
    };
    let tenant = TenantId::new("bench-continuity")?;
    let runs = import_all(rt, &store, &tenant, &corpus)?;
    let mut details = json!({});
    details["long"] = long_sessions(&runs, quick, report, out)?;
    details["marathon"] = marathon(rt, &store, &tenant, &runs, quick, report, out)?;
    details["claude_code"] = beside_claude_code(&runs, report, out)?;
    report.details.insert("continuity".into(), details);
    out.flush()?;
    Ok(())
}

/// Imports every Claude Code and Codex file; the runs with their histories.
fn import_all(
    rt: &Runtime,
    store: &SqliteStore,
    tenant: &TenantId,
    corpus: &Path,
) -> anyhow::Result<Vec<Imported>> {
    let mut files = Vec::new();
    for format in ["claude-code-jsonl", "codex-rollout-jsonl"] {
        walk(&corpus.join(format), &mut files)?;
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "jsonl"));
    let (store, tenant) = (store.clone(), tenant.clone());
    on_worker(rt, async move {
        let mut runs = Vec::new();
        for file in &files {
            let bytes =
                std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
            let Some(format) = baton_import::detect(&bytes) else {
                continue;
            };
            let transcripts = baton_import::parse(format, &bytes)
                .with_context(|| format!("parsing {}", file.display()))?;
            let ids = crate::compaction::import_file(&store, &tenant, file).await?;
            for (transcript, run) in transcripts.iter().zip(ids) {
                let (entries, _) = recorded(&store, &tenant, &run).await?;
                runs.push(Imported {
                    run,
                    name: file
                        .file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                    entries,
                    model: transcript.models.first().cloned(),
                    points: baton_probes::compaction_points(transcript),
                });
            }
        }
        Ok(runs)
    })
}

fn counter_for(model: Option<&str>) -> Arc<dyn TokenCounter> {
    baton_tokens::counter(TokenizerChoice::Auto, model)
}

fn probe_share(r: &ReplayReport, kind: &str) -> Share {
    r.extra.get(kind).copied().unwrap_or_default()
}

fn show(s: Share) -> String {
    if s.total == 0 {
        "-".to_owned()
    } else {
        format!("{}/{}", s.kept, s.total)
    }
}

/// (a): every long run at every budget, `budget` and `structured`.
fn long_sessions(
    runs: &[Imported],
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<Value> {
    let budgets: &[u64] = if quick { &[12_000] } else { &BUDGETS };
    let long: Vec<&Imported> = runs.iter().filter(|r| r.entries.len() >= LONG).collect();
    writeln!(
        out,
        "    (a) {} runs of {LONG}+ messages, budgets {}",
        long.len(),
        budgets
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(
        out,
        "      {:<44} {:>6} {:<10} {:>7} {:>7} {:>5} {:>11} {:>9} {:>7} {:>9} {:>8}",
        "run",
        "budget",
        "strategy",
        "reduct",
        "peak",
        "over",
        "state/cap",
        "instruct",
        "plan",
        "files",
        "problems"
    )?;
    let mut over = 0usize;
    let mut reduction_losses: Vec<String> = Vec::new();
    // Per budget: input and full tokens summed over the runs, per strategy.
    let mut sums: Vec<[(u64, u64); 2]> = vec![[(0, 0); 2]; budgets.len()];
    let mut over_cap = 0usize;
    let (mut instructions, mut plan, mut files, mut problems) = (
        Share::default(),
        Share::default(),
        Share::default(),
        Share::default(),
    );
    let mut rows = Vec::new();
    for run in &long {
        for (b, &budget) in budgets.iter().enumerate() {
            let counter = counter_for(run.model.as_deref());
            let mut reductions = [0.0f64; 2];
            for (i, name) in ["budget", "structured"].into_iter().enumerate() {
                let r = replay_as_cli(
                    &run.run,
                    &run.entries,
                    name,
                    budget,
                    counter.clone(),
                    vec![independent()],
                )?;
                reductions[i] = r.reduction;
                sums[b][i].0 += r.total_input_tokens;
                sums[b][i].1 += r.total_full_tokens;
                over += r.steps_over_budget;
                let p = |k| probe_share(&r, k);
                if name == "structured" {
                    instructions += p("instructions");
                    plan += p("plan_items");
                    files += p("modified_files");
                    problems += p("unresolved_problems");
                    over_cap += usize::from(r.peak_state_tokens > r.state_cap);
                }
                writeln!(
                    out,
                    "      {:<44} {:>6} {:<10} {:>6.1}% {:>7} {:>5} {:>11} {:>9} {:>7} {:>9} {:>8}",
                    short_name(&run.name, 44),
                    budget,
                    name,
                    100.0 * r.reduction,
                    r.peak_context_tokens,
                    r.steps_over_budget,
                    format!("{}/{}", r.peak_state_tokens, r.state_cap),
                    show(p("instructions")),
                    show(p("plan_items")),
                    show(p("modified_files")),
                    show(p("unresolved_problems")),
                )?;
                rows.push(json!({
                    "run": run.name, "budget": budget, "strategy": name,
                    "reduction": r.reduction, "peak": r.peak_context_tokens,
                    "over": r.steps_over_budget, "state": r.peak_state_tokens, "cap": r.state_cap,
                    "compactions": r.compactions, "refused": r.refused,
                    "instructions": [p("instructions").kept, p("instructions").total],
                    "plan_items": [p("plan_items").kept, p("plan_items").total],
                    "modified_files": [p("modified_files").kept, p("modified_files").total],
                    "unresolved_problems": [p("unresolved_problems").kept, p("unresolved_problems").total],
                }));
            }
            if reductions[1] < reductions[0] {
                reduction_losses.push(format!(
                    "{} at {budget}: structured {:.2}% vs budget {:.2}%",
                    run.name,
                    100.0 * reductions[1],
                    100.0 * reductions[0]
                ));
            }
        }
    }
    let ratio = |s: Share| s.ratio().unwrap_or(f64::NAN);
    report.figure(
        "continuity_steps_over_budget",
        "13a budget+structured: steps over the budget",
        over as f64,
        Unit::Count("steps"),
        Some(Target::AtMost(0.0)),
    );
    for (b, &budget) in budgets.iter().enumerate() {
        let reduction = |(input, full): (u64, u64)| 1.0 - input as f64 / full.max(1) as f64;
        let (budget_r, structured_r) = (reduction(sums[b][0]), reduction(sums[b][1]));
        writeln!(
            out,
            "      at {budget}: reduction over the runs, structured {:.2}% vs budget {:.2}%",
            100.0 * structured_r,
            100.0 * budget_r
        )?;
        report.figure(
            match budget {
                8_000 => "continuity_reduction_margin_8k",
                12_000 => "continuity_reduction_margin_12k",
                _ => "continuity_reduction_margin_32k",
            },
            format!("13a at {budget}: structured's reduction minus budget's, points"),
            100.0 * (structured_r - budget_r),
            Unit::Ratio,
            Some(Target::AtLeast(0.0)),
        );
    }
    writeln!(
        out,
        "      runs x budgets where structured reduces less than budget: {}{}",
        reduction_losses.len(),
        if reduction_losses.is_empty() {
            String::new()
        } else {
            format!(" ({})", reduction_losses.join("; "))
        }
    )?;
    report.figure(
        "continuity_state_over_cap",
        "13a structured: runs x budgets with the state over its cap",
        over_cap as f64,
        Unit::Count("cases"),
        Some(Target::AtMost(0.0)),
    );
    for (key, what, share, bound) in [
        ("continuity_instructions", "instructions", instructions, 1.0),
        ("continuity_plan_items", "in-progress plan items", plan, 1.0),
        ("continuity_modified_files", "modified files", files, 0.95),
        (
            "continuity_unresolved_problems",
            "unresolved problems",
            problems,
            1.0,
        ),
    ] {
        report.figure(
            key,
            format!(
                "13a structured probes: {what} {}/{}",
                share.kept, share.total
            ),
            ratio(share),
            Unit::Ratio,
            (share.total > 0).then_some(Target::AtLeast(bound)),
        );
    }
    Ok(json!({ "rows": rows }))
}

/// (b): the seven longest runs appended into one, replayed at 32,000.
fn marathon(
    rt: &Runtime,
    store: &SqliteStore,
    tenant: &TenantId,
    runs: &[Imported],
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<Value> {
    let mut longest: Vec<&Imported> = runs.iter().collect();
    longest.sort_by_key(|r| std::cmp::Reverse(r.entries.len()));
    longest.truncate(MARATHON_RUNS);
    let batches: Vec<Vec<NewEntry>> = longest
        .iter()
        .map(|r| {
            r.entries
                .iter()
                .map(|e| NewEntry {
                    message: e.message.clone(),
                    tokens: e.tokens,
                })
                .collect()
        })
        .collect();
    let names: Vec<String> = longest.iter().map(|r| r.name.clone()).collect();
    let (run, entries) = on_worker(rt, {
        let (store, tenant) = (store.clone(), tenant.clone());
        async move {
            let run = store.create_run(&tenant, &NewRun::default()).await?;
            for batch in &batches {
                store.append(&tenant, &run.id, batch).await?;
            }
            let (entries, _) = recorded(&store, &tenant, &run.id).await?;
            Ok((run.id, entries))
        }
    })?;
    let tokens: u64 = entries.iter().map(|e| u64::from(e.tokens)).sum();
    writeln!(
        out,
        "    (b) marathon: {} runs appended ({} messages, {} tokens): {}",
        names.len(),
        entries.len(),
        tokens,
        names
            .iter()
            .map(|n| short_name(n, 28))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let strategies: &[&str] = if quick {
        &["structured"]
    } else {
        &["structured", "budget"]
    };
    let counter = counter_for(Some("claude"));
    let mut out_json = Vec::new();
    for name in strategies {
        let r = replay_as_cli(
            &run,
            &entries,
            name,
            MARATHON_BUDGET,
            counter.clone(),
            Vec::new(),
        )?;
        let quarter = r.steps.len().div_ceil(4).max(1);
        let quarters: Vec<(f64, u64)> = r
            .steps
            .chunks(quarter)
            .map(|q| {
                let sum: u64 = q.iter().map(|s| s.state_tokens).sum();
                let max = q.iter().map(|s| s.state_tokens).max().unwrap_or(0);
                (sum as f64 / q.len().max(1) as f64, max)
            })
            .collect();
        writeln!(
            out,
            "      {name:<10} reduction {:.1}%, peak {} (budget {MARATHON_BUDGET}), {} steps over, state cap {}, state per quarter (mean/largest): {}, compactions {}, refused {} ({} for lack of room)",
            100.0 * r.reduction,
            r.peak_context_tokens,
            r.steps_over_budget,
            r.state_cap,
            quarters
                .iter()
                .map(|(mean, max)| format!("{mean:.0}/{max}"))
                .collect::<Vec<_>>()
                .join("  "),
            r.compactions,
            r.refused,
            r.refused_no_room,
        )?;
        if *name == "structured" {
            report.figure(
                "marathon_peak",
                "13b marathon structured: peak context",
                r.peak_context_tokens as f64,
                Unit::Count("tokens"),
                Some(Target::AtMost(MARATHON_BUDGET as f64)),
            );
            report.figure(
                "marathon_state_peak",
                format!(
                    "13b marathon structured: largest state (cap {})",
                    r.state_cap
                ),
                r.peak_state_tokens as f64,
                Unit::Count("tokens"),
                Some(Target::AtMost(r.state_cap as f64)),
            );
            report.figure(
                "marathon_refused_no_room",
                "13b marathon structured: refused for lack of room",
                r.refused_no_room as f64,
                Unit::Count("compactions"),
                Some(Target::AtMost(0.0)),
            );
        }
        out_json.push(json!({
            "strategy": name, "reduction": r.reduction, "peak": r.peak_context_tokens,
            "over": r.steps_over_budget, "state_cap": r.state_cap,
            "state_quarters": quarters.iter().map(|(m, x)| json!({"mean": m, "max": x})).collect::<Vec<_>>(),
            "compactions": r.compactions, "refused": r.refused, "refused_no_room": r.refused_no_room,
        }));
    }
    Ok(
        json!({ "runs": names, "messages": entries.len(), "tokens": tokens, "strategies": out_json }),
    )
}

/// (c): at Claude Code's own compaction seqs, its summary against our working state.
fn beside_claude_code(
    runs: &[Imported],
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<Value> {
    let counter = counter_for(Some("claude"));
    writeln!(
        out,
        "    (c) beside Claude Code's own summaries, at its compaction seqs (tokens cl100k_base; ours capped at its size)"
    )?;
    writeln!(
        out,
        "      {:<44} {:>5} {:>13} {:>13} {:>13} {:>13}",
        "session", "seq", "tokens", "paths", "commands", "user msgs"
    )?;
    let (mut paths, mut commands, mut users) =
        (Share::default(), Share::default(), Share::default());
    let mut larger = 0usize;
    let mut rows = Vec::new();
    let share = |s: baton_probes::Share| Share {
        kept: u32::try_from(s.kept).unwrap_or(u32::MAX),
        total: u32::try_from(s.total).unwrap_or(u32::MAX),
    };
    for run in runs {
        for point in &run.points {
            let Some(theirs) = &point.summary else {
                continue;
            };
            let through = run.entries.partition_point(|e| e.seq <= point.seq);
            if through == 0 {
                continue;
            }
            let their_tokens = u64::from(counter.count_text(theirs));
            let bounded = Offline::state(&SummaryRequest {
                base: None,
                old: &run.entries[..through],
                cut: point.seq,
                instructions: None,
                pins: &[],
                cap: their_tokens,
                counter: &*counter,
            });
            let ours = render_state(point.seq, &bounded.claims);
            let history = &run.entries[..through];
            let a = baton_probes::coverage(history, point.seq, theirs);
            let b = baton_probes::coverage(history, point.seq, &ours);
            larger += usize::from(bounded.tokens > their_tokens);
            paths += share(b.paths);
            commands += share(b.commands);
            users += share(b.user_messages);
            writeln!(
                out,
                "      {:<44} {:>5} {:>13} {:>13} {:>13} {:>13}",
                short_name(&run.name, 44),
                point.seq,
                format!("{their_tokens} / {}", bounded.tokens),
                format!("{} / {}", a.paths, b.paths),
                format!("{} / {}", a.commands, b.commands),
                format!("{} / {}", a.user_messages, b.user_messages),
            )?;
            rows.push(json!({
                "session": run.name, "seq": point.seq, "theirs_tokens": their_tokens, "ours_tokens": bounded.tokens,
                "theirs": {"paths": [a.paths.kept, a.paths.total], "commands": [a.commands.kept, a.commands.total], "user_messages": [a.user_messages.kept, a.user_messages.total]},
                "ours": {"paths": [b.paths.kept, b.paths.total], "commands": [b.commands.kept, b.commands.total], "user_messages": [b.user_messages.kept, b.user_messages.total]},
            }));
        }
    }
    writeln!(out, "      (each cell: Claude Code's / ours)")?;
    let ratio = |s: Share| s.ratio().unwrap_or(f64::NAN);
    report.figure(
        "beside_cc_larger",
        "13c compactions where our state is larger than Claude Code's summary",
        larger as f64,
        Unit::Count("compactions"),
        Some(Target::AtMost(0.0)),
    );
    for (key, what, s, bound) in [
        ("beside_cc_paths", "paths named", paths, 0.95),
        ("beside_cc_commands", "commands exact", commands, 0.90),
        (
            "beside_cc_user_messages",
            "user messages verbatim",
            users,
            1.0,
        ),
    ] {
        report.figure(
            key,
            format!(
                "13c ours at Claude Code's seqs: {what} {}/{}",
                s.kept, s.total
            ),
            ratio(s),
            Unit::Ratio,
            (s.total > 0).then_some(Target::AtLeast(bound)),
        );
    }
    Ok(json!({ "rows": rows }))
}

/// `name` cut to `max` characters (its head), for a table column.
fn short_name(name: &str, max: usize) -> String {
    match name.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &name[..i.saturating_sub(3)]),
        None => name.to_owned(),
    }
}
