//! The idempotency ledger's operations and attempts as PostgreSQL statements (schema versions
//! 7, 9 and 13: the live attempt lives in the operation's row, `attempts` holds only
//! superseded attempts).
//!
//! The common paths are one statement each, in autocommit: a new key is one `INSERT` (the
//! operation with its live attempt), a publish one conditional `UPDATE … RETURNING` under the
//! fence, a heartbeat one conditional `UPDATE`. Only the rare paths lock the operation's row
//! (`lock_operation`: `SELECT … FOR UPDATE`, which begins the job's transaction): under READ
//! COMMITTED a lock that waited returns the row's newest version, so workers on any number of
//! connections act on one operation one at a time. A worker paused in the middle of a common
//! path holds no lock.

use async_trait::async_trait;
use baton_core::{TenantId, Timestamp};
use baton_store::backend::{LedgerRows, Outcome, Row, int, lookup};
use baton_store::{Attempt, Error, OpStatus, Operation};

use crate::{Params, PgTx};

/// The columns [`Row::operation`] reads, in its order (a macro so statements can `concat!` it).
macro_rules! operation {
    () => {
        "id, key, request_hash, status, fence, lease_owner, lease_expires_at, result, error,
         retryable, created_at, updated_at, expires_at"
    };
}

/// The operation of a key.
const OPERATION: &str = concat!(
    "SELECT ",
    operation!(),
    " FROM operations WHERE tenant_id = $1 AND key = $2"
);

/// Closes the superseded attempt of fence `$3` that lost its lease as fenced out, keeping what
/// it tried to publish.
const FENCE_OUT: &str = "UPDATE attempts SET ended_at = $4, outcome = 'fenced_out',
        paid = paid OR $5, result = COALESCE($6, result), error = COALESCE($7, error)
    WHERE tenant_id = $1 AND key = $2 AND fence = $3 AND outcome = 'lease_lost'";

