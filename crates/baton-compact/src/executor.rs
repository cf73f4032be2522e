//! The one compaction executor: admit → claims → accept → audit → install, for the runtime
//! (against a store) and for replay (in memory) alike.
//!
//! A [`Target`] is where a run lives: it hands out the run's context as metadata, reads message
//! bodies for the part a compaction covers, and applies a new summary version or a new clearing
//! by compare-and-swap. The runtime's target is a store; replay's is a run held in memory. Both
//! go through [`Executor::execute`], so replay's figures are what the runtime does.
//!
//! What the executor adds to a strategy's plan:
//! - **The clearing layer.** When the context is over the strategy's [`limit`](Strategy::limit),
//!   old tool results are cleared first (the `clear-tool-results` settings, as a layer under
//!   the strategy): if that alone brings the context under the limit, that is the whole
//!   compaction; otherwise the strategy plans on the cleared view, and both are applied.
//! - **The loop guard never blocks a context over its limit** that took new content since the
//!   last compaction: then any reduction is admitted.
//! - **The working state's cap**: a share of the limit (20% unless configured), counted with the
//!   run's tokenizer, stored with the version (`state_tokens` in its meta) so context assembly
//!   counts the preamble as it was measured.
//!
//! A decorator wraps the executor to see what it did ([`Logged`](crate::Logged)), like tower's
//! `Trace<S>` wraps a service.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Instant;

use async_trait::async_trait;
use baton_core::context::{assemble_pinned, render_state};
use baton_core::prices::PriceTable;
use baton_core::tokens::{TokenCounter, estimate_text};
use baton_core::{
    Claim, Cleared, Entry, EntryMeta, Run, RunStatus, Seq, Summary, SummaryId, Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::audit::audit;
use crate::state::WorkingState;
use crate::strategies::ClearToolResults;
use crate::trigger::{Skip, Trigger};
use crate::{
    Compaction, HistoryView, Keep, Offline, Plan, Strategy, SummarizeError, Summarizer,
    SummaryRequest,
};

/// A run's context as planning reads it: the run, its active summary, the tail after it as
/// metadata, the pinned seqs and the pinned messages the summary covers.
///
/// The tail is borrowed where the target already holds it (replay's run in memory, asked
/// once per model call) and owned where it was read (a store).
#[derive(Clone, Debug)]
pub struct RunState<'t> {
    /// The run (its status, rules, goal, cleared setting).
    pub run: Run,
    /// The active summary.
    pub summary: Option<Summary>,
    /// The messages after its coverage, as metadata.
    pub tail: Cow<'t, [EntryMeta]>,
    /// The run's pinned seqs.
    pub pins: Vec<Seq>,
    /// The pinned messages the summary covers.
    pub pinned: Vec<Entry>,
}

impl RunState<'_> {
    /// Tokens of the context besides the tail, as context assembly counts them.
    pub fn fixed_tokens(&self) -> u64 {
        assemble_pinned(
            &self.run,
            self.summary.as_ref(),
            Vec::new(),
            self.pinned.clone(),
            &self.pins,
        )
        .tokens
    }
}

/// A new summary version, as the executor asks a target to install it.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    /// The version it builds on (compare-and-swap: it must still be the active one).
    pub base: Option<SummaryId>,
    /// The last seq it covers.
    pub cut: Seq,
    /// What it says.
    pub claims: Vec<Claim>,
    /// What made it.
    pub meta: serde_json::Value,
}

/// What a target did with a version or a clearing.
#[derive(Clone, Debug, PartialEq)]
pub enum Applied<R> {
    /// Written; for a version, its id.
    Done(Option<SummaryId>),
    /// Another writer moved the run first, or it is not active: nothing was written.
    Conflict(R),
    /// The target refused it as invalid: a strategy or summarizer broke its contract.
    Invalid(R),
}

/// Where a run lives, for the executor: a store (the runtime) or memory (replay).
#[async_trait]
pub trait Target: Send + Sync {
    /// A failure of the target itself.
    type Error: std::error::Error + Send + Sync + 'static;
    /// Why the target refused a write.
    type Rejection: std::fmt::Debug + std::fmt::Display + Send + Sync + 'static;

