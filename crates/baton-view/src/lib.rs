//! The shapes baton answers in: one set of view types for the command line's `--json` output
//! and the HTTP API's bodies, so the two cannot drift apart.
//!
//! Each view is plain data (`Serialize`), built from the store's records by a `From` or `of`
//! that does no IO. With the `openapi` feature every view also derives `utoipa::ToSchema`, so
//! the service's OpenAPI document describes exactly what the command line prints; a crate that
//! needs only the views builds without utoipa.
//!
//! Roles:
//! - [`runs`]: a run ([`RunView`]), a list of runs, and `runs show`'s report.
//! - [`history`]: a stored message ([`EntryView`]), lists and pages of them, what an append
//!   stored.
//! - [`summaries`]: summary versions and their claims.
//! - [`pins`]: a run's pinned seqs.
//! - [`ops`]: the idempotency ledger's operations and attempts.
//! - [`reports`]: the duplicate-work and token-growth reports.
//! - [`keys`]: API keys as listed and as made.
//! - [`error`]: the command line's `--json` error object, `{"error": {"kind", "code",
//!   "message"}}` (the HTTP service answers errors as RFC 9457 problems instead).
//!
//! Times are RFC 3339 strings with milliseconds (`2026-12-02T10:00:00.000Z`), ids are strings
//! or integers as the store has them, and optional members are present as `null`.
//!
//! ```
//! use baton_core::{Run, RunId, RunStatus, Seq, TenantId, Timestamp};
//! use baton_view::RunView;
//!
//! let run = Run {
//!     id: RunId::new("fix-retries").unwrap(),
//!     tenant: TenantId::default_tenant(),
//!     status: RunStatus::Active,
//!     goal: None,
//!     rules: None,
//!     active_summary_id: None,
//!     last_seq: Seq(0),
//!     created_at: Timestamp(0),
//!     cleared: None,
//! };
//! let json = serde_json::to_value(RunView::from(run)).unwrap();
//! assert_eq!(json["tenant"], "default");
//! assert_eq!(json["created_at"], "1970-01-01T00:00:00.000Z");
//! ```

pub mod error;
pub mod history;
pub mod keys;
pub mod ops;
pub mod pins;
pub mod reports;
pub mod runs;
pub mod summaries;

pub use error::{ErrorBody, ErrorView};
pub use history::{Appended, EntryView, HistoryPage, MessageList};
pub use keys::{KeyList, KeyView, NewKeyView};
pub use ops::{
    AttemptOutcomeView, AttemptView, Begun, BegunOutcome, OperationDetail, OperationList,
    OperationStatus, OperationView,
};
pub use pins::Pins;
pub use reports::{DuplicatesReport, DuplicatesRow, GrowthReport, GrowthStep};
pub use runs::{
    DeletedRunView, RunCountsView, RunList, RunOriginView, RunReportView, RunSummaryView, RunView,
    SourceCompactionView,
};
pub use summaries::{
    ClaimChange, ClaimKindName, ClaimView, StatusName, SummaryDiff, SummaryItem, SummaryList,
    SummaryView,
};
