//! What the response cache, in-flight deduplication and the call log keep in the store.
//!
//! Roles:
//! - [`CacheStore`]: the operations, written once over every backend's rows and checked by
//!   the conformance suite like the rest of [`Store`](crate::Store).
//! - Cache entries ([`NewCacheEntry`], [`CacheEntry`], [`Lookup`]): a successful, complete
//!   result under its [`RequestKey`], per tenant, until it expires. The body is kept with its
//!   SHA-256, and a body that no longer matches it is [`Lookup::Corrupt`]: reported, removed,
//!   never served.
//! - Flights ([`Flight`]): the record that one caller, somewhere, is computing a key's result
//!   now. Claimed atomically with a lease; the lease is renewed while the work runs; an expired
//!   lease lets exactly one waiter take over, with a higher token; only the current token's
//!   holder can renew or release it.
//! - The call log ([`CallRecord`]): one row per model call, however it was answered.
//!
//! The key is never a permission: every operation takes the caller's tenant and reaches only
//! that tenant's rows, whatever key it names; authorization proper is the caller's policy hook
//! (`baton-cache`), run before any of these is called.
//!
//! # Design
//!
//! `cache_entries`, `flights` and `calls` (schema v6) are keyed by tenant first; no read or write crosses tenants whatever key it names.
//! A hit is one `UPDATE … RETURNING` that counts it; a body failing its SHA-256 is deleted in the same call and reported.
//! A released flight keeps its row (lease 0), so a key's tokens never repeat and a holder that lost its lease can never renew or release a later holder's flight.
//! `claim_flight` is the one check-then-act: on SQLite a `BEGIN IMMEDIATE` transaction (SQLite's write lock orders claimers in every process); on PostgreSQL `INSERT … ON CONFLICT DO NOTHING`, then a conditional `UPDATE … WHERE lease_expires_at <= now` for a takeover (the row lock makes a second taker re-check the renewed lease), so exactly one claimer leads and exactly one takes an expired lease over, with a higher token; renew and release act only for the current token.
//! Waiters wait with `wait_flight` between looks at the cache (5 ms doubling to 200 ms). On PostgreSQL a release and a put `pg_notify` the schema's channel (`baton_flights_SCHEMA`, hashed when too long) in the same statement as the write, so the notification is delivered when it commits, and one `LISTEN` connection per store, outside the pool, opened on the first wait, wakes that key's waiters at once; without it (cannot connect, connection lost: reopened on a later wait) a wait sleeps its interval. SQLite polls with the same backoff. A notification is only a hint: a lost one (sent between a waiter's read and its next wait) costs one backoff interval, never correctness.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::backend::{Backend, CacheRows};
use crate::history::job;
use crate::{Error, check_text};

/// A result to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCacheEntry<'a> {
    /// The request's key.
    pub key: RequestKey,
    /// The operation (`anthropic.messages`, …), kept to report on.
    pub operation: &'a str,
    /// The result, as the caller serialized it.
    pub body: &'a [u8],
    /// How long it may be served. Never zero.
    pub ttl: Duration,
}

/// A kept result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// The request's key.
    pub key: RequestKey,
    /// The operation.
    pub operation: String,
    /// The result.
    pub body: Vec<u8>,
    /// When it was stored.
    pub created_at: Timestamp,
    /// When it stops being served.
    pub expires_at: Timestamp,
    /// How many hits were counted before this read ([`CacheStore::count_hits`], and hits
    /// logged by [`CacheStore::log_calls`]).
    pub hits: u64,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A live entry; its hit count was incremented.
    Hit(CacheEntry),
    /// No live entry (none, or expired).
    Miss,
    /// An entry whose body no longer matches its checksum. It was removed; the caller treats
    /// this as a miss and reports it.
    Corrupt {
        /// What did not match.
        detail: String,
    },
}

/// What claiming a flight gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flight {
    /// The caller holds the flight with this token: it does the work, renews the lease while
    /// it runs, and releases the flight when its result is stored (or it gave up).
    Leader {
        /// The token; it grows each time the flight changes hands.
        token: u64,
        /// Whether the caller took it over from a holder whose lease had expired.
        took_over: bool,
    },
    /// Someone else holds it: wait for the result, and claim again when the lease expires.
    Held {
        /// The holder.
        owner: String,
        /// When its lease runs out.
        lease_expires_at: Timestamp,
    },
}