    /// The run's context as metadata.
    async fn state(&self) -> Result<RunState<'_>, Self::Error>;
    /// The messages with seq in `from..=through` (to the end without `through`).
    async fn read(&self, from: Seq, through: Option<Seq>) -> Result<Vec<Entry>, Self::Error>;
    /// Installs `version` by compare-and-swap on the run's active summary.
    async fn install(&self, version: Version) -> Result<Applied<Self::Rejection>, Self::Error>;
    /// Moves the run's cleared setting from `current` to `new` by compare-and-swap.
    async fn clear(
        &self,
        current: Option<Cleared>,
        new: Cleared,
    ) -> Result<Applied<Self::Rejection>, Self::Error>;
    /// The rejection that says the run is not active.
    fn inactive(&self, status: RunStatus) -> Self::Rejection;
}

/// How compactions run whatever the strategy: the `[compaction]` section's shared settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// When a compaction runs and when it is refused.
    pub trigger: Trigger,
    /// Clear old tool results under every strategy that holds a limit, when the context goes
    /// over it (the `clear-tool-results` settings say which).
    pub clear_layer: bool,
    /// The working state's cap.
    pub state: StateCap,
    /// When given, every compaction that changed something is logged to this file.
    pub log: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            trigger: Trigger::default(),
            clear_layer: true,
            state: StateCap::default(),
            log: None,
        }
    }
}

/// The working state's cap: a share of the strategy's limit, or a number of tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateCap {
    /// The share of the strategy's limit (0.2: a fifth).
    pub share: f64,
    /// A cap in tokens, overriding the share.
    pub max_tokens: Option<u64>,
}

impl Default for StateCap {
    fn default() -> Self {
        StateCap {
            share: 0.2,
            max_tokens: None,
        }
    }
}

impl StateCap {
    /// The cap for a strategy whose limit is `limit` (32,000 when it holds none).
    pub fn tokens(&self, limit: Option<u64>) -> u64 {
        self.max_tokens
            .unwrap_or_else(|| (limit.unwrap_or(32_000) as f64 * self.share) as u64)
    }
}

/// What one execution did.
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Outcome<R> {
    /// The strategy planned nothing, and why.
    Kept(Keep),
    /// The trigger or a guard refused the plan; nothing was written.
    Refused {
        /// The plan's kind.
        plan: &'static str,
        /// Why.
        reason: Skip,
        /// Context tokens before.
        tokens_before: u64,
        /// Context tokens the plan would have left.
        tokens_after: u64,
    },
    /// A dry run: what would have been installed, with the claims it would carry.
    Planned {
        /// The compaction, without a summary id.
        compaction: Compaction,
        /// The new version's claims (empty for a clearing alone).
        claims: Vec<Claim>,
    },
    /// Done.
    Compacted(Compaction),
    /// The run could not take the compaction: another writer moved it first, or it is not
    /// active; nothing was written (a clearing applied with it may have been).
    Conflict(R),
}

impl<R> Outcome<R> {
    /// Its name, as metrics and reports count it: `kept`, `refused`, `planned`, `compacted`,
    /// `conflict`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Kept(_) => "kept",
            Outcome::Refused { .. } => "refused",
            Outcome::Planned { .. } => "planned",
            Outcome::Compacted(_) => "compacted",
            Outcome::Conflict(_) => "conflict",
        }
    }
}

/// What went wrong, other than an expected outcome. Exhaustive: a caller maps each case.
#[derive(Debug)]
pub enum Error<E, R> {
    /// The target failed.
    Target(E),
    /// The summarizer failed; nothing was written.
    Summarize(SummarizeError),
    /// The target refused the version as invalid: a strategy or summarizer broke its contract.
    Invalid {
        /// The strategy.
        strategy: &'static str,
        /// The target's reason.
        rejection: R,
    },
    /// The strategy needs a model and the summarizer is offline.
    NeedsModel {
        /// The strategy.
        strategy: &'static str,
    },
}

