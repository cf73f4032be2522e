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
