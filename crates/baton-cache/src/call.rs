//! `Cache::call`: key → authorize → cache → single-flight (in process, then across processes)
//! → execute → store → log, around any upstream call.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use baton_core::key::{KeyError, KeyInput, RequestKey, request_key};
use baton_core::prices::{Price, PriceTable};
use baton_core::usage::Usage;
use baton_core::{TenantId, Timestamp};
use baton_store::{CacheStore, CallOutcome, CallRecord, Flight, Lookup, NewCacheEntry};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::flight::Group;
use crate::policy::{AccessPolicy, AllowOwnTenant, Denied};

/// What one call asks for: the inputs of its key.
#[derive(Clone, Debug)]
pub struct CallRequest<'a> {
    /// The operation (`anthropic.messages`, …).
    pub operation: &'a str,
    /// The whole request body as the upstream receives it.
    pub body: &'a serde_json::Value,
    /// The model, for the log and the price.
    pub model: &'a str,
    /// Caller-declared versions (`schema_version`, `preprocess_version`, …).
    pub versions: &'a BTreeMap<String, String>,
    /// Content hashes of documents the request refers to.
    pub documents: &'a [String],
}

/// How one call may use the cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallPolicy {
    /// Fresh processing: skip the cache read (and in-flight sharing); the result is still
    /// stored unless `no_store`.
    pub no_cache: bool,
    /// Do not store the result.
    pub no_store: bool,
    /// How long the result may be served; the operation's TTL when `None`.
    pub ttl: Option<Duration>,
}

/// What the upstream call returned, with what the log needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer<T> {
    /// The result.
    pub value: T,
    /// The model that answered.
    pub model: String,
    /// The tokens billed, split as the price table prices them (fresh input, output, cache
    /// writes of both lifetimes, cache reads).
    pub usage: Usage,
    /// Whether it is a successful, complete result that may be stored (a reply cut short by
    /// its token limit is complete; anything the caller would not serve again is not).
    pub storable: bool,
}

/// What a caller got.
#[derive(Clone, Debug, PartialEq)]
pub struct Answered<T> {
    /// The result.
    pub value: T,
    /// How it was answered (never [`CallOutcome::Error`]).
    pub outcome: CallOutcome,
    /// The request's key.
    pub key: RequestKey,
    /// Every input token of the answer's prompt: fresh, written to and read from the prompt
    /// cache ([`Usage::context`]).
    pub input_tokens: u64,
    /// The output tokens of the answer.
    pub output_tokens: u64,
    /// The answer's tokens, split as they are priced.
    pub usage: Usage,
}

/// Why a call failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The policy hook refused the caller.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The request's key cannot be derived (the body is not a JSON object, …).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A TTL of zero, or a lease of zero.
    #[error("cache: {0}")]
    Invalid(String),
    /// The store failed.
    #[error("cache store: {0}")]
    Store(Arc<baton_store::Error>),
    /// The upstream call failed (this caller's, or the one it was coalesced with).
    #[error("{0}")]
    Upstream(Arc<dyn std::error::Error + Send + Sync>),
    /// A result could not be encoded for the cache.
    #[error("cache: encoding the result: {0}")]
    Encode(String),
    /// Another process held the flight longer than the wait limit.
    #[error("cache: waited {0:?} for another process computing the same request")]
    WaitedTooLong(Duration),
}

impl From<baton_store::Error> for CallError {
    fn from(e: baton_store::Error) -> Self {
        CallError::Store(Arc::new(e))
    }
}

/// What the cache stores for a result: the value and what the log needs about it. Version 1
/// had only `input_tokens` and `output_tokens`; version 2 adds `usage`, the whole split, and
/// reads a version 1 entry as fresh input and output.
#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    v: u32,
    model: String,
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    value: T,
}

impl<T> Envelope<T> {
    fn usage(&self) -> Usage {
        self.usage.unwrap_or(Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            ..Usage::default()
        })
    }
}

/// How the caller that ran the flight got its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Executed,
    /// Found in the cache after claiming the flight, or while waiting on another process.
    Coalesced,
}

