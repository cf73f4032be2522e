//! The idempotency ledger on PostgreSQL (schema version 7). Every method is one transaction;
//! the rules of `begin` are `baton_store::ledger`'s, shared with SQLite.
//!
//! Locks: every check-then-act on an operation starts by taking the operation's row lock
//! (`SELECT … FOR UPDATE` on its `operations` row) and holds it until commit, so workers on any
//! number of connections act on one operation one at a time, each seeing what the one before
//! it committed (under READ COMMITTED a `FOR UPDATE` that waited returns the row's newest
//! version). The attempts of an operation are only written under that lock, so they need none
//! of their own. No `SERIALIZABLE` is needed: every conflicting writer starts at the same row,
//! so one lock orders them and there are no serialization failures to retry.
//!
//! - `begin` first inserts the operation with `ON CONFLICT (tenant_id, key) DO NOTHING`: of
//!   concurrent `begin`s on a new key the primary key lets exactly one insert (the others wait
//!   for it to commit, then insert nothing). One that inserted nothing locks the row and
//!   decides with `decide_begin`/`answer`: of concurrent takeovers of an expired lease the
//!   first to lock takes over with the next fence, and the others, locking after it, find its
//!   live lease. A row pruned between the insert and the lock is inserted again.
//! - `heartbeat` and `publish` lock the row, check the fence and status, then write; a
//!   fenced-out `publish` records what it tried on its own attempt row and commits that.
//! - `operation` reads the record and its attempts in one `REPEATABLE READ READ ONLY`
//!   snapshot; `operations` and `prune_operations` are single statements (attempts go with
//!   their operation by `ON DELETE CASCADE`).
//!
//! Times come from the caller (`now`), as on SQLite.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::codec::{lookup_i64, to_i64, to_u64};
use baton_store::ledger::{
    Decision, after, answer, check_key, check_text, decide_begin, new_operation_id,
};
use baton_store::{
    Attempt, AttemptOutcome, Begin, Error, Fenced, LedgerStore, OpStatus, Operation, Publish,
};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::{PgStore, connection_broken, pg, snapshot};

/// How many times `begin` goes round when the record it conflicted with is pruned before it
/// can lock it. Only a pathological begin-and-prune loop on one key could exhaust it.
const BEGIN_ATTEMPTS: usize = 64;

/// The columns `op_from_row` reads, in its order (a macro so statements can `concat!` it).
macro_rules! op_columns {
    () => {
        "id, key, request_hash, status, fence, lease_owner, lease_expires_at, result, error,
         retryable, created_at, updated_at, expires_at"
    };
}

fn corrupt(what: String) -> Error {
    Error::Corrupt { what }
}

fn json(text: Option<String>, what: &str) -> Result<Option<serde_json::Value>, Error> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

fn op_from_row(r: &Row) -> Result<Operation, Error> {
    let key: String = r.get(1);
    let hash: Vec<u8> = r.get(2);
    let status: String = r.get(3);
    Ok(Operation {
        id: r.get(0),
        request_hash: RequestKey(
            hash.try_into()
                .map_err(|_| corrupt(format!("operation {key}: request hash is not 32 bytes")))?,
        ),
        status: OpStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("operation status {status:?}")))?,
        fence: to_u64(r.get(4), "an operation's fence")?,
        lease_owner: r.get(5),
        lease_expires_at: r.get::<_, Option<i64>>(6).map(Timestamp),
        result: json(r.get(7), "an operation's result")?,
        error: r.get(8),
        retryable: r.get(9),
        created_at: Timestamp(r.get(10)),
        updated_at: Timestamp(r.get(11)),
        expires_at: Timestamp(r.get(12)),
        key,
    })
}

