//! Exit codes, and how an error chooses one: by its kind (`baton_store::ErrorKind`), from one
//! table ([`for_kind`]).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (also: stdout closed early, as by `| head`) |
//! | 1 | not found (a run, summary, seq, operation…), unavailable (the store or a provider cannot be reached), internal (a corrupt store, a store from a newer baton, I/O) |
//! | 2 | usage error (unknown flag, missing argument) |
//! | 3 | conflict: stale base (or stale cleared-results setting), run not active, run already exists, an import that would mix two histories; an operation's request mismatch, in progress, fenced out or failed |
//! | 4 | invalid input: malformed message or candidate, invalid cut, invalid id, a search with no words, an unknown tokenizer, a bad configuration, a missing API key, a `--db` that is not a baton database |
//! | N | `ops run`: a command that failed exits baton with the command's own code (127 and 126 when it cannot start, 128 + N after signal N) |
//!
//! Each cause in an error's chain is classified by [`classify`]; the first one that has a kind
//! decides. The store's errors and rejections classify themselves (`Error::kind`,
//! `Rejection::kind`); the other crates' errors get their kind here, where they surface: a
//! configuration, a message or a transcript that cannot be read is invalid, a provider that
//! cannot be reached is unavailable. The HTTP service maps the same kinds to statuses in its own
//! one table (`baton-server`'s `problem`), so a store error means the same on both.

use baton_core::InvalidCandidate;
use baton_store::{Error as StoreError, ErrorKind, ImportRejection, Rejection};
use baton_view::{ErrorBody, ErrorView, OperationView};

/// Success.
pub const OK: u8 = 0;
/// Not found, unavailable, internal: any other failure.
pub const FAILURE: u8 = 1;
/// Usage error.
pub const USAGE: u8 = 2;
/// Conflict with the stored state.
pub const CONFLICT: u8 = 3;
/// Invalid input.
pub const INVALID: u8 = 4;

/// The exit code of every error of `kind`: the one table.
pub fn for_kind(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound | ErrorKind::Unavailable | ErrorKind::Internal => FAILURE,
        ErrorKind::Conflict => CONFLICT,
        ErrorKind::Invalid => INVALID,
    }
}

/// Input the user gave that cannot be used, with the reason; its kind is invalid.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

/// Something the user named that does not exist (an operation, a key); its kind is not found.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotFound(pub String);

/// A command line baton can parse but not run as asked (`--json` on a command that has no
/// JSON form); exits 2, as a usage error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// A failure the command has already reported on stdout (with `--json`, in its one object: an
/// import's failed files, a history check's problems, a command `ops run` ran that failed);
/// exits 1 with its line on stderr, and no error object is printed after the report.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Reported(pub String);

/// A ledger call that met the stored state: a mismatch, an operation in progress, a fenced-out
/// worker, or a failed operation; its kind is conflict. `code` is its `--json` code, and with
/// `--json` the operation it met is printed beside the error.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct OpConflict {
    /// `mismatch`, `in_progress`, `fenced_out` or `failed`.
    pub code: &'static str,
    /// What happened, for people.
    pub message: String,
    /// The operation as it stands.
    pub operation: Box<OperationView>,
}

/// The kind of one cause of an error, and its finer code, when it has a kind.
pub fn classify(cause: &(dyn std::error::Error + 'static)) -> Option<(ErrorKind, &'static str)> {
    if let Some(c) = cause.downcast_ref::<OpConflict>() {
        return Some((ErrorKind::Conflict, c.code));
    }
    if cause.downcast_ref::<InvalidInput>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_input"));
    }
    if cause.downcast_ref::<NotFound>().is_some() {
        return Some((ErrorKind::NotFound, "not_found"));
    }
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        return Some((e.kind(), e.code()));
    }
    if let Some(r) = cause.downcast_ref::<Rejection>() {
        return Some((r.kind(), r.code()));
    }
    if cause.downcast_ref::<ImportRejection>().is_some() {
        return Some((ErrorKind::Conflict, "import_rejected"));
    }
    if cause.downcast_ref::<InvalidCandidate>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_candidate"));
    }
    if cause.downcast_ref::<baton_core::Error>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_id"));
    }
    if cause
        .downcast_ref::<baton_compact::config::Error>()
        .is_some()
    {
        return Some((ErrorKind::Invalid, "invalid_config"));
    }
    if cause.downcast_ref::<baton_tokens::Error>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_tokenizer"));
    }
    if cause.downcast_ref::<baton_wire::Error>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_message"));
    }
    if cause.downcast_ref::<baton_import::Error>().is_some() {
        return Some((ErrorKind::Invalid, "invalid_transcript"));
    }
    if let Some(e) = cause.downcast_ref::<baton_provider::Error>() {
        return Some(provider(e));
    }
    if let Some(e) = cause.downcast_ref::<baton_runtime::Error>() {
        return Some(runtime(e));
    }
    if let Some(e) = cause.downcast_ref::<baton_runtime::agent::AgentError>() {
        return Some(match e {
            baton_runtime::agent::AgentError::Store(e) => (e.kind(), e.code()),
            baton_runtime::agent::AgentError::Provider(e) => provider(e),
            baton_runtime::agent::AgentError::Compact(e) => runtime(e),
            _ => (ErrorKind::Internal, "internal"),
        });
    }
    if let Some(e) = cause.downcast_ref::<baton_cache::CallError>() {
        use baton_cache::CallError as C;
        return Some(match e {
            C::Store(e) => (e.kind(), e.code()),
            C::Upstream(e) => match e.downcast_ref::<baton_provider::Error>() {
                Some(e) => provider(e),
                None => (ErrorKind::Unavailable, "upstream"),
            },
            C::Denied(_) | C::Key(_) | C::Invalid(_) => (ErrorKind::Invalid, "invalid_call"),
            C::WaitedTooLong(_) => (ErrorKind::Unavailable, "waited_too_long"),
            _ => (ErrorKind::Internal, "internal"),
        });
    }
    if let Some(io) = cause.downcast_ref::<std::io::Error>() {
        return Some(match io.kind() {
            std::io::ErrorKind::NotFound => (ErrorKind::NotFound, "io"),
            _ => (ErrorKind::Internal, "io"),
        });
    }
    None
}

