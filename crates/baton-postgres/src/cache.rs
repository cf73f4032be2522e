//! The response cache's entries, flights and call log (schema version 6) and API keys
//! (version 8) as PostgreSQL statements, one each, in autocommit; and the listener that wakes
//! flight waiters.
//!
//! A claim needs no transaction of its own: the flight's insert with `ON CONFLICT DO NOTHING`
//! lets exactly one of concurrent claimers win (the others wait on the winner's index entry,
//! then insert nothing); a takeover's `UPDATE … WHERE lease_expires_at <= now` makes a second
//! taker block on the first one's row lock and re-check its `WHERE` against the lease the first
//! one wrote.
//!
//! Waiters are woken by `LISTEN/NOTIFY` rather than polling alone. A release that ended the
//! flight and every put notify the schema's channel ([`flight_channel`]) with
//! `TENANT/KEY_HEX`, in the same statement as the write, so PostgreSQL delivers it when that
//! write commits and never for a write that did not happen. Each store (and its clones) has one
//! [`FlightListener`]: a connection outside the pool, opened on the first wait with the pool's
//! config, that `LISTEN`s the channel and forwards payloads to a broadcast channel each wait
//! subscribes to, returning at its key's payload or at `at_most` (the backend-agnostic part is
//! [`Wakeups`]). A notification is only ever a
//! hint: waiters look at the cache and claim again after each wait, whether or not they were
//! woken, so correctness never depends on one. When the listener cannot connect or its
//! connection dies, waiting falls back to sleeping `at_most` (the poll), and a later wait starts
//! a new listener (at most one start a second). Wakeups can be lost, harmlessly: a notification
//! sent between a waiter's read and its next wait is missed, and that waiter sleeps one full
//! `at_most` (one backoff interval, at most 200 ms in `baton-cache`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::backend::{CacheRows, KeyRows, Row, Wakeups, int};
use baton_store::keys::{ApiKey, KeyHash, NewApiKey, Revoke};
use baton_store::{CacheEntry, CallRecord, Error};
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::{Params, PgTx, ints};

#[async_trait]
impl CacheRows for PgTx {
    async fn cache_read(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        now: Timestamp,
    ) -> Result<Option<(CacheEntry, Vec<u8>)>, Error> {
        self.one(
            "SELECT operation, body, body_sha256, created_at, expires_at, hits FROM cache_entries
             WHERE tenant_id = $1 AND key = $2 AND expires_at > $3",
            &[&tenant.as_str(), &&key.0[..], &now.0],
            |r| r.cache_entry(*key),
        )
        .await
    }

    async fn cache_count_hits(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        n: u64,
    ) -> Result<(), Error> {
        let sql = "UPDATE cache_entries SET hits = hits + $3 WHERE tenant_id = $1 AND key = $2";
        self.exec(sql, &[&tenant.as_str(), &&key.0[..], &int(n)?])
            .await
    }

    async fn cache_drop(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        digest: &[u8],
        created_at: Timestamp,
    ) -> Result<(), Error> {
        let sql = "DELETE FROM cache_entries
                   WHERE tenant_id = $1 AND key = $2 AND body_sha256 = $3 AND created_at = $4";
        let params: &Params = &[&tenant.as_str(), &&key.0[..], &digest, &created_at.0];
        self.exec(sql, params).await
    }

