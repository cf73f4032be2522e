//! The idempotency ledger: operations, their attempts, and what `begin` did.
//!
//! An operation's members sit at the top level of every object that carries one: `begin`
//! adds `outcome` beside them, and an operation's detail adds `attempts`.

use baton_core::TenantId;
use baton_store::ledger::downstream_key;
use baton_store::{Attempt, AttemptOutcome, OpStatus, Operation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An operation's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OperationStatus {
    /// Recorded, no worker yet.
    Pending,
    /// A worker holds the lease.
    Running,
    /// Done; the result is final.
    Completed,
    /// The last attempt failed.
    Failed,
}

impl From<OpStatus> for OperationStatus {
    fn from(s: OpStatus) -> Self {
        match s {
            OpStatus::Pending => OperationStatus::Pending,
            OpStatus::Running => OperationStatus::Running,
            OpStatus::Completed => OperationStatus::Completed,
            OpStatus::Failed => OperationStatus::Failed,
        }
    }
}

impl From<OperationStatus> for OpStatus {
    fn from(s: OperationStatus) -> Self {
        match s {
            OperationStatus::Pending => OpStatus::Pending,
            OperationStatus::Running => OpStatus::Running,
            OperationStatus::Completed => OpStatus::Completed,
            OperationStatus::Failed => OpStatus::Failed,
        }
    }
}

/// An operation's record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperationView {
    /// Its id (stable for the record's life).
    pub id: String,
    /// The idempotency key.
    pub key: String,
    /// The hash of the request it was begun with (64 hex digits).
    pub request_hash: String,
    /// Where it stands.
    pub status: OperationStatus,
    /// The current fence: grows every time the lease changes hands.
    pub fence: u64,
    /// Who holds (or last held) the lease.
    pub lease_owner: Option<String>,
    /// When the lease runs out (RFC 3339).
    pub lease_expires_at: Option<String>,
    /// The result, once completed.
    pub result: Option<Value>,
    /// The last failure's message.
    pub error: Option<String>,
    /// Whether the last failure may be retried.
    pub retryable: bool,
    /// When it was begun (RFC 3339).
    pub created_at: String,
    /// When it last changed (RFC 3339).
    pub updated_at: String,
    /// When the record may be pruned (RFC 3339).
    pub expires_at: String,
    /// The key to hand a downstream system with its own idempotency contract: the same for
    /// every attempt of this operation, different for every other.
    pub downstream_key: String,
}

impl OperationView {
    /// The view of `tenant`'s operation `op`.
    pub fn of(tenant: &TenantId, op: &Operation) -> Self {
        OperationView {
            downstream_key: downstream_key(tenant, &op.key),
            id: op.id.clone(),
            key: op.key.clone(),
            request_hash: op.request_hash.to_string(),
            status: op.status.into(),
            fence: op.fence,
            lease_owner: op.lease_owner.clone(),
            lease_expires_at: op.lease_expires_at.map(|t| t.to_string()),
            result: op.result.clone(),
            error: op.error.clone(),
            retryable: op.retryable,
            created_at: op.created_at.to_string(),
            updated_at: op.updated_at.to_string(),
            expires_at: op.expires_at.to_string(),
        }
    }
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcomeView {
    /// It published the result.
    Completed,
    /// It recorded a failure.
    Failed,
    /// Its lease expired and another worker took over.
    LeaseLost,
    /// It tried to publish after losing the lease; nothing was published.
    FencedOut,
}

impl From<AttemptOutcome> for AttemptOutcomeView {
    fn from(o: AttemptOutcome) -> Self {
        match o {
            AttemptOutcome::Completed => AttemptOutcomeView::Completed,
            AttemptOutcome::Failed => AttemptOutcomeView::Failed,
            AttemptOutcome::LeaseLost => AttemptOutcomeView::LeaseLost,
            AttemptOutcome::FencedOut => AttemptOutcomeView::FencedOut,
        }
    }
}

/// One worker's attempt.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptView {
    /// The worker.
    pub owner: String,
    /// The fence it held.
    pub fence: u64,
    /// When it began (RFC 3339).
    pub started_at: String,
    /// When it ended, if it did (RFC 3339).
    pub ended_at: Option<String>,
    /// How it ended, if it did.
    pub outcome: Option<AttemptOutcomeView>,
    /// Whether it made a paid external call.
    pub paid: bool,
    /// What it tried to publish, kept for audit when it was fenced out.
    pub result: Option<Value>,
    /// The error it reported.
    pub error: Option<String>,
}

impl From<&Attempt> for AttemptView {
    fn from(a: &Attempt) -> Self {
        AttemptView {
            owner: a.owner.clone(),
            fence: a.fence,
            started_at: a.started_at.to_string(),
            ended_at: a.ended_at.map(|t| t.to_string()),
            outcome: a.outcome.map(AttemptOutcomeView::from),
            paid: a.paid,
            result: a.result.clone(),
            error: a.error.clone(),
        }
    }
}

/// What `begin` gave: the operation's members, and `outcome`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Begun {
    /// `acquired` or `took_over` (do the work with `fence`), `completed` (the work is done;
    /// `result` is its result).
    pub outcome: BegunOutcome,
    /// The record.
    #[serde(flatten)]
    pub operation: OperationView,
}

/// What `begin` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BegunOutcome {
    /// A new operation: the caller holds the lease.
    Acquired,
    /// The caller took over an expired lease or a retryable failure.
    TookOver,
    /// The operation completed before; nothing is to be done.
    Completed,
}

/// An operation's members, and its attempts.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperationDetail {
    /// The record.
    #[serde(flatten)]
    pub operation: OperationView,
    /// Its attempts, oldest first.
    pub attempts: Vec<AttemptView>,
}

impl OperationDetail {
    /// `tenant`'s operation `op` with its `attempts`.
    pub fn of(tenant: &TenantId, op: &Operation, attempts: &[Attempt]) -> Self {
        OperationDetail {
            operation: OperationView::of(tenant, op),
            attempts: attempts.iter().map(AttemptView::from).collect(),
        }
    }
}

/// The tenant's operations.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperationList {
    /// By key.
    pub operations: Vec<OperationView>,
}

impl OperationList {
    /// The list of `tenant`'s `ops`.
    pub fn of(tenant: &TenantId, ops: &[Operation]) -> Self {
        OperationList {
            operations: ops.iter().map(|o| OperationView::of(tenant, o)).collect(),
        }
    }
}
