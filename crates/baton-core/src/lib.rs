//! baton's pure core: the types every other crate speaks, and the rules that need no IO.
//!
//! - [`Message`] and [`ContentBlock`]: the vendor-neutral message model.
//! - [`units`]: protocol units and [`units::SafeCut`], the only cut a compaction may use.
//! - [`claim`]: summary claims and their validation.
//! - [`context`]: assembling rules, goal, the active summary and the tail into what the next
//!   model call receives.
//! - [`Run`], [`Entry`], [`Summary`]: what a store keeps.
//! - [`tokens`]: the token-counting seam and the byte proxy; [`prices`]: what tokens cost;
//!   [`usage`]: what a model response cost in tokens, as its provider reported it.
//!
//! This crate performs no IO and depends on no async runtime, driver or HTTP crate.
//!
//! ```
//! use baton_core::{claim, Seq};
//!
//! let claims = claim::parse_candidate(r#"[{"kind":"constraint","text":"read-only","source_seq":1}]"#)?;
//! claim::validate_sources(&claims, Seq(4), Seq(5))?;
//! # Ok::<(), baton_core::claim::InvalidCandidate>(())
//! ```

pub mod claim;
pub mod context;
mod ids;
pub mod key;
mod message;
pub mod prices;
mod record;
pub mod tokens;
pub mod units;
pub mod usage;

pub use claim::{Claim, ClaimKind, InvalidCandidate, Status};
pub use context::{Context, ContextSummary, OverBudget};
pub use ids::{MAX_ID_LEN, RunId, Seq, SummaryId, TenantId, Timestamp};
pub use key::{KeyError, KeyInput, RequestKey};
pub use message::{ContentBlock, MediaSource, Message, Role};
pub use record::{Cleared, Entry, EntryMeta, Run, RunStatus, Summary};

/// Errors of the core's constructors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An id that is empty, too long, `.` or `..`, or has characters outside `[A-Za-z0-9._:-]`.
    #[error(
        "invalid {what} {value:?}: expected 1 to 128 characters of letters, digits, '-', '_', '.' or ':', other than '.' and '..'"
    )]
    InvalidId {
        /// Which kind of id.
        what: &'static str,
        /// The offending value (truncated).
        value: String,
    },
    /// A number a caller gave (an id, a seq, a count) past what a store can hold: the
    /// databases' integers are signed 64-bit.
    #[error("{what} {value} is out of range: at most {max} is accepted", max = i64::MAX)]
    OutOfRange {
        /// What the number is.
        what: &'static str,
        /// The offending value.
        value: u64,
    },
}
