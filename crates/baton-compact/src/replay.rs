//! Offline replay: re-walk a recorded run step by step as if an agent were living it, under one
//! strategy, and measure what it would have cost.
//!
//! A *step* is a model call: every assistant message of the run is one, and its input is the
//! context as it stood just before that message. At each step (every `every` steps) the run,
//! held in memory, goes through the same [`Executor`] the runtime uses against a store (plan,
//! admit, write the claims, check them, audit, install), so replay's figures are what the
//! runtime does; then the step's context is assembled as the runtime assembles it — and clipped
//! to the strategy's limit as the runtime clips it ([`Context::fit`]) — and its tokens counted.
//! Nothing is written to a store.
//!
//! The report gives, per strategy: total input tokens over the run and the reduction against
//! the full transcript, the peak context, the steps whose context was over the budget, the
//! working state's size (the run's tokenizer), compactions and refusals, the continuity probes
//! (the old constraint probe, and any [`Probe`] the caller passes — independent ones, such as
//! `baton-probes`, live outside this crate) and the retention audit.
//!
//! A strategy that needs a model (`summarize`) is not replayed offline: the report says so
//! ([`ReplayReport::needs_model`]) rather than print another strategy's figures.
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
//! let none = replay(&entries, &Replay::new(run.clone(), &CompactionConfig::named("none"))?);
//! let sliding = replay(&entries, &Replay::new(run, &CompactionConfig::named("sliding"))?);
//! assert_eq!(none.steps.len(), 20);
//! assert!(sliding.total_input_tokens < none.total_input_tokens);
//! # Ok::<(), baton_compact::config::Error>(())
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::context::{Context, assemble_pinned};
use baton_core::prices::PriceTable;
use baton_core::tokens::{ByteEstimate, TokenCounter};
use baton_core::{
    Cleared, Entry, EntryMeta, Role, Run, RunId, RunStatus, Seq, Summary, SummaryId, TenantId,
    Timestamp,
};
use serde::Serialize;

use crate::audit::{Retention, Share};
use crate::config::{CompactionConfig, Error as ConfigError};
use crate::executor::{Applied, Execute, Executor, Outcome, RunState, Settings, Target, Version};
use crate::probes::probe;
use crate::strategies::ClearToolResults;
use crate::trigger::Skip;
use crate::{Offline, Strategy};

/// A probe the caller adds: given the history a model call had, the working state's coverage and
/// the context the call received, how much of what it looks for is present, per kind.
pub type Probe = Arc<dyn Fn(&[Entry], Seq, &Context) -> Vec<(String, Share)> + Send + Sync>;

/// How to replay.
#[derive(Clone)]
pub struct Replay {
    /// The run replayed (named in the summaries it makes in memory).
    pub run: RunId,
    /// The strategy.
    pub strategy: Arc<dyn Strategy>,
    /// The shared settings (trigger, clearing layer, state cap).
    pub settings: Settings,
    /// The clearing layer's settings.
    pub clear: ClearToolResults,
    /// Consider compacting every this many steps (1: before every model call).
    pub every: usize,
    /// The run's rules and goal, in every step's context.
    pub rules: Option<String>,
    /// The run's goal.
    pub goal: Option<String>,
    /// The budget steps are measured against (`steps_over_budget`); the strategy's limit when
    /// it has one.
    pub budget: Option<u64>,
    /// How the run counts tokens (the working state is measured with it).
    pub counter: Arc<dyn TokenCounter>,
    /// Prices, for the trigger's cost policy.
    pub prices: PriceTable,
    /// Probes to run after each compaction and on the final context, beside the old
    /// constraint probe; `probes = false` runs none (the growth report needs none).
    pub extra_probes: Vec<Probe>,
    /// Whether to run any probe.
    pub probes: bool,
}

