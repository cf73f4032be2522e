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
//!
//! # Design
//!
//! `operations` and `attempts` (schema v7; since v13 the live attempt, the one holding the current fence, lives in its operation's row and `attempts` keeps only superseded ones: a takeover moves the live attempt there, ended `lease_lost` or as it failed, and starts the new one in the row; [`LedgerStore::operation`] lists both by fence). Every ledger call is one transaction that starts by reading (on PostgreSQL, locking with `FOR UPDATE`) the operation's row, so all check-then-act on one operation is ordered by that row: on SQLite by `BEGIN IMMEDIATE`, on PostgreSQL by the row lock after `INSERT … ON CONFLICT DO NOTHING`; no `SERIALIZABLE` retries.
//! A fence is issued once per holder (`begin` on a new key gives 1, or one more than the highest fence of the key's pruned operations, which `fence_marks` remembers; each takeover the next), and `heartbeat`/`publish` compare it inside the transaction, so a publish is never made by a worker that lost its lease: its attempt is closed `fenced_out` with what it tried to publish (the attempt that published keeps its record; the same outcome published again by its fence is answered with the record). `ops prune` removes only operations past their retention that no live lease holds, and a heartbeat extends retention to the end of the lease.
//! Time comes from the caller (`now`): the CLI passes the clock, the tests drive it by hand, so lease expiry is tested without sleeping and the model test (the conformance suite's ledger model, on both backends) explores interleavings of begin, heartbeat, complete, fail and the clock.
//! The agent's side-effecting tool calls are operations keyed `tool:RUN:TOOL_USE_ID`; their lease is long because nothing takes a tool call over (a running one found on resume is answered "interrupted").
//! The common pair writes one row: `begin` on a new key is one `INSERT` (tried before any read), and `publish` by the current fence one conditional `UPDATE … RETURNING` (`baton-bench`, section 10, measures the pair against a bare insert + update loop). On SQLite both tables are `WITHOUT ROWID`, clustered on their keys.
//! On PostgreSQL the common paths are one statement each, in autocommit (`begin`, `publish`, and `heartbeat`, one conditional `UPDATE`); only the rare paths (a takeover, a fenced-out publish) take a transaction with `FOR UPDATE`. `baton-bench`'s section 11 measures the pair beside `pgbench`'s `simple-update`; and it means a worker paused in the middle of the common path holds no lock. For the rare paths, every baton session sets `idle_in_transaction_session_timeout = 10s` (unless the URL's `options` set it): a paused or stuck process cannot hold an operation's row lock, or a run's, for longer.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, LedgerRows, Outcome};
use crate::history::job;
use crate::{Error, check_text};

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

/// What `begin` does with an existing record, read under its lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer with the record as it is.
    Answer,
    /// Take the lease over: next fence, new owner; the previous attempt moves to the log.
    TakeOver,
}

/// Decides `begin` on an existing record. A mismatch is checked first by the caller.
pub(crate) fn decide_begin(op: &Operation, now: Timestamp) -> Decision {
    match op.status {
        OpStatus::Completed => Decision::Answer,
        OpStatus::Running | OpStatus::Pending => {
            let live = op.lease_expires_at.is_some_and(|at| at > now);
            if live && op.status == OpStatus::Running {
                Decision::Answer
            } else {
                Decision::TakeOver
            }
        }
        OpStatus::Failed if op.retryable => Decision::TakeOver,
        OpStatus::Failed => Decision::Answer,
    }
}

