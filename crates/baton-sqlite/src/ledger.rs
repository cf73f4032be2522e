//! The idempotency ledger's operations and attempts as SQLite statements (schema versions 7,
//! 9 and 13: both tables `WITHOUT ROWID`, clustered on their keys; the live attempt lives in
//! the operation's row, so `begin` on a new key is one `INSERT` and a publish one `UPDATE …
//! RETURNING`, and `attempts` holds only superseded attempts). The writer thread's
//! `BEGIN IMMEDIATE` transaction orders every worker in every process, so locking an operation
//! is reading it.

use async_trait::async_trait;
use baton_core::{TenantId, Timestamp};
use baton_store::backend::{LedgerRows, Outcome, Row, int, lookup};
use baton_store::{Attempt, Error, OpStatus, Operation};
use rusqlite::params;

use crate::SqliteTx;

/// The columns [`Row::operation`] reads, in its order.
const OPERATION: &str = "id, key, request_hash, status, fence, lease_owner, lease_expires_at,
    result, error, retryable, created_at, updated_at, expires_at";

/// Closes the superseded attempt of fence `?3` that lost its lease as fenced out, keeping what
/// it tried to publish.
const FENCE_OUT: &str = "UPDATE attempts SET ended_at = ?4, outcome = 'fenced_out',
        paid = paid OR ?5, result = COALESCE(?6, result), error = COALESCE(?7, error)
    WHERE tenant_id = ?1 AND key = ?2 AND fence = ?3 AND outcome = 'lease_lost'";

/// An operation's removable records: past retention, and held by no live lease.
const PRUNABLE: &str =
    "tenant_id = ?1 AND expires_at <= ?2 AND NOT (status = 'running' AND lease_expires_at > ?2)";

