//! The idempotency ledger: one intended operation, one outcome.
//!
//! An operation is named by its caller's idempotency key (per tenant) and pinned to the hash
//! of its request. A worker `begin`s it and gets a lease and a *fence*, a number that grows
//! every time the operation changes hands. Only the current fence may `heartbeat`, `complete`
//! or `fail` it: a worker whose lease expired and was taken over is *fenced out*, and whatever
//! it tried to publish is kept in the attempts log for audit, never as the result.
//!
//! Status moves only forward: `running → completed`, `running → failed`, `failed → running`
//! (a retryable failure taken over), `running → running` (an expired lease taken over, with a
//! higher fence). `pending` is the state of an operation recorded without a worker; `begin`
//! always names one, so this version writes `running` directly. A completed operation never
//! changes its result.
//!
//! Every operation takes `now` from its caller: the CLI passes the clock, and tests drive time
//! by hand, so lease expiry is tested without sleeping.
//!
//! The ledger never reads the response cache, nor the cache the ledger: processing the same
//! input again on purpose takes a new idempotency key.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::Error;

/// Where an operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpStatus {
    /// Recorded, no worker yet.
    Pending,
    /// A worker holds the lease.
    Running,
    /// Done; the result is final.
    Completed,
    /// The last attempt failed (retryable or not).
    Failed,
}

impl OpStatus {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            OpStatus::Pending => "pending",
            OpStatus::Running => "running",
            OpStatus::Completed => "completed",
            OpStatus::Failed => "failed",
        }
    }

    /// The status a stored name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => OpStatus::Pending,
            "running" => OpStatus::Running,
            "completed" => OpStatus::Completed,
            "failed" => OpStatus::Failed,
            _ => return None,
        })
    }
}

/// An operation's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// Its id (stable for the record's life).
    pub id: String,
    /// The caller's idempotency key.
    pub key: String,
    /// The hash of the request it was begun with.
    pub request_hash: RequestKey,
    /// Where it stands.
    pub status: OpStatus,
    /// The fence: grows every time the lease changes hands.
    pub fence: u64,
    /// Who holds (or last held) the lease.
    pub lease_owner: Option<String>,
    /// When the lease runs out.
    pub lease_expires_at: Option<Timestamp>,
    /// The result, once completed (JSON).
    pub result: Option<serde_json::Value>,
    /// The last failure's message.
    pub error: Option<String>,
    /// Whether the last failure may be retried.
    pub retryable: bool,
    /// When it was begun.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When `ops prune` may remove it.
    pub expires_at: Timestamp,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// It published the result.
    Completed,
    /// It recorded a failure.
    Failed,
    /// Its lease expired and another worker took over.
    LeaseLost,
    /// It tried to complete or fail after losing the lease; nothing was published.
    FencedOut,
}

impl AttemptOutcome {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::LeaseLost => "lease_lost",
            AttemptOutcome::FencedOut => "fenced_out",
        }
    }

    /// The outcome a stored name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "completed" => AttemptOutcome::Completed,
            "failed" => AttemptOutcome::Failed,
            "lease_lost" => AttemptOutcome::LeaseLost,
            "fenced_out" => AttemptOutcome::FencedOut,
            _ => return None,
        })
    }
}

/// One worker's attempt at an operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The worker.
    pub owner: String,
    /// The fence it held.
    pub fence: u64,
    /// When it began.
    pub started_at: Timestamp,
    /// When it ended, if it did.
    pub ended_at: Option<Timestamp>,
    /// How it ended, if it did.
    pub outcome: Option<AttemptOutcome>,
    /// Whether it made a paid external call (as the worker reported).
    pub paid: bool,
    /// What it tried to publish, kept for audit when it was fenced out (a published result is
    /// the operation's, and not copied here).
    pub result: Option<serde_json::Value>,
    /// The error it reported.
    pub error: Option<String>,
}

/// What `begin` found or did.
#[derive(Clone, Debug, PartialEq)]
pub enum Begin {
    /// The caller holds the lease with `fence` and should do the work.
    Acquired {
        /// The record.
        operation: Operation,
        /// Whether it took over an expired lease or a retryable failure.
        takeover: bool,
    },
    /// Already done: here is the result; do not execute.
    Completed(Operation),
    /// Another worker holds a live lease.
    InProgress(Operation),
    /// Failed, and not retryable.
    Failed(Operation),
    /// The key was begun with another request: a caller error.
    Mismatch {
        /// The record.
        operation: Operation,
        /// The hash the caller sent.
        given: RequestKey,
    },
}

/// A `heartbeat`, `complete` or `fail` that did not act.
// `Out` carries the record as it stands so the caller can say why; `NotFound` is rare and
// small. Boxing the record would only move the size to every `Out`.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Fenced {
    /// The caller's fence is not the current one (or the operation is no longer running):
    /// nothing was published.
    Out {
        /// The record as it stands.
        operation: Operation,
        /// The fence the caller gave.
        given: u64,
    },
    /// No such operation.
    NotFound,
}

/// What a worker publishes.
#[derive(Clone, Debug, PartialEq)]
pub enum Publish<'a> {
    /// The result.
    Complete(&'a serde_json::Value),
    /// A failure.
    Fail {
        /// What went wrong.
        error: &'a str,
        /// Whether another attempt may be made.
        retryable: bool,
    },
}