impl Replay {
    /// A replay of `run` under the configured strategy and settings, every step, byte-estimated.
    pub fn new(run: RunId, config: &CompactionConfig) -> Result<Self, ConfigError> {
        let strategy = config.build()?;
        Ok(Replay {
            run,
            budget: strategy.limit(),
            strategy,
            settings: config.settings.clone(),
            clear: config.clear()?,
            every: 1,
            rules: None,
            goal: None,
            counter: Arc::new(ByteEstimate),
            prices: PriceTable::defaults(),
            extra_probes: Vec::new(),
            probes: true,
        })
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
    /// Tokens of the working state in that context.
    pub state_tokens: u64,
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The strategy replayed.
    pub strategy: String,
    /// The strategy needs a model: nothing was replayed.
    pub needs_model: bool,
    /// Every model call, in order.
    pub steps: Vec<Step>,
    /// Input tokens over the run, compacted.
    pub total_input_tokens: u64,
    /// Input tokens over the run had nothing been compacted.
    pub total_full_tokens: u64,
    /// `1 - total_input_tokens / total_full_tokens`.
    pub reduction: f64,
    /// The largest context sent.
    pub peak_context_tokens: u64,
    /// The budget steps were measured against.
    pub budget: Option<u64>,
    /// Steps whose context was over the budget.
    pub steps_over_budget: usize,
    /// Compactions carried out.
    pub compactions: usize,
    /// Compactions the trigger or the guards refused.
    pub refused: usize,
    /// Of those, refused because what was written did not leave room (a summary not smaller
    /// than what it replaces, a context that would not shrink).
    pub refused_no_room: usize,
    /// Tokens the summarizer read and wrote (0 offline).
    pub summary_tokens: u64,
    /// Tokens of the last working state.
    pub state_tokens: u64,
    /// The largest working state.
    pub peak_state_tokens: u64,
    /// The working state's cap.
    pub state_cap: u64,
    /// The old constraint probe, summed over every compaction and the final context.
    pub probes: crate::probes::Probes,
    /// The caller's probes, by kind, summed the same way.
    pub extra: BTreeMap<String, Share>,
    /// The retention audit, summed over every compaction.
    pub retention: Retention,
    /// How long the replay took.
    #[serde(serialize_with = "millis")]
    pub duration: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// The run in memory, as the executor's target.
struct Memory<'a> {
    entries: &'a [Entry],
    metas: &'a [EntryMeta],
    run: Run,
    inner: Mutex<Held>,
}

struct Held {
    /// Entries visible: the history before the current model call.
    visible: usize,
    summary: Option<Summary>,
    cleared: Option<Cleared>,
    next_id: u64,
}

/// Why the memory target refused.
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The memory target cannot fail.
#[derive(Debug, thiserror::Error)]
#[error("replay target")]
struct Never;

impl Memory<'_> {
    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl Target for Memory<'_> {
    type Error = Never;
    type Rejection = Refusal;

