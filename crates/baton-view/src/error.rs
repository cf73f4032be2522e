//! The command line's error object: with `--json`, a failed command prints exactly this on
//! stdout (and exits with the code its kind maps to).
//!
//! ```json
//! {"error": {"kind": "not_found", "code": "run_not_found", "message": "run \"r\" not found"}}
//! ```
//!
//! `kind` is one of `baton_store::ErrorKind`'s names (`not_found`, `conflict`, `invalid`,
//! `unavailable`, `internal`), or `usage` for a command line that does not parse; `code` names
//! the error more finely (a store error's variant, a rejection, a ledger conflict) and is the
//! kind's name when there is nothing finer to say. Some errors carry members of their own
//! beside `error`: a ledger conflict carries the `operation` it met.

use serde::Serialize;

/// `{"error": {…}}`, and the members some errors add.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorView {
    /// What went wrong.
    pub error: ErrorBody,
    /// Members of some errors (a ledger conflict's `operation`).
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// The kind: `not_found`, `conflict`, `invalid`, `unavailable`, `internal`, or `usage`.
    pub kind: String,
    /// A finer code (`run_not_found`, `stale_base`, `mismatch`, …), or the kind's name.
    pub code: String,
    /// What happened, for people: the same one line the command prints on stderr.
    pub message: String,
}