    async fn cache_put(
        &mut self,
        tenant: &TenantId,
        entry: &CacheEntry,
        digest: &[u8],
    ) -> Result<(), Error> {
        let sql = "WITH put AS (
                INSERT INTO cache_entries
                    (tenant_id, key, operation, body, body_sha256, created_at, expires_at, hits)
                VALUES ($1, $2, $3, $4, $5, $6, $7, 0)
                ON CONFLICT (tenant_id, key) DO UPDATE SET
                    operation = excluded.operation, body = excluded.body,
                    body_sha256 = excluded.body_sha256, created_at = excluded.created_at,
                    expires_at = excluded.expires_at, hits = 0
                RETURNING 1)
            SELECT pg_notify($8, $9) FROM put";
        let (payload, channel) = (flight_payload(tenant, &entry.key), self.channel.clone());
        let params = [
            &tenant.as_str() as _,
            &&entry.key.0[..] as _,
            &entry.operation as _,
            &entry.body as _,
            &digest as _,
            &entry.created_at.0 as _,
            &entry.expires_at.0 as _,
            &channel.as_ref() as _,
            &payload as _,
        ];
        self.all(sql, &params, |_| Ok(())).await.map(drop)
    }

    async fn cache_prune(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        let sql = "DELETE FROM cache_entries WHERE tenant_id = $1 AND expires_at <= $2";
        self.changed(sql, &[&tenant.as_str(), &now.0]).await
    }

    async fn insert_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<u64>, Error> {
        let sql = "INSERT INTO flights (tenant_id, key, owner, token, lease_expires_at, started_at)
                   VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT (tenant_id, key) DO NOTHING
                   RETURNING token";
        let params: &Params = &[&tenant.as_str(), &&key.0[..], &owner, &until.0, &now.0];
        self.one(sql, params, |r| r.count(0, "a flight's token"))
            .await
    }

    async fn take_over_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<(u64, bool)>, Error> {
        // The subquery reads the row as the statement found it: a lease of 0 is a released
        // flight, not an expired one.
        let sql = "UPDATE flights SET owner = $3, token = token + 1, lease_expires_at = $4,
                       started_at = $5
                   WHERE tenant_id = $1 AND key = $2 AND lease_expires_at <= $5
                   RETURNING token, COALESCE((SELECT g.lease_expires_at FROM flights g
                        WHERE g.tenant_id = $1 AND g.key = $2) <> 0, TRUE)";
        let params: &Params = &[&tenant.as_str(), &&key.0[..], &owner, &until.0, &now.0];
        self.one(sql, params, |r| {
            Ok((r.count(0, "a flight's token")?, r.flag(1)?))
        })
        .await
    }

    async fn flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
    ) -> Result<Option<(String, Timestamp)>, Error> {
        let sql = "SELECT owner, lease_expires_at FROM flights WHERE tenant_id = $1 AND key = $2";
        self.one(sql, &[&tenant.as_str(), &&key.0[..]], |r| {
            Ok((r.text_at(0)?, r.time(1)?))
        })
        .await
    }

    async fn renew_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        until: Timestamp,
    ) -> Result<bool, Error> {
        let sql = "UPDATE flights SET lease_expires_at = $4
                   WHERE tenant_id = $1 AND key = $2 AND token = $3 AND lease_expires_at > 0";
        let params: &Params = &[&tenant.as_str(), &&key.0[..], &int(token)?, &until.0];
        Ok(self.changed(sql, params).await? == 1)
    }

    async fn release_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error> {
        let sql = "WITH released AS (
                UPDATE flights SET lease_expires_at = 0
                WHERE tenant_id = $1 AND key = $2 AND token = $3 AND lease_expires_at > 0
                RETURNING 1)
            SELECT pg_notify($4, $5) FROM released";
        let (payload, channel) = (flight_payload(tenant, key), self.channel.clone());
        let params = [
            &tenant.as_str() as _,
            &&key.0[..] as _,
            &int(token)? as _,
            &channel.as_ref() as _,
            &payload as _,
        ];
        Ok(self.all(sql, &params, |_| Ok(())).await?.len() == 1)
    }

    async fn insert_calls(
        &mut self,
        tenant: &TenantId,
        records: &[CallRecord],
    ) -> Result<(), Error> {
        let input = ints(records, |r| r.input_tokens)?;
        let output = ints(records, |r| r.output_tokens)?;
        let latency = ints(records, |r| r.latency_ms)?;
        let at: Vec<i64> = records.iter().map(|r| r.at.0).collect();
        let operation: Vec<&str> = records.iter().map(|r| r.operation.as_str()).collect();
        let hash: Vec<&[u8]> = records.iter().map(|r| &r.request_hash.0[..]).collect();
        let model: Vec<&str> = records.iter().map(|r| r.model.as_str()).collect();
        let cost: Vec<Option<f64>> = records.iter().map(|r| r.cost_usd).collect();
        let outcome: Vec<&str> = records.iter().map(|r| r.outcome.as_str()).collect();
        let overlapped: Vec<bool> = records.iter().map(|r| r.overlapped).collect();
        // One statement, so one transaction; `ORDER BY n` hands out ids in the batch's order.
        self.exec(
            "INSERT INTO calls (tenant_id, at, operation, request_hash, model, input_tokens,
                 output_tokens, cost_usd, outcome, latency_ms, overlapped)
             SELECT $1, at, operation, request_hash, model, input_tokens, output_tokens,
                    cost_usd, outcome, latency_ms, overlapped
             FROM unnest($2::bigint[], $3::text[], $4::bytea[], $5::text[], $6::bigint[],
                         $7::bigint[], $8::float8[], $9::text[], $10::bigint[], $11::bool[])
                  WITH ORDINALITY AS x(at, operation, request_hash, model, input_tokens,
                      output_tokens, cost_usd, outcome, latency_ms, overlapped, n)
             ORDER BY n",
            &[
                &tenant.as_str(),
                &at,
                &operation,
                &hash,
                &model,
                &input,
                &output,
                &cost,
                &outcome,
                &latency,
                &overlapped,
            ],
        )
        .await
    }

    async fn calls(
        &mut self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error> {
        self.all(
            "SELECT at, operation, request_hash, model, input_tokens, output_tokens, cost_usd,
                    outcome, latency_ms, overlapped
             FROM calls WHERE tenant_id = $1 AND at >= $2 AND at < $3 ORDER BY at, id",
            &[&tenant.as_str(), &since.0, &until.0],
            |r| r.call(),
        )
        .await
    }
}