    async fn state(&self) -> Result<RunState<'_>, Never> {
        let held = self.held();
        let visible = &self.metas[..held.visible];
        let coverage = held.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
        let start = visible.partition_point(|m| m.seq() <= coverage);
        let mut run = self.run.clone();
        run.cleared = held.cleared;
        run.last_seq = visible.last().map_or(Seq::ZERO, EntryMeta::seq);
        Ok(RunState {
            run,
            summary: held.summary.clone(),
            tail: Cow::Borrowed(&visible[start..]),
            pins: Vec::new(),
            pinned: Vec::new(),
        })
    }

    async fn read(&self, from: Seq, through: Option<Seq>) -> Result<Vec<Entry>, Never> {
        let held = self.held();
        let visible = &self.entries[..held.visible];
        let start = visible.partition_point(|e| e.seq < from);
        let end = through.map_or(visible.len(), |t| visible.partition_point(|e| e.seq <= t));
        Ok(visible[start..end.max(start)].to_vec())
    }

    async fn install(&self, version: Version) -> Result<Applied<Refusal>, Never> {
        let mut held = self.held();
        let last = self.entries[..held.visible]
            .last()
            .map_or(Seq::ZERO, |e| e.seq);
        // What the store's install checks.
        if let Err(why) = baton_core::claim::validate_sources(&version.claims, version.cut, last) {
            return Ok(Applied::Invalid(Refusal(why.to_string())));
        }
        if held.summary.as_ref().map(|s| s.id) != version.base {
            return Ok(Applied::Conflict(Refusal("stale base".into())));
        }
        let id = SummaryId(held.next_id);
        held.next_id += 1;
        held.summary = Some(Summary {
            id,
            run: self.run.id.clone(),
            coverage: version.cut,
            previous_id: version.base,
            claims: version.claims,
            meta: Some(version.meta),
            created_at: Timestamp(0),
        });
        Ok(Applied::Done(Some(id)))
    }

    async fn clear(
        &self,
        current: Option<Cleared>,
        new: Cleared,
    ) -> Result<Applied<Refusal>, Never> {
        let mut held = self.held();
        if held.cleared != current {
            return Ok(Applied::Conflict(Refusal("stale cleared setting".into())));
        }
        held.cleared = Some(new);
        Ok(Applied::Done(None))
    }

    fn inactive(&self, status: RunStatus) -> Refusal {
        Refusal(format!("run is {}", status.as_str()))
    }
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
    let strategy = &*config.strategy;
    let executor = Executor {
        strategy,
        summarizer: &Offline,
        settings: &config.settings,
        clear: config.clear,
        prices: &config.prices,
        counter: &*config.counter,
        force: false,
        dry_run: false,
    };
    let mut report = ReplayReport {
        strategy: strategy.name().to_owned(),
        needs_model: strategy.needs_model(),
        steps: Vec::new(),
        total_input_tokens: 0,
        total_full_tokens: 0,
        reduction: 0.0,
        peak_context_tokens: 0,
        budget: config.budget,
        steps_over_budget: 0,
        compactions: 0,
        refused: 0,
        refused_no_room: 0,
        summary_tokens: 0,
        state_tokens: 0,
        peak_state_tokens: 0,
        state_cap: executor.state_cap(),
        probes: crate::probes::Probes::default(),
        extra: BTreeMap::new(),
        retention: Retention::default(),
        duration: Duration::ZERO,
    };
    if report.needs_model {
        report.duration = started.elapsed();
        return (report, true);
    }
    let metas: Vec<EntryMeta> = entries.iter().map(EntryMeta::of).collect();
    let memory = Memory {
        entries,
        metas: &metas,
        run: Run {
            id: config.run.clone(),
            tenant: TenantId::default_tenant(),
            status: RunStatus::Active,
            goal: config.goal.clone(),
            rules: config.rules.clone(),
            active_summary_id: None,
            last_seq: Seq::ZERO,
            cleared: None,
            created_at: Timestamp(0),
        },
        inner: Mutex::new(Held {
            visible: 0,
            summary: None,
            cleared: None,
            next_id: 1,
        }),
    };
    // Tokens of `entries[..i]`, so a step's tail is counted without reading it.
    let prefix: Vec<u64> = std::iter::once(0)
        .chain(entries.iter().scan(0u64, |sum, e| {
            *sum += u64::from(e.tokens);
            Some(*sum)
        }))
        .collect();
    let mut fixed_of: Option<(Option<SummaryId>, u64, u64)> = None;
    let compacts = strategy.name() != "none";
    let mut full = 0u64;
    let mut calls = 0usize;
    let fixed = {
        let run = &memory.run;
        assemble_pinned(run, None, Vec::new(), Vec::new(), &[]).tokens
    };
    full += fixed;
    for (i, entry) in entries.iter().enumerate() {
        if entry.message.role == Role::Assistant && i > 0 {
            if cancel.load(Ordering::Relaxed) {
                return (report, false);
            }
            memory.held().visible = i;
            let mut compacted = false;
            if compacts && calls.is_multiple_of(config.every.max(1)) {
                match pollster::block_on(executor.execute(&memory)) {
                    Ok(Outcome::Compacted(c)) => {
                        compacted = true;
                        report.compactions += 1;
                        report.summary_tokens += c.summarizer_tokens;
                        if let Some(r) = c.retention {
                            report.retention += r;
                        }
                        if config.probes && c.cut.is_some() {
                            let context = context_of(&memory, entries, None);
                            probe_into(&mut report, config, &entries[..i], &memory, &context);
                        }
                    }
                    Ok(Outcome::Refused { reason, .. }) => {
                        report.refused += 1;
                        if matches!(reason, Skip::SummaryNotSmaller { .. })
                            || matches!(reason, Skip::TooLittle { min_reduction, .. } if min_reduction == 0.0)
                        {
                            report.refused_no_room += 1;
                        }
                    }
                    Ok(_) => {}
                    Err(err) => {
                        tracing::error!(strategy = strategy.name(), error = %err, "replay: compaction failed");
                        report.refused += 1;
                    }
                }
            }
            calls += 1;
            let budget = config.budget.filter(|_| strategy.limit().is_some());
            let (tokens, state_tokens) =
                step_tokens(&memory, entries, budget, &prefix, &mut fixed_of);
            report.steps.push(Step {
                seq: entry.seq,
                full_tokens: full,
                context_tokens: tokens,
                compacted,
                state_tokens,
            });
            report.total_input_tokens += tokens;
            report.total_full_tokens += full;
            report.peak_context_tokens = report.peak_context_tokens.max(tokens);
            report.peak_state_tokens = report.peak_state_tokens.max(state_tokens);
            report.state_tokens = state_tokens;
            if config.budget.is_some_and(|b| tokens > b) {
                report.steps_over_budget += 1;
            }
        }
        full += u64::from(entry.tokens);
    }
    // The final context keeps what the user said too.
    if config.probes && !entries.is_empty() {
        memory.held().visible = entries.len();
        let context = context_of(&memory, entries, None);
        probe_into(&mut report, config, entries, &memory, &context);
    }
    report.reduction =
        1.0 - report.total_input_tokens as f64 / report.total_full_tokens.max(1) as f64;
    report.duration = started.elapsed();
    (report, true)
}