#[async_trait]
impl LedgerRows for PgTx {
    async fn insert_operation(
        &mut self,
        tenant: &TenantId,
        op: &Operation,
    ) -> Result<Option<u64>, Error> {
        let sql = "INSERT INTO operations (tenant_id, key, id, request_hash, status, fence,
                lease_owner, lease_expires_at, created_at, updated_at, expires_at,
                attempt_started_at)
            VALUES ($1, $2, $3, $4, 'running',
                1 + COALESCE((SELECT m.fence FROM fence_marks m WHERE m.tenant_id = $1 AND m.key = $2), 0),
                $5, $6, $7, $7, $8, $7)
            ON CONFLICT (tenant_id, key) DO NOTHING
            RETURNING fence";
        let params = [
            &tenant.as_str() as _,
            &op.key as _,
            &op.id as _,
            &&op.request_hash.0[..] as _,
            &op.lease_owner as _,
            &op.lease_expires_at.map(|t| t.0) as _,
            &op.created_at.0 as _,
            &op.expires_at.0 as _,
        ];
        self.one(sql, &params, |r| r.count(0, "an operation's fence"))
            .await
    }

    async fn operation(
        &mut self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<Operation>, Error> {
        self.one(OPERATION, &[&tenant.as_str(), &key], |r| r.operation())
            .await
    }

    async fn lock_operation(
        &mut self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<Operation>, Error> {
        self.begin().await?;
        let sql = format!("{OPERATION} FOR UPDATE");
        self.one(&sql, &[&tenant.as_str(), &key], |r| r.operation())
            .await
    }

    async fn take_over(&mut self, tenant: &TenantId, op: &Operation) -> Result<(), Error> {
        // Both statements see the row as it was: the old attempt moves, the new one starts.
        let sql = "WITH moved AS (
                INSERT INTO attempts (tenant_id, key, owner, fence, started_at, ended_at,
                    outcome, paid, error)
                SELECT tenant_id, key, lease_owner, fence, attempt_started_at,
                    COALESCE(attempt_ended_at, $6), COALESCE(attempt_outcome, 'lease_lost'),
                    attempt_paid, error
                FROM operations
                WHERE tenant_id = $1 AND key = $2 AND attempt_started_at IS NOT NULL
            )
            UPDATE operations SET status = 'running', fence = $3, lease_owner = $4,
                lease_expires_at = $5, error = NULL, retryable = FALSE, updated_at = $6,
                attempt_started_at = $6, attempt_ended_at = NULL, attempt_outcome = NULL,
                attempt_paid = FALSE
            WHERE tenant_id = $1 AND key = $2";
        let params = [
            &tenant.as_str() as _,
            &op.key as _,
            &int(op.fence)? as _,
            &op.lease_owner as _,
            &op.lease_expires_at.map(|t| t.0) as _,
            &op.updated_at.0 as _,
        ];
        self.exec(sql, &params).await
    }

    async fn fence_out(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: &Outcome,
        now: Timestamp,
    ) -> Result<(), Error> {
        let params = [
            &tenant.as_str() as _,
            &key as _,
            // A fence past the integer range names no attempt: nothing to close.
            &lookup(fence) as _,
            &now.0 as _,
            &outcome.paid as _,
            &outcome.result as _,
            &outcome.error as _,
        ];
        self.exec(FENCE_OUT, &params).await
    }

    async fn extend_lease(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Operation>, Error> {
        let sql = concat!(
            "UPDATE operations SET lease_expires_at = $3, updated_at = $4,
                 expires_at = GREATEST(expires_at, $3)
             WHERE tenant_id = $1 AND key = $2 AND fence = $5 AND status = 'running'
             RETURNING ",
            operation!()
        );
        let params: &Params = &[&tenant.as_str(), &key, &until.0, &now.0, &lookup(fence)];
        self.one(sql, params, |r| r.operation()).await
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
        let sql = concat!(
            "UPDATE operations SET status = $3, result = $4, error = $5, retryable = $6,
                 lease_expires_at = NULL, updated_at = $7, attempt_ended_at = $7,
                 attempt_outcome = $3, attempt_paid = attempt_paid OR $9
             WHERE tenant_id = $1 AND key = $2 AND fence = $8 AND status = 'running'
             RETURNING ",
            operation!()
        );
        let params = [
            &tenant.as_str() as _,
            &key as _,
            &outcome.status.as_str() as _,
            &outcome.result as _,
            &outcome.error as _,
            &outcome.retryable as _,
            &now.0 as _,
            &lookup(fence) as _,
            &outcome.paid as _,
        ];
        self.one(sql, &params, |r| r.operation()).await
    }

    async fn attempts(&mut self, tenant: &TenantId, key: &str) -> Result<Vec<Attempt>, Error> {
        self.all(
            "SELECT owner, fence, started_at, ended_at, outcome, paid, result, error
             FROM attempts WHERE tenant_id = $1 AND key = $2
             UNION ALL SELECT lease_owner, fence, attempt_started_at, attempt_ended_at,
                 attempt_outcome, attempt_paid, NULL, error
             FROM operations WHERE tenant_id = $1 AND key = $2 AND attempt_started_at IS NOT NULL
             ORDER BY fence",
            &[&tenant.as_str(), &key],
            |r| r.attempt(),
        )
        .await
    }

    async fn operations(
        &mut self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error> {
        let sql = concat!(
            "SELECT ",
            operation!(),
            " FROM operations WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2::text)
              ORDER BY key"
        );
        let params = [&tenant.as_str() as _, &status.map(OpStatus::as_str) as _];
        self.all(sql, &params, |r| r.operation()).await
    }

    async fn prune_operations(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        // One statement; the attempts go by `ON DELETE CASCADE`.
        let sql = "WITH gone AS (
                DELETE FROM operations
                WHERE tenant_id = $1 AND expires_at <= $2
                  AND NOT (status = 'running' AND lease_expires_at > $2)
                RETURNING tenant_id, key, fence
            ), marked AS (
                INSERT INTO fence_marks (tenant_id, key, fence)
                SELECT tenant_id, key, fence FROM gone
                ON CONFLICT (tenant_id, key)
                DO UPDATE SET fence = GREATEST(fence_marks.fence, excluded.fence)
            )
            SELECT count(*) FROM gone";
        let params = [&tenant.as_str() as _, &now.0 as _];
        let removed = self.one(sql, &params, |r| r.count(0, "a pruned count"));
        Ok(removed.await?.unwrap_or(0))
    }
}
