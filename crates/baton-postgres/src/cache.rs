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
//!
//! Waiters are woken by `LISTEN/NOTIFY` rather than polling alone. A release that ended the
//! flight and every put notify the schema's channel ([`flight_channel`]) with
//! `TENANT/KEY_HEX`, in the same statement as the write, so PostgreSQL delivers it when that
//! write commits and never for a write that did not happen. Each store (and its clones) has one
//! [`FlightListener`]: a connection outside the pool, opened on the first `wait_flight` with the
//! pool's config, that `LISTEN`s the channel and forwards payloads to a broadcast channel that
//! `wait_flight` subscribes to, returning at its key's payload or at `at_most`. A notification
//! is only ever a hint: waiters look at the cache and claim again after each wait, whether or
//! not they were woken, so correctness never depends on one. When the listener cannot connect
//! or its connection dies, waiting falls back to sleeping `at_most` (the poll), and a later
//! wait starts a new listener (at most one start a second).
//!
//! Wakeups can be lost, harmlessly: `baton-cache`'s loop is wait → read the cache → claim, and
//! a waiter subscribes only when its wait begins, so a notification sent between its read and
//! its next wait (or before a new listener's `LISTEN` took effect) is missed, and that waiter
//! sleeps one full `at_most`: one backoff interval, at most 200 ms there.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::cache::{body_digest, check_body, later, ttl_millis};
use baton_store::codec::{to_i64, to_u64};
use baton_store::{
    CacheEntry, CacheStore, CallOutcome, CallRecord, Error, Flight, Lookup, NewCacheEntry,
};
use deadpool_postgres::GenericClient;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls, Row};

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
                    "WITH put AS (
                         INSERT INTO cache_entries
                             (tenant_id, key, operation, body, body_sha256, created_at,
                              expires_at, hits)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, 0)
                         ON CONFLICT (tenant_id, key) DO UPDATE SET
                             operation = excluded.operation, body = excluded.body,
                             body_sha256 = excluded.body_sha256, created_at = excluded.created_at,
                             expires_at = excluded.expires_at, hits = 0
                         RETURNING 1)
                     SELECT pg_notify($8, $9) FROM put",
                )
                .await
                .map_err(pg)?;
            client
                .query(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &&entry.key.0[..],
                        &entry.operation,
                        &entry.body,
                        &&digest[..],
                        &now.0,
                        &later(now, ttl).0,
                        &self.flights.channel,
                        &flight_payload(tenant, &entry.key),
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
                     RETURNING token,
                         (SELECT g.lease_expires_at FROM flights g
                          WHERE g.tenant_id = $1 AND g.key = $2) <> 0",
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
                    // The subquery reads the row as the statement found it: a lease of 0 is a
                    // released flight, not an expired one.
                    return Ok(Flight::Leader {
                        token: to_u64(row.get(0), "a flight's token")?,
                        took_over: row.get::<_, Option<bool>>(1).unwrap_or(true),
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
                     WHERE tenant_id = $1 AND key = $2 AND token = $3 AND lease_expires_at > 0",
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
                    "WITH released AS (
                         UPDATE flights SET lease_expires_at = 0
                         WHERE tenant_id = $1 AND key = $2 AND token = $3 AND lease_expires_at > 0
                         RETURNING 1)
                     SELECT pg_notify($4, $5) FROM released",
                )
                .await
                .map_err(pg)?;
            let released = client
                .query(
                    &stmt,
                    &[
                        &tenant.as_str(),
                        &&key.0[..],
                        &token,
                        &self.flights.channel,
                        &flight_payload(tenant, key),
                    ],
                )
                .await
                .map_err(pg)?;
            Ok(released.len() == 1)
        })
    }

    async fn wait_flight(&self, tenant: &TenantId, key: &RequestKey, at_most: Duration) {
        let Some(mut payloads) = self.flights.subscribe() else {
            tokio::time::sleep(at_most).await;
            return;
        };
        let expected = flight_payload(tenant, key);
        let woken = async {
            loop {
                match payloads.recv().await {
                    Ok(payload) if *payload == *expected => return,
                    Ok(_) => {}
                    // Ours may have been among those dropped: look again now.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    // The listener died: the wait is the poll.
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        let _ = tokio::time::timeout(at_most, woken).await;
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

/// How many payloads the listener buffers for a waiter that has not read them yet; a waiter that
/// falls further behind stops waiting and looks again.
const LISTENER_BUFFER: usize = 1024;
/// How soon after starting a listener another may be started, when the first one ended (could
/// not connect, or its connection died).
const LISTENER_RETRY: Duration = Duration::from_secs(1);
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
/// it ended. Dropping it (with the last clone of its store) closes the connection.
pub(crate) struct FlightListener {
    config: tokio_postgres::Config,
    channel: String,
    shown_url: String,
    state: Mutex<ListenerState>,
}

#[derive(Default)]
struct ListenerState {
    /// The running listener's payloads and task.
    live: Option<(broadcast::Sender<Arc<str>>, tokio::task::JoinHandle<()>)>,
    /// When the last listener was started.
    started: Option<Instant>,
}

impl FlightListener {
    /// A listener for `schema`'s channel, connecting with `config` when first needed.
    pub(crate) fn new(config: tokio_postgres::Config, schema: &str, shown_url: &str) -> Self {
        FlightListener {
            config,
            channel: flight_channel(schema),
            shown_url: shown_url.to_owned(),
            state: Mutex::new(ListenerState::default()),
        }
    }

    /// The channel's payloads from now on, starting a listener if none runs; `None` (poll)
    /// while the last one ended less than [`LISTENER_RETRY`] after it started.
    fn subscribe(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((payloads, task)) = &state.live
            && !task.is_finished()
        {
            return Some(payloads.subscribe());
        }
        if state
            .started
            .is_some_and(|started| started.elapsed() < LISTENER_RETRY)
        {
            return None;
        }
        let (payloads, receiver) = broadcast::channel(LISTENER_BUFFER);
        let task = tokio::spawn(listen(
            self.config.clone(),
            self.channel.clone(),
            self.shown_url.clone(),
            payloads.clone(),
        ));
        state.live = Some((payloads, task));
        state.started = Some(Instant::now());
        Some(receiver)
    }
}

impl Drop for FlightListener {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, task)) = state.live.take() {
            task.abort();
        }
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
