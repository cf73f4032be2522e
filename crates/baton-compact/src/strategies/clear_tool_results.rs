//! `clear-tool-results { keep_recent, min_tokens }`: in the assembled context, tool results
//! older than the last `keep_recent` messages and of at least `min_tokens` are replaced by a
//! stub naming the tool, the seq and how to recall it (pinned messages never are), and a
//! later plan never clears less than the run clears already. History keeps every original; the
//! `tool_result` blocks stay (with their ids), so no cut is involved and the tool-call pairing a
//! provider checks is untouched.
//!
//! ```
//! use baton_compact::strategies::ClearToolResults;
//! use baton_compact::{HistoryView, Plan, Strategy};
//! use baton_core::units::ProtocolEvents;
//! use baton_core::{EntryMeta, Seq};
//! let call = |s: u64| EntryMeta { events: ProtocolEvents { seq: Seq(s), uses: vec![format!("t{s}")], results: vec![] }, tokens: 20 };
//! let result = |s: u64| EntryMeta { events: ProtocolEvents { seq: Seq(s), uses: vec![], results: vec![format!("t{}", s - 1)] }, tokens: 2_000 };
//! let tail = vec![call(1), result(2), call(3), result(4)];
//! let view = HistoryView::new(None, &tail, &[], 0);
//! let plan = ClearToolResults { keep_recent: 2, min_tokens: 500 }.plan(&view);
//! assert_eq!(plan, Plan::ClearToolResults { through: Seq(2), min_tokens: 500 });
//! ```

use serde::{Deserialize, Serialize};

use baton_core::Cleared;

use crate::{HistoryView, Keep, Plan, Strategy};

/// The `clear-tool-results` strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClearToolResults {
    /// Messages at the end whose tool results stay whole.
    pub keep_recent: usize,
    /// Tool-result messages smaller than this stay whole.
    pub min_tokens: u32,
}

impl Default for ClearToolResults {
    fn default() -> Self {
        ClearToolResults {
            keep_recent: 10,
            min_tokens: 500,
        }
    }
}

impl Strategy for ClearToolResults {
    fn name(&self) -> &'static str {
        "clear-tool-results"
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        let Some(through) = view.seq_keeping_last(self.keep_recent) else {
            return Plan::Keep(Keep::NothingOld {
                messages: view.tail().len(),
                keep: self.keep_recent,
            });
        };
        // Clearing only moves forward: never back before what the run clears already, never
        // showing again a result it stubs (a lower size bar wins).
        let (through, min_tokens) = match view.cleared() {
            Some(c) => (through.max(c.through), self.min_tokens.min(c.min_tokens)),
            None => (through, self.min_tokens),
        };
        let any = view
            .tail()
            .iter()
            .any(|m| view.clearable(m, through, min_tokens) && !view.is_cleared(m));
        if !any
            || view.cleared()
                == Some(Cleared {
                    through,
                    min_tokens,
                })
        {
            return Plan::Keep(Keep::NothingToClear);
        }
        Plan::ClearToolResults {
            through,
            min_tokens,
        }
    }
}

impl super::Configured for ClearToolResults {
    const NAME: &'static str = "clear-tool-results";
    const ABOUT: &'static str = "shows old large tool results as a stub naming the seq to recall";

    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        if self.keep_recent == 0 {
            return Err(("keep_recent", "0".into(), "1 or more"));
        }
        Ok(())
    }
}
