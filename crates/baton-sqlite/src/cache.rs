//! The response cache, in-flight records and the call log on SQLite (schema version 6).
//!
//! A hit is one `UPDATE … RETURNING` on the writer connection: it counts the hit and reads the
//! entry in one statement. A claim is one `BEGIN IMMEDIATE` transaction, so SQLite's write lock
//! orders concurrent claimers in every process: the first inserts the flight, the others find
//! it, and once its lease has expired the first to look takes it over with the next token.
//! Releasing a flight keeps its row (with a lease of 0), so its token keeps growing: a holder
//! that lost its lease can never match a later holder's token.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::cache::{body_digest, check_body, later, ttl_millis};
use baton_store::codec::{to_i64, to_u64};
use baton_store::{
    CacheEntry, CacheStore, CallOutcome, CallRecord, Error, Flight, Lookup, NewCacheEntry,
};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::{SqliteStore, sql};

#[async_trait]
impl CacheStore for SqliteStore {
    async fn cache_get(&self, tenant: &TenantId, key: &RequestKey) -> Result<Lookup, Error> {
        let (tenant, key) = (tenant.clone(), *key);
        self.write(move |conn| {
            let now = Timestamp::now();
            let row = conn
                .prepare_cached(
                    "UPDATE cache_entries SET hits = hits + 1
                     WHERE tenant_id = ?1 AND key = ?2 AND expires_at > ?3
                     RETURNING operation, body, body_sha256, created_at, expires_at, hits",
                )
                .map_err(sql)?
                .query_row(params![tenant.as_str(), &key.0[..], now.0], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .optional()
                .map_err(sql)?;
            let Some((operation, body, digest, created_at, expires_at, hits)) = row else {
                return Ok(Lookup::Miss);
            };
            if let Err(detail) = check_body(&key, &body, &digest) {
                // Only the entry just read: a fresh one stored meanwhile stays.
                conn.prepare_cached(
                    "DELETE FROM cache_entries
                     WHERE tenant_id = ?1 AND key = ?2 AND body_sha256 = ?3 AND created_at = ?4",
                )
                .map_err(sql)?
                .execute(params![tenant.as_str(), &key.0[..], &digest, created_at])
                .map_err(sql)?;
                return Ok(Lookup::Corrupt { detail });
            }
            Ok(Lookup::Hit(CacheEntry {
                key,
                operation,
                body,
                created_at: Timestamp(created_at),
                expires_at: Timestamp(expires_at),
                hits: to_u64(hits, "a cache entry's hit count")?,
            }))
        })
        .await
    }

    async fn cache_put(&self, tenant: &TenantId, entry: &NewCacheEntry<'_>) -> Result<(), Error> {
        let ttl = ttl_millis(entry.ttl, "a cache TTL")?;
        let tenant = tenant.clone();
        let (key, operation, body) = (entry.key, entry.operation.to_owned(), entry.body.to_vec());
        self.write(move |conn| {
            let now = Timestamp::now();
            conn.prepare_cached(
                "INSERT INTO cache_entries
                     (tenant_id, key, operation, body, body_sha256, created_at, expires_at, hits)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)
                 ON CONFLICT (tenant_id, key) DO UPDATE SET
                     operation = excluded.operation, body = excluded.body,
                     body_sha256 = excluded.body_sha256, created_at = excluded.created_at,
                     expires_at = excluded.expires_at, hits = 0",
            )
            .map_err(sql)?
            .execute(params![
                tenant.as_str(),
                &key.0[..],
                operation,
                body,
                &body_digest(&body)[..],
                now.0,
                later(now, ttl).0,
            ])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn cache_prune(&self, tenant: &TenantId) -> Result<u64, Error> {
        let tenant = tenant.clone();
        self.write(move |conn| {
            let removed = conn
                .prepare_cached(
                    "DELETE FROM cache_entries WHERE tenant_id = ?1 AND expires_at <= ?2",
                )
                .map_err(sql)?
                .execute(params![tenant.as_str(), Timestamp::now().0])
                .map_err(sql)?;
            Ok(removed as u64)
        })
        .await
    }

    async fn claim_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        lease: Duration,
    ) -> Result<Flight, Error> {
        let lease = ttl_millis(lease, "a flight's lease")?;
        let (tenant, key, owner) = (tenant.clone(), *key, owner.to_owned());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let now = Timestamp::now();
            let held = tx
                .prepare_cached(
                    "SELECT owner, token, lease_expires_at FROM flights
                     WHERE tenant_id = ?1 AND key = ?2",
                )
                .map_err(sql)?
                .query_row(params![tenant.as_str(), &key.0[..]], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .optional()
                .map_err(sql)?;
            let flight = match held {
                Some((holder, _, expires)) if expires > now.0 => Flight::Held {
                    owner: holder,
                    lease_expires_at: Timestamp(expires),
                },
                Some((_, token, expires)) => {
                    let token = token.checked_add(1).ok_or_else(|| Error::Corrupt {
                        what: "a flight's token overflowed".into(),
                    })?;
                    tx.prepare_cached(
                        "UPDATE flights SET owner = ?3, token = ?4, lease_expires_at = ?5,
                                started_at = ?6
                         WHERE tenant_id = ?1 AND key = ?2",
                    )
                    .map_err(sql)?
                    .execute(params![
                        tenant.as_str(),
                        &key.0[..],
                        owner,
                        token,
                        later(now, lease).0,
                        now.0
                    ])
                    .map_err(sql)?;
                    Flight::Leader {
                        token: to_u64(token, "a flight's token")?,
                        // A lease of 0 is a released flight, not an expired one.
                        took_over: expires != 0,
                    }
                }
                None => {
                    tx.prepare_cached(
                        "INSERT INTO flights
                             (tenant_id, key, owner, token, lease_expires_at, started_at)
                         VALUES (?1, ?2, ?3, 1, ?4, ?5)",
                    )
                    .map_err(sql)?
                    .execute(params![
                        tenant.as_str(),
                        &key.0[..],
                        owner,
                        later(now, lease).0,
                        now.0
                    ])
                    .map_err(sql)?;
                    Flight::Leader {
                        token: 1,
                        took_over: false,
                    }
                }
            };
            tx.commit().map_err(sql)?;
            Ok(flight)
        })
        .await
    }

    async fn renew_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        lease: Duration,
    ) -> Result<bool, Error> {
        let lease = ttl_millis(lease, "a flight's lease")?;
        let (tenant, key, token) = (tenant.clone(), *key, to_i64(token)?);
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE flights SET lease_expires_at = ?4
                     WHERE tenant_id = ?1 AND key = ?2 AND token = ?3 AND lease_expires_at > 0",
                )
                .map_err(sql)?
                .execute(params![
                    tenant.as_str(),
                    &key.0[..],
                    token,
                    later(Timestamp::now(), lease).0
                ])
                .map_err(sql)?;
            Ok(changed == 1)
        })
        .await
    }

    async fn release_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error> {
        let (tenant, key, token) = (tenant.clone(), *key, to_i64(token)?);
        self.write(move |conn| {
            let changed = conn
                .prepare_cached(
                    "UPDATE flights SET lease_expires_at = 0
                     WHERE tenant_id = ?1 AND key = ?2 AND token = ?3 AND lease_expires_at > 0",
                )
                .map_err(sql)?
                .execute(params![tenant.as_str(), &key.0[..], token])
                .map_err(sql)?;
            Ok(changed == 1)
        })
        .await
    }

    async fn log_calls(&self, tenant: &TenantId, records: &[CallRecord]) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        let (tenant, records) = (tenant.clone(), records.to_vec());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO calls (tenant_id, at, operation, request_hash, model,
                             input_tokens, output_tokens, cost_usd, outcome, latency_ms, overlapped)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    )
                    .map_err(sql)?;
                for r in &records {
                    insert
                        .execute(params![
                            tenant.as_str(),
                            r.at.0,
                            r.operation,
                            &r.request_hash.0[..],
                            r.model,
                            to_i64(r.input_tokens)?,
                            to_i64(r.output_tokens)?,
                            r.cost_usd,
                            r.outcome.as_str(),
                            to_i64(r.latency_ms)?,
                            r.overlapped,
                        ])
                        .map_err(sql)?;
                }
            }
            tx.commit().map_err(sql)
        })
        .await
    }

    async fn calls(
        &self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT at, operation, request_hash, model, input_tokens, output_tokens,
                            cost_usd, outcome, latency_ms, overlapped
                     FROM calls WHERE tenant_id = ?1 AND at >= ?2 AND at < ?3
                     ORDER BY at, id",
                )
                .map_err(sql)?;
            let mut rows = stmt
                .query(params![tenant.as_str(), since.0, until.0])
                .map_err(sql)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(sql)? {
                let hash: Vec<u8> = r.get(2).map_err(sql)?;
                let outcome: String = r.get(7).map_err(sql)?;
                out.push(CallRecord {
                    at: Timestamp(r.get(0).map_err(sql)?),
                    operation: r.get(1).map_err(sql)?,
                    request_hash: RequestKey(hash.try_into().map_err(|_| Error::Corrupt {
                        what: "a call's request hash is not 32 bytes".into(),
                    })?),
                    model: r.get(3).map_err(sql)?,
                    input_tokens: to_u64(r.get(4).map_err(sql)?, "a call's input tokens")?,
                    output_tokens: to_u64(r.get(5).map_err(sql)?, "a call's output tokens")?,
                    cost_usd: r.get(6).map_err(sql)?,
                    outcome: CallOutcome::parse(&outcome).ok_or_else(|| Error::Corrupt {
                        what: format!("a call's outcome \"{outcome}\" is not one baton writes"),
                    })?,
                    latency_ms: to_u64(r.get(8).map_err(sql)?, "a call's latency")?,
                    overlapped: r.get(9).map_err(sql)?,
                });
            }
            Ok(out)
        })
        .await
    }
}
