//! `none`: never compacts. The baseline every other strategy is measured against: the context
//! is the whole history, and input tokens over a run grow with the square of its length.
//!
//! ```
//! use baton_compact::strategies::NoCompaction;
//! use baton_compact::{HistoryView, Keep, Plan, Strategy};
//! let view = HistoryView::new(None, &[], &[], 0);
//! assert_eq!(NoCompaction.plan(&view), Plan::Keep(Keep::Baseline));
//! ```

use serde::{Deserialize, Serialize};

use crate::{HistoryView, Keep, Plan, Strategy};

/// The `none` strategy. It has no settings (`[compaction.none]` is an empty table).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(from = "Table", into = "Table")]
pub struct NoCompaction;

/// `none`'s table: empty.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {}

impl From<Table> for NoCompaction {
    fn from(_: Table) -> Self {
        NoCompaction
    }
}

impl From<NoCompaction> for Table {
    fn from(_: NoCompaction) -> Self {
        Table {}
    }
}

impl Strategy for NoCompaction {
    fn name(&self) -> &'static str {
        "none"
    }

    fn plan(&self, _view: &HistoryView<'_>) -> Plan {
        Plan::Keep(Keep::Baseline)
    }
}

impl super::Configured for NoCompaction {
    const NAME: &'static str = "none";
    const ABOUT: &'static str = "never compacts: the baseline";
}
