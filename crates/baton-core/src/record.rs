//! What a store keeps: runs, history entries and summary versions.

use serde::{Deserialize, Serialize};

use crate::units::ProtocolEvents;
use crate::{Claim, Message, RunId, Seq, SummaryId, TenantId, Timestamp};

/// Where a run is in its life. Only an active run takes new summaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Taking messages and summaries.
    Active,
    /// Finished normally.
    Completed,
    /// Stopped on purpose; never reactivated by an install.
    Cancelled,
}

impl RunStatus {
    /// The lowercase name, as stored and serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Active => "active",
            RunStatus::Completed => "completed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(RunStatus::Active),
            "completed" => Some(RunStatus::Completed),
            "cancelled" => Some(RunStatus::Cancelled),
            _ => None,
        }
    }
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Its id, unique within its tenant.
    pub id: RunId,
    /// The tenant that owns it.
    pub tenant: TenantId,
    /// Where it is in its life.
    pub status: RunStatus,
    /// What the agent is trying to do.
    pub goal: Option<String>,
    /// Standing instructions placed first in every context.
    pub rules: Option<String>,
    /// The summary version context assembly uses, if any.
    pub active_summary_id: Option<SummaryId>,
    /// The last seq appended (0 when the history is empty).
    pub last_seq: Seq,
    /// Which old tool results its context shows as a stub instead of in full (the
    /// `clear-tool-results` strategy); history keeps every original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleared: Option<Cleared>,
    /// When it was created.
    pub created_at: Timestamp,
}

/// A message as the store keeps it. Serializes flat: `{"seq":1,"role":…,"content":[…],…}`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// Its position in the run.
    pub seq: Seq,
    /// The message.
    #[serde(flatten)]
    pub message: Message,
    /// Its token count, computed once at append time.
    pub tokens: u32,
    /// When it was appended.
    pub created_at: Timestamp,
}

/// A summary version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Its id.
    pub id: SummaryId,
    /// The run it summarizes.
    pub run: RunId,
    /// The last seq it covers: context assembly sends it in place of messages `1..=coverage`.
    pub coverage: Seq,
    /// The version it was built from (`None` for a run's first summary).
    pub previous_id: Option<SummaryId>,
    /// What it says.
    pub claims: Vec<Claim>,
    /// What made it (strategy, sizes, retention audit), as its installer gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
    /// When it was installed.
    pub created_at: Timestamp,
}

impl Summary {
    /// The tokens its working state takes in a context, as the compaction that wrote it
    /// measured them with the run's tokenizer (`state_tokens` in its meta), when it did.
    pub fn state_tokens(&self) -> Option<u64> {
        self.meta.as_ref()?.get("state_tokens")?.as_u64()
    }
}

/// Which tool results a context shows as a stub naming the tool, the seq and how to recall it:
/// those in messages with seq `≤ through` whose stored token count is at least `min_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cleared {
    /// The last seq whose tool results may be stubbed.
    pub through: Seq,
    /// Results of messages smaller than this stay whole.
    pub min_tokens: u32,
}

/// A history entry without its body: what planning a compaction needs (its size and the tool
/// calls it opens or answers), so a plan never reads message bodies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryMeta {
    /// Its seq and the tool-call ids it opens and answers.
    pub events: ProtocolEvents,
    /// Its stored token count.
    pub tokens: u32,
}

impl EntryMeta {
    /// The metadata of a full entry.
    pub fn of(entry: &Entry) -> Self {
        EntryMeta {
            events: ProtocolEvents::of(entry.seq, &entry.message),
            tokens: entry.tokens,
        }
    }

    /// Its seq.
    pub fn seq(&self) -> Seq {
        self.events.seq
    }
}
