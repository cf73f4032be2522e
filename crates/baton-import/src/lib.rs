//! Readers for real agent session logs: each turns one file into baton [`Transcript`]s.
//!
//! Roles:
//! - [`Format`] and [`detect`]: which reader a file needs, decided from its content, never
//!   from its name.
//! - [`parse`]: one file's bytes to transcripts; pure (no IO, no store), so every reader is
//!   tested on bytes and fuzzed with truncated and corrupted input.
//! - `formats/`: one module per source format.
//! - [`redact`]: secrets (API keys, tokens) removed from imported text, counted.
//!
//! - [`Transcript::to_import`]: a transcript, redacted, as the store imports it
//!   ([`baton_store::NewImport`]): its source key, origin, messages (each counted by the
//!   caller's `TokenCounter`) and compaction events. The store does the rest (one
//!   transaction per file, found again by source key); this crate does no IO.

pub mod formats;
pub mod redact;

use baton_core::tokens::TokenCounter;
use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_core::{Message, RunId, Seq};
use baton_store::{NewEntry, NewImport, Origin, SourceCompaction};
use serde::Serialize;

/// A source format baton can import.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Claude Code session JSONL (`~/.claude/projects/<project>/<session>.jsonl`).
    ClaudeCode,
    /// Codex CLI rollout JSONL (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    Codex,
    /// OpenHands event streams: a JSON array of events, or `output.jsonl` with `history`.
    OpenHands,
    /// SWE-agent `.traj` JSON.
    SweAgent,
    /// OpenAI Chat Completions messages: a JSON array, JSONL, or `{"messages": [...]}`.
    OpenAi,
    /// Anthropic Messages: a JSON array, JSONL, or `{"messages": [...]}`.
    Anthropic,
    /// aider chat history Markdown (`.aider.chat.history.md`).
    Aider,
}

impl Format {
    /// Every format, in the order `detect` tries them.
    pub const ALL: [Format; 7] = [
        Format::ClaudeCode,
        Format::Codex,
        Format::OpenHands,
        Format::SweAgent,
        Format::OpenAi,
        Format::Anthropic,
        Format::Aider,
    ];

    /// The name used on the command line (`--format`).
    pub fn name(self) -> &'static str {
        match self {
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
            Format::OpenHands => "openhands",
            Format::SweAgent => "swe-agent",
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Aider => "aider",
        }
    }

    /// Parses a `--format` name.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// One message of a transcript, with what the source said about it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImportedMessage {
    /// The message in baton's model.
    pub message: Message,
    /// The source's timestamp, as written (RFC 3339 where the format has one; aider writes local
    /// time without an offset).
    pub timestamp: Option<String>,
    /// The model that wrote it, for assistant messages where the source says.
    pub model: Option<String>,
}

/// A compaction the source agent performed, recorded as an event, not as a message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompactionEvent {
    /// How many messages of the transcript came before it.
    pub after_messages: usize,
    /// The summary text the agent wrote, when the source has it.
    pub summary: Option<String>,
    /// When it happened.
    pub timestamp: Option<String>,
}

/// What a reader passed over, so an import can say so.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Lines or events that are not messages (progress, snapshots, metadata…).
    pub non_message_lines: usize,
    /// Side branches of a threaded session not on the main branch.
    pub side_branches: usize,
    /// Messages on those side branches.
    pub side_branch_messages: usize,
}

/// One session read from a file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transcript {
    /// The reader that produced it.
    pub format: Format,
    /// The source's own session id, when it has one.
    pub source_session_id: Option<String>,
    /// For a subagent transcript, the session id of its parent.
    pub parent_session_id: Option<String>,
    /// Which of a file's transcripts this is (0 for single-session files).
    pub index: usize,
    /// The messages, in conversation order.
    pub messages: Vec<ImportedMessage>,
    /// Compactions the source agent performed.
    pub compactions: Vec<CompactionEvent>,
    /// Distinct model names, in order of first appearance.
    pub models: Vec<String>,
    /// What was passed over.
    pub skipped: Skipped,
}

impl Transcript {
    /// An empty transcript of `format`.
    pub fn new(format: Format) -> Self {
        Transcript {
            format,
            source_session_id: None,
            parent_session_id: None,
            index: 0,
            messages: Vec::new(),
            compactions: Vec::new(),
            models: Vec::new(),
            skipped: Skipped::default(),
        }
    }

    /// The number of tool calls (tool_use blocks) in the transcript.
    pub fn tool_calls(&self) -> usize {
        self.messages
            .iter()
            .map(|m| m.message.tool_use_ids().count())
            .sum()
    }

    /// Records a model name once.
    pub fn saw_model(&mut self, model: &str) {
        if !model.is_empty() && !self.models.iter().any(|m| m == model) {
            self.models.push(model.to_owned());
        }
    }