/// The [`Begin`] an answered record gives.
pub(crate) fn answer(op: Operation, given: &RequestKey) -> Begin {
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

/// The prefix of the keys the HTTP gateway keeps its `Idempotency-Key` records under
/// (`baton.gateway/<operation>/<scope>/<key>`). The public ledger API (`/v1/operations`)
/// refuses keys that start with it and does not list them, so no key of a tenant can read,
/// begin, complete or fail a gateway record, and a forged result can never be replayed to a
/// gateway caller.
pub const GATEWAY_PREFIX: &str = "baton.gateway/";

/// Whether `key` is in the gateway's namespace ([`GATEWAY_PREFIX`]).
pub fn is_gateway_key(key: &str) -> bool {
    key.starts_with(GATEWAY_PREFIX)
}

/// Checks an idempotency key: 1 to 255 characters, no control characters, not `.` or `..`.
pub fn check_key(key: &str) -> Result<(), Error> {
    // `.` and `..` are path segments: no HTTP client can name such a key in
    // `/v1/operations/{key}` (issue 20 item 7).
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

/// `now + d`, in milliseconds, saturating; a zero `d` is [`Error::InvalidLedger`] naming `what`.
fn after(now: Timestamp, d: Duration, what: &str) -> Result<Timestamp, Error> {
    let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    if millis == 0 {
        return Err(Error::InvalidLedger {
            detail: format!("{what} must be at least 1 ms"),
        });
    }
    Ok(Timestamp(now.0.saturating_add(millis)))
}

/// How many times `begin` goes round when the record it conflicted with is pruned before it
/// can lock it. Only a pathological begin-and-prune loop on one key could exhaust it.
const BEGIN_ATTEMPTS: usize = 64;

/// Gives the operation to `owner` with the next fence (the attempt it had moves to the log, as
/// `lease_lost` if it was still running): the record as it becomes.
async fn take_over(
    tx: &mut impl LedgerRows,
    tenant: &TenantId,
    op: Operation,
    (owner, lease_until): (&str, Timestamp),
    now: Timestamp,
) -> Result<Begin, Error> {
    let operation = Operation {
        status: OpStatus::Running,
        fence: op.fence + 1,
        lease_owner: Some(owner.to_owned()),
        lease_expires_at: Some(lease_until),
        error: None,
        retryable: false,
        updated_at: now,
        ..op
    };
    tx.take_over(tenant, &operation).await?;
    Ok(Begin::Acquired {
        operation,
        takeover: true,
    })
}

/// Every ledger call is one write job. Its check-then-act starts at the operation's row: a new
/// key is one insert (of the operation, its first attempt in its row) that the primary key lets exactly
/// one of concurrent `begin`s win; anything else locks the row first (on SQLite the write
/// transaction is exclusive already), so workers act on one operation one at a time, each
/// seeing what the one before committed. `heartbeat` and `publish` try their conditional
/// update first and read the record only when it did not act.
#[async_trait]
impl<B: Backend> LedgerStore for B {
    async fn begin(
        &self,
        tenant: &TenantId,
        key: &str,
        request_hash: &RequestKey,
        owner: &str,
        lease: Duration,
        retention: Duration,
        now: Timestamp,
    ) -> Result<Begin, Error> {
        check_key(key)?;
        check_text("lease owner", Some(owner))?;
        let lease_until = after(now, lease, "a lease")?;
        let new = Operation {
            id: uuid::Uuid::now_v7().to_string(),
            key: key.to_owned(),
            request_hash: *request_hash,
            status: OpStatus::Running,
            fence: 1,
            lease_owner: Some(owner.to_owned()),
            lease_expires_at: Some(lease_until),
            result: None,
            error: None,
            retryable: false,
            created_at: now,
            updated_at: now,
            expires_at: after(now, retention, "a retention")?,
        };
        let (tenant, owner) = (tenant.clone(), owner.to_owned());
        self.write_row(job!(|tx| {
            for _ in 0..BEGIN_ATTEMPTS {
                // The common case first: a new key is one insert, no read.
                if let Some(fence) = tx.insert_operation(&tenant, &new).await? {
                    let operation = Operation { fence, ..new };
                    return Ok(Begin::Acquired {
                        operation,
                        takeover: false,
                    });
                }
                let Some(op) = tx.lock_operation(&tenant, &new.key).await? else {
                    continue; // pruned since the insert found it: insert again
                };
                if op.request_hash != new.request_hash {
                    return Ok(answer(op, &new.request_hash));
                }
                return match decide_begin(&op, now) {
                    Decision::Answer => Ok(answer(op, &new.request_hash)),
                    Decision::TakeOver => {
                        let holder = (owner.as_str(), lease_until);
                        take_over(tx, &tenant, op, holder, now).await
                    }
                };
            }
            Err(Error::Unavailable {
                what: format!(
                    "operation {}: it was pruned {BEGIN_ATTEMPTS} times while being begun",
                    new.key
                ),
            })
        }))
        .await
    }

    async fn heartbeat(
        &self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        lease: Duration,
        now: Timestamp,
    ) -> Result<Result<Operation, Fenced>, Error> {
        let until = after(now, lease, "a lease")?;
        let (tenant, key) = (tenant.clone(), key.to_owned());
        self.write_row(job!(|tx| {
            if let Some(op) = tx.extend_lease(&tenant, &key, fence, until, now).await? {
                return Ok(Ok(op));
            }
            Ok(Err(match tx.operation(&tenant, &key).await? {
                None => Fenced::NotFound,
                Some(operation) => Fenced::Out {
                    operation,
                    given: fence,
                },
            }))
        }))
        .await
    }

    async fn publish(
        &self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: Publish<'_>,
        paid: bool,
        now: Timestamp,
    ) -> Result<Result<Operation, Fenced>, Error> {
        let (result, outcome) = match outcome {
            Publish::Complete(v) => (
                Some(v.clone()),
                Outcome {
                    status: OpStatus::Completed,
                    result: Some(v.to_string()),
                    error: None,
                    retryable: false,
                    paid,
                },
            ),
            Publish::Fail { error, retryable } => {
                check_text("error", Some(error))?;
                let outcome = Outcome {
                    status: OpStatus::Failed,
                    result: None,
                    error: Some(error.to_owned()),
                    retryable,
                    paid,
                };
                (None, outcome)
            }
        };
        let (tenant, key) = (tenant.clone(), key.to_owned());
        self.write_row(job!(|tx| {
            // The common case first: the fence holds, and one conditional update publishes.
            if let Some(op) = tx.publish(&tenant, &key, fence, &outcome, now).await? {
                return Ok(Ok(op));
            }
            let Some(op) = tx.lock_operation(&tenant, &key).await? else {
                return Ok(Err(Fenced::NotFound));
            };
            // The same outcome again from the fence that published it (a retry after a lost
            // reply): the record as it stands, nothing written.
            if op.fence == fence
                && op.status == outcome.status
                && op.result == result
                && op.error == outcome.error
                && op.retryable == outcome.retryable
            {
                return Ok(Ok(op));
            }
            if op.status == OpStatus::Running && op.fence == fence {
                // Running with this fence again since the update missed it: publish under the
                // lock now.
                if let Some(op) = tx.publish(&tenant, &key, fence, &outcome, now).await? {
                    return Ok(Ok(op));
                }
            }
            // Kept for audit: what the fenced-out worker tried to publish.
            tx.fence_out(&tenant, &key, fence, &outcome, now).await?;
            Ok(Err(Fenced::Out {
                operation: op,
                given: fence,
            }))
        }))
        .await
    }

    async fn operation(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(Operation, Vec<Attempt>)>, Error> {
        let (tenant, key) = (tenant.clone(), key.to_owned());
        self.read(job!(|tx| {
            let Some(op) = tx.operation(&tenant, &key).await? else {
                return Ok(None);
            };
            Ok(Some((op, tx.attempts(&tenant, &key).await?)))
        }))
        .await
    }

    async fn operations(
        &self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error> {
        let tenant = tenant.clone();
        self.read_one(job!(|tx| { tx.operations(&tenant, status).await }))
            .await
    }

    async fn prune_operations(&self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        let tenant = tenant.clone();
        self.write(job!(|tx| { tx.prune_operations(&tenant, now).await }))
            .await
    }
}

#[cfg(test)]
mod tests;
