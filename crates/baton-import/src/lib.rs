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
//! Storing transcripts as runs (one transaction per file, found again by source identity) is the
//! store's and the CLI's job; this crate only reads.

pub mod formats;
pub mod redact;

use baton_core::Message;
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
