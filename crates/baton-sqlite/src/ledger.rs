//! The idempotency ledger on SQLite (schema version 7). Every method is one `BEGIN IMMEDIATE`
//! transaction, so SQLite's write lock orders every worker in every process; the rules of
//! `begin` are `baton_store::ledger`'s, shared with PostgreSQL.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::codec::{to_i64, to_u64};
use baton_store::ledger::{
    Decision, after, answer, check_key, check_text, decide_begin, new_operation_id,
};
use baton_store::{
    Attempt, AttemptOutcome, Begin, Error, Fenced, LedgerStore, OpStatus, Operation, Publish,
};
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::{SqliteStore, sql};

macro_rules! op_columns {
    () => {
        "id, key, request_hash, status, fence, lease_owner, lease_expires_at,
         result, error, retryable, created_at, updated_at, expires_at"
    };
}

fn op_row(r: &Row<'_>) -> rusqlite::Result<RawOp> {
    Ok(RawOp {
        id: r.get(0)?,
        key: r.get(1)?,
        request_hash: r.get(2)?,
        status: r.get(3)?,
        fence: r.get(4)?,
        lease_owner: r.get(5)?,
        lease_expires_at: r.get(6)?,
        result: r.get(7)?,
        error: r.get(8)?,
        retryable: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
        expires_at: r.get(12)?,
    })
}

struct RawOp {
    id: String,
    key: String,
    request_hash: Vec<u8>,
    status: String,
    fence: i64,
    lease_owner: Option<String>,
    lease_expires_at: Option<i64>,
    result: Option<String>,
    error: Option<String>,
    retryable: bool,
    created_at: i64,
    updated_at: i64,
    expires_at: i64,
}

fn corrupt(what: String) -> Error {
    Error::Corrupt { what }
}

fn json(text: Option<String>, what: &str) -> Result<Option<serde_json::Value>, Error> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

impl RawOp {
    fn decode(self) -> Result<Operation, Error> {
        Ok(Operation {
            request_hash: RequestKey(self.request_hash.try_into().map_err(|_| {
                corrupt(format!(
                    "operation {}: request hash is not 32 bytes",
                    self.key
                ))
            })?),
            status: OpStatus::parse(&self.status)
                .ok_or_else(|| corrupt(format!("operation status {:?}", self.status)))?,
            fence: to_u64(self.fence, "an operation's fence")?,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at.map(Timestamp),
            result: json(self.result, "an operation's result")?,
            error: self.error,
            retryable: self.retryable,
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
            expires_at: Timestamp(self.expires_at),
            id: self.id,
            key: self.key,
        })
    }
}

fn read_op(conn: &Connection, tenant: &TenantId, key: &str) -> Result<Option<Operation>, Error> {
    conn.prepare_cached(concat!(
        "SELECT ",
        op_columns!(),
        " FROM operations WHERE tenant_id = ?1 AND key = ?2"
    ))
    .map_err(sql)?
    .query_row(params![tenant.as_str(), key], op_row)
    .optional()
    .map_err(sql)?
    .map(RawOp::decode)
    .transpose()
}