const KEY: &str = "SELECT id, tenant_id, label, created_at, revoked_at FROM api_keys";

#[async_trait]
impl KeyRows for PgTx {
    async fn insert_key(&mut self, new: &NewApiKey<'_>) -> Result<bool, Error> {
        let sql = "INSERT INTO api_keys (hash, id, tenant_id, label, created_at)
                   VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING";
        let params = [
            &&new.hash.0[..] as _,
            &new.id as _,
            &new.tenant.as_str() as _,
            &new.label as _,
            &new.now.0 as _,
        ];
        Ok(self.changed(sql, &params).await? == 1)
    }

    async fn key(&mut self, hash: &KeyHash) -> Result<Option<ApiKey>, Error> {
        let sql = format!("{KEY} WHERE hash = $1 AND revoked_at IS NULL");
        self.one(&sql, &[&&hash.0[..]], |r| r.api_key()).await
    }

    async fn keys(&mut self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error> {
        let sql =
            format!("{KEY} WHERE $1::text IS NULL OR tenant_id = $1::text ORDER BY created_at, id");
        let tenant = tenant.map(TenantId::as_str);
        self.all(&sql, &[&tenant], |r| r.api_key()).await
    }

    async fn revoke_keys(&mut self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error> {
        let (id, tenant) = match which {
            Revoke::Id(id) => (Some(id), None),
            Revoke::Tenant(t) => (None, Some(t.as_str())),
        };
        let sql = "UPDATE api_keys SET revoked_at = $3
                   WHERE revoked_at IS NULL AND (id = $1::text OR tenant_id = $2::text)";
        self.changed(sql, &[&id, &tenant, &now.0]).await
    }
}

/// How often the listener checks that its connection still answers: a connection cut without a
/// word from the server is otherwise noticed only by TCP keepalive, hours later.
const LISTENER_PING: Duration = Duration::from_secs(30);
/// How long that check may take.
const LISTENER_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The channel a schema's flight notifications go to: `baton_flights_SCHEMA`, or, when that
/// would exceed PostgreSQL's 63-byte identifiers, the schema's first 32 bytes and a hash of
/// the whole name. Channels are per database, not per schema, hence the schema in the name.
/// The schema name is lowercase letters, digits and `_` (checked at connect), so the channel is
/// a valid identifier that `LISTEN` needs no quoting for and `pg_notify` takes as is.
pub(crate) fn flight_channel(schema: &str) -> String {
    let channel = format!("baton_flights_{schema}");
    if channel.len() <= 63 {
        return channel;
    }
    // FNV-1a: stable across builds and platforms, which `DefaultHasher` is not promised to be.
    let hash = schema.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let prefix = schema.get(..32).unwrap_or(schema);
    format!("baton_flights_{prefix}_{hash:016x}")
}

/// What a flight's notification says: `TENANT/KEY_HEX`.
fn flight_payload(tenant: &TenantId, key: &RequestKey) -> String {
    format!("{}/{key}", tenant.as_str())
}

/// A store's one `LISTEN` connection, opened on the first wait, reopened on a later wait after
/// it ended ([`Wakeups`] does that). Dropping it (with the last clone of its store) closes the
/// connection.
pub(crate) struct FlightListener {
    pub(crate) channel: Arc<str>,
    wakeups: Wakeups,
}

impl FlightListener {
    /// A listener for `schema`'s channel, connecting with `config` when first needed.
    pub(crate) fn new(config: tokio_postgres::Config, schema: &str, shown_url: &str) -> Self {
        let channel: Arc<str> = flight_channel(schema).into();
        let (name, shown_url) = (channel.to_string(), shown_url.to_owned());
        let wakeups = Wakeups::new(move |payloads| {
            Box::pin(listen(
                config.clone(),
                name.clone(),
                shown_url.clone(),
                payloads,
            ))
        });
        FlightListener { channel, wakeups }
    }

    /// Waits until the flight of `key` may have ended (its payload arrives) or `at_most` has
    /// passed.
    pub(crate) async fn wait(&self, tenant: &TenantId, key: &RequestKey, at_most: Duration) {
        let expected = flight_payload(tenant, key);
        self.wakeups.wait(&expected, at_most).await;
    }
}

/// The listener's task: connects, `LISTEN`s `channel` and forwards every notification's
/// payload to `payloads` until the connection ends (the task then ends too, and the next wait
/// starts another).
async fn listen(
    config: tokio_postgres::Config,
    channel: String,
    shown_url: String,
    payloads: broadcast::Sender<Arc<str>>,
) {
    let (client, mut connection) = match config.connect(NoTls).await {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(url = %shown_url, error = %e,
                "cannot open the connection that wakes cache waiters; they poll");
            return;
        }
    };
    // The connection does its I/O only while polled: drive it beside every statement.
    let driver = async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    // No receiver (no waiter now) is not an error.
                    let _ = payloads.send(Arc::from(n.payload()));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Some(e),
                None => return None,
            }
        }
    };
    tokio::pin!(driver);
    // Re-issued as the liveness check: a no-op on a listening session, and it keeps the
    // session's `pg_stat_activity.query` saying what it is for.
    let listen = format!("LISTEN {channel}");
    let mut ping = tokio::time::interval(LISTENER_PING);
    loop {
        let checked = async {
            ping.tick().await;
            tokio::time::timeout(LISTENER_PING_TIMEOUT, client.batch_execute(&listen)).await
        };
        tokio::select! {
            ended = &mut driver => {
                let error = ended.map(|e| e.to_string());
                tracing::warn!(url = %shown_url, ?error,
                    "the connection that wakes cache waiters closed; they poll until it reopens");
                return;
            }
            checked = checked => match checked {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(url = %shown_url, error = %e,
                        "the connection that wakes cache waiters failed; they poll until it reopens");
                    return;
                }
                Err(_) => {
                    tracing::warn!(url = %shown_url,
                        "the connection that wakes cache waiters stopped answering; they poll until it reopens");
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::flight_channel;

    #[test]
    fn channels_are_identifiers_and_tell_schemas_apart() {
        assert_eq!(flight_channel("baton"), "baton_flights_baton");
        let long_a = format!("{}a", "s".repeat(62));
        let long_b = format!("{}b", "s".repeat(62));
        for schema in ["baton", "x".repeat(49).as_str(), &long_a, &long_b] {
            let channel = flight_channel(schema);
            assert!(channel.len() <= 63, "{channel} is {} bytes", channel.len());
            assert!(
                channel
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            );
        }
        assert_eq!(flight_channel(&"x".repeat(49)).len(), 63);
        assert_ne!(flight_channel(&long_a), flight_channel(&long_b));
        assert_eq!(flight_channel(&long_a), flight_channel(&long_a));
    }
}
