//! History: a stored message, lists and pages of them, and what an append stored.

use baton_core::{ContentBlock, Entry, Seq};
use serde::Serialize;

/// A stored message: its seq, baton's vendor-neutral message (role and content blocks, the
/// form history rows keep), its stored token count and when it was appended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EntryView {
    /// Its position in the run, from 1.
    pub seq: u64,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its content blocks in baton's form (`{"type": "text", "text": …}`, `tool_use`,
    /// `tool_result`, `thinking`, `redacted_thinking`, `image`, `document`, in a tool result
    /// `tool_reference`, and `opaque` holding a vendor block baton does not read).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub content: Vec<ContentBlock>,
    /// Its token count, computed when it was appended.
    pub tokens: u32,
    /// When it was appended (RFC 3339).
    pub created_at: String,
}

impl From<&Entry> for EntryView {
    fn from(entry: &Entry) -> Self {
        EntryView {
            seq: entry.seq.0,
            role: entry.message.role.as_str().to_owned(),
            content: entry.message.content.clone(),
            tokens: entry.tokens,
            created_at: entry.created_at.to_string(),
        }
    }
}

impl EntryView {
    /// The views of `entries`, in order.
    pub fn all(entries: &[Entry]) -> Vec<Self> {
        entries.iter().map(EntryView::from).collect()
    }
}

/// Stored messages: a history read whole or a range of it, recalled originals, search hits.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessageList {
    /// The messages, in seq order.
    pub messages: Vec<EntryView>,
}

impl MessageList {
    /// The list of `entries`.
    pub fn of(entries: &[Entry]) -> Self {
        MessageList {
            messages: EntryView::all(entries),
        }
    }
}

/// A page of history.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryPage {
    /// The entries, in seq order.
    pub messages: Vec<EntryView>,
    /// The `from` of the next page, or `null` when this page reached `to` or the end.
    pub next_from: Option<u64>,
}

/// What an append stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Appended {
    /// The seqs the messages were given, in order.
    pub seqs: Vec<u64>,
    /// Each message's token count, in order.
    pub tokens: Vec<u32>,
}

impl Appended {
    /// What appending messages of `tokens` stored at `seqs`.
    pub fn of(seqs: &[Seq], tokens: impl IntoIterator<Item = u32>) -> Self {
        Appended {
            seqs: seqs.iter().map(|s| s.0).collect(),
            tokens: tokens.into_iter().collect(),
        }
    }
}