/// A step's context tokens and the working state's part of them. With no tool results
/// cleared, the context is the preamble (which depends on the summary only: kept in `fixed_of`
/// until the summary changes) plus the tail's stored counts (from `prefix`), so no step copies
/// its tail; only a context over `budget` (which [`Context::fit`] clips) or one with cleared
/// results is assembled. Debug builds assemble it every time and check the two agree.
fn step_tokens(
    memory: &Memory<'_>,
    entries: &[Entry],
    budget: Option<u64>,
    prefix: &[u64],
    fixed_of: &mut Option<(Option<SummaryId>, u64, u64)>,
) -> (u64, u64) {
    let slow = |memory: &Memory<'_>| {
        let context = context_of(memory, entries, budget);
        let state = context.summary.as_ref().map_or(0, |s| s.tokens);
        (context.tokens, state)
    };
    let held = memory.held();
    if held.cleared.is_some() {
        drop(held);
        return slow(memory);
    }
    let summary_id = held.summary.as_ref().map(|s| s.id);
    let (preamble, state) = match fixed_of {
        Some((id, preamble, state)) if *id == summary_id => (*preamble, *state),
        _ => {
            let context = assemble_pinned(
                &memory.run,
                held.summary.as_ref(),
                Vec::new(),
                Vec::new(),
                &[],
            );
            let state = context.summary.as_ref().map_or(0, |s| s.tokens);
            *fixed_of = Some((summary_id, context.tokens, state));
            (context.tokens, state)
        }
    };
    let visible = &entries[..held.visible];
    let coverage = held.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let start = visible.partition_point(|e| e.seq <= coverage);
    drop(held);
    let tokens = preamble + prefix[visible.len()] - prefix[start];
    if budget.is_some_and(|b| tokens > b) {
        return slow(memory);
    }
    debug_assert_eq!(
        (tokens, state),
        slow(memory),
        "a step counted without assembling"
    );
    (tokens, state)
}

/// The context the run in memory would send now, clipped to `budget` when given.
fn context_of(memory: &Memory<'_>, entries: &[Entry], budget: Option<u64>) -> Context {
    let held = memory.held();
    let visible = &entries[..held.visible];
    let coverage = held.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let tail = visible[visible.partition_point(|e| e.seq <= coverage)..].to_vec();
    let mut run = memory.run.clone();
    run.cleared = held.cleared;
    let mut context = assemble_pinned(&run, held.summary.as_ref(), tail, Vec::new(), &[]);
    drop(held);
    if let Some(budget) = budget {
        context.fit(budget);
    }
    context
}

/// Runs every probe on a context and adds what they found to the report.
fn probe_into(
    report: &mut ReplayReport,
    config: &Replay,
    history: &[Entry],
    memory: &Memory<'_>,
    context: &Context,
) {
    let held = memory.held();
    let coverage = held.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let claims = held.summary.as_ref().map_or(&[][..], |s| &s.claims[..]);
    let tail = &history[history.partition_point(|e| e.seq <= coverage)..];
    report.probes += probe(history, coverage, claims, tail);
    drop(held);
    for extra in &config.extra_probes {
        for (kind, share) in extra(history, coverage, context) {
            *report.extra.entry(kind).or_default() += share;
        }
    }
}