#[derive(Clone)]
struct Landed {
    body: Arc<[u8]>,
    how: How,
}

type Flown = Result<Landed, CallError>;

/// The response cache of one tenant: see the crate docs.
pub struct Cache {
    store: Arc<dyn CacheStore>,
    tenant: TenantId,
    access: Arc<dyn AccessPolicy>,
    prices: PriceTable,
    owner: String,
    lease: Duration,
    max_wait: Duration,
    default_ttl: Duration,
    ttls: HashMap<String, Duration>,
    group: Group<RequestKey, Flown>,
    corrupt: AtomicU64,
    background: Option<BackgroundLog>,
}

/// The TTL of an operation without its own: a day.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);
/// How long a flight's holder is presumed alive without renewing: 30 s, renewed every 10 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

impl Cache {
    /// The tenant's cache on `store` (an `Arc<dyn Store>` coerces to it): every operation a
    /// day, leases of 30 s, the built-in price table, and the policy that lets a caller reach
    /// only its own tenant.
    pub fn new(store: Arc<dyn CacheStore>, tenant: TenantId) -> Self {
        Cache {
            store,
            tenant,
            access: Arc::new(AllowOwnTenant),
            prices: PriceTable::defaults(),
            owner: format!("{}:{}", std::process::id(), uuid::Uuid::now_v7().simple()),
            lease: DEFAULT_LEASE,
            max_wait: Duration::from_secs(15 * 60),
            default_ttl: DEFAULT_TTL,
            ttls: HashMap::new(),
            group: Group::new(),
            corrupt: AtomicU64::new(0),
            background: None,
        }
    }

    /// Writes the call log from a task of its own, in batches, instead of before each call
    /// returns: a call (a cache hit above all) no longer waits for its log line's transaction,
    /// and concurrent calls share one. Records still queued when the process dies are lost, so
    /// a long-lived owner (the HTTP service) calls [`flush_log`](Self::flush_log) before it
    /// exits. Must be called inside a tokio runtime.
    pub fn with_background_log(mut self) -> Self {
        self.background = Some(BackgroundLog::start(
            self.store.clone(),
            self.tenant.clone(),
        ));
        self
    }

    /// Waits until every call-log record handed over so far is written (at once without
    /// [`with_background_log`](Self::with_background_log)).
    pub async fn flush_log(&self) {
        if let Some(background) = &self.background {
            let (done, written) = tokio::sync::oneshot::channel();
            if background.tx.send(LogMsg::Flush(done)).is_ok() {
                let _ = written.await;
            }
        }
    }

    /// Uses `policy` to authorize every call.
    pub fn with_policy(mut self, policy: Arc<dyn AccessPolicy>) -> Self {
        self.access = policy;
        self
    }

    /// Prices calls at `prices`.
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// Keeps `operation`'s results for `ttl` (`None`: every operation without its own).
    pub fn with_ttl(mut self, operation: Option<&str>, ttl: Duration) -> Result<Self, CallError> {
        check_nonzero(ttl, "a TTL")?;
        match operation {
            Some(op) => {
                self.ttls.insert(op.to_owned(), ttl);
            }
            None => self.default_ttl = ttl,
        }
        Ok(self)
    }

    /// Holds flights with leases of `lease`, renewed every third of it.
    pub fn with_lease(mut self, lease: Duration) -> Result<Self, CallError> {
        check_nonzero(lease, "a lease")?;
        self.lease = lease;
        Ok(self)
    }

    /// The tenant this cache serves.
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// How many stored entries were found corrupt (and not served) so far.
    pub fn corrupt_entries(&self) -> u64 {
        self.corrupt.load(Ordering::Relaxed)
    }

    /// The price of `model`, when the table has one.
    pub fn price(&self, model: &str) -> Option<&Price> {
        self.prices.get(model)
    }

