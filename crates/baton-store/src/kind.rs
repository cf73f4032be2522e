//! One classification of what went wrong: [`ErrorKind`], and [`Error::kind`] for the store's
//! errors ([`Rejection::kind`] for an install's expected rejections).
//!
//! Every interface answers from the kind alone: the command line maps kinds to exit codes in
//! one table (`baton-cli`'s `exit`), the HTTP service maps them to statuses in another
//! (`baton-server`'s `problem`), and neither looks at a variant. The store decides what a
//! variant means; it never picks an exit code or an HTTP status.
//!
//! Where the interfaces used to disagree, the kind decides:
//! - [`Error::SeqNotFound`] (a seq the run does not have) is [`ErrorKind::NotFound`], like a
//!   missing run or summary: what the caller named does not exist (it was exit 4, invalid
//!   input, on the command line and 404 over HTTP).
//! - [`Error::InvalidKey`] (an API key that cannot be made or stored as asked) is
//!   [`ErrorKind::Invalid`] (it was exit 1 and 400).
//! - [`Error::Import`] (an import that would mix two histories) is [`ErrorKind::Conflict`]:
//!   the source conflicts with what is stored (it was exit 1 and 409).
//! - [`Error::NotABatonDatabase`] and [`Error::InvalidUrl`] are [`ErrorKind::Invalid`]: the
//!   `--db` value names something baton cannot use, which the caller fixes by naming another
//!   (they were exit 1).
//! - [`Error::SchemaTooNew`] is [`ErrorKind::Internal`]: no request can fix it; baton must be
//!   upgraded.
//! - [`Error::InvalidId`] is [`ErrorKind::Internal`]: a caller's ids are checked before they
//!   reach the store (as `baton_core::Error`, which is invalid input), so an id the store read
//!   or built that is not an id is a corrupt store (it was exit 4 and 400). One exception: a
//!   number past the databases' signed 64-bit range (`baton_core::Error::OutOfRange`, from
//!   `backend::int`) can only have come from a caller, so it is [`ErrorKind::Invalid`], code
//!   `out_of_range` (issue 20 item 4).

use crate::{Error, Rejection};

/// What kind of failure an error is: what its caller can do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// What the caller named does not exist (for its tenant): a run, a summary, a seq.
    NotFound,
    /// The request conflicts with what is stored: the id is taken, the run no longer takes
    /// writes, another writer moved the pointer first, the source was edited since its import.
    /// Read the stored state again before deciding.
    Conflict,
    /// The request cannot be used as given: a malformed value, a search with no words, a zero
    /// lease, an invalid candidate, a `--db` that is not a baton database. Fix the request.
    Invalid,
    /// The store (or an upstream) cannot be reached now. Try again later.
    Unavailable,
    /// Nothing the caller can fix: a corrupt store, a database driver failure, a store written
    /// by a newer baton.
    Internal,
}

impl ErrorKind {
    /// Every kind, in a fixed order.
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::Invalid,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];

    /// Its name: `not_found`, `conflict`, `invalid`, `unavailable`, `internal`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Error {
    /// What kind of failure this is. Every variant has exactly one kind (the match has no
    /// wildcard, so a new variant must choose).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidId(baton_core::Error::OutOfRange { .. }) => ErrorKind::Invalid,
            Error::UnknownTenant { .. }
            | Error::RunNotFound { .. }
            | Error::SummaryNotFound { .. }
            | Error::SeqNotFound { .. } => ErrorKind::NotFound,
            Error::RunExists { .. } | Error::RunNotActive { .. } | Error::Import(_) => {
                ErrorKind::Conflict
            }
            Error::NotABatonDatabase { .. }
            | Error::InvalidUrl { .. }
            | Error::InvalidQuery { .. }
            | Error::InvalidCache { .. }
            | Error::InvalidLedger { .. }
            | Error::InvalidKey { .. }
            | Error::InvalidText { .. } => ErrorKind::Invalid,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
            Error::SchemaTooNew { .. }
            | Error::Corrupt { .. }
            | Error::InvalidId(_)
            | Error::Backend(_) => ErrorKind::Internal,
        }
    }

    /// The variant's name in snake case (`run_not_found`, `seq_not_found`, `corrupt`, …): a
    /// stable code finer than the kind, for machine-readable errors.
    pub fn code(&self) -> &'static str {
        match self {
            Error::UnknownTenant { .. } => "unknown_tenant",
            Error::RunNotFound { .. } => "run_not_found",
            Error::SummaryNotFound { .. } => "summary_not_found",
            Error::SeqNotFound { .. } => "seq_not_found",
            Error::RunExists { .. } => "run_exists",
            Error::RunNotActive { .. } => "run_not_active",
            Error::NotABatonDatabase { .. } => "not_a_baton_database",
            Error::SchemaTooNew { .. } => "schema_too_new",
            Error::InvalidUrl { .. } => "invalid_url",
            Error::Unavailable { .. } => "unavailable",
            Error::Corrupt { .. } => "corrupt",
            Error::InvalidQuery { .. } => "invalid_query",
            Error::InvalidCache { .. } => "invalid_cache",
            Error::InvalidLedger { .. } => "invalid_ledger",
            Error::InvalidKey { .. } => "invalid_key",
            Error::InvalidText { .. } => "invalid_text",
            Error::Import(_) => "import_rejected",
            Error::InvalidId(baton_core::Error::OutOfRange { .. }) => "out_of_range",
            Error::InvalidId(_) => "invalid_id",
            Error::Backend(_) => "backend",
        }
    }
}

impl Rejection {
    /// What kind of failure the rejection is, when a caller turns it into one: a stale base or
    /// setting and a run that is not active are conflicts; an invalid candidate or setting is
    /// invalid.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Rejection::StaleBase { .. }
            | Rejection::StaleCleared { .. }
            | Rejection::RunNotActive { .. } => ErrorKind::Conflict,
            Rejection::Invalid(_) | Rejection::InvalidClear { .. } => ErrorKind::Invalid,
        }
    }

    /// Its code: `stale_base`, `stale_setting`, `run_not_active`, `invalid_candidate` or
    /// `invalid_setting`.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::StaleBase { .. } => "stale_base",
            Rejection::StaleCleared { .. } => "stale_setting",
            Rejection::RunNotActive { .. } => "run_not_active",
            Rejection::Invalid(_) => "invalid_candidate",
            Rejection::InvalidClear { .. } => "invalid_setting",
        }
    }
}