    /// The identity a store finds this transcript by when it is imported again, `path` being
    /// the file it was read from (absolute, so the same file gives the same key from any
    /// working directory).
    ///
    /// Claude Code and Codex name each session with a globally unique id that stays the same
    /// while the session's file grows, wherever the file is copied: their key is
    /// `<format>:<session id>`, so a session's later snapshot extends the run of its earlier
    /// one. Every other format's ids are not unique per session (SWE-agent and OpenHands name
    /// the benchmark instance, shared by every attempt at it), so their key is the place:
    /// `<format>:<path>#<index>`.
    pub fn source_key(&self, path: &str) -> String {
        match (&self.source_session_id, self.format) {
            (Some(id), Format::ClaudeCode | Format::Codex) => {
                format!("{}:{id}", self.format.name())
            }
            _ => format!("{}:{path}#{}", self.format.name(), self.index),
        }
    }

    /// The [`source_key`](Self::source_key) of the session this one is a subagent of.
    pub fn parent_key(&self) -> Option<String> {
        self.parent_session_id
            .as_ref()
            .map(|id| format!("{}:{id}", self.format.name()))
    }

    /// Redacts secrets from every message and compaction summary; returns how many.
    pub fn redact(&mut self) -> usize {
        let in_messages: usize = self
            .messages
            .iter_mut()
            .map(|m| redact::redact_message(&mut m.message))
            .sum();
        let in_summaries: usize = self
            .compactions
            .iter_mut()
            .filter_map(|c| c.summary.as_mut())
            .map(|text| {
                let (redacted, n) = redact::redact(text);
                *text = redacted;
                n
            })
            .sum();
        in_messages + in_summaries
    }

    /// The source's timestamp of its first message that has one.
    pub fn first_timestamp(&self) -> Option<&str> {
        self.messages.iter().find_map(|m| m.timestamp.as_deref())
    }

    /// The source's timestamp of its last message that has one.
    pub fn last_timestamp(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find_map(|m| m.timestamp.as_deref())
    }

    /// Redacts the transcript and turns it into what the store imports, `path` being the file
    /// it was read from (see [`source_key`](Self::source_key)), `id` the new run's id if the
    /// caller names one, and `counter` what every message's stored token count is computed
    /// with (after redaction, so the count is of what is stored). Returns the import and how
    /// many secrets were redacted.
    pub fn to_import(
        &mut self,
        path: &str,
        id: Option<RunId>,
        counter: &dyn TokenCounter,
    ) -> (NewImport, usize) {
        let redactions = self.redact();
        let origin = Origin {
            source_key: self.source_key(path),
            path: path.to_owned(),
            format: self.format.name().to_owned(),
            source_session_id: self.source_session_id.clone(),
            parent_key: self.parent_key(),
            models: self.models.clone(),
            first_at: self.first_timestamp().map(str::to_owned),
            last_at: self.last_timestamp().map(str::to_owned),
            redactions: redactions as u64,
            skipped_lines: self.skipped.non_message_lines as u64,
            side_branches: self.skipped.side_branches as u64,
            side_branch_messages: self.skipped.side_branch_messages as u64,
        };
        let entries = self
            .messages
            .iter()
            .map(|m| NewEntry::counted(m.message.clone(), counter))
            .collect();
        let compactions = self
            .compactions
            .iter()
            .map(|c| SourceCompaction {
                after: c.after_messages as u64,
                summary: c.summary.clone(),
                at: c.timestamp.clone(),
            })
            .collect();
        (NewImport::new(id, origin, entries, compactions), redactions)
    }

    /// The tool-pairing problems the transcript would have as a run (seqs from 1): orphan
    /// results, calls without a result, reused call ids. A transcript whose source is itself
    /// incomplete (cut off while a tool ran) has some; a reader never hides them.
    pub fn problems(&self) -> Vec<Problem> {
        let events: Vec<ProtocolEvents> = (1..)
            .zip(&self.messages)
            .map(|(seq, m)| ProtocolEvents::of(Seq(seq), &m.message))
            .collect();
        ProtocolMap::analyze(Seq::ZERO, &events).problems().to_vec()
    }
}

/// Why a file could not be read. Nothing of a failed file is imported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The content matches no format.
    #[error("not a recognized transcript format (tried {tried})")]
    UnknownFormat {
        /// The formats tried.
        tried: String,
    },
    /// The content is not what the format requires.
    #[error("{}{reason}", .line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Malformed {
        /// The 1-based line, for line-oriented formats.
        line: Option<usize>,
        /// What was wrong.
        reason: String,
    },
}

impl Error {
    /// A malformed-input error at `line`.
    pub fn at(line: usize, reason: impl Into<String>) -> Self {
        Error::Malformed {
            line: Some(line),
            reason: reason.into(),
        }
    }

    /// A malformed-input error without a line.
    pub fn malformed(reason: impl Into<String>) -> Self {
        Error::Malformed {
            line: None,
            reason: reason.into(),
        }
    }
}

/// The format of `bytes`, judged from their content.
pub fn detect(bytes: &[u8]) -> Option<Format> {
    Format::ALL.into_iter().find(|f| formats::sniff(*f, bytes))
}

/// Reads one file's content as `format`.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    formats::parse(format, bytes)
}
