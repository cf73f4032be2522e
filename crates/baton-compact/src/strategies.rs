//! The strategies, one file each, each with the configuration it takes.

mod budget;
mod clear_tool_results;
mod none;
mod sliding;
mod structured;
mod summarize;

pub use budget::Budget;
pub use clear_tool_results::ClearToolResults;
pub use none::NoCompaction;
pub use sliding::Sliding;
pub use structured::Structured;
pub use summarize::Summarize;

use baton_core::{EntryMeta, Seq};

/// Whether `m` holds tool results a `clear-tool-results` plan through `through` stubs.
pub(crate) fn clearable(m: &EntryMeta, through: Seq, min_tokens: u32) -> bool {
    m.seq() <= through && m.tokens >= min_tokens && !m.events.results.is_empty()
}
