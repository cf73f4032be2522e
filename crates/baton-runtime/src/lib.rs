//! baton's runtime: what happens around a model call, against a store.
//!
//! Roles:
//! - [`compact`]: carries out one compaction of a run with `baton_compact`'s executor, the
//!   store as its target: reads the run's context as metadata
//!   ([`Store::context_meta`](baton_store::Store::context_meta)), asks the strategy for a plan
//!   (the clearing layer under it when the context is over its limit), admits it through the
//!   trigger, writes the new working state, checks it, audits what the dropped part's paths,
//!   commands, URLs and numbers still reach, and installs it through the store's
//!   compare-and-swap. History is never touched; a lost race writes nothing and says so.
//!
//! - [`agent`]: the agent loop (context, model call, tools, every event stored before the next
//!   step), which calls [`compact`] before a model call, never from inside one.
//! - [`tools`]: the tools the model may call, confined to the working directory.
//! - [`summarizer`]: the model-backed summarizer.
//!
//! Strategies plan; this crate executes.
//!
//! ```no_run
//! # async fn demo(store: &dyn baton_store::Store) -> Result<(), baton_runtime::Error> {
//! use baton_compact::{Offline, config::CompactionConfig};
//! use baton_core::prices::PriceTable;
//! use baton_core::tokens::ByteEstimate;
//! use baton_core::{RunId, TenantId};
//! use baton_runtime::{Compactor, Outcome, compact};
//!
//! let config = CompactionConfig::named("structured");
//! let strategy = config.build().unwrap();
//! let compactor = Compactor {
//!     strategy: &*strategy,
//!     summarizer: &Offline,
//!     settings: &config.settings,
//!     clear: config.clear().unwrap(),
//!     prices: &PriceTable::defaults(),
//!     counter: &ByteEstimate,
//!     force: false,
//!     dry_run: false,
//! };
//! let run = RunId::new("r-1").unwrap();
//! match compact(store, &TenantId::default_tenant(), &run, &compactor).await? {
//!     Outcome::Compacted(c) => println!("{} → {} tokens", c.tokens_before, c.tokens_after),
//!     other => println!("nothing done: {other:?}"),
//! }
//! # Ok(()) }
//! ```

pub mod agent;
mod compact;
pub mod summarizer;
pub mod tools;

pub use compact::{Compactor, Error, Outcome, compact};