/// How a model call was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// Sent upstream, and it answered.
    Executed,
    /// Answered from the cache.
    CacheHit,
    /// Answered with the result of an identical call in flight at the same time.
    Coalesced,
    /// Failed (upstream, or waiting for the call it was coalesced with).
    Error,
}

impl CallOutcome {
    /// Its name in the log and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Executed => "executed",
            CallOutcome::CacheHit => "cache_hit",
            CallOutcome::Coalesced => "coalesced",
            CallOutcome::Error => "error",
        }
    }

    /// The outcome a stored name stands for.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "executed" => CallOutcome::Executed,
            "cache_hit" => CallOutcome::CacheHit,
            "coalesced" => CallOutcome::Coalesced,
            "error" => CallOutcome::Error,
            _ => return None,
        })
    }
}

/// One model call, as the call log keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// When the call started.
    pub at: Timestamp,
    /// The operation (`anthropic.messages`, `openai.chat_completions`, …).
    pub operation: String,
    /// The request's key: the same derivation as the cache's, so identical requests have one.
    pub request_hash: RequestKey,
    /// The model.
    pub model: String,
    /// Input tokens of the answer (for a hit or a coalesced call: of the answer it was given):
    /// the whole prompt, fresh, written to and read from the provider's prompt cache, as
    /// `cost_usd` prices each part at its own rate.
    pub input_tokens: u64,
    /// Output tokens of the answer.
    pub output_tokens: u64,
    /// What the answer costs when it is executed, in US dollars, at the price table; `None`
    /// when the model has no price. Recorded for every outcome, so the report can say what a
    /// hit or a coalesced call saved.
    pub cost_usd: Option<f64>,
    /// How it was answered.
    pub outcome: CallOutcome,
    /// How long the caller waited, in milliseconds.
    pub latency_ms: u64,
    /// Whether an identical request was in flight at the same time.
    pub overlapped: bool,
}

/// The store half of the response cache, in-flight deduplication and the call log.
///
/// Contract, for every backend:
/// - Every operation is scoped by tenant: tenant B never reads, counts, claims or releases
///   tenant A's rows, even with A's exact key.
/// - `cache_get` serves only live entries (`expires_at` after now) whose body matches its
///   SHA-256, and counts the hit in the same statement; a corrupt entry is removed and
///   reported, never served.
/// - `cache_put` replaces the key's entry (a fresh result wins over an older one).
/// - `claim_flight` is atomic: of any number of concurrent claimers of a key with no live
///   flight, exactly one gets [`Flight::Leader`]; a flight whose lease expired goes to exactly
///   one claimer, with a higher token.
/// - `renew_flight` and `release_flight` act only for the current token.
/// - Tokens of a key never repeat: releasing a flight keeps its row (lease 0), and the next
///   claim takes the next token (`took_over: false`), so a holder that lost its lease can
///   never renew or release a later holder's flight.
#[async_trait]
pub trait CacheStore: Send + Sync {
    /// The live entry for `key`. A read: it counts no hit, so a hit never waits for a write.
    /// Hits are counted where they are logged ([`CacheStore::log_calls`] counts its
    /// [`CallOutcome::CacheHit`] records), or by [`CacheStore::count_hits`].
    async fn cache_get(&self, tenant: &TenantId, key: &RequestKey) -> Result<Lookup, Error>;

    /// Adds `n` hits to `key`'s entry (nothing when it is gone).
    async fn count_hits(&self, tenant: &TenantId, key: &RequestKey, n: u64) -> Result<(), Error>;

    /// Stores (or replaces) an entry. A zero TTL is [`Error::InvalidCache`].
    async fn cache_put(&self, tenant: &TenantId, entry: &NewCacheEntry<'_>) -> Result<(), Error>;

    /// Removes the tenant's expired entries; returns how many.
    async fn cache_prune(&self, tenant: &TenantId) -> Result<u64, Error>;

    /// Claims the flight for `key` for `owner`, for `lease`.
    async fn claim_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        lease: Duration,
    ) -> Result<Flight, Error>;

