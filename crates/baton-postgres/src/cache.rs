//! The response cache, in-flight records and the call log on PostgreSQL (schema version 6).
//!
//! Every operation but `log_calls` is one statement in autocommit, so it is atomic on its own:
//! a hit is one `UPDATE … RETURNING` (it counts the hit and reads the entry), a put one
//! `INSERT … ON CONFLICT DO UPDATE`.
//!
//! A claim needs no transaction and no lock of its own: it first inserts the flight with
//! `ON CONFLICT DO NOTHING`, which the primary key lets exactly one of any number of concurrent
//! claimers win (the others wait on the winner's index entry, then insert nothing). A claimer
//! that found a flight tries to take it over with an `UPDATE … WHERE lease_expires_at <= now`:
//! under READ COMMITTED a second taker blocks on the first one's row lock and then re-checks its
//! `WHERE` against the row the first one wrote, whose lease is live again, so exactly one taker
//! gets the next token. A claimer that neither inserted nor took over reads the holder; if the
//! flight was released in between, it claims again.
//!
//! Times are taken in Rust (`Timestamp::now()`), as on SQLite, so both backends measure leases
//! and TTLs by the clocks of the processes that use them.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::cache::{body_digest, check_body, later, ttl_millis};
use baton_store::codec::{to_i64, to_u64};
use baton_store::{
    CacheEntry, CacheStore, CallOutcome, CallRecord, Error, Flight, Lookup, NewCacheEntry,
};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::{PgStore, connection_broken, pg};

/// How many times a claim goes round when the flight it found keeps vanishing before it can
/// read it (released between the claim's statements each time). Only a pathological release
/// loop on the same key could exhaust it.
const CLAIM_ATTEMPTS: usize = 64;

#[async_trait]
impl CacheStore for PgStore {
    async fn cache_get(&self, tenant: &TenantId, key: &RequestKey) -> Result<Lookup, Error> {
        with_client!(self, |client| {
            let now = Timestamp::now();
            let stmt = client
                .prepare_cached(
                    "UPDATE cache_entries SET hits = hits + 1
                     WHERE tenant_id = $1 AND key = $2 AND expires_at > $3
                     RETURNING operation, body, body_sha256, created_at, expires_at, hits",
                )
                .await
                .map_err(pg)?;
            let Some(row) = client
                .query_opt(&stmt, &[&tenant.as_str(), &&key.0[..], &now.0])
                .await
                .map_err(pg)?
            else {
                return Ok(Lookup::Miss);
            };
            let body: Vec<u8> = row.get(1);
            let digest: Vec<u8> = row.get(2);
            let created_at: i64 = row.get(3);
            if let Err(detail) = check_body(key, &body, &digest) {
                // Only the entry that was read: a fresh result stored since stays.
                let stmt = client
                    .prepare_cached(
                        "DELETE FROM cache_entries
                         WHERE tenant_id = $1 AND key = $2 AND body_sha256 = $3
                           AND created_at = $4",
                    )
                    .await
                    .map_err(pg)?;
                client
                    .execute(
                        &stmt,
                        &[&tenant.as_str(), &&key.0[..], &digest, &created_at],
                    )
                    .await
                    .map_err(pg)?;
                tracing::warn!(tenant = tenant.as_str(), %detail, "removed a corrupt cache entry");
                return Ok(Lookup::Corrupt { detail });
            }
            Ok(Lookup::Hit(CacheEntry {
                key: *key,
                operation: row.get(0),
                body,
                created_at: Timestamp(created_at),
                expires_at: Timestamp(row.get(4)),
                hits: to_u64(row.get(5), "a cache entry's hit count")?,
            }))
        })
    }

