//! The [`Summarizer`] seam, and [`Offline`], the deterministic extractive summarizer.
//!
//! A summarizer writes the claims of a new summary version from the active summary and the
//! messages being compacted. The model-backed summarizer (a provider call) plugs into the same
//! trait; `Offline` needs no model and is what replay uses.

mod offline;

use async_trait::async_trait;
use baton_core::tokens::TokenCounter;
use baton_core::{Claim, Entry, Seq, Summary};

pub use offline::Offline;

/// What a summarizer is asked.
#[derive(Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// The active summary, whose claims the new one builds on.
    pub base: Option<&'a Summary>,
    /// The messages being compacted: every entry after the base's coverage through the cut,
    /// in order.
    pub old: &'a [Entry],
    /// The cut: every claim written must cite a seq at or before it.
    pub cut: Seq,
    /// What the summary must keep, when the configuration overrides the default.
    pub instructions: Option<&'a str>,
    /// The run's pinned seqs: claims citing them must be carried.
    pub pins: &'a [Seq],
    /// The most tokens the working state may take ([`crate::state::bound`]).
    pub cap: u64,
    /// How the run counts tokens.
    pub counter: &'a dyn TokenCounter,
}

impl std::fmt::Debug for SummaryRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryRequest")
            .field("base", &self.base.map(|b| b.id))
            .field("old", &self.old.len())
            .field("cut", &self.cut)
            .field("pins", &self.pins)
            .field("cap", &self.cap)
            .field("counter", &self.counter.name())
            .finish()
    }
}

/// What a summarizer wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The new version's claims.
    pub claims: Vec<Claim>,
    /// Tokens the summarizer read (0 offline).
    pub input_tokens: u64,
    /// Tokens the summarizer wrote (0 offline).
    pub output_tokens: u64,
}

/// Why a summary could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// The summarizer's backend failed (a provider call, say).
    #[error("summarizer {summarizer}: {detail}")]
    Failed {
        /// Which summarizer.
        summarizer: String,
        /// What went wrong.
        detail: String,
        /// The tokens the failed attempts read and wrote all the same (0 offline): a failed
        /// compaction still costs them.
        tokens: u64,
    },
}

impl SummarizeError {
    /// The tokens spent before the summarizer gave up.
    pub fn tokens(&self) -> u64 {
        match self {
            SummarizeError::Failed { tokens, .. } => *tokens,
        }
    }
}

/// Writes summary claims.
///
/// Contract: every claim cites a `source_seq` at or before [`SummaryRequest::cut`] and in the
/// run (claims carried from the base cite older seqs, which is fine); the store's install checks
/// this again and refuses otherwise. A summarizer should carry the base's claims that cite
/// pinned seqs unchanged.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// The summarizer's name, as logged.
    fn name(&self) -> &str;

    /// Whether summarizing calls a model (and so costs the tokens it reads and writes, which
    /// the trigger's cost policy weighs). `false` for [`Offline`].
    fn calls_a_model(&self) -> bool {
        true
    }

    /// Writes the claims of the summary that replaces `request.base` and `request.old`.
    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<Written, SummarizeError>;
}