    /// The key of `request` for this tenant.
    pub fn key(&self, request: &CallRequest<'_>) -> Result<RequestKey, CallError> {
        Ok(request_key(&KeyInput {
            tenant: &self.tenant,
            operation: request.operation,
            body: request.body,
            versions: request.versions,
            documents: request.documents,
        })?)
    }

    /// Answers `request`: from the cache, from an identical call in flight (in this process
    /// or another), or by running `work`, which then runs at most once. Every caller's call is
    /// logged, whatever its outcome.
    pub async fn call<T, E, F, Fut>(
        &self,
        request: &CallRequest<'_>,
        policy: &CallPolicy,
        work: F,
    ) -> Result<Answered<T>, CallError>
    where
        T: Serialize + DeserializeOwned,
        E: std::error::Error + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Answer<T>, E>>,
    {
        self.access.check(&self.tenant, request.operation)?;
        let key = self.key(request)?;
        let ttl = match policy.ttl {
            Some(ttl) => check_nonzero(ttl, "a TTL")?,
            None => self
                .ttls
                .get(request.operation)
                .copied()
                .unwrap_or(self.default_ttl),
        };
        let started = Instant::now();
        let at = Timestamp::now();

        if !policy.no_cache
            && let Some(body) = self.lookup::<T>(&key, true).await?
        {
            return self
                .answer(
                    request,
                    key,
                    at,
                    started,
                    body,
                    CallOutcome::CacheHit,
                    false,
                )
                .await;
        }

        let store_result = !policy.no_store;
        let (flown, outcome, overlapped) = if policy.no_cache {
            let flown = self
                .execute(&key, request.operation, ttl, store_result, work)
                .await
                .map(|body| Landed {
                    body,
                    how: How::Executed,
                });
            (flown, CallOutcome::Executed, false)
        } else {
            let shared = self
                .group
                .run(key, || {
                    self.lead(key, request.operation, ttl, store_result, work)
                })
                .await;
            let outcome = match (&shared.value, shared.ran) {
                (Ok(landed), true) if landed.how == How::Executed => CallOutcome::Executed,
                _ => CallOutcome::Coalesced,
            };
            let overlapped = shared.joined > 1
                || shared
                    .value
                    .as_ref()
                    .is_ok_and(|landed| landed.how == How::Coalesced);
            (shared.value, outcome, overlapped)
        };
        match flown {
            Ok(landed) => {
                self.answer(request, key, at, started, landed.body, outcome, overlapped)
                    .await
            }
            Err(err) => {
                self.log(CallRecord {
                    at,
                    operation: request.operation.to_owned(),
                    request_hash: key,
                    model: request.model.to_owned(),
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_usd: None,
                    outcome: CallOutcome::Error,
                    latency_ms: elapsed_ms(started),
                    overlapped,
                })
                .await;
                Err(err)
            }
        }
    }

    /// Decodes a body for the caller and logs the call.
    #[allow(clippy::too_many_arguments)]
    async fn answer<T: DeserializeOwned>(
        &self,
        request: &CallRequest<'_>,
        key: RequestKey,
        at: Timestamp,
        started: Instant,
        body: Arc<[u8]>,
        outcome: CallOutcome,
        overlapped: bool,
    ) -> Result<Answered<T>, CallError> {
        let envelope: Envelope<T> = serde_json::from_slice(&body)
            .map_err(|e| CallError::Encode(format!("decoding a result just stored: {e}")))?;
        let usage = envelope.usage();
        // Every part at its own rate: a prompt read from the provider's cache costs a tenth of
        // one sent fresh, and is most of the input of an agent's calls.
        let cost = self
            .prices
            .get(&envelope.model)
            .map(|p| p.usage_cost(&usage));
        self.log(CallRecord {
            at,
            operation: request.operation.to_owned(),
            request_hash: key,
            model: envelope.model,
            input_tokens: usage.context(),
            output_tokens: usage.output,
            cost_usd: cost,
            outcome,
            latency_ms: elapsed_ms(started),
            overlapped,
        })
        .await;
        Ok(Answered {
            value: envelope.value,
            outcome,
            key,
            input_tokens: usage.context(),
            output_tokens: usage.output,
            usage,
        })
    }