#[async_trait]
impl LedgerRows for SqliteTx {
    async fn insert_operation(
        &mut self,
        tenant: &TenantId,
        op: &Operation,
    ) -> Result<Option<u64>, Error> {
        self.one(
            "INSERT INTO operations (tenant_id, key, id, request_hash, status, fence, lease_owner,
                 lease_expires_at, created_at, updated_at, expires_at, attempt_started_at)
             VALUES (?1, ?2, ?3, ?4, 'running',
                 1 + COALESCE((SELECT fence FROM fence_marks WHERE tenant_id = ?1 AND key = ?2), 0),
                 ?5, ?6, ?7, ?7, ?8, ?7)
             ON CONFLICT (tenant_id, key) DO NOTHING RETURNING fence",
            params![
                tenant.as_str(),
                op.key,
                op.id,
                &op.request_hash.0[..],
                op.lease_owner,
                op.lease_expires_at.map(|t| t.0),
                op.created_at.0,
                op.expires_at.0
            ],
            |r| r.count(0, "an operation's fence"),
        )
    }

    async fn operation(
        &mut self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<Operation>, Error> {
        let sql = format!("SELECT {OPERATION} FROM operations WHERE tenant_id = ?1 AND key = ?2");
        self.one(&sql, [tenant.as_str(), key], |r| r.operation())
    }

    async fn take_over(&mut self, tenant: &TenantId, op: &Operation) -> Result<(), Error> {
        // The live attempt moves to the log; one still open ends `lease_lost` now.
        self.exec(
            "INSERT INTO attempts SELECT tenant_id, key, lease_owner, fence, attempt_started_at,
                 COALESCE(attempt_ended_at, ?3), COALESCE(attempt_outcome, 'lease_lost'),
                 attempt_paid, NULL, error
             FROM operations WHERE tenant_id = ?1 AND key = ?2 AND attempt_started_at IS NOT NULL",
            params![tenant.as_str(), op.key, op.updated_at.0],
        )?;
        self.exec(
            "UPDATE operations SET status = 'running', fence = ?3, lease_owner = ?4,
                 lease_expires_at = ?5, error = NULL, retryable = 0, updated_at = ?6,
                 attempt_started_at = ?6, attempt_ended_at = NULL, attempt_outcome = NULL,
                 attempt_paid = 0
             WHERE tenant_id = ?1 AND key = ?2",
            params![
                tenant.as_str(),
                op.key,
                int(op.fence)?,
                op.lease_owner,
                op.lease_expires_at.map(|t| t.0),
                op.updated_at.0
            ],
        )
        .map(drop)
    }

    async fn fence_out(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: &Outcome,
        now: Timestamp,
    ) -> Result<(), Error> {
        let values = params![
            tenant.as_str(),
            key,
            lookup(fence),
            now.0,
            outcome.paid,
            outcome.result,
            outcome.error
        ];
        self.exec(FENCE_OUT, values).map(drop)
    }

    async fn extend_lease(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Operation>, Error> {
        let sql = format!(
            "UPDATE operations SET lease_expires_at = ?3, updated_at = ?4,
                 expires_at = MAX(expires_at, ?3)
             WHERE tenant_id = ?1 AND key = ?2 AND fence = ?5 AND status = 'running'
             RETURNING {OPERATION}"
        );
        let values = params![tenant.as_str(), key, until.0, now.0, lookup(fence)];
        self.one(&sql, values, |r| r.operation())
    }

    async fn publish(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: &Outcome,
        now: Timestamp,
    ) -> Result<Option<Operation>, Error> {
        // The attempt that published keeps no copy of the result: it is the operation's.
        let sql = format!(
            "UPDATE operations SET status = ?3, result = ?4, error = ?5, retryable = ?6,
                 lease_expires_at = NULL, updated_at = ?7, attempt_ended_at = ?7,
                 attempt_outcome = ?3, attempt_paid = attempt_paid OR ?9
             WHERE tenant_id = ?1 AND key = ?2 AND fence = ?8 AND status = 'running'
             RETURNING {OPERATION}"
        );
        let values = params![
            tenant.as_str(),
            key,
            outcome.status.as_str(),
            outcome.result,
            outcome.error,
            outcome.retryable,
            now.0,
            lookup(fence),
            outcome.paid
        ];
        self.one(&sql, values, |r| r.operation())
    }

    async fn attempts(&mut self, tenant: &TenantId, key: &str) -> Result<Vec<Attempt>, Error> {
        self.all(
            "SELECT owner, fence, started_at, ended_at, outcome, paid, result, error
             FROM attempts WHERE tenant_id = ?1 AND key = ?2
             UNION ALL SELECT lease_owner, fence, attempt_started_at, attempt_ended_at,
                 attempt_outcome, attempt_paid, NULL, error
             FROM operations WHERE tenant_id = ?1 AND key = ?2 AND attempt_started_at IS NOT NULL
             ORDER BY fence",
            [tenant.as_str(), key],
            |r| r.attempt(),
        )
    }

    async fn operations(
        &mut self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error> {
        let sql = format!(
            "SELECT {OPERATION} FROM operations
             WHERE tenant_id = ?1 AND (?2 IS NULL OR status = ?2) ORDER BY key"
        );
        let values = params![tenant.as_str(), status.map(OpStatus::as_str)];
        self.all(&sql, values, |r| r.operation())
    }

    async fn prune_operations(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        let values = params![tenant.as_str(), now.0];
        self.exec(
            &format!(
                "INSERT INTO fence_marks (tenant_id, key, fence)
                 SELECT tenant_id, key, fence FROM operations WHERE {PRUNABLE}
                 ON CONFLICT (tenant_id, key) DO UPDATE SET fence = MAX(fence, excluded.fence)"
            ),
            values,
        )?;
        // The attempts go by `ON DELETE CASCADE` (foreign keys are on in every connection).
        let removed = self.exec(&format!("DELETE FROM operations WHERE {PRUNABLE}"), values)?;
        Ok(removed as u64)
    }
}
