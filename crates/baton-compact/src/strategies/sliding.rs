//! `sliding { keep_last }`: keeps the last `keep_last` messages and drops the rest from the
//! context, rounded to a safe cut (so it may keep a few more, never fewer, and never splits a
//! tool call from its result). Cheap and without a model call; loses what it drops except
//! through recall.
//!
//! ```
//! use baton_compact::strategies::Sliding;
//! use baton_compact::{HistoryView, Plan, Strategy};
//! use baton_core::units::ProtocolEvents;
//! use baton_core::{EntryMeta, Seq};
//! let tail: Vec<EntryMeta> = (1..=5)
//!     .map(|s| EntryMeta { events: ProtocolEvents { seq: Seq(s), ..Default::default() }, tokens: 10 })
//!     .collect();
//! let view = HistoryView::new(None, &tail, &[], 0);
//! let plan = Sliding { keep_last: 2 }.plan(&view);
//! assert_eq!(plan.cut(), Some(Seq(3)));
//! ```

use serde::{Deserialize, Serialize};

use crate::{HistoryView, Keep, Plan, Strategy};

/// The `sliding` strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sliding {
    /// Messages to keep.
    pub keep_last: usize,
}

impl Default for Sliding {
    fn default() -> Self {
        Sliding { keep_last: 20 }
    }
}

impl Strategy for Sliding {
    fn name(&self) -> &'static str {
        "sliding"
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        let Some(desired) = view.seq_keeping_last(self.keep_last) else {
            return Plan::Keep(Keep::NothingOld {
                messages: view.tail().len(),
                keep: self.keep_last,
            });
        };
        match view.safe_cut_at_or_before(desired) {
            Some(through) => Plan::Drop { through },
            None => Plan::Keep(Keep::NoSafeCut { desired }),
        }
    }
}

impl super::Configured for Sliding {
    const NAME: &'static str = "sliding";
    const ABOUT: &'static str = "keeps the last N messages";

    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        if self.keep_last == 0 {
            return Err(("keep_last", "0".into(), "1 or more"));
        }
        Ok(())
    }
}