impl<E: std::fmt::Display, R: std::fmt::Display> std::fmt::Display for Error<E, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Target(e) => e.fmt(f),
            Error::Summarize(e) => e.fmt(f),
            Error::Invalid {
                strategy,
                rejection,
            } => write!(
                f,
                "strategy {strategy}: the store refused its candidate: {rejection}"
            ),
            Error::NeedsModel { strategy } => write!(
                f,
                "strategy {strategy} needs a model to write its summary (baton chat, or the HTTP API with a provider); offline, use structured"
            ),
        }
    }
}

impl<E, R> std::error::Error for Error<E, R>
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug + std::fmt::Display,
{
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Target(e) => Some(e),
            Error::Summarize(e) => Some(e),
            _ => None,
        }
    }
}

/// The result of an execution against `T`.
pub type Executed<T> = Result<
    Outcome<<T as Target>::Rejection>,
    Error<<T as Target>::Error, <T as Target>::Rejection>,
>;

/// Carries out compactions: the executor, or a decorator around it.
#[async_trait]
pub trait Execute: Send + Sync {
    /// Plans one compaction of the run `target` holds and carries it out.
    async fn execute<T: Target + ?Sized>(&self, target: &T) -> Executed<T>;
}

#[async_trait]
impl<E: Execute + ?Sized> Execute for &E {
    async fn execute<T: Target + ?Sized>(&self, target: &T) -> Executed<T> {
        (**self).execute(target).await
    }
}

/// The executor: one compaction of one run, with everything it needs.
#[derive(Clone, Copy)]
pub struct Executor<'a> {
    /// What to do.
    pub strategy: &'a dyn Strategy,
    /// Who writes a `summarize` plan's claims.
    pub summarizer: &'a dyn Summarizer,
    /// The shared settings (trigger, clearing layer, state cap).
    pub settings: &'a Settings,
    /// The clearing layer's settings.
    pub clear: ClearToolResults,
    /// Prices, for the trigger's cost policy.
    pub prices: &'a PriceTable,
    /// How the run counts tokens (the working state is measured with it).
    pub counter: &'a dyn TokenCounter,
    /// The user asked for this compaction now: the strategy plans as if its threshold were
    /// reached and the trigger's admission is skipped. The guards on what is written (smaller
    /// than what it replaces, a context that shrinks) still apply.
    pub force: bool,
    /// Plan, write and check, but install nothing.
    pub dry_run: bool,
}

impl Executor<'_> {
    /// The working state's cap for this executor's strategy.
    pub fn state_cap(&self) -> u64 {
        self.settings.state.tokens(self.strategy.limit())
    }

    /// Whether the clearing layer applies under this executor's strategy.
    fn layered(&self) -> bool {
        self.settings.clear_layer && self.strategy.limit().is_some()
    }
}