    async fn cache_put(&self, tenant: &TenantId, entry: &NewCacheEntry<'_>) -> Result<(), Error> {
        let ttl = ttl_millis(entry.ttl, "a cache TTL")?;
        let digest = body_digest(entry.body);
        with_client!(self, |client| {
            let now = Timestamp::now();
            let stmt = client
                .prepare_cached(
                    "INSERT INTO cache_entries
                         (tenant_id, key, operation, body, body_sha256, created_at, expires_at, hits)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 0)
                     ON CONFLICT (tenant_id, key) DO UPDATE SET
                         operation = excluded.operation, body = excluded.body,
                         body_sha256 = excluded.body_sha256, created_at = excluded.created_at,
                         expires_at = excluded.expires_at, hits = 0",
                )
                .await
                .map_err(pg)?;
            client
                .execute(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &&entry.key.0[..],
                        &entry.operation,
                        &entry.body,
                        &&digest[..],
                        &now.0,
                        &later(now, ttl).0,
                    ],
                )
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    async fn cache_prune(&self, tenant: &TenantId) -> Result<u64, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(
                    "DELETE FROM cache_entries WHERE tenant_id = $1 AND expires_at <= $2",
                )
                .await
                .map_err(pg)?;
            client
                .execute(&stmt, &[&tenant.as_str(), &Timestamp::now().0])
                .await
                .map_err(pg)
        })
    }

    async fn claim_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        lease: Duration,
    ) -> Result<Flight, Error> {
        let lease = ttl_millis(lease, "a flight's lease")?;
        with_client!(self, |client| {
            let insert = client
                .prepare_cached(
                    "INSERT INTO flights (tenant_id, key, owner, token, lease_expires_at, started_at)
                     VALUES ($1, $2, $3, 1, $4, $5)
                     ON CONFLICT (tenant_id, key) DO NOTHING
                     RETURNING token",
                )
                .await
                .map_err(pg)?;
            let take_over = client
                .prepare_cached(
                    "UPDATE flights SET owner = $3, token = token + 1, lease_expires_at = $4,
                            started_at = $5
                     WHERE tenant_id = $1 AND key = $2 AND lease_expires_at <= $5
                     RETURNING token",
                )
                .await
                .map_err(pg)?;
            let holder = client
                .prepare_cached(
                    "SELECT owner, lease_expires_at FROM flights WHERE tenant_id = $1 AND key = $2",
                )
                .await
                .map_err(pg)?;
            for _ in 0..CLAIM_ATTEMPTS {
                let now = Timestamp::now();
                let expires = later(now, lease).0;
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                    [&tenant.as_str(), &&key.0[..], &owner, &expires, &now.0];
                if let Some(row) = client.query_opt(&insert, &params).await.map_err(pg)? {
                    return Ok(Flight::Leader {
                        token: to_u64(row.get(0), "a flight's token")?,
                        took_over: false,
                    });
                }
                if let Some(row) = client.query_opt(&take_over, &params).await.map_err(pg)? {
                    return Ok(Flight::Leader {
                        token: to_u64(row.get(0), "a flight's token")?,
                        took_over: true,
                    });
                }
                if let Some(row) = client
                    .query_opt(&holder, &[&tenant.as_str(), &&key.0[..]])
                    .await
                    .map_err(pg)?
                {
                    return Ok(Flight::Held {
                        owner: row.get(0),
                        lease_expires_at: Timestamp(row.get(1)),
                    });
                }
                // Released between the statements: claim again.
            }
            Err(Error::Unavailable {
                what: format!(
                    "the flight of cache key {key}: it was released {CLAIM_ATTEMPTS} times while being claimed"
                ),
            })
        })
    }

    async fn renew_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        lease: Duration,
    ) -> Result<bool, Error> {
        let lease = ttl_millis(lease, "a flight's lease")?;
        let token = to_i64(token)?;
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(
                    "UPDATE flights SET lease_expires_at = $4
                     WHERE tenant_id = $1 AND key = $2 AND token = $3",
                )
                .await
                .map_err(pg)?;
            let changed = client
                .execute(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &&key.0[..],
                        &token,
                        &later(Timestamp::now(), lease).0,
                    ],
                )
                .await
                .map_err(pg)?;
            Ok(changed == 1)
        })
    }

    async fn release_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error> {
        let token = to_i64(token)?;
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(
                    "DELETE FROM flights WHERE tenant_id = $1 AND key = $2 AND token = $3",
                )
                .await
                .map_err(pg)?;
            let changed = client
                .execute(&stmt, &[&tenant.as_str(), &&key.0[..], &token])
                .await
                .map_err(pg)?;
            Ok(changed == 1)
        })
    }

    async fn log_calls(&self, tenant: &TenantId, records: &[CallRecord]) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        let columns = CallColumns::of(records)?;
        with_client!(self, |client| {
            // One statement, so one transaction; `ORDER BY n` hands out ids in the batch's order.
            let stmt = client
                .prepare_cached(
                    "INSERT INTO calls (tenant_id, at, operation, request_hash, model,
                         input_tokens, output_tokens, cost_usd, outcome, latency_ms, overlapped)
                     SELECT $1, at, operation, request_hash, model, input_tokens, output_tokens,
                            cost_usd, outcome, latency_ms, overlapped
                     FROM unnest($2::bigint[], $3::text[], $4::bytea[], $5::text[], $6::bigint[],
                                 $7::bigint[], $8::float8[], $9::text[], $10::bigint[],
                                 $11::boolean[])
                          WITH ORDINALITY AS r(at, operation, request_hash, model, input_tokens,
                                               output_tokens, cost_usd, outcome, latency_ms,
                                               overlapped, n)
                     ORDER BY n",
                )
                .await
                .map_err(pg)?;
            let c = &columns;
            client
                .execute(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &c.at,
                        &c.operation,
                        &c.request_hash,
                        &c.model,
                        &c.input_tokens,
                        &c.output_tokens,
                        &c.cost_usd,
                        &c.outcome,
                        &c.latency_ms,
                        &c.overlapped,
                    ],
                )
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    async fn calls(
        &self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(
                    "SELECT at, operation, request_hash, model, input_tokens, output_tokens,
                            cost_usd, outcome, latency_ms, overlapped
                     FROM calls WHERE tenant_id = $1 AND at >= $2 AND at < $3
                     ORDER BY at, id",
                )
                .await
                .map_err(pg)?;
            client
                .query(&stmt, &[&tenant.as_str(), &since.0, &until.0])
                .await
                .map_err(pg)?
                .iter()
                .map(call_from_row)
                .collect()
        })
    }
}

