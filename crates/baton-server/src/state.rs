//! What every handler shares: the store, the configuration, the metrics, each tenant's cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use baton_cache::Cache;
use baton_core::TenantId;
use baton_core::prices::PriceTable;
use baton_store::Store;

use crate::gateway::managed::TenantContext;
use crate::metrics::Metrics;

/// How the service runs; `baton serve`'s flags.
#[derive(Clone, Debug)]
pub struct Config {
    /// The largest request body accepted (413 above it).
    pub body_limit: usize,
    /// How long an API request may take before it is answered 503 (the gateway's upstream
    /// calls have their own limit).
    pub request_timeout: Duration,
    /// How long the gateway waits for an upstream's response head, and between its chunks.
    pub upstream_timeout: Duration,
    /// Where `POST /v1/chat/completions` goes: an OpenAI-compatible base URL including `/v1`.
    pub upstream_openai: Option<String>,
    /// Where `POST /v1/messages` goes: an Anthropic base URL without `/v1`.
    pub upstream_anthropic: Option<String>,
    /// The tenant of gateway requests that carry no `x-baton-key` (`None`: they are refused).
    pub gateway_tenant: Option<TenantId>,
    /// How long the gateway's cached answers are served.
    pub cache_ttl: Duration,
    /// How long a request's head may take to arrive once its first byte has (the connection
    /// is closed after it).
    pub header_read_timeout: Duration,
    /// How long a connection with no request in flight may send nothing before it is closed.
    pub idle_timeout: Duration,
    /// How long a request's body may take to arrive whole once the handler reads it (408).
    pub body_read_timeout: Duration,
    /// The most connections served at once; the next ones are answered 503 and closed.
    pub max_connections: usize,
    /// The prices the gateway's call log costs calls at (the reports' table: the built-in one,
    /// or `--prices FILE`).
    pub prices: PriceTable,
    /// Whether gateway conversations are captured as runs (`baton serve --no-capture` turns it
    /// off; see `gateway::capture`).
    pub capture: bool,
    /// Managed context for the gateway requests of a tenant that name none (`baton serve
    /// --managed-context`; see `gateway::managed`). Needs `capture`.
    pub managed_context: HashMap<TenantId, TenantContext>,
    /// Whether `/ui` (the dashboard) is served (`baton serve --no-ui` turns it off).
    pub ui: bool,
    /// The tenant `/ui` shows without a key, to loopback `Host`s only (`baton serve` sets its
    /// `--tenant` when it listens on loopback only); `None`: every visitor signs in with a key.
    pub ui_open_tenant: Option<TenantId>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            body_limit: 8 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            upstream_timeout: Duration::from_secs(300),
            upstream_openai: None,
            upstream_anthropic: None,
            gateway_tenant: None,
            cache_ttl: baton_cache::DEFAULT_TTL,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(20),
            max_connections: 1024,
            prices: PriceTable::defaults(),
            capture: true,
            managed_context: HashMap::new(),
            ui: true,
            ui_open_tenant: None,
        }
    }
}

/// The state behind every route.
pub struct AppState {
    /// The store `--db` names.
    pub(crate) store: Arc<dyn Store>,
    /// The configuration.
    pub(crate) config: Config,
    /// The metrics `/metrics` serves.
    pub(crate) metrics: Metrics,
    /// The client the gateway calls upstreams with.
    pub(crate) http: reqwest::Client,
    caches: Mutex<HashMap<TenantId, Arc<Cache>>>,
    /// The gateway calls captured lately (`gateway::capture::Recent`).
    pub(crate) captured: crate::gateway::capture::Recent,
    /// Where each conversation's last capture stopped (`gateway::capture::Tails`).
    pub(crate) tails: crate::gateway::capture::Tails,
    draining: AtomicBool,
}

impl AppState {
    /// The state of a server over `store`.
    pub fn new(store: Arc<dyn Store>, config: Config) -> anyhow::Result<Arc<Self>> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(config.upstream_timeout)
            .pool_max_idle_per_host(64)
            .build()?;
        Ok(Arc::new(AppState {
            store,
            config,
            metrics: Metrics::new(),
            http,
            caches: Mutex::new(HashMap::new()),
            captured: crate::gateway::capture::Recent::new(),
            tails: crate::gateway::capture::Tails::new(),
            draining: AtomicBool::new(false),
        }))
    }

    /// The response cache of `tenant` (one per tenant, so in-process single-flight spans every
    /// request of the tenant).
    pub fn cache(&self, tenant: &TenantId) -> Arc<Cache> {
        let mut caches = self.caches.lock().unwrap_or_else(PoisonError::into_inner);
        caches
            .entry(tenant.clone())
            .or_insert_with(|| {
                let cache = Cache::new(self.store.clone(), tenant.clone());
                let cache = cache
                    .with_ttl(None, self.config.cache_ttl)
                    .unwrap_or_else(|_| Cache::new(self.store.clone(), tenant.clone()))
                    .with_prices(self.config.prices.clone());
                // A hit must not wait for its log line: the log is written in batches, and
                // flushed when the server stops.
                Arc::new(cache.with_background_log())
            })
            .clone()
    }

    /// Writes every call-log record still queued (the server calls it as it stops).
    pub async fn flush_logs(&self) {
        let caches: Vec<Arc<Cache>> = self
            .caches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for cache in caches {
            cache.flush_log().await;
        }
    }

    /// Runs CPU-bound `work` on the blocking pool and waits for it. `work` is handed a flag
    /// that is set when the waiting future is dropped (the client hung up, the request timed
    /// out), and must stop soon after it is set, returning `None`: work in `spawn_blocking`
    /// cannot be cancelled from outside, so without the flag N abandoned requests would keep N
    /// cores busy. The `baton_blocking_tasks` gauge counts the work running.
    pub async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&AtomicBool) -> Option<T> + Send + 'static,
    ) -> Result<Option<T>, tokio::task::JoinError> {
        /// Sets the flag when dropped: when the request's future goes away.
        struct CancelOnDrop(Arc<AtomicBool>);
        impl Drop for CancelOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        let gauge = self.metrics.blocking_tasks();
        tokio::task::spawn_blocking(move || {
            gauge.inc();
            let done = work(&cancel);
            gauge.dec();
            done
        })
        .await
    }

    /// Marks the server as shutting down: `/readyz` answers 503 from now on.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is shutting down.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}