#[async_trait]
impl Execute for Executor<'_> {
    async fn execute<T: Target + ?Sized>(&self, target: &T) -> Executed<T> {
        let started = Instant::now();
        let st = target.state().await.map_err(Error::Target)?;
        if st.run.status != RunStatus::Active {
            return Ok(Outcome::Conflict(target.inactive(st.run.status)));
        }
        let strategy = self.strategy;
        let fixed = st.fixed_tokens();
        let view = HistoryView::new(st.summary.as_ref(), &st.tail, &st.pins, fixed)
            .with_cleared(st.run.cleared);
        let tokens_before = view.tokens();
        let limit = strategy.limit();
        let over = limit.is_some_and(|l| tokens_before > l);
        let after_last = st.summary.as_ref().and_then(|s| {
            s.meta
                .as_ref()?
                .get("tokens_after")
                .and_then(serde_json::Value::as_u64)
        });
        // Over the limit with content that arrived since the last compaction: the loop guard
        // and the minimum reduction do not hold a compaction back.
        let urgent = over && after_last.is_none_or(|a| tokens_before > a);

        // The clearing layer, when the context is over the limit.
        let layer = if over && self.layered() {
            match self.clear.plan(&view) {
                Plan::ClearToolResults {
                    through,
                    min_tokens,
                } => Some(Cleared {
                    through,
                    min_tokens,
                }),
                _ => None,
            }
        } else {
            None
        };
        let layered_view;
        let view = match layer {
            Some(cleared) => {
                layered_view = HistoryView::new(st.summary.as_ref(), &st.tail, &st.pins, fixed)
                    .with_cleared(Some(cleared));
                &layered_view
            }
            None => &view,
        };
        let plan = match (layer, limit) {
            (Some(cleared), Some(limit)) if view.tokens() <= limit => Plan::ClearToolResults {
                through: cleared.through,
                min_tokens: cleared.min_tokens,
            },
            _ if self.force => strategy.plan_now(view),
            _ => strategy.plan(view),
        };
        if let Plan::Keep(keep) = &plan {
            // The strategy keeps, but the layer alone may still help.
            let Some(cleared) = layer else {
                return Ok(Outcome::Kept(keep.clone()));
            };
            let after = view.tokens();
            return self
                .clear_only(target, &st, cleared, tokens_before, after, urgent, started)
                .await;
        }
        if plan.needs_summary() && strategy.needs_model() && !self.summarizer.calls_a_model() {
            return Err(Error::NeedsModel {
                strategy: strategy.name(),
            });
        }
        let estimate = plan.tokens_after(view);
        let cut = plan.cut();
        let old_tokens = cut.map_or(0, |cut| view.tokens_through(cut));
        let summary_call = match &plan {
            Plan::Summarize { .. } if self.summarizer.calls_a_model() => old_tokens,
            _ => 0,
        };
        if !self.force {
            let admitted = if urgent {
                self.settings.trigger.admit_over(tokens_before, estimate)
            } else {
                self.settings.trigger.admit_priced(
                    tokens_before,
                    estimate,
                    after_last,
                    summary_call,
                    self.prices,
                )
            };
            if let Err(reason) = admitted {
                return Ok(Outcome::Refused {
                    plan: plan.kind(),
                    reason,
                    tokens_before,
                    tokens_after: estimate,
                });
            }
        }
        if let Plan::ClearToolResults {
            through,
            min_tokens,
        } = plan
        {
            let cleared = Cleared {
                through,
                min_tokens,
            };
            return self
                .clear_only(target, &st, cleared, tokens_before, estimate, true, started)
                .await;
        }
        let Some(through) = cut else {
            return Ok(Outcome::Kept(Keep::NothingToClear));
        };

        // The claims.
        let coverage = view.coverage();
        let old = target
            .read(coverage.next(), Some(through))
            .await
            .map_err(Error::Target)?;
        let cap = self.state_cap();
        let request = SummaryRequest {
            base: st.summary.as_ref(),
            old: &old,
            cut: through,
            instructions: None,
            pins: &st.pins,
            cap,
            counter: self.counter,
        };
        let (claims, summarizer_tokens) = match &plan {
            Plan::Drop { .. } => (
                st.summary
                    .as_ref()
                    .map(|s| s.claims.clone())
                    .unwrap_or_default(),
                0,
            ),
            Plan::Summarize { instructions, .. } if self.summarizer.calls_a_model() => {
                let request = SummaryRequest {
                    instructions: instructions.as_deref(),
                    ..request
                };
                let written = self
                    .summarizer
                    .summarize(&request)
                    .await
                    .map_err(Error::Summarize)?;
                // The model's claims, with the exact lists merged in so it can drop none.
                let base = st.summary.as_ref().map_or(&[][..], |s| &s.claims[..]);
                let mut state = WorkingState::from_claims(base, &st.pins);
                state.observe(&old);
                let state = state.with_model(&written.claims);
                let bounded = crate::state::bound(&state, through, cap, self.counter);
                (bounded.claims, written.input_tokens + written.output_tokens)
            }
            _ => (Offline::state(&request).claims, 0),
        };

        // What the context holds after.
        let state_tokens = if matches!(plan, Plan::Drop { .. }) {
            st.summary
                .as_ref()
                .map_or(0, |s| measured_state(s, self.counter))
        } else {
            u64::from(self.counter.count_text(&render_state(through, &claims)))
        };
        let newly_pinned: Vec<Entry> = old
            .iter()
            .filter(|e| st.pins.contains(&e.seq))
            .cloned()
            .collect();
        let mut pinned_after = st.pinned.clone();
        pinned_after.extend(newly_pinned.iter().cloned());
        let draft = Summary {
            id: SummaryId(0),
            run: st.run.id.clone(),
            coverage: through,
            previous_id: None,
            claims: claims.clone(),
            meta: Some(serde_json::json!({ "state_tokens": state_tokens })),
            created_at: Timestamp(0),
        };
        let fixed_after =
            assemble_pinned(&st.run, Some(&draft), Vec::new(), pinned_after, &st.pins).tokens;
        let tokens_after = fixed_after + view.tokens_after(through);
        let base_state = st
            .summary
            .as_ref()
            .map_or(0, |s| measured_state(s, self.counter));
        let replaced = base_state + view.tokens_through(through);
        let written = if matches!(plan, Plan::Drop { .. }) {
            0
        } else {
            state_tokens
        };
        let accepted = if urgent || self.force {
            self.settings
                .trigger
                .accept_over(tokens_before, tokens_after, written, replaced.max(1))
        } else {
            self.settings
                .trigger
                .accept(tokens_before, tokens_after, written, replaced.max(1))
        };
        if let Err(reason) = accepted {
            return Ok(Outcome::Refused {
                plan: plan.kind(),
                reason,
                tokens_before,
                tokens_after,
            });
        }

        // The audit: what the dropped part's facts still reach.
        let mut kept = target
            .read(through.next(), None)
            .await
            .map_err(Error::Target)?;
        kept.extend(st.pinned.iter().cloned());
        kept.extend(newly_pinned.iter().cloned());
        let retention = audit(&old, &claims, &kept);
        let messages_before = st.pinned.len() + st.tail.len();
        let messages_after =
            st.pinned.len() + newly_pinned.len() + st.tail.len() - view.count_through(through);
        let mut compaction = Compaction {
            strategy: strategy.name().to_owned(),
            run: st.run.id.clone(),
            plan: plan.kind(),
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
            cut: Some(through),
            summary_id: None,
            summary_tokens: written,
            state_tokens,
            summarizer_tokens,
            cleared: layer,
            retention: Some(retention),
            duration: started.elapsed(),
        };
        if self.dry_run {
            return Ok(Outcome::Planned { compaction, claims });
        }
        let version = Version {
            base: st.summary.as_ref().map(|s| s.id),
            cut: through,
            claims,
            meta: serde_json::json!({
                "strategy": compaction.strategy,
                "plan": compaction.plan,
                "summarizer": self.summarizer.name(),
                "tokens_before": compaction.tokens_before,
                "tokens_after": compaction.tokens_after,
                "summary_tokens": compaction.summary_tokens,
                "state_tokens": compaction.state_tokens,
                "state_cap": cap,
                "summarizer_tokens": compaction.summarizer_tokens,
                "retention": compaction.retention,
            }),
        };
        match target.install(version).await.map_err(Error::Target)? {
            Applied::Done(id) => compaction.summary_id = id,
            Applied::Conflict(why) => return Ok(Outcome::Conflict(why)),
            Applied::Invalid(why) => {
                return Err(Error::Invalid {
                    strategy: strategy.name(),
                    rejection: why,
                });
            }
        }
        if let Some(cleared) = layer {
            // The clearing moves on its own column; losing its race loses nothing installed.
            match target
                .clear(st.run.cleared, cleared)
                .await
                .map_err(Error::Target)?
            {
                Applied::Done(_) => {}
                Applied::Conflict(why) | Applied::Invalid(why) => {
                    tracing::debug!(run = %st.run.id, %why, "clearing layer not applied");
                    compaction.cleared = None;
                }
            }
        }
        compaction.duration = started.elapsed();
        Ok(Outcome::Compacted(compaction))
    }
}