fn attempt_from_row(r: &Row) -> Result<Attempt, Error> {
    let outcome: Option<String> = r.get(4);
    Ok(Attempt {
        owner: r.get(0),
        fence: to_u64(r.get(1), "an attempt's fence")?,
        started_at: Timestamp(r.get(2)),
        ended_at: r.get::<_, Option<i64>>(3).map(Timestamp),
        outcome: outcome
            .map(|o| {
                AttemptOutcome::parse(&o).ok_or_else(|| corrupt(format!("attempt outcome {o:?}")))
            })
            .transpose()?,
        paid: r.get(5),
        result: json(r.get(6), "an attempt's result")?,
        error: r.get(7),
    })
}

/// The operation, with its row lock held until the transaction ends.
async fn lock_op(
    c: &impl GenericClient,
    tenant: &TenantId,
    key: &str,
) -> Result<Option<Operation>, Error> {
    let stmt = c
        .prepare_cached(concat!(
            "SELECT ",
            op_columns!(),
            " FROM operations WHERE tenant_id = $1 AND key = $2 FOR UPDATE"
        ))
        .await
        .map_err(pg)?;
    c.query_opt(&stmt, &[&tenant.as_str(), &key])
        .await
        .map_err(pg)?
        .as_ref()
        .map(op_from_row)
        .transpose()
}

