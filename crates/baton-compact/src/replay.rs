//! Offline replay: re-walk a recorded run step by step as if an agent were living it, under one
//! strategy, and measure what it would have cost.
//!
//! A *step* is a model call: every assistant message of the run is one, and its input is the
//! context as it stood just before that message. At each step (every `every` steps), the
//! strategy plans over the context so far; the plan is carried out in memory exactly as the
//! runtime would (the offline summarizer writes claims, the cut is checked against the tool-call
//! pairing and the claims against the cut), subject to the [`Trigger`]; then the step's input
//! tokens are counted. Nothing is written to a store.
//!
//! The report gives, per strategy: total input tokens over the run, the peak context, the number
//! of compactions, the tokens spent on summaries (0 offline), the continuity probes (the user's
//! constraints and the latest finding before each cut still in the context) and the retention
//! audit (paths, commands, URLs and numbers of the dropped parts still reachable).
//!
//! ```
//! use baton_compact::replay::{Replay, replay};
//! use baton_compact::config::CompactionConfig;
//! use baton_core::{Entry, Message, Role, RunId, Seq, Timestamp};
//! let entries: Vec<Entry> = (1..=40)
//!     .map(|s| {
//!         let role = if s % 2 == 1 { Role::User } else { Role::Assistant };
//!         let message = Message::text(role, "word ".repeat(200));
//!         Entry { seq: Seq(s), tokens: 250, message, created_at: Timestamp(0) }
//!     })
//!     .collect();
//! let run = RunId::new("r").unwrap();
//! let none = replay(&entries, &Replay::new(run.clone(), CompactionConfig::named("none").build()?));
//! let sliding = replay(&entries, &Replay::new(run, CompactionConfig::named("sliding").build()?));
//! assert_eq!(none.steps.len(), 20);
//! assert!(sliding.total_input_tokens < none.total_input_tokens);
//! # Ok::<(), baton_compact::config::Error>(())
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton_core::prices::PriceTable;
use baton_core::{Cleared, Entry, EntryMeta, Role, RunId, Seq, Summary, SummaryId, Timestamp};
use serde::Serialize;

use crate::audit::Retention;
use crate::probes::{Probes, probe};
use crate::trigger::Trigger;
use crate::{HistoryView, Offline, Plan, Strategy, SummaryRequest, claims_tokens};

/// How to replay.
#[derive(Clone)]
pub struct Replay {
    /// The run replayed (named in the summaries it makes in memory).
    pub run: RunId,
    /// The strategy.
    pub strategy: Arc<dyn Strategy>,
    /// When compaction is admitted.
    pub trigger: Trigger,
    /// Consider compacting every this many steps (1: before every model call).
    pub every: usize,
    /// Tokens of the run's rules and goal, counted in every step's input.
    pub fixed_tokens: u64,
    /// Prices, for the trigger's cost policy.
    pub prices: PriceTable,
    /// Whether each compaction is also measured: the continuity probes and the retention
    /// audit (the report's `probes` and `retention`). They read the whole history covered so
    /// far, so they make a replay quadratic in the run's length; the growth report, which
    /// reports neither, turns them off. Nothing else the replay does depends on them.
    pub measure: bool,
}

impl Replay {
    /// A replay of `run` under `strategy` with the default trigger, every step.
    pub fn new(run: RunId, strategy: Arc<dyn Strategy>) -> Self {
        Replay {
            run,
            strategy,
            trigger: Trigger::default(),
            every: 1,
            fixed_tokens: 0,
            prices: PriceTable::defaults(),
            measure: true,
        }
    }
}

/// One model call of the replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The seq of the assistant message the call produced.
    pub seq: Seq,
    /// Input tokens had the whole transcript been sent.
    pub full_tokens: u64,
    /// Input tokens of the compacted context actually sent.
    pub context_tokens: u64,
    /// Whether a compaction ran just before this call.
    pub compacted: bool,
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The strategy replayed.
    pub strategy: String,
    /// Every model call, in order.
    pub steps: Vec<Step>,
    /// Input tokens over the run, compacted.
    pub total_input_tokens: u64,
    /// Input tokens over the run had nothing been compacted.
    pub total_full_tokens: u64,
    /// The largest context sent.
    pub peak_context_tokens: u64,
    /// Compactions carried out.
    pub compactions: usize,
    /// Compactions the trigger or the guards refused.
    pub refused: usize,
    /// Tokens the summarizer read and wrote (0 offline).
    pub summary_tokens: u64,
    /// Tokens of the last summary's claims.
    pub last_summary_tokens: u64,
    /// The continuity probes, summed over every compaction and the final context.
    pub probes: Probes,
    /// The retention audit, summed over every compaction.
    pub retention: Retention,
    /// How long the replay took.
    #[serde(serialize_with = "millis")]
    pub duration: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The in-memory state of the replayed run.