/// A batch of call records as one array per column, for `unnest`.
struct CallColumns<'a> {
    at: Vec<i64>,
    operation: Vec<&'a str>,
    request_hash: Vec<&'a [u8]>,
    model: Vec<&'a str>,
    input_tokens: Vec<i64>,
    output_tokens: Vec<i64>,
    cost_usd: Vec<Option<f64>>,
    outcome: Vec<&'static str>,
    latency_ms: Vec<i64>,
    overlapped: Vec<bool>,
}

impl<'a> CallColumns<'a> {
    fn of(records: &'a [CallRecord]) -> Result<Self, Error> {
        let n = records.len();
        let mut c = CallColumns {
            at: Vec::with_capacity(n),
            operation: Vec::with_capacity(n),
            request_hash: Vec::with_capacity(n),
            model: Vec::with_capacity(n),
            input_tokens: Vec::with_capacity(n),
            output_tokens: Vec::with_capacity(n),
            cost_usd: Vec::with_capacity(n),
            outcome: Vec::with_capacity(n),
            latency_ms: Vec::with_capacity(n),
            overlapped: Vec::with_capacity(n),
        };
        for r in records {
            c.at.push(r.at.0);
            c.operation.push(&r.operation);
            c.request_hash.push(&r.request_hash.0[..]);
            c.model.push(&r.model);
            c.input_tokens.push(to_i64(r.input_tokens)?);
            c.output_tokens.push(to_i64(r.output_tokens)?);
            c.cost_usd.push(r.cost_usd);
            c.outcome.push(r.outcome.as_str());
            c.latency_ms.push(to_i64(r.latency_ms)?);
            c.overlapped.push(r.overlapped);
        }
        Ok(c)
    }
}

fn call_from_row(r: &Row) -> Result<CallRecord, Error> {
    let hash: Vec<u8> = r.get(2);
    let outcome: String = r.get(7);
    Ok(CallRecord {
        at: Timestamp(r.get(0)),
        operation: r.get(1),
        request_hash: RequestKey(hash.try_into().map_err(|_| Error::Corrupt {
            what: "a call's request hash is not 32 bytes".into(),
        })?),
        model: r.get(3),
        input_tokens: to_u64(r.get(4), "a call's input tokens")?,
        output_tokens: to_u64(r.get(5), "a call's output tokens")?,
        cost_usd: r.get(6),
        outcome: CallOutcome::parse(&outcome).ok_or_else(|| Error::Corrupt {
            what: format!("a call's outcome \"{outcome}\" is not one baton writes"),
        })?,
        latency_ms: to_u64(r.get(8), "a call's latency")?,
        overlapped: r.get(9),
    })
}