    /// Extends the lease of the flight held with `token` to `lease` from now; `false` when the
    /// token is no longer the current one (the flight was taken over or released).
    async fn renew_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        lease: Duration,
    ) -> Result<bool, Error>;

    /// Ends the flight held with `token`; `false` when that token no longer holds it.
    async fn release_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error>;

    /// Waits until the flight for `key` may have ended (its holder released it or stored a
    /// result), or `at_most` has passed, whichever comes first; a waiter then looks again.
    /// The default sleeps `at_most` (polling); a backend with notifications wakes waiters as
    /// soon as the holder is done.
    async fn wait_flight(&self, tenant: &TenantId, key: &RequestKey, at_most: Duration) {
        let _ = (tenant, key);
        tokio::time::sleep(at_most).await;
    }

    /// Appends records to the call log, in one transaction.
    async fn log_calls(&self, tenant: &TenantId, records: &[CallRecord]) -> Result<(), Error>;

    /// The tenant's calls that started in `since..until`, oldest first (ties in log order).
    async fn calls(
        &self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error>;
}

/// A TTL as whole milliseconds: at least 1, or [`Error::InvalidCache`].
fn ttl_millis(ttl: Duration, what: &str) -> Result<i64, Error> {
    let millis = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    if millis == 0 {
        return Err(Error::InvalidCache {
            detail: format!("{what} must be at least 1 ms (got {ttl:?})"),
        });
    }
    Ok(millis)
}

/// `now + millis`, saturating.
fn later(now: Timestamp, millis: i64) -> Timestamp {
    Timestamp(now.0.saturating_add(millis))
}

/// The SHA-256 of a cache body, which the store keeps beside it.
pub fn body_digest(body: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(body).into()
}

/// Checks a stored body against its digest: `Err` names the mismatch.
fn check_body(key: &RequestKey, body: &[u8], digest: &[u8]) -> Result<(), String> {
    if body_digest(body).as_slice() == digest {
        Ok(())
    } else {
        Err(format!(
            "cache entry {key}: its body ({} bytes) does not match its SHA-256",
            body.len()
        ))
    }
}

/// How many times a claim goes round when the flight it found keeps vanishing before it can
/// read it (released between the claim's statements each time). Only a pathological release
/// loop on the same key could exhaust it.
const CLAIM_ATTEMPTS: usize = 64;

/// Every call is one write job (a hit counts itself). A claim inserts the flight unless the key
/// has one, which the primary key lets exactly one of concurrent claimers win; a claimer that
/// found one takes it over if its lease ended, with a conditional update that a second taker,
/// waiting on the first one's row, re-checks against the lease the first one wrote; anyone else
/// reads the holder. Times are taken here (`Timestamp::now()`), so leases and TTLs are measured
/// by the clocks of the processes that use them.
#[async_trait]
impl<B: Backend> CacheStore for B {
    async fn cache_get(&self, tenant: &TenantId, key: &RequestKey) -> Result<Lookup, Error> {
        let (tenant, key) = (tenant.clone(), *key);
        let read = {
            let tenant = tenant.clone();
            // One statement on one row: no snapshot to open and close around it.
            self.read_row(job!(|tx| {
                tx.cache_read(&tenant, &key, Timestamp::now()).await
            }))
            .await?
        };
        let Some((entry, digest)) = read else {
            return Ok(Lookup::Miss);
        };
        if let Err(detail) = check_body(&key, &entry.body, &digest) {
            // Only the entry just read: a fresh one stored meanwhile stays.
            let created_at = entry.created_at;
            let t = tenant.clone();
            self.write_row(job!(|tx| {
                tx.cache_drop(&t, &key, &digest, created_at).await
            }))
            .await?;
            tracing::warn!(tenant = tenant.as_str(), %detail, "removed a corrupt cache entry");
            return Ok(Lookup::Corrupt { detail });
        }
        Ok(Lookup::Hit(entry))
    }

