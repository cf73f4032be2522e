//! Compaction: keeping a run's context bounded without losing work.
//!
//! Roles:
//! - [`Strategy`]: looks at a [`HistoryView`] of a run's context (sizes and tool-call ids from
//!   stored metadata, never message bodies) and returns a [`Plan`]. One file per strategy in
//!   [`strategies`]: `none`, `sliding`, `budget`, `clear-tool-results`, `summarize`,
//!   `structured`; one line of configuration picks one ([`config`]).
//! - Every cut a plan names is a [`SafeCut`](baton_core::units::SafeCut) from the protocol-unit
//!   analysis: a tool call is never separated from its result, and when no safe cut is near
//!   the desired one the plan keeps the context as it is rather than break the conversation.
//! - [`Logged`]: the decorator that logs what any strategy's compactions did.
//! - [`Summarizer`]: writes a summary's claims; [`Offline`] is the deterministic extractive
//!   one ([`summarizer`]), and [`state`] merges extracted claims into a working state.
//! - [`trigger`]: when a compaction pays for itself, and the guards against loops and against
//!   summaries that do not shrink anything.
//! - [`audit`]: what share of the file paths, commands, URLs and numbers of the dropped part is
//!   still reachable; [`probes`]: whether the user's constraints and the latest findings
//!   survive.
//! - [`replay`]: re-walks a recorded run step by step under each strategy, offline.
//!
//! Strategies plan; the runtime executes. Nothing here does IO (except [`Logged`]'s log file)
//! or needs an async runtime; installing a plan goes through the store's compare-and-swap.
//!
//! ```
//! use baton_compact::{HistoryView, Plan, Strategy, config::CompactionConfig};
//! use baton_core::units::ProtocolEvents;
//! use baton_core::{EntryMeta, Seq};
//!
//! let tail: Vec<EntryMeta> = (1..=30)
//!     .map(|s| EntryMeta { events: ProtocolEvents { seq: Seq(s), ..Default::default() }, tokens: 500 })
//!     .collect();
//! let view = HistoryView::new(None, &tail, &[], 0);
//! let strategy = CompactionConfig::named("sliding").build()?;
//! let plan = strategy.plan(&view);
//! assert_eq!(plan.cut(), Some(Seq(10)));       // keeps the last 20
//! assert_eq!(plan.tokens_after(&view), 20 * 500);
//! # Ok::<(), baton_compact::config::Error>(())
//! ```

pub mod audit;
pub mod config;
pub mod executor;
pub mod growth;
mod logged;
mod plan;
pub mod probes;
pub mod replay;
pub mod state;
pub mod strategies;
mod strategy;
pub mod summarizer;
pub mod trigger;
mod view;

use baton_core::Claim;
use baton_core::tokens::{ByteEstimate, TokenCounter};

pub use executor::{Execute, Executor, Outcome, Settings, Target};
pub use logged::Logged;
pub use plan::{Compaction, Keep, Plan, STUB_TOKENS};
pub use state::{Bounded, WorkingState};
pub use strategy::{Strategy, StrategyFn, strategy_fn};
pub use summarizer::{Offline, SummarizeError, Summarizer, SummaryRequest, Written};
pub use view::HistoryView;

/// Tokens a list of claims takes in the context's preamble (one line each, as assembled).
pub fn claims_tokens(claims: &[Claim]) -> u64 {
    claims
        .iter()
        .map(|c| u64::from(ByteEstimate.count_text(&c.text)) + CLAIM_OVERHEAD)
        .sum()
}

/// The per-claim cost of its bullet, kind heading share and `[seq N]` reference.
const CLAIM_OVERHEAD: u64 = 6;
