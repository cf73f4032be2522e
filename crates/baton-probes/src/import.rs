//! Imported transcripts for the side-by-side with the source agent's own compactions (feature
//! `import`): where Claude Code or Codex compacted, and the transcript as a run's entries.

use baton_core::{Entry, Seq, Timestamp};
use baton_import::Transcript;

/// A compaction the source agent made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionPoint {
    /// The last seq its summary covers: the messages before it, numbered from 1 as an import
    /// numbers them.
    pub seq: Seq,
    /// The summary the agent wrote, when the source has it.
    pub summary: Option<String>,
}

/// The compactions of `transcript`, in order. A compaction before any message (seq 0) is left
/// out: it covers nothing of this transcript.
pub fn compaction_points(transcript: &Transcript) -> Vec<CompactionPoint> {
    transcript
        .compactions
        .iter()
        .filter(|c| c.after_messages > 0)
        .map(|c| CompactionPoint {
            seq: Seq(c.after_messages as u64),
            summary: c.summary.clone(),
        })
        .collect()
}

/// The transcript's messages as the entries an import stores (seq 1, 2, …; no token counts,
/// no times). The store redacts secrets on import: redact the transcript first to probe what
/// a stored run holds.
pub fn history_of(transcript: &Transcript) -> Vec<Entry> {
    (1..)
        .zip(&transcript.messages)
        .map(|(seq, m)| Entry {
            seq: Seq(seq),
            message: m.message.clone(),
            tokens: 0,
            created_at: Timestamp(0),
        })
        .collect()
}