async fn insert_attempt(
    c: &impl GenericClient,
    tenant: &TenantId,
    key: &str,
    owner: &str,
    fence: u64,
    now: Timestamp,
) -> Result<(), Error> {
    let stmt = c
        .prepare_cached(
            "INSERT INTO attempts (tenant_id, key, owner, fence, started_at)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .await
        .map_err(pg)?;
    c.execute(
        &stmt,
        &[&tenant.as_str(), &key, &owner, &to_i64(fence)?, &now.0],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// What ends an attempt: how, whether it paid, what it tried to publish.
struct Close<'a> {
    outcome: AttemptOutcome,
    paid: bool,
    result: Option<&'a str>,
    error: Option<&'a str>,
}

/// Ends the attempt holding `fence` (none, if no attempt holds it); `paid` is OR'd into what
/// was recorded, and a result or error it names replaces the one recorded.
async fn close_attempt(
    c: &impl GenericClient,
    tenant: &TenantId,
    key: &str,
    fence: u64,
    close: Close<'_>,
    now: Timestamp,
) -> Result<(), Error> {
    let stmt = c
        .prepare_cached(
            "UPDATE attempts SET ended_at = $4, outcome = $5, paid = paid OR $6,
                    result = COALESCE($7, result), error = COALESCE($8, error)
             WHERE tenant_id = $1 AND key = $2 AND fence = $3
               AND (ended_at IS NULL OR outcome = 'lease_lost')",
        )
        .await
        .map_err(pg)?;
    c.execute(
        &stmt,
        &[
            &tenant.as_str(),
            &key,
            // A fence past the integer range names no attempt: nothing to close.
            &lookup_i64(fence),
            &now.0,
            &close.outcome.as_str(),
            &close.paid,
            &close.result,
            &close.error,
        ],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

#[async_trait]
impl LedgerStore for PgStore {
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
        check_text("owner", owner)?;
        let lease_until = after(now, lease, "a lease")?;
        let expires = after(now, retention, "a retention")?;
        with_client!(self, |client| {
            // The common case in one statement, one round trip, one commit: a new key inserts
            // the operation and its first attempt together (the attempt's foreign key is
            // checked at the end of the statement, when the operation is there).
            let fast = client
                .prepare_cached(concat!(
                    "WITH op AS (
                         INSERT INTO operations (tenant_id, key, id, request_hash, status, fence,
                             lease_owner, lease_expires_at, created_at, updated_at, expires_at)
                         VALUES ($1, $2, $3, $4, 'running',
                             1 + COALESCE((SELECT m.fence FROM fence_marks m WHERE m.tenant_id = $1 AND m.key = $2), 0),
                             $5, $6, $7, $7, $8)
                         ON CONFLICT (tenant_id, key) DO NOTHING
                         RETURNING ",
                    op_columns!(),
                    "
                     ), attempt AS (
                         INSERT INTO attempts (tenant_id, key, owner, fence, started_at)
                         SELECT $1, $2, $5, op.fence, $7 FROM op
                     )
                     SELECT * FROM op"
                ))
                .await
                .map_err(pg)?;
            let id = new_operation_id();
            let hash = &request_hash.0[..];
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
                &tenant.as_str(),
                &key,
                &id,
                &hash,
                &owner,
                &lease_until.0,
                &now.0,
                &expires.0,
            ];
            let inserted = client.query_opt(&fast, &params).await.map_err(pg)?;
            if let Some(row) = inserted {
                return Ok(Begin::Acquired {
                    operation: op_from_row(&row)?,
                    takeover: false,
                });
            }
            let tx = client.transaction().await.map_err(pg)?;
            let insert = tx
                .prepare_cached(concat!(
                    "INSERT INTO operations (tenant_id, key, id, request_hash, status, fence,
                         lease_owner, lease_expires_at, created_at, updated_at, expires_at)
                     VALUES ($1, $2, $3, $4, 'running',
                         1 + COALESCE((SELECT m.fence FROM fence_marks m WHERE m.tenant_id = $1 AND m.key = $2), 0),
                         $5, $6, $7, $7, $8)
                     ON CONFLICT (tenant_id, key) DO NOTHING
                     RETURNING ",
                    op_columns!()
                ))
                .await
                .map_err(pg)?;
            for _ in 0..BEGIN_ATTEMPTS {
                // The same operation id on every round: only one insert of it can succeed.
                let inserted = tx.query_opt(&insert, &params).await.map_err(pg)?;
                if let Some(row) = inserted {
                    let operation = op_from_row(&row)?;
                    insert_attempt(&tx, tenant, key, owner, operation.fence, now).await?;
                    tx.commit().await.map_err(pg)?;
                    return Ok(Begin::Acquired {
                        operation,
                        takeover: false,
                    });
                }
                let Some(op) = lock_op(&tx, tenant, key).await? else {
                    // Pruned since the insert found it: insert again.
                    continue;
                };
                if op.request_hash != *request_hash {
                    tx.commit().await.map_err(pg)?;
                    return Ok(answer(op, request_hash));
                }
                let lease_lost = match decide_begin(&op, now) {
                    Decision::Answer => {
                        tx.commit().await.map_err(pg)?;
                        return Ok(answer(op, request_hash));
                    }
                    Decision::TakeOver { lease_lost } => lease_lost,
                };
                if lease_lost {
                    let close = Close {
                        outcome: AttemptOutcome::LeaseLost,
                        paid: false,
                        result: None,
                        error: None,
                    };
                    close_attempt(&tx, tenant, key, op.fence, close, now).await?;
                }
                let fence = op.fence + 1;
                let stmt = tx
                    .prepare_cached(concat!(
                        "UPDATE operations SET status = 'running', fence = $3, lease_owner = $4,
                             lease_expires_at = $5, error = NULL, retryable = FALSE,
                             updated_at = $6
                         WHERE tenant_id = $1 AND key = $2
                         RETURNING ",
                        op_columns!()
                    ))
                    .await
                    .map_err(pg)?;
                let row = tx
                    .query_one(
                        &stmt,
                        &[
                            &tenant.as_str(),
                            &key,
                            &to_i64(fence)?,
                            &owner,
                            &lease_until.0,
                            &now.0,
                        ],
                    )
                    .await
                    .map_err(pg)?;
                let operation = op_from_row(&row)?;
                insert_attempt(&tx, tenant, key, owner, fence, now).await?;
                tx.commit().await.map_err(pg)?;
                return Ok(Begin::Acquired {
                    operation,
                    takeover: true,
                });
            }
            Err(Error::Unavailable {
                what: format!(
                    "operation {key}: it was pruned {BEGIN_ATTEMPTS} times while being begun"
                ),
            })
        })
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
        with_client!(self, |client| {
            // One conditional statement: a heartbeat never leaves a transaction open, so a
            // worker paused mid-heartbeat holds no lock.
            let stmt = client
                .prepare_cached(concat!(
                    "UPDATE operations SET lease_expires_at = $3, updated_at = $4,
                         expires_at = GREATEST(expires_at, $3)
                     WHERE tenant_id = $1 AND key = $2 AND fence = $5 AND status = 'running'
                     RETURNING ",
                    op_columns!()
                ))
                .await
                .map_err(pg)?;
            if let Some(row) = client
                .query_opt(
                    &stmt,
                    &[&tenant.as_str(), &key, &until.0, &now.0, &to_i64(fence)?],
                )
                .await
                .map_err(pg)?
            {
                return Ok(Ok(op_from_row(&row)?));
            }
            let current = client
                .prepare_cached(concat!(
                    "SELECT ",
                    op_columns!(),
                    " FROM operations WHERE tenant_id = $1 AND key = $2"
                ))
                .await
                .map_err(pg)?;
            Ok(
                match client
                    .query_opt(&current, &[&tenant.as_str(), &key])
                    .await
                    .map_err(pg)?
                {
                    None => Err(Fenced::NotFound),
                    Some(row) => Err(Fenced::Out {
                        operation: op_from_row(&row)?,
                        given: fence,
                    }),
                },
            )
        })
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
        let (result, error, retryable) = match outcome {
            Publish::Complete(v) => (Some(v.to_string()), None, false),
            Publish::Fail { error, retryable } => {
                check_text("error", error)?;
                (None, Some(error), retryable)
            }
        };
        with_client!(self, |client| {
            // The common case in one statement: the fence holds, the operation is published and
            // its attempt closed together. Anything else takes the locked path below.
            let (status, attempt) = match &result {
                Some(_) => (OpStatus::Completed, AttemptOutcome::Completed),
                None => (OpStatus::Failed, AttemptOutcome::Failed),
            };
            let fast = client
                .prepare_cached(concat!(
                    "WITH up AS (
                         UPDATE operations SET status = $3, result = $4, error = $5,
                             retryable = $6, lease_expires_at = NULL, updated_at = $7
                         WHERE tenant_id = $1 AND key = $2 AND fence = $8 AND status = 'running'
                         RETURNING ",
                    op_columns!(),
                    "
                     ), attempt AS (
                         UPDATE attempts SET ended_at = $7, outcome = $9, paid = paid OR $10,
                             error = COALESCE($5, error)
                         WHERE tenant_id = $1 AND key = $2 AND fence = $8
                           AND EXISTS (SELECT 1 FROM up)
                     )
                     SELECT * FROM up"
                ))
                .await
                .map_err(pg)?;
            let published = client
                .query_opt(
                    &fast,
                    &[
                        &tenant.as_str(),
                        &key,
                        &status.as_str(),
                        &result,
                        &error,
                        &retryable,
                        &now.0,
                        &to_i64(fence)?,
                        &attempt.as_str(),
                        &paid,
                    ],
                )
                .await
                .map_err(pg)?;
            if let Some(row) = published {
                return Ok(Ok(op_from_row(&row)?));
            }
            let tx = client.transaction().await.map_err(pg)?;
            let Some(op) = lock_op(&tx, tenant, key).await? else {
                tx.commit().await.map_err(pg)?;
                return Ok(Err(Fenced::NotFound));
            };
            // The same outcome again from the fence that published it (a retry after a lost
            // reply): the record as it stands, nothing written.
            let same = op.fence == fence
                && op.status == status
                && op.result == result.as_deref().and_then(|r| serde_json::from_str(r).ok())
                && op.error.as_deref() == error
                && op.retryable == retryable;
            if same {
                tx.commit().await.map_err(pg)?;
                return Ok(Ok(op));
            }
            if op.status != OpStatus::Running || op.fence != fence {
                // Kept for audit: what the fenced-out worker tried to publish.
                let close = Close {
                    outcome: AttemptOutcome::FencedOut,
                    paid,
                    result: result.as_deref(),
                    error,
                };
                close_attempt(&tx, tenant, key, fence, close, now).await?;
                tx.commit().await.map_err(pg)?;
                return Ok(Err(Fenced::Out {
                    operation: op,
                    given: fence,
                }));
            }
            let (status, attempt) = match &result {
                Some(_) => (OpStatus::Completed, AttemptOutcome::Completed),
                None => (OpStatus::Failed, AttemptOutcome::Failed),
            };
            let stmt = tx
                .prepare_cached(concat!(
                    "UPDATE operations SET status = $3, result = $4, error = $5, retryable = $6,
                         lease_expires_at = NULL, updated_at = $7
                     WHERE tenant_id = $1 AND key = $2
                     RETURNING ",
                    op_columns!()
                ))
                .await
                .map_err(pg)?;
            let row = tx
                .query_one(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &key,
                        &status.as_str(),
                        &result,
                        &error,
                        &retryable,
                        &now.0,
                    ],
                )
                .await
                .map_err(pg)?;
            let operation = op_from_row(&row)?;
            // The attempt that published keeps no copy of the result: it is the operation's.
            let close = Close {
                outcome: attempt,
                paid,
                result: None,
                error,
            };
            close_attempt(&tx, tenant, key, fence, close, now).await?;
            tx.commit().await.map_err(pg)?;
            Ok(Ok(operation))
        })
    }

    async fn operation(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(Operation, Vec<Attempt>)>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let stmt = tx
                .prepare_cached(concat!(
                    "SELECT ",
                    op_columns!(),
                    " FROM operations WHERE tenant_id = $1 AND key = $2"
                ))
                .await
                .map_err(pg)?;
            let Some(row) = tx
                .query_opt(&stmt, &[&tenant.as_str(), &key])
                .await
                .map_err(pg)?
            else {
                tx.commit().await.map_err(pg)?;
                return Ok(None);
            };
            let op = op_from_row(&row)?;
            let stmt = tx
                .prepare_cached(
                    "SELECT owner, fence, started_at, ended_at, outcome, paid, result, error
                     FROM attempts WHERE tenant_id = $1 AND key = $2 ORDER BY fence",
                )
                .await
                .map_err(pg)?;
            let attempts = tx
                .query(&stmt, &[&tenant.as_str(), &key])
                .await
                .map_err(pg)?
                .iter()
                .map(attempt_from_row)
                .collect::<Result<Vec<_>, Error>>()?;
            tx.commit().await.map_err(pg)?;
            Ok(Some((op, attempts)))
        })
    }

    async fn operations(
        &self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(concat!(
                    "SELECT ",
                    op_columns!(),
                    " FROM operations
                     WHERE tenant_id = $1 AND ($2::text IS NULL OR status = $2::text)
                     ORDER BY key"
                ))
                .await
                .map_err(pg)?;
            client
                .query(&stmt, &[&tenant.as_str(), &status.map(OpStatus::as_str)])
                .await
                .map_err(pg)?
                .iter()
                .map(op_from_row)
                .collect()
        })
    }

    async fn prune_operations(&self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        with_client!(self, |client| {
            // One statement, so one transaction; the attempts go by `ON DELETE CASCADE`. An
            // operation still held by a live lease stays; the fence of each removed one is
            // remembered, so the key's next operation starts above it.
            let stmt = client
                .prepare_cached(
                    "WITH gone AS (
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
                     SELECT count(*) FROM gone",
                )
                .await
                .map_err(pg)?;
            let removed: i64 = client
                .query_one(&stmt, &[&tenant.as_str(), &now.0])
                .await
                .map_err(pg)?
                .get(0);
            to_u64(removed, "a pruned count")
        })
    }
}
