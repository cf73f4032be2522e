//! Exit codes, and how an error chooses one.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (also: stdout closed early, as by `| head`) |
//! | 1 | any other failure (not found, not a baton database, I/O…) |
//! | 2 | usage error (unknown flag, missing argument) |
//! | 3 | conflict: stale base (or stale cleared-results setting), run not active, run already exists; an operation's request mismatch, in progress, fenced out or failed |
//! | 4 | invalid input: malformed message or candidate, invalid cut, invalid id, a search with no words, an unknown tokenizer, a seq the run does not have |

use baton_core::InvalidCandidate;
use baton_store::{Error as StoreError, Rejection};

/// Success.
pub const OK: u8 = 0;
/// Any other failure.
pub const FAILURE: u8 = 1;
/// Usage error.
pub const USAGE: u8 = 2;
/// Conflict with the stored state.
pub const CONFLICT: u8 = 3;
/// Invalid input.
pub const INVALID: u8 = 4;

/// Input the user gave that cannot be used, with the reason; exits 4.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

/// A ledger call that met the stored state: a mismatch, an operation in progress, a fenced-out
/// worker, or a failed operation; exits 3. `code` is its `--json` code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OpConflict {
    /// `mismatch`, `in_progress`, `fenced_out` or `failed`.
    pub code: &'static str,
    /// What happened, for people.
    pub message: String,
}

/// The exit code for `err`: the first cause in its chain that has a meaning decides.
pub fn code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(rejection) = cause.downcast_ref::<Rejection>() {
            return match rejection {
                Rejection::Invalid(_) | Rejection::InvalidClear { .. } => INVALID,
                _ => CONFLICT,
            };
        }
        if cause.downcast_ref::<OpConflict>().is_some() {
            return CONFLICT;
        }
        if let Some(failed) = cause.downcast_ref::<crate::ops::CommandFailed>() {
            return failed.code;
        }
        if cause.downcast_ref::<InvalidCandidate>().is_some()
            || cause.downcast_ref::<InvalidInput>().is_some()
            || cause.downcast_ref::<baton_core::Error>().is_some()
        {
            return INVALID;
        }
        if let Some(store) = cause.downcast_ref::<StoreError>() {
            return match store {
                StoreError::RunExists { .. } | StoreError::RunNotActive { .. } => CONFLICT,
                StoreError::InvalidId(_)
                | StoreError::InvalidQuery { .. }
                | StoreError::InvalidLedger { .. }
                | StoreError::InvalidCache { .. }
                | StoreError::SeqNotFound { .. } => INVALID,
                _ => FAILURE,
            };
        }
    }
    FAILURE
}

/// Whether `err` only says that stdout was closed by its reader.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
