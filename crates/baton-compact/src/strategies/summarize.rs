//! `summarize { threshold, keep_recent, keep_tokens, instructions }`: when the context reaches
//! `threshold` tokens, the messages before the last `keep_recent` (fewer when those would hold
//! more than `keep_tokens`, a quarter of the threshold unless set; rounded to a safe cut) become
//! one new
//! summary written by the [`Summarizer`](crate::Summarizer) from the active summary and those
//! messages; the summary replaces them in the context. `instructions` overrides what the
//! summarizer is asked to keep.
//!
//! ```
//! use baton_compact::strategies::Summarize;
//! use baton_compact::{HistoryView, Plan, Strategy};
//! use baton_core::units::ProtocolEvents;
//! use baton_core::{EntryMeta, Seq};
//! let tail: Vec<EntryMeta> = (1..=8)
//!     .map(|s| EntryMeta { events: ProtocolEvents { seq: Seq(s), ..Default::default() }, tokens: 100 })
//!     .collect();
//! let view = HistoryView::new(None, &tail, &[], 0);
//! let s = Summarize { threshold: 500, keep_recent: 3, keep_tokens: Some(300), instructions: None };
//! assert!(matches!(s.plan(&view), Plan::Summarize { .. }));
//! assert_eq!(s.plan(&view).cut(), Some(Seq(5)));
//! ```

use serde::{Deserialize, Serialize};

use crate::{HistoryView, Plan, Strategy};

/// The `summarize` strategy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Summarize {
    /// Context tokens at which it summarizes.
    pub threshold: u64,
    /// Messages at the end that stay whole.
    pub keep_recent: usize,
    /// The most tokens those messages may hold (default a quarter of the threshold).
    pub keep_tokens: Option<u64>,
    /// What the summary must keep, overriding the summarizer's default instructions.
    pub instructions: Option<String>,
}

impl Default for Summarize {
    fn default() -> Self {
        Summarize {
            threshold: 32_000,
            keep_recent: 10,
            keep_tokens: None,
            instructions: None,
        }
    }
}

impl Strategy for Summarize {
    fn name(&self) -> &'static str {
        "summarize"
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        match super::structured::old_part(view, self.threshold, self.keep_recent, self.keep_tokens)
        {
            Ok(through) => Plan::Summarize {
                through,
                instructions: self.instructions.clone(),
            },
            Err(keep) => Plan::Keep(keep),
        }
    }

    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        let keep = self.keep_tokens.unwrap_or(self.threshold / 4);
        match super::structured::old_part(view, 0, self.keep_recent, Some(keep)) {
            Ok(through) => Plan::Summarize {
                through,
                instructions: self.instructions.clone(),
            },
            Err(keep) => Plan::Keep(keep),
        }
    }

    fn limit(&self) -> Option<u64> {
        Some(self.threshold)
    }

    fn needs_model(&self) -> bool {
        true
    }
}

impl super::Configured for Summarize {
    const NAME: &'static str = "summarize";
    const ABOUT: &'static str = "a model writes the working state of the old part (needs a model)";

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