/// How long records are kept by default: a day.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// The store half of the idempotency ledger.
///
/// Contract, for every backend: each method is one transaction; of concurrent `begin`s on a
/// new key exactly one is `Acquired`; of concurrent takeovers of an expired lease exactly one
/// wins, with the next fence; `heartbeat`, `publish` act only for the current fence of a
/// running operation and leave a fenced-out attempt's result in the attempts log.
#[async_trait]
pub trait LedgerStore: Send + Sync {
    /// Creates the operation (running, fence 1, for `owner`) or reads and acts on the existing
    /// one; see [`Begin`].
    #[allow(clippy::too_many_arguments)]
    async fn begin(
        &self,
        tenant: &TenantId,
        key: &str,
        request_hash: &RequestKey,
        owner: &str,
        lease: Duration,
        retention: Duration,
        now: Timestamp,
    ) -> Result<Begin, Error>;

    /// Extends the lease of the running operation held with `fence` to `now + lease`.
    async fn heartbeat(
        &self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        lease: Duration,
        now: Timestamp,
    ) -> Result<Result<Operation, Fenced>, Error>;

    /// Publishes the outcome of the attempt holding `fence`; `paid` records whether it made a
    /// paid external call.
    async fn publish(
        &self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: Publish<'_>,
        paid: bool,
        now: Timestamp,
    ) -> Result<Result<Operation, Fenced>, Error>;

    /// The operation and its attempts, oldest first.
    async fn operation(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(Operation, Vec<Attempt>)>, Error>;

    /// The tenant's operations, optionally of one status, by key.
    async fn operations(
        &self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error>;

    /// Removes the tenant's records whose retention ended before `now` (and their attempts);
    /// returns how many operations.
    async fn prune_operations(&self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error>;
}

/// The key a tool hands to a system with its own idempotency contract (an `Idempotency-Key`
/// header): the same for every attempt of one operation, different for every other.
pub fn downstream_key(tenant: &TenantId, key: &str) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"baton.ledger.v1\0");
    h.update(tenant.as_str().as_bytes());
    h.update(b"\0");
    h.update(key.as_bytes());
    let digest: [u8; 32] = h.finalize().into();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("baton-{hex}")
}

/// What `begin` does with an existing record, decided once for both backends: the backend
/// reads the record (locked), asks this, and writes what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Answer with the record as it is.
    Answer,
    /// Take the lease over: next fence, new owner; `lease_lost` says whether a running
    /// attempt is closed as having lost its lease.
    TakeOver {
        /// Whether the previous holder was still marked running.
        lease_lost: bool,
    },
}

/// Decides `begin` on an existing record. A mismatch is checked first by the caller.
pub fn decide_begin(op: &Operation, now: Timestamp) -> Decision {
    match op.status {
        OpStatus::Completed => Decision::Answer,
        OpStatus::Running | OpStatus::Pending => {
            let live = op.lease_expires_at.is_some_and(|at| at > now);
            if live && op.status == OpStatus::Running {
                Decision::Answer
            } else {
                Decision::TakeOver {
                    lease_lost: op.status == OpStatus::Running,
                }
            }
        }
        OpStatus::Failed if op.retryable => Decision::TakeOver { lease_lost: false },
        OpStatus::Failed => Decision::Answer,
    }
}

/// The [`Begin`] an answered record gives.
pub fn answer(op: Operation, given: &RequestKey) -> Begin {
    if op.request_hash != *given {
        return Begin::Mismatch {
            operation: op,
            given: *given,
        };
    }
    match op.status {
        OpStatus::Completed => Begin::Completed(op),
        OpStatus::Failed => Begin::Failed(op),
        OpStatus::Running | OpStatus::Pending => Begin::InProgress(op),
    }
}

/// Checks an idempotency key: 1 to 255 characters, no control characters, not `.` or `..`
/// (path segments: no HTTP client can name such a key in `/v1/operations/{key}`).
pub fn check_key(key: &str) -> Result<(), Error> {
    let dots = matches!(key, "." | "..");
    if key.is_empty() || key.len() > 255 || dots || key.chars().any(char::is_control) {
        return Err(Error::InvalidLedger {
            detail: format!(
                "idempotency key {:?}: expected 1 to 255 characters, none of them control characters, other than '.' and '..'",
                key.chars().take(64).collect::<String>()
            ),
        });
    }
    Ok(())
}

/// Checks a text the ledger keeps as text (a failure's `error`, an attempt's `owner`): no
/// NUL character ([`crate::nul_at`]).
pub fn check_text(field: &str, text: &str) -> Result<(), Error> {
    match crate::nul_at(text) {
        Some(at) => Err(Error::InvalidLedger {
            detail: format!(
                "{field} has a NUL character (U+0000) at character {at}, which the store does not keep; remove it"
            ),
        }),
        None => Ok(()),
    }
}

/// A new operation id: a time-ordered UUID (v7).
pub fn new_operation_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// `now + d`, in milliseconds, saturating; a zero `d` is [`Error::InvalidLedger`] naming `what`.
pub fn after(now: Timestamp, d: Duration, what: &str) -> Result<Timestamp, Error> {
    let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if millis == 0 {
        return Err(Error::InvalidLedger {
            detail: format!("{what} must be at least 1 ms"),
        });
    }
    Ok(Timestamp(now.0.saturating_add(millis)))
}

#[cfg(test)]
mod tests;