    async fn count_hits(&self, tenant: &TenantId, key: &RequestKey, n: u64) -> Result<(), Error> {
        let (tenant, key) = (tenant.clone(), *key);
        self.write_row(job!(|tx| { tx.cache_count_hits(&tenant, &key, n).await }))
            .await
    }

    async fn cache_put(&self, tenant: &TenantId, entry: &NewCacheEntry<'_>) -> Result<(), Error> {
        let ttl = ttl_millis(entry.ttl, "a cache TTL")?;
        check_text("cache operation", Some(entry.operation))?;
        let digest = body_digest(entry.body);
        let now = Timestamp::now();
        let entry = CacheEntry {
            key: entry.key,
            operation: entry.operation.to_owned(),
            body: entry.body.to_vec(),
            created_at: now,
            expires_at: later(now, ttl),
            hits: 0,
        };
        let tenant = tenant.clone();
        self.write_row(job!(|tx| { tx.cache_put(&tenant, &entry, &digest).await }))
            .await
    }

    async fn cache_prune(&self, tenant: &TenantId) -> Result<u64, Error> {
        let tenant = tenant.clone();
        self.write(job!(|tx| {
            tx.cache_prune(&tenant, Timestamp::now()).await
        }))
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
        check_text("flight owner", Some(owner))?;
        let (tenant, key, owner) = (tenant.clone(), *key, owner.to_owned());
        self.write_row(job!(|tx| {
            for _ in 0..CLAIM_ATTEMPTS {
                let now = Timestamp::now();
                let until = later(now, lease);
                if let Some(token) = tx.insert_flight(&tenant, &key, &owner, until, now).await? {
                    return Ok(Flight::Leader {
                        token,
                        took_over: false,
                    });
                }
                if let Some((token, expired)) =
                    tx.take_over_flight(&tenant, &key, &owner, until, now).await?
                {
                    return Ok(Flight::Leader {
                        token,
                        took_over: expired,
                    });
                }
                if let Some((owner, lease_expires_at)) = tx.flight(&tenant, &key).await? {
                    return Ok(Flight::Held {
                        owner,
                        lease_expires_at,
                    });
                }
                // Released between the statements: claim again.
            }
            Err(Error::Unavailable {
                what: format!(
                    "the flight of cache key {key}: it was released {CLAIM_ATTEMPTS} times while being claimed"
                ),
            })
        }))
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
        let (tenant, key) = (tenant.clone(), *key);
        self.write_row(job!(|tx| {
            let until = later(Timestamp::now(), lease);
            tx.renew_flight(&tenant, &key, token, until).await
        }))
        .await
    }

    async fn release_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error> {
        let (tenant, key) = (tenant.clone(), *key);
        self.write_row(job!(|tx| { tx.release_flight(&tenant, &key, token).await }))
            .await
    }

    async fn wait_flight(&self, tenant: &TenantId, key: &RequestKey, at_most: Duration) {
        Backend::wait_flight(self, tenant, key, at_most).await;
    }

    async fn log_calls(&self, tenant: &TenantId, records: &[CallRecord]) -> Result<(), Error> {
        if records.is_empty() {
            return Ok(());
        }
        for r in records {
            check_text("call operation", Some(&r.operation))?;
            check_text("call model", Some(&r.model))?;
        }
        // Each entry's hits, counted with the records that log them, in the same transaction.
        let mut hits: Vec<(RequestKey, u64)> = Vec::new();
        for r in records
            .iter()
            .filter(|r| r.outcome == CallOutcome::CacheHit)
        {
            match hits.iter_mut().find(|(k, _)| *k == r.request_hash) {
                Some((_, n)) => *n += 1,
                None => hits.push((r.request_hash, 1)),
            }
        }
        let (tenant, records) = (tenant.clone(), records.to_vec());
        self.write(job!(|tx| {
            tx.insert_calls(&tenant, &records).await?;
            for (key, n) in &hits {
                tx.cache_count_hits(&tenant, key, *n).await?;
            }
            Ok(())
        }))
        .await
    }

    async fn calls(
        &self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error> {
        let tenant = tenant.clone();
        self.read_one(job!(|tx| { tx.calls(&tenant, since, until).await }))
            .await
    }
}