fn insert_attempt(
    conn: &Connection,
    tenant: &TenantId,
    key: &str,
    owner: &str,
    fence: u64,
    now: Timestamp,
) -> Result<(), Error> {
    conn.prepare_cached(
        "INSERT INTO attempts (tenant_id, key, owner, fence, started_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .map_err(sql)?
    .execute(params![tenant.as_str(), key, owner, to_i64(fence)?, now.0])
    .map_err(sql)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn close_attempt(
    conn: &Connection,
    tenant: &TenantId,
    key: &str,
    fence: u64,
    outcome: AttemptOutcome,
    paid: bool,
    result: Option<&serde_json::Value>,
    error: Option<&str>,
    now: Timestamp,
) -> Result<(), Error> {
    conn.prepare_cached(
        "UPDATE attempts SET ended_at = ?4, outcome = ?5, paid = paid OR ?6,
                result = COALESCE(?7, result), error = COALESCE(?8, error)
         WHERE tenant_id = ?1 AND key = ?2 AND fence = ?3
           AND (ended_at IS NULL OR outcome = 'lease_lost')",
    )
    .map_err(sql)?
    .execute(params![
        tenant.as_str(),
        key,
        to_i64(fence)?,
        now.0,
        outcome.as_str(),
        paid,
        result.map(|v| v.to_string()),
        error,
    ])
    .map_err(sql)?;
    Ok(())
}

#[async_trait]
impl LedgerStore for SqliteStore {
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
        let (tenant, key, hash, owner) = (
            tenant.clone(),
            key.to_owned(),
            *request_hash,
            owner.to_owned(),
        );
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            // The common case first: a new key is one insert, no read.
            let operation = Operation {
                id: new_operation_id(),
                key: key.clone(),
                request_hash: hash,
                status: OpStatus::Running,
                fence: 1,
                lease_owner: Some(owner.clone()),
                lease_expires_at: Some(lease_until),
                result: None,
                error: None,
                retryable: false,
                created_at: now,
                updated_at: now,
                expires_at: expires,
            };
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO operations (tenant_id, key, id, request_hash, status, fence,
                             lease_owner, lease_expires_at, created_at, updated_at, expires_at)
                         VALUES (?1, ?2, ?3, ?4, 'running',
                             1 + COALESCE((SELECT fence FROM fence_marks
                                           WHERE tenant_id = ?1 AND key = ?2), 0),
                             ?5, ?6, ?7, ?7, ?8)
                         ON CONFLICT (tenant_id, key) DO NOTHING
                         RETURNING fence",
                )
                .map_err(sql)?
                .query_row(
                    params![
                        tenant.as_str(),
                        key,
                        operation.id,
                        &hash.0[..],
                        owner,
                        lease_until.0,
                        now.0,
                        expires.0
                    ],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map_err(sql)?;
            let (existing, operation) = match inserted {
                Some(fence) => (
                    None,
                    Operation {
                        fence: to_u64(fence, "an operation's fence")?,
                        ..operation
                    },
                ),
                None => (
                    Some(read_op(&tx, &tenant, &key)?.ok_or_else(|| {
                        corrupt(format!("operation {key} conflicted but cannot be read"))
                    })?),
                    operation,
                ),
            };
            let begun = match existing {
                None => {
                    insert_attempt(&tx, &tenant, &key, &owner, operation.fence, now)?;
                    Begin::Acquired {
                        operation,
                        takeover: false,
                    }
                }
                Some(op) if op.request_hash != hash => answer(op, &hash),
                Some(op) => match decide_begin(&op, now) {
                    Decision::Answer => answer(op, &hash),
                    Decision::TakeOver { lease_lost } => {
                        if lease_lost {
                            close_attempt(
                                &tx,
                                &tenant,
                                &key,
                                op.fence,
                                AttemptOutcome::LeaseLost,
                                false,
                                None,
                                None,
                                now,
                            )?;
                        }
                        let fence = op.fence + 1;
                        tx.prepare_cached(
                            "UPDATE operations SET status = 'running', fence = ?3, lease_owner = ?4,
                                 lease_expires_at = ?5, error = NULL, retryable = 0, updated_at = ?6
                             WHERE tenant_id = ?1 AND key = ?2",
                        )
                        .map_err(sql)?
                        .execute(params![
                            tenant.as_str(),
                            key,
                            to_i64(fence)?,
                            owner,
                            lease_until.0,
                            now.0
                        ])
                        .map_err(sql)?;
                        insert_attempt(&tx, &tenant, &key, &owner, fence, now)?;
                        Begin::Acquired {
                            operation: Operation {
                                status: OpStatus::Running,
                                fence,
                                lease_owner: Some(owner.clone()),
                                lease_expires_at: Some(lease_until),
                                error: None,
                                retryable: false,
                                updated_at: now,
                                ..op
                            },
                            takeover: true,
                        }
                    }
                },
            };
            tx.commit().map_err(sql)?;
            Ok(begun)
        })
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
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let Some(op) = read_op(&tx, &tenant, &key)? else {
                return Ok(Err(Fenced::NotFound));
            };
            if op.status != OpStatus::Running || op.fence != fence {
                return Ok(Err(Fenced::Out {
                    operation: op,
                    given: fence,
                }));
            }
            tx.prepare_cached(
                "UPDATE operations SET lease_expires_at = ?3, updated_at = ?4,
                     expires_at = MAX(expires_at, ?3)
                 WHERE tenant_id = ?1 AND key = ?2",
            )
            .map_err(sql)?
            .execute(params![tenant.as_str(), key, until.0, now.0])
            .map_err(sql)?;
            tx.commit().map_err(sql)?;
            Ok(Ok(Operation {
                lease_expires_at: Some(until),
                updated_at: now,
                expires_at: op.expires_at.max(until),
                ..op
            }))
        })
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
        let (tenant, key) = (tenant.clone(), key.to_owned());
        let (result, error, retryable) = match outcome {
            Publish::Complete(v) => (Some(v.clone()), None, false),
            Publish::Fail { error, retryable } => {
                check_text("error", error)?;
                (None, Some(error.to_owned()), retryable)
            }
        };
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let (status, attempt) = match &result {
                Some(_) => (OpStatus::Completed, AttemptOutcome::Completed),
                None => (OpStatus::Failed, AttemptOutcome::Failed),
            };
            // The common case first: the fence holds, and one conditional update publishes.
            let published = tx
                .prepare_cached(concat!(
                    "UPDATE operations SET status = ?3, result = ?4, error = ?5, retryable = ?6,
                         lease_expires_at = NULL, updated_at = ?7
                     WHERE tenant_id = ?1 AND key = ?2 AND fence = ?8 AND status = 'running'
                     RETURNING ",
                    op_columns!()
                ))
                .map_err(sql)?
                .query_row(
                    params![
                        tenant.as_str(),
                        key,
                        status.as_str(),
                        result.as_ref().map(|v| v.to_string()),
                        error,
                        retryable,
                        now.0,
                        to_i64(fence)?
                    ],
                    op_row,
                )
                .optional()
                .map_err(sql)?;
            if let Some(raw) = published {
                // The attempt that published keeps no copy of the result: it is the operation's.
                close_attempt(
                    &tx,
                    &tenant,
                    &key,
                    fence,
                    attempt,
                    paid,
                    None,
                    error.as_deref(),
                    now,
                )?;
                let operation = raw.decode()?;
                tx.commit().map_err(sql)?;
                return Ok(Ok(operation));
            }
            let Some(op) = read_op(&tx, &tenant, &key)? else {
                return Ok(Err(Fenced::NotFound));
            };
            // The same outcome again from the fence that published it (a retry after a lost
            // reply): the record as it stands, nothing written.
            if op.fence == fence
                && op.status == status
                && op.result == result
                && op.error == error
                && op.retryable == retryable
            {
                return Ok(Ok(op));
            }
            // Kept for audit: what the fenced-out worker tried to publish.
            close_attempt(
                &tx,
                &tenant,
                &key,
                fence,
                AttemptOutcome::FencedOut,
                paid,
                result.as_ref(),
                error.as_deref(),
                now,
            )?;
            tx.commit().map_err(sql)?;
            Ok(Err(Fenced::Out {
                operation: op,
                given: fence,
            }))
        })
        .await
    }

    async fn operation(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<(Operation, Vec<Attempt>)>, Error> {
        let (tenant, key) = (tenant.clone(), key.to_owned());
        self.read(move |conn| {
            let Some(op) = read_op(conn, &tenant, &key)? else {
                return Ok(None);
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT owner, fence, started_at, ended_at, outcome, paid, result, error
                     FROM attempts WHERE tenant_id = ?1 AND key = ?2 ORDER BY fence",
                )
                .map_err(sql)?;
            let mut rows = stmt.query(params![tenant.as_str(), key]).map_err(sql)?;
            let mut attempts = Vec::new();
            while let Some(r) = rows.next().map_err(sql)? {
                let outcome: Option<String> = r.get(4).map_err(sql)?;
                attempts.push(Attempt {
                    owner: r.get(0).map_err(sql)?,
                    fence: to_u64(r.get(1).map_err(sql)?, "an attempt's fence")?,
                    started_at: Timestamp(r.get(2).map_err(sql)?),
                    ended_at: r.get::<_, Option<i64>>(3).map_err(sql)?.map(Timestamp),
                    outcome: outcome
                        .map(|o| {
                            AttemptOutcome::parse(&o)
                                .ok_or_else(|| corrupt(format!("attempt outcome {o:?}")))
                        })
                        .transpose()?,
                    paid: r.get(5).map_err(sql)?,
                    result: json(r.get(6).map_err(sql)?, "an attempt's result")?,
                    error: r.get(7).map_err(sql)?,
                });
            }
            Ok(Some((op, attempts)))
        })
        .await
    }

    async fn operations(
        &self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(concat!(
                    "SELECT ",
                    op_columns!(),
                    " FROM operations WHERE tenant_id = ?1 AND (?2 IS NULL OR status = ?2) ORDER BY key"
                ))
                .map_err(sql)?;
            let rows = stmt
                .query_map(
                    params![tenant.as_str(), status.map(OpStatus::as_str)],
                    op_row,
                )
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                out.push(row.map_err(sql)?.decode()?);
            }
            Ok(out)
        })
        .await
    }

    async fn prune_operations(&self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        let tenant = tenant.clone();
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            // An operation past its retention but still held by a live lease stays. The fence
            // of each removed one is remembered, so the key's next operation starts above it
            // and no worker of the removed one can ever match a later fence.
            const PRUNABLE: &str = "tenant_id = ?1 AND expires_at <= ?2
                 AND NOT (status = 'running' AND lease_expires_at > ?2)";
            tx.prepare_cached(&format!(
                "INSERT INTO fence_marks (tenant_id, key, fence)
                 SELECT tenant_id, key, fence FROM operations WHERE {PRUNABLE}
                 ON CONFLICT (tenant_id, key) DO UPDATE SET fence = MAX(fence, excluded.fence)"
            ))
            .map_err(sql)?
            .execute(params![tenant.as_str(), now.0])
            .map_err(sql)?;
            tx.prepare_cached(&format!(
                "DELETE FROM attempts WHERE (tenant_id, key) IN
                     (SELECT tenant_id, key FROM operations WHERE {PRUNABLE})"
            ))
            .map_err(sql)?
            .execute(params![tenant.as_str(), now.0])
            .map_err(sql)?;
            let removed = tx
                .prepare_cached(&format!("DELETE FROM operations WHERE {PRUNABLE}"))
                .map_err(sql)?
                .execute(params![tenant.as_str(), now.0])
                .map_err(sql)?;
            tx.commit().map_err(sql)?;
            Ok(removed as u64)
        })
        .await
    }
}
