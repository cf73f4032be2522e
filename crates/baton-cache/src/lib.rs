//! The exact response cache, in-flight deduplication and the call log.
//!
//! [`Cache::call`] wraps any upstream call (a model call, a document extraction) with, in order:
//! 1. authorization by an [`AccessPolicy`] hook, with the caller's tenant (a key is never a
//!    permission);
//! 2. the request's key ([`baton_core::key`]: SHA-256 over the RFC 8785 canonical form of the
//!    whole body, the operation, declared versions, document hashes and the tenant);
//! 3. the cache: a live, intact entry is served (unless the caller asked for fresh processing);
//! 4. single-flight in this process ([`flight::Group`]): concurrent identical calls share one
//!    execution, and a leader that is cancelled or panics is replaced by exactly one follower;
//! 5. single-flight across processes: a flight record in the store, claimed atomically with a
//!    lease that the holder renews; other processes poll for the result with backoff (5 ms,
//!    doubling to 200 ms) and one of them takes over when the lease expires;
//! 6. the execution, whose successful, complete result is stored (unless `no_store`);
//! 7. a call-log record for every caller: executed, cache hit, coalesced or error.
//!
//! [`CachedProvider`] puts a provider behind it; [`report`] reads the log back as the
//! duplicate-work report.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn baton_store::CacheStore>) -> Result<(), baton_cache::CallError> {
//! use baton_cache::{Answer, Cache, CallPolicy, CallRequest};
//! let cache = Cache::new(store, baton_core::TenantId::default_tenant());
//! let body = serde_json::json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
//! let versions = Default::default();
//! let request = CallRequest { operation: "openai.chat_completions", body: &body, model: "gpt-4o-mini", versions: &versions, documents: &[] };
//! let answered = cache
//!     .call(&request, &CallPolicy::default(), || async {
//!         Ok::<_, std::io::Error>(Answer { value: "hello".to_owned(), model: "gpt-4o-mini".into(), usage: baton_core::usage::Usage { input: 9, output: 1, ..Default::default() }, storable: true })
//!     })
//!     .await?;
//! println!("{} ({:?})", answered.value, answered.outcome);
//! # Ok(()) }
//! ```

pub mod call;
pub mod flight;
pub mod policy;
pub mod provider;
pub mod report;

pub use call::{
    Answer, Answered, Cache, CallError, CallPolicy, CallRequest, DEFAULT_LEASE, DEFAULT_TTL,
};
pub use policy::{AccessPolicy, AllowOperations, AllowOwnTenant, Denied};
pub use provider::CachedProvider;
