//! What a strategy decides: a [`Plan`], and what carrying it out did: a [`Compaction`].

use std::time::Duration;

use baton_core::units::SafeCut;
use baton_core::{RunId, Seq, SummaryId};
use serde::Serialize;

use crate::HistoryView;
use crate::audit::Retention;

/// What a strategy wants done to a run's context. Strategies plan; the runtime carries the plan
/// out (every cut through the store's compare-and-swap install) and never touches history.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum Plan {
    /// Leave the context as it is, and why.
    Keep(Keep),
    /// Drop the messages through the cut from the context: a new summary version covering
    /// them, carrying the active summary's claims and adding none.
    Drop {
        /// The cut.
        through: SafeCut,
    },
    /// Show old tool results (in messages through `through`, of at least `min_tokens`) as a
    /// stub naming the tool, the seq and how to recall the original.
    ClearToolResults {
        /// The last seq whose tool results may be stubbed.
        through: Seq,
        /// Results of messages smaller than this stay whole.
        min_tokens: u32,
    },
    /// Summarize the messages through the cut: the [`Summarizer`](crate::Summarizer) writes the
    /// new version's claims from the active summary and the messages it covers.
    Summarize {
        /// The cut.
        through: SafeCut,
        /// What the summary must keep, when the configuration overrides the default.
        instructions: Option<String>,
    },
    /// Update the working state with the messages through the cut: claims extracted from them
    /// are merged into the active summary's (constraints verbatim, findings with evidence,
    /// refuted hypotheses marked, artifacts kept), each citing its seq.
    UpdateState {
        /// The cut.
        through: SafeCut,
    },
}

/// Why a plan changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Keep {
    /// The strategy never compacts (`none`).
    Baseline,
    /// The context is under the strategy's threshold or budget.
    UnderThreshold {
        /// The context's tokens.
        tokens: u64,
        /// The threshold.
        threshold: u64,
    },
    /// The tail holds no more than the messages the strategy keeps.
    NothingOld {
        /// Messages in the tail.
        messages: usize,
        /// Messages the strategy keeps.
        keep: usize,
    },
    /// No safe cut lies at or before the desired one: cutting there would separate a tool call
    /// from its result, so nothing is done rather than break the conversation.
    NoSafeCut {
        /// Where the strategy wanted to cut.
        desired: Seq,
    },
    /// No old tool result is large enough to clear, or they are cleared already.
    NothingToClear,
}

impl std::fmt::Display for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keep::Baseline => write!(f, "the strategy never compacts"),
            Keep::UnderThreshold { tokens, threshold } => {
                write!(f, "{tokens} tokens is under the threshold of {threshold}")
            }
            Keep::NothingOld { messages, keep } => write!(
                f,
                "the tail has {messages} messages and the strategy keeps the last {keep}"
            ),
            Keep::NoSafeCut { desired } => write!(
                f,
                "no safe cut at or before seq {desired}: a tool call and its result would be separated"
            ),
            Keep::NothingToClear => write!(f, "no old tool result is large enough to clear"),
        }
    }
}

impl Plan {
    /// The cut the plan moves the summary's coverage to, if it moves it.
    pub fn cut(&self) -> Option<Seq> {
        match self {
            Plan::Drop { through }
            | Plan::Summarize { through, .. }
            | Plan::UpdateState { through } => Some(through.seq()),
            Plan::Keep(_) | Plan::ClearToolResults { .. } => None,
        }
    }

    /// Whether carrying the plan out writes a new working state (a summarizer or the
    /// extractor runs).
    pub fn needs_summary(&self) -> bool {
        matches!(self, Plan::Summarize { .. } | Plan::UpdateState { .. })
    }

    /// Whether the plan changes anything.
    pub fn changes(&self) -> bool {
        !matches!(self, Plan::Keep(_))
    }

    /// The plan's kind, as logged (`keep`, `drop`, `clear_tool_results`, `summarize`,
    /// `update_state`).
    pub fn kind(&self) -> &'static str {
        match self {
            Plan::Keep(_) => "keep",
            Plan::Drop { .. } => "drop",
            Plan::ClearToolResults { .. } => "clear_tool_results",
            Plan::Summarize { .. } => "summarize",
            Plan::UpdateState { .. } => "update_state",
        }
    }

    /// The context's tokens after the plan, as far as planning can tell: exact for `drop`
    /// (stored counts), close for `clear_tool_results` (each cleared message counted at a
    /// stub's size), and without the new summary's own size for the summarizing plans (which
    /// the runtime measures once the summary is written).
    pub fn tokens_after(&self, view: &HistoryView<'_>) -> u64 {
        match self {
            Plan::Keep(_) => view.tokens(),
            Plan::Drop { through } => view.fixed_tokens() + view.tokens_after(through.seq()),
            Plan::Summarize { through, .. } | Plan::UpdateState { through } => {
                let claims = view
                    .summary()
                    .map_or(0, |s| crate::claims_tokens(&s.claims));
                view.fixed_tokens().saturating_sub(claims) + view.tokens_after(through.seq())
            }
            Plan::ClearToolResults {
                through,
                min_tokens,
            } => view.tokens_with_cleared(baton_core::Cleared {
                through: *through,
                min_tokens: *min_tokens,
            }),
        }
    }
}

/// About what a cleared tool result's stub costs.
pub const STUB_TOKENS: u64 = 40;

/// What one compaction did, as the [`Executor`](crate::Executor) reports it (to the logging
/// decorator and to the user).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Compaction {
    /// The strategy that planned it.
    pub strategy: String,
    /// The run.
    pub run: RunId,
    /// What the plan was (`drop`, `clear_tool_results`, `summarize`, `update_state`).
    pub plan: &'static str,
    /// Messages in the context before.
    pub messages_before: usize,
    /// Messages in the context after.
    pub messages_after: usize,
    /// Tokens of the context before.
    pub tokens_before: u64,
    /// Tokens of the context after.
    pub tokens_after: u64,
    /// The cut, for the plans that move the coverage.
    pub cut: Option<Seq>,
    /// The summary version installed, if one was.
    pub summary_id: Option<SummaryId>,
    /// Tokens of the new summary's claims (0 when none was written).
    pub summary_tokens: u64,
    /// Tokens of the working state the context carries after, counted with the run's
    /// tokenizer.
    pub state_tokens: u64,
    /// Tokens the summarizer spent (0 offline).
    pub summarizer_tokens: u64,
    /// The tool results the context shows as a stub after (the clearing layer, or the
    /// `clear-tool-results` plan), when this compaction moved it.
    pub cleared: Option<baton_core::Cleared>,
    /// What share of the dropped part's paths, commands, URLs and numbers stay reachable.
    pub retention: Option<Retention>,
    /// How long planning, summarizing and installing took.
    #[serde(serialize_with = "serialize_millis")]
    pub duration: Duration,
}

fn serialize_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}
