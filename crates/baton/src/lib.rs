//! baton for Rust agent authors: durable, bounded context under one name.
//!
//! Roles, each the crate it re-exports:
//! - [`core`]: the types every other part speaks (runs, messages, summaries, claims, seqs) and
//!   context assembly; no IO.
//! - [`store`]: the [`Store`] contract (append-only history, summaries installed by
//!   compare-and-swap, pins, search, imports) with the cache's, the ledger's and the keys'
//!   traits, and its one error type with [`ErrorKind`].
//! - [`sqlite`] and [`postgres`]: the two backends; [`open`] picks one from a URL.
//! - [`compact`]: compaction strategies, which plan and never write.
//! - [`runtime`]: carries a plan out against a store ([`runtime::compact`]) and runs the agent
//!   loop.
//! - [`cache`]: the exact response cache with in-flight deduplication and the call log.
//! - [`ledger`]: the idempotency ledger's outcomes ([`LedgerStore`] is its store).
//! - [`provider`]: model providers (Anthropic, OpenAI-compatible, scripted).
//!
//! The runnable examples in `examples/` are the tour: `agent_loop` appends, compacts and
//! assembles a context on a temporary SQLite file; `gateway_client` talks to a running
//! `baton serve` over HTTP.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton::store::Error> {
//! use baton::{Message, NewEntry, NewRun, Role, TenantId};
//!
//! let store = baton::open("sqlite://agent.db").await?;
//! let tenant = TenantId::default_tenant();
//! let run = store.create_run(&tenant, &NewRun::default()).await?;
//! let hello = NewEntry::estimated(Message::text(Role::User, "list the open issues"));
//! store.append(&tenant, &run.id, &[hello]).await?;
//! let context = store.context(&tenant, &run.id).await?;
//! println!("{} messages, {} tokens", context.messages.len(), context.tokens);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use std::sync::Arc;

pub use baton_cache as cache;
pub use baton_compact as compact;
pub use baton_core as core;
pub use baton_postgres as postgres;
pub use baton_provider as provider;
pub use baton_runtime as runtime;
pub use baton_sqlite as sqlite;
pub use baton_store as store;
pub use baton_store::ledger;

pub use baton_core::{Message, Role, RunId, Seq, TenantId, Timestamp};
pub use baton_store::{
    CacheStore, Error, ErrorKind, KeyStore, LedgerStore, NewEntry, NewRun, Store,
};

/// Opens the store `url` names, applying missing migrations: `postgres://` or
/// `postgresql://` selects PostgreSQL (`?schema=NAME` picks the schema), anything else is a
/// SQLite file path, optionally written `sqlite://PATH` (created when missing).
///
/// The store is every trait at once: pass it where a narrower one is taken
/// (`Arc<dyn CacheStore>` for [`cache::Cache::new`]) by upcasting the `Arc`.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(baton_postgres::PgStore::connect(url).await?));
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    Ok(Arc::new(baton_sqlite::SqliteStore::open(path).await?))
}