impl Executor<'_> {
    /// Applies a clearing alone (the `clear-tool-results` plan, or the layer when the strategy
    /// keeps): checked like any compaction, audited, applied by compare-and-swap.
    #[allow(clippy::too_many_arguments)]
    async fn clear_only<T: Target + ?Sized>(
        &self,
        target: &T,
        st: &RunState<'_>,
        cleared: Cleared,
        tokens_before: u64,
        tokens_after: u64,
        admitted: bool,
        started: Instant,
    ) -> Executed<T> {
        if st.run.cleared == Some(cleared) || tokens_after >= tokens_before {
            return Ok(Outcome::Kept(Keep::NothingToClear));
        }
        if !admitted && !self.force {
            let after_last = st.summary.as_ref().and_then(|s| {
                s.meta
                    .as_ref()?
                    .get("tokens_after")
                    .and_then(serde_json::Value::as_u64)
            });
            if let Err(reason) = self.settings.trigger.admit_priced(
                tokens_before,
                tokens_after,
                after_last,
                0,
                self.prices,
            ) {
                return Ok(Outcome::Refused {
                    plan: "clear_tool_results",
                    reason,
                    tokens_before,
                    tokens_after,
                });
            }
        }
        let coverage = st.summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
        // The audit of a clearing: what the stubbed results' messages held, against the
        // context as it will be.
        let tail = target
            .read(coverage.next(), None)
            .await
            .map_err(Error::Target)?;
        let view = HistoryView::new(st.summary.as_ref(), &st.tail, &st.pins, 0);
        let (stubbed, kept): (Vec<Entry>, Vec<Entry>) = tail.into_iter().partition(|e| {
            st.tail
                .iter()
                .find(|m| m.seq() == e.seq)
                .is_some_and(|m| view.clearable(m, cleared.through, cleared.min_tokens))
        });
        let claims = st
            .summary
            .as_ref()
            .map(|s| s.claims.clone())
            .unwrap_or_default();
        let mut visible = kept;
        visible.extend(stubbed.iter().map(|e| stub(e, cleared)));
        let retention = audit(&stubbed, &claims, &visible);
        let state_tokens = st
            .summary
            .as_ref()
            .map_or(0, |s| measured_state(s, self.counter));
        let n = st.pinned.len() + st.tail.len();
        let mut compaction = Compaction {
            strategy: self.strategy.name().to_owned(),
            run: st.run.id.clone(),
            plan: "clear_tool_results",
            messages_before: n,
            messages_after: n,
            tokens_before,
            tokens_after,
            cut: None,
            summary_id: None,
            summary_tokens: 0,
            state_tokens,
            summarizer_tokens: 0,
            cleared: Some(cleared),
            retention: Some(retention),
            duration: started.elapsed(),
        };
        if self.dry_run {
            return Ok(Outcome::Planned {
                compaction,
                claims: Vec::new(),
            });
        }
        match target
            .clear(st.run.cleared, cleared)
            .await
            .map_err(Error::Target)?
        {
            Applied::Done(_) => {
                compaction.duration = started.elapsed();
                Ok(Outcome::Compacted(compaction))
            }
            Applied::Conflict(why) => Ok(Outcome::Conflict(why)),
            Applied::Invalid(why) => Err(Error::Invalid {
                strategy: self.strategy.name(),
                rejection: why,
            }),
        }
    }
}

/// A message as a clearing shows it: its tool results' content replaced by the stub.
fn stub(entry: &Entry, cleared: Cleared) -> Entry {
    let mut shown = [entry.clone()];
    baton_core::context::clear_tool_results(&mut shown, cleared, &[]);
    let [shown] = shown;
    shown
}

/// The tokens a version's working state takes: as it measured them, else counted now.
fn measured_state(summary: &Summary, counter: &dyn TokenCounter) -> u64 {
    summary.state_tokens().unwrap_or_else(|| {
        if summary.claims.is_empty() {
            0
        } else {
            u64::from(counter.count_text(&render_state(summary.coverage, &summary.claims)))
        }
    })
}

/// The byte estimate of a state, for callers without a tokenizer.
pub fn estimate_state(coverage: Seq, claims: &[Claim]) -> u64 {
    u64::from(estimate_text(&render_state(coverage, claims)))
}