    /// A live, intact, decodable entry. A corrupt one is reported and treated as a miss; one
    /// that is intact but does not decode stays (the store removes only what fails its
    /// checksum), so it is reported on the call's first lookup only (`report`).
    async fn lookup<T: DeserializeOwned>(
        &self,
        key: &RequestKey,
        report: bool,
    ) -> Result<Option<Arc<[u8]>>, CallError> {
        match self.store.cache_get(&self.tenant, key).await? {
            Lookup::Hit(entry) => {
                if let Err(e) = serde_json::from_slice::<Envelope<T>>(&entry.body) {
                    if report {
                        self.corrupt.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(%key, error = %e, "a cache entry does not decode; treated as a miss");
                    }
                    return Ok(None);
                }
                Ok(Some(entry.body.into()))
            }
            Lookup::Miss => Ok(None),
            Lookup::Corrupt { detail } => {
                self.corrupt.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%key, %detail, "a corrupt cache entry was removed; treated as a miss");
                Ok(None)
            }
        }
    }

    /// The in-process leader's part: claim the flight across processes, then run the work,
    /// or wait for the process that holds it.
    async fn lead<T, E, F, Fut>(
        &self,
        key: RequestKey,
        operation: &str,
        ttl: Duration,
        store_result: bool,
        work: F,
    ) -> Flown
    where
        T: Serialize + DeserializeOwned,
        E: std::error::Error + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Answer<T>, E>>,
    {
        let waited = Instant::now();
        let mut backoff = Duration::from_millis(5);
        loop {
            match self
                .store
                .claim_flight(&self.tenant, &key, &self.owner, self.lease)
                .await?
            {
                Flight::Leader { token, took_over } => {
                    let mut guard = FlightGuard {
                        store: self.store.clone(),
                        tenant: self.tenant.clone(),
                        key,
                        token,
                        released: false,
                    };
                    if took_over {
                        tracing::info!(%key, token, "took over a flight whose lease expired");
                    }
                    // The holder before may have stored the result just before letting go.
                    if let Some(body) = self.lookup::<T>(&key, false).await? {
                        guard.release().await;
                        return Ok(Landed {
                            body,
                            how: How::Coalesced,
                        });
                    }
                    let beat = self.heartbeat(key, token);
                    let done = self.execute(&key, operation, ttl, store_result, work);
                    let result = tokio::select! {
                        biased;
                        result = done => result,
                        () = beat => unreachable_heartbeat(),
                    };
                    guard.release().await;
                    return result.map(|body| Landed {
                        body,
                        how: How::Executed,
                    });
                }
                Flight::Held { .. } => {
                    if waited.elapsed() > self.max_wait {
                        return Err(CallError::WaitedTooLong(self.max_wait));
                    }
                    self.store.wait_flight(&self.tenant, &key, backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                    if let Some(body) = self.lookup::<T>(&key, false).await? {
                        return Ok(Landed {
                            body,
                            how: How::Coalesced,
                        });
                    }
                }
            }
        }
    }

    /// Renews the flight's lease every third of it, forever (the caller stops polling it).
    async fn heartbeat(&self, key: RequestKey, token: u64) {
        let mut tick = tokio::time::interval(self.lease / 3);
        tick.tick().await;
        loop {
            tick.tick().await;
            match self
                .store
                .renew_flight(&self.tenant, &key, token, self.lease)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(%key, token, "lost the flight's lease; finishing the call anyway");
                }
                Err(e) => tracing::warn!(%key, error = %e, "could not renew the flight's lease"),
            }
        }
    }

    /// Runs the work and stores a storable result; returns the stored body.
    async fn execute<T, E, F, Fut>(
        &self,
        key: &RequestKey,
        operation: &str,
        ttl: Duration,
        store_result: bool,
        work: F,
    ) -> Result<Arc<[u8]>, CallError>
    where
        T: Serialize,
        E: std::error::Error + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Answer<T>, E>>,
    {
        let answer = work().await.map_err(|e| CallError::Upstream(Arc::new(e)))?;
        let body: Arc<[u8]> = serde_json::to_vec(&Envelope {
            v: 2,
            model: answer.model,
            input_tokens: answer.usage.context(),
            output_tokens: answer.usage.output,
            usage: Some(answer.usage),
            value: answer.value,
        })
        .map_err(|e| CallError::Encode(e.to_string()))?
        .into();
        if store_result && answer.storable {
            self.store
                .cache_put(
                    &self.tenant,
                    &NewCacheEntry {
                        key: *key,
                        operation,
                        body: &body,
                        ttl,
                    },
                )
                .await?;
        }
        Ok(body)
    }

    async fn log(&self, record: CallRecord) {
        let record = match &self.background {
            Some(background) => match background.tx.send(LogMsg::Record(record)) {
                Ok(()) => return,
                // The writer is gone (its runtime is shutting down): write it here.
                Err(tokio::sync::mpsc::error::SendError(LogMsg::Record(record))) => record,
                Err(_) => return,
            },
            None => record,
        };
        // A call that was answered stays answered if its log line cannot be written: the
        // failure is reported, not turned into a failed call.
        if let Err(e) = self.store.log_calls(&self.tenant, &[record]).await {
            tracing::warn!(error = %e, "could not append to the call log");
        }
    }
}