struct State {
    summary: Option<Summary>,
    cleared: Option<Cleared>,
    /// Context tokens right after the last compaction.
    after_last: Option<u64>,
    next_id: u64,
}

/// Replays `entries` (a whole run's history, in seq order) under `config`.
pub fn replay(entries: &[Entry], config: &Replay) -> ReplayReport {
    let never = AtomicBool::new(false);
    let (report, _) = replay_inner(entries, config, &never);
    report
}

/// [`replay`], stopped early when `cancel` is set: the loop looks at the flag before every
/// model call, so work whose caller has gone (a request that was dropped, timed out) ends
/// within one step instead of running to the end. `None` when it was cancelled.
pub fn replay_unless(
    entries: &[Entry],
    config: &Replay,
    cancel: &AtomicBool,
) -> Option<ReplayReport> {
    match replay_inner(entries, config, cancel) {
        (report, true) => Some(report),
        (_, false) => None,
    }
}

/// The replay and whether it ran to the end.
fn replay_inner(entries: &[Entry], config: &Replay, cancel: &AtomicBool) -> (ReplayReport, bool) {
    let started = Instant::now();
    let metas: Vec<EntryMeta> = entries.iter().map(EntryMeta::of).collect();
    let mut state = State {
        summary: None,
        cleared: None,
        after_last: None,
        next_id: 1,
    };
    let mut report = ReplayReport {
        strategy: config.strategy.name().to_owned(),
        steps: Vec::new(),
        total_input_tokens: 0,
        total_full_tokens: 0,
        peak_context_tokens: 0,
        compactions: 0,
        refused: 0,
        summary_tokens: 0,
        last_summary_tokens: 0,
        probes: Probes::default(),
        retention: Retention::default(),
        duration: Duration::ZERO,
    };
    let mut full = config.fixed_tokens;
    let mut calls = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        if entry.message.role == Role::Assistant && i > 0 {
            if cancel.load(Ordering::Relaxed) {
                return (report, false);
            }
            // The call that produced `entry` saw everything before it.
            let before = &entries[..i];
            let mut compacted = false;
            if calls.is_multiple_of(config.every.max(1)) {
                compacted = step(before, &metas[..i], config, &mut state, &mut report);
            }
            calls += 1;
            let context = context_tokens(&metas[..i], &state, config.fixed_tokens);
            report.steps.push(Step {
                seq: entry.seq,
                full_tokens: full,
                context_tokens: context,
                compacted,
            });
            report.total_input_tokens += context;
            report.total_full_tokens += full;
            report.peak_context_tokens = report.peak_context_tokens.max(context);
        }
        full += u64::from(entry.tokens);
    }
    // The final context keeps what the user said too.
    if let Some(last) = entries.last().filter(|_| config.measure) {
        let cut = state.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
        let claims = state.summary.as_ref().map_or(&[][..], |s| &s.claims[..]);
        let tail = tail_of(entries, cut);
        report.probes += probe(entries, cut.min(last.seq), claims, tail);
    }
    report.duration = started.elapsed();
    (report, true)
}

/// The entries after `cut`.
fn tail_of(entries: &[Entry], cut: Seq) -> &[Entry] {
    &entries[entries.partition_point(|e| e.seq <= cut)..]
}

/// Tokens of the context as it stands: fixed, the summary's claims, the tail (cleared results
/// at a stub's size).
fn context_tokens(metas: &[EntryMeta], state: &State, fixed: u64) -> u64 {
    let cut = state.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let tail = &metas[metas.partition_point(|m| m.seq() <= cut)..];
    let claims = state
        .summary
        .as_ref()
        .map_or(0, |s| claims_tokens(&s.claims));
    let view = HistoryView::new(state.summary.as_ref(), tail, &[], fixed + claims)
        .with_cleared(state.cleared);
    view.tokens()
}

