//! `structured { threshold, keep_recent, keep_tokens }`: when the context reaches `threshold`
//! tokens, the messages before the last `keep_recent` — fewer when those would hold more than
//! `keep_tokens` (a quarter of the threshold unless set), so a few huge tool results cannot
//! keep the context at the threshold — (rounded to a safe cut) update the run's working
//! state: the objective, the user's constraints in their exact words, verified findings with
//! the seq of their evidence, hypotheses (and which later message refuted them), failed
//! approaches, pending operations, artifact references (files, URLs, commands) and the next
//! step, every claim citing its `source_seq` and validated by the store's install. Nothing of
//! the earlier state is lost: new claims are merged in ([`crate::state`]).
//!
//! ```
//! use baton_compact::strategies::Structured;
//! use baton_compact::{HistoryView, Keep, Plan, Strategy};
//! let view = HistoryView::new(None, &[], &[], 0);
//! let plan = Structured { threshold: 1_000, keep_recent: 4, keep_tokens: None }.plan(&view);
//! assert!(matches!(plan, Plan::Keep(Keep::UnderThreshold { .. })));
//! ```

use baton_core::units::SafeCut;
use serde::{Deserialize, Serialize};

use crate::{HistoryView, Keep, Plan, Strategy};

/// The `structured` strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Structured {
    /// Context tokens at which it updates the working state.
    pub threshold: u64,
    /// Messages at the end that stay whole.
    pub keep_recent: usize,
    /// The most tokens those messages may hold (default a quarter of the threshold).
    pub keep_tokens: Option<u64>,
}

impl Default for Structured {
    fn default() -> Self {
        Structured {
            threshold: 32_000,
            keep_recent: 10,
            keep_tokens: None,
        }
    }
}

impl Strategy for Structured {
    fn name(&self) -> &'static str {
        "structured"
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        match old_part(view, self.threshold, self.keep_recent, self.keep_tokens) {
            Ok(through) => Plan::UpdateState { through },
            Err(keep) => Plan::Keep(keep),
        }
    }

    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        let keep = self.keep_tokens.unwrap_or(self.threshold / 4);
        match old_part(view, 0, self.keep_recent, Some(keep)) {
            Ok(through) => Plan::UpdateState { through },
            Err(keep) => Plan::Keep(keep),
        }
    }

    fn limit(&self) -> Option<u64> {
        Some(self.threshold)
    }
}

/// The cut that compacts everything before the last `keep_recent` messages (fewer when they
/// hold more than `keep_tokens`, default a quarter of the threshold), once the context reaches
/// `threshold`: shared by the two summarizing strategies.
pub(crate) fn old_part(
    view: &HistoryView<'_>,
    threshold: u64,
    keep_recent: usize,
    keep_tokens: Option<u64>,
) -> Result<SafeCut, Keep> {
    let tokens = view.tokens();
    if tokens < threshold {
        return Err(Keep::UnderThreshold { tokens, threshold });
    }
    let by_count = view.seq_keeping_last(keep_recent);
    let keep_tokens = keep_tokens.unwrap_or(threshold / 4);
    // The earliest cut after which the tail fits in `keep_tokens`: just after the latest
    // message whose successors hold more. The last message always stays, whatever its size.
    let tail = view.tail();
    let second_last = tail.len().checked_sub(2).map(|i| tail[i].seq());
    let by_tokens = tail
        .iter()
        .rposition(|m| view.tokens_after(m.seq()) > keep_tokens)
        .and_then(|i| tail.get(i + 1))
        .map(|m| m.seq())
        .zip(second_last)
        .map(|(seq, limit)| seq.min(limit));
    let desired = match (by_count, by_tokens) {
        (Some(a), Some(b)) => a.max(b),
        (Some(a), None) | (None, Some(a)) => a,
        (None, None) => {
            return Err(Keep::NothingOld {
                messages: tail.len(),
                keep: keep_recent,
            });
        }
    };
    view.safe_cut_at_or_before(desired)
        // None there (the cut would fall inside a run of parallel tool results, say, with
        // nothing safe between it and what is already covered): the first safe cut after it,
        // so a context over its threshold still shrinks, keeping fewer messages than asked.
        .or_else(|| view.safe_cuts().find(|c| c.seq() > desired))
        .ok_or(Keep::NoSafeCut { desired })
}

impl super::Configured for Structured {
    const NAME: &'static str = "structured";
    const ABOUT: &'static str = "the old part updates the bounded working state, read offline from the transcript's structure";

    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        if self.keep_recent == 0 {
            return Err(("keep_recent", "0".into(), "1 or more"));
        }
        if self.threshold == 0 {
            return Err(("threshold", "0".into(), "1 or more"));
        }
        Ok(())
    }
}