/// A provider's failure: a missing or refused key, or a request the provider refuses, is
/// invalid (the caller fixes it); anything else is the provider being unavailable.
fn provider(e: &baton_provider::Error) -> (ErrorKind, &'static str) {
    use baton_provider::Error as P;
    match e {
        P::MissingKey { .. } => (ErrorKind::Invalid, "missing_key"),
        P::Unauthorized { .. } => (ErrorKind::Invalid, "unauthorized"),
        P::Status { status, .. } if (400..500).contains(status) && *status != 429 => {
            (ErrorKind::Invalid, "provider_refused")
        }
        _ => (ErrorKind::Unavailable, "provider_unavailable"),
    }
}

/// A compaction's failure: the store's own kind; a summarizer that failed is unavailable; a
/// strategy whose candidate the store refused broke its contract (internal).
fn runtime(e: &baton_runtime::Error) -> (ErrorKind, &'static str) {
    match e {
        baton_runtime::Error::Store(e) => (e.kind(), e.code()),
        baton_runtime::Error::Summarize(_) => (ErrorKind::Unavailable, "summarizer_failed"),
        _ => (ErrorKind::Internal, "internal"),
    }
}

/// The kind and code of `err`: the first cause in its chain that has a kind decides; an error
/// with none is internal.
pub fn kind(err: &anyhow::Error) -> (ErrorKind, &'static str) {
    err.chain()
        .find_map(classify)
        .unwrap_or((ErrorKind::Internal, "internal"))
}

/// The exit code for `err`.
pub fn code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|c| c.is::<Usage>()) {
        return USAGE;
    }
    if let Some(failed) = err
        .chain()
        .find_map(|c| c.downcast_ref::<crate::ops::CommandFailed>())
    {
        return failed.code;
    }
    if err.chain().any(|c| c.is::<Reported>()) {
        return FAILURE;
    }
    for_kind(kind(err).0)
}

/// What `--json` prints for `err`: `{"error": {"kind", "code", "message"}}`, with the
/// operation a ledger conflict met beside it; nothing for an error the command has reported
/// already.
pub fn json(err: &anyhow::Error) -> Option<ErrorView> {
    if err
        .chain()
        .any(|c| c.is::<Reported>() || c.is::<crate::ops::CommandFailed>())
    {
        return None;
    }
    if err.chain().any(|c| c.is::<Usage>()) {
        return Some(usage_json(&format!("{err:#}")));
    }
    let (kind, code) = kind(err);
    let mut extra = serde_json::Map::new();
    if let Some(conflict) = err.chain().find_map(|c| c.downcast_ref::<OpConflict>())
        && let Ok(operation) = serde_json::to_value(&conflict.operation)
    {
        extra.insert("operation".to_owned(), operation);
    }
    Some(ErrorView {
        error: ErrorBody {
            kind: kind.as_str().to_owned(),
            code: code.to_owned(),
            message: format!("{err:#}"),
        },
        extra,
    })
}

/// What `--json` prints for a command line that does not parse.
pub fn usage_json(message: &str) -> ErrorView {
    ErrorView {
        error: ErrorBody {
            kind: "usage".to_owned(),
            code: "usage".to_owned(),
            message: message.to_owned(),
        },
        extra: serde_json::Map::new(),
    }
}

/// Whether `err` only says that stdout was closed by its reader.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