/// What the background log writer is handed.
enum LogMsg {
    Record(CallRecord),
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The most records one background write takes.
const LOG_BATCH: usize = 1000;

/// The call log written by a task of its own: it takes every record queued when it wakes, up
/// to [`LOG_BATCH`], and writes them in one transaction.
struct BackgroundLog {
    tx: tokio::sync::mpsc::UnboundedSender<LogMsg>,
}

impl BackgroundLog {
    fn start(store: Arc<dyn CacheStore>, tenant: TenantId) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<LogMsg>();
        tokio::spawn(async move {
            let mut batch = Vec::new();
            let mut flushes = Vec::new();
            while let Some(first) = rx.recv().await {
                let mut next = Some(first);
                while let Some(msg) = next {
                    match msg {
                        LogMsg::Record(record) => batch.push(record),
                        LogMsg::Flush(done) => flushes.push(done),
                    }
                    next = if batch.len() < LOG_BATCH {
                        rx.try_recv().ok()
                    } else {
                        None
                    };
                }
                if !batch.is_empty() {
                    if let Err(e) = store.log_calls(&tenant, &batch).await {
                        tracing::warn!(error = %e, records = batch.len(), "could not append to the call log");
                    }
                    batch.clear();
                }
                for done in flushes.drain(..) {
                    let _ = done.send(());
                }
            }
        });
        BackgroundLog { tx }
    }
}

fn unreachable_heartbeat() -> Result<Arc<[u8]>, CallError> {
    Err(CallError::Invalid("the heartbeat stopped".into()))
}

fn check_nonzero(d: Duration, what: &str) -> Result<Duration, CallError> {
    if d.is_zero() {
        return Err(CallError::Invalid(format!("{what} must be more than zero")));
    }
    Ok(d)
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Releases a flight: explicitly when the work is done, or from `Drop` when the caller was
/// cancelled or panicked, so waiters in other processes do not wait out the lease.
struct FlightGuard {
    store: Arc<dyn CacheStore>,
    tenant: TenantId,
    key: RequestKey,
    token: u64,
    released: bool,
}

impl FlightGuard {
    async fn release(&mut self) {
        // Marked released only once the store said so: a caller cancelled during the release
        // leaves it to `Drop`.
        if let Err(e) = self
            .store
            .release_flight(&self.tenant, &self.key, self.token)
            .await
        {
            tracing::warn!(key = %self.key, error = %e, "could not release a flight; its lease will expire");
        }
        self.released = true;
    }
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, tenant, key, token) = (
            self.store.clone(),
            self.tenant.clone(),
            self.key,
            self.token,
        );
        handle.spawn(async move {
            let _ = store.release_flight(&tenant, &key, token).await;
        });
    }
}