/// Plans and carries out one compaction over the history `before` a model call; returns
/// whether the context changed.
fn step(
    before: &[Entry],
    metas: &[EntryMeta],
    config: &Replay,
    state: &mut State,
    report: &mut ReplayReport,
) -> bool {
    let coverage = state.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let tail = &metas[metas.partition_point(|m| m.seq() <= coverage)..];
    let base_claims = state
        .summary
        .as_ref()
        .map_or(0, |s| claims_tokens(&s.claims));
    let view = HistoryView::new(
        state.summary.as_ref(),
        tail,
        &[],
        config.fixed_tokens + base_claims,
    )
    .with_cleared(state.cleared);
    let plan = config.strategy.plan(&view);
    let tokens_before = view.tokens();
    let estimate = plan.tokens_after(&view);
    if let Plan::Keep(keep) = &plan {
        tracing::trace!(strategy = config.strategy.name(), tokens = tokens_before, %keep, "replay: kept");
        return false;
    }
    let summary_call = 0; // offline: no model reads anything
    if let Err(skip) = config.trigger.admit_priced(
        tokens_before,
        estimate,
        state.after_last,
        summary_call,
        &config.prices,
    ) {
        tracing::debug!(strategy = config.strategy.name(), %skip, "replay: not admitted");
        report.refused += 1;
        return false;
    }
    let (claims, cut) = match &plan {
        Plan::Keep(_) => return false,
        Plan::ClearToolResults {
            through,
            min_tokens,
        } => {
            // Like the runtime: a clear moves no summary version, so the loop guard's reference
            // (the context right after the last version) stays where it was; the minimum
            // reduction and the plan's own "nothing new to clear" keep clears from looping.
            state.cleared = Some(Cleared {
                through: *through,
                min_tokens: *min_tokens,
            });
            report.compactions += 1;
            return true;
        }
        Plan::Drop { through } => (
            state
                .summary
                .as_ref()
                .map(|s| s.claims.clone())
                .unwrap_or_default(),
            through.seq(),
        ),
        Plan::Summarize {
            through,
            instructions,
        } => {
            let old = &before[before.partition_point(|e| e.seq <= coverage)
                ..before.partition_point(|e| e.seq <= through.seq())];
            let written = Offline.write(&SummaryRequest {
                base: state.summary.as_ref(),
                old,
                cut: through.seq(),
                instructions: instructions.as_deref(),
                pins: &[],
            });
            report.summary_tokens += written.input_tokens + written.output_tokens;
            (written.claims, through.seq())
        }
        Plan::UpdateState { through } => {
            let old = &before[before.partition_point(|e| e.seq <= coverage)
                ..before.partition_point(|e| e.seq <= through.seq())];
            let base = state.summary.as_ref().map_or(&[][..], |s| &s.claims[..]);
            (
                crate::state::merge(base, crate::summarizer::extract(old), &[]),
                through.seq(),
            )
        }
    };
    // What the store's install would check: every claim cites a seq of the run at or before
    // the cut (inherited ones may be older). A strategy bug here is a failed replay, loudly.
    let last = before.last().map_or(Seq::ZERO, |e| e.seq);
    if let Err(why) = baton_core::claim::validate_sources(&claims, cut, last) {
        tracing::error!(strategy = config.strategy.name(), %why, "replay: invalid candidate");
        report.refused += 1;
        return false;
    }
    let new_claims = claims_tokens(&claims);
    let replaced = base_claims + view.tokens_through(cut);
    let after = view.fixed_tokens() - base_claims + new_claims + view.tokens_after(cut);
    let accepted = match &plan {
        // A drop writes no summary of its own; only the reduction counts.
        Plan::Drop { .. } => config
            .trigger
            .accept(tokens_before, after, 0, replaced.max(1)),
        _ => config
            .trigger
            .accept(tokens_before, after, new_claims, replaced),
    };
    if let Err(skip) = accepted {
        tracing::debug!(strategy = config.strategy.name(), %skip, "replay: not accepted");
        report.refused += 1;
        return false;
    }
    let dropped = &before
        [before.partition_point(|e| e.seq <= coverage)..before.partition_point(|e| e.seq <= cut)];
    let kept = tail_of(before, cut);
    if config.measure {
        report.retention += crate::audit::audit(dropped, &claims, kept);
        report.probes += probe(before, cut, &claims, kept);
    }
    let id = SummaryId(state.next_id);
    state.next_id += 1;
    state.summary = Some(Summary {
        id,
        run: config.run.clone(),
        coverage: cut,
        previous_id: state.summary.as_ref().map(|s| s.id),
        claims,
        meta: None,
        created_at: Timestamp(0),
    });
    report.last_summary_tokens = new_claims;
    state.after_last = Some(after);
    report.compactions += 1;
    true
}
