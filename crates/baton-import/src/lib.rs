//! Readers for real agent session logs: each turns one file into baton [`Transcript`]s.
//!
//! Roles:
//! - [`Format`] and [`detect`]: which reader a file needs, decided from its content, never
//!   from its name.
//! - [`parse`]: one file's bytes to transcripts; pure (no IO, no store), so every reader is
//!   tested on bytes and fuzzed with truncated and corrupted input.
//! - `formats/`: one module per source format.
//! - [`redact`]: secrets (API keys, tokens) removed from imported text, counted.
//! - [`Transcript::settled`] and [`Transcript::settle`]: a session still being written is read
//!   up to its *last complete unit* (each format's module says what that is), so importing a
//!   file now and again once it has grown gives what importing it once at the end gives.
//! - [`Transcript::usage`]: each model response's recorded usage, one [`ImportedUsage`] per
//!   response with an id that is the same in every file the response is copied into
//!   ([`baton_core::usage::UsageRecord`]); [`Transcript::estimated_usage`] for formats that
//!   record none.
//! - What a run listing shows: [`Transcript::project`], [`Transcript::title`],
//!   [`Transcript::models`], the source timestamps, [`Transcript::agent_version`]; subagents
//!   linked both ways ([`Transcript::parent_tool_use_id`], [`Transcript::spawned`]).
//!
//! - [`Transcript::to_import`]: a transcript, redacted, as the store imports it
//!   ([`baton_store::NewImport`]): its source key, origin, messages (each counted by the
//!   caller's `TokenCounter`) and compaction events. The store does the rest (one
//!   transaction per file, found again by source key); this crate does no IO.

pub mod formats;
pub mod redact;

use baton_core::tokens::TokenCounter;
use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_core::usage::UsageRecord;
use baton_core::{Message, RunId, Seq};
use baton_store::{ImportUsage, NewEntry, NewImport, Origin, SourceCompaction};
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
    /// Claude Code's prompt history (`~/.claude/history.jsonl`): the prompts of every session,
    /// kept after the sessions' files are deleted. Read only when named (`import --history`),
    /// never detected: it is not in [`Format::ALL`].
    ClaudeCodeHistory,
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
            Format::ClaudeCodeHistory => "claude-code-history",
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
    /// The line of the file it starts on (from 1), for the formats written a line per event
    /// (Claude Code, Codex), so an import that finds it changed can say where.
    pub line: Option<usize>,
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

/// One model response's usage, found in a transcript's source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ImportedUsage {
    /// The usage, with its identity (see [`UsageRecord::id`]).
    pub record: UsageRecord,
    /// The index in [`Transcript::messages`] of the assistant message holding the response,
    /// or `None` when the response is not one of the transcript's messages (a branch the
    /// user abandoned by editing an earlier message was still paid for). After
    /// [`Transcript::settle`] it may be past the last message: a response still being written.
    pub message: Option<usize>,
}

/// A subagent a transcript's tool call started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Spawn {
    /// The tool call (`Task`) that started it.
    pub tool_use_id: String,
    /// The subagent transcript's [`Transcript::source_session_id`].
    pub session_id: String,
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
    /// How many leading messages can no longer change however the source grows (see the
    /// module documentation of each format for its *last complete unit*); the rest may still
    /// be rewritten by a source that is being written. [`Transcript::settle`] keeps only them.
    pub settled: usize,
    /// Each model response's usage as the source recorded it, one record per response.
    pub usage: Vec<ImportedUsage>,
    /// The project the session worked in (the agent's working directory), when the source
    /// says.
    pub project: Option<String>,
    /// The first instruction the user gave, on one line and cut to [`TITLE_CHARS`] characters.
    pub title: Option<String>,
    /// The source agent's version, when the source says.
    pub agent_version: Option<String>,
    /// For a subagent, the tool call of its parent that started it, when the source says.
    pub parent_tool_use_id: Option<String>,
    /// The subagents this transcript's tool calls started.
    pub spawned: Vec<Spawn>,
    /// User messages that were typed while the agent worked (queued), imported among the
    /// messages.
    pub queued: usize,
}

/// How many user messages [`Transcript::redact`] looks through for the line a title was cut
/// from.
const TITLE_SEARCH: usize = 64;

/// How many characters of the first instruction make a [`Transcript::title`].
pub const TITLE_CHARS: usize = 80;

/// The title made of a user's instruction: its first non-empty line, trimmed, cut to
/// [`TITLE_CHARS`] characters (with `…` when cut); `None` when it has no text.
pub fn title_of(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let mut chars = line.chars();
    let cut: String = chars.by_ref().take(TITLE_CHARS).collect();
    if chars.next().is_some() {
        Some(format!("{}…", cut.trim_end()))
    } else {
        Some(cut)
    }
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
            settled: 0,
            usage: Vec::new(),
            project: None,
            title: None,
            agent_version: None,
            parent_tool_use_id: None,
            spawned: Vec::new(),
            queued: 0,
        }
    }

    /// Keeps only what can no longer change: the first [`settled`](Self::settled) messages,
    /// and the compactions placed before the last of them (or at its end with their summary
    /// written). Importing a source's settled part and later the settled part of the grown
    /// source gives the run a one-shot import of the grown source gives.
    ///
    /// Usage is kept whole: a response still streaming was paid for as far as it went, so a
    /// report on a live session counts it as ccusage does, and the store keeps the larger
    /// copy when the finished response comes. Its record still names the message it will be,
    /// now past the settled ones ([`ImportedUsage::message`]).
    pub fn settle(&mut self) {
        let n = self.settled.min(self.messages.len());
        self.messages.truncate(n);
        self.compactions
            .retain(|c| c.after_messages < n || (c.after_messages == n && c.summary.is_some()));
        self.settled = n;
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
    /// `<format>:<path>#<index>`. A prompt history's sessions are keyed like Claude Code's, under
    /// their own format (`claude-code-history:<session id>`), and its prompts without a session
    /// by project (`claude-code-history:project:<project>`), wherever the history file is.
    pub fn source_key(&self, path: &str) -> String {
        match (&self.source_session_id, self.format) {
            (Some(id), Format::ClaudeCode | Format::Codex | Format::ClaudeCodeHistory) => {
                format!("{}:{id}", self.format.name())
            }
            (None, Format::ClaudeCodeHistory) => format!(
                "{}:project:{}",
                self.format.name(),
                self.project.as_deref().unwrap_or_default()
            ),
            _ => format!("{}:{path}#{}", self.format.name(), self.index),
        }
    }

    /// The key a prompt history gives this session's recovered prompts, for a Claude Code
    /// session: the run they made is replaced by this one's (`Origin::replaces`).
    pub fn stand_in_key(&self) -> Option<String> {
        match (&self.source_session_id, self.format) {
            (Some(id), Format::ClaudeCode) if self.parent_session_id.is_none() => {
                Some(format!("{}:{id}", Format::ClaudeCodeHistory.name()))
            }
            _ => None,
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
        // The title repeats the first instruction's words, cut at 80 characters, perhaps in the
        // middle of a key too short then for its pattern: it is made again from the line it
        // was cut from, once that is redacted (else redacted as it is), and not counted twice.
        if let Some(title) = self.title.take() {
            let stem = title.trim_end_matches('…');
            // The first instruction is among the first user messages; a title no line starts
            // with (a Claude Code command and its arguments) is not searched for further.
            let users = self
                .messages
                .iter()
                .filter(|m| m.message.role == baton_core::Role::User)
                .take(TITLE_SEARCH);
            let line = users.into_iter().find_map(|m| {
                let text = m.message.plain_text();
                text.lines()
                    .map(str::trim)
                    .find(|l| l.starts_with(stem))
                    .map(str::to_owned)
            });
            self.title = match line {
                Some(line) => title_of(&redact::redact(&line).0),
                None => Some(redact::redact(&title).0),
            };
        }
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
            project: self.project.clone(),
            title: self.title.clone(),
            replaces: self.stand_in_key(),
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
        let mut import = NewImport::new(id, origin, entries, compactions);
        import.usage = self.import_usage(&import);
        (import, redactions)
    }

    /// The usage records an import keeps: the source's own, or for a format that records none
    /// (all but Claude Code and Codex) the estimates of [`Transcript::estimated_usage`] from
    /// the stored token counts. Counted under the session's id (a subagent's under its
    /// parent's, `<session>/…` cut at the slash, as ccusage counts them), or the source key
    /// for a format without session ids.
    fn import_usage(&self, import: &NewImport) -> ImportUsage {
        let key = &import.origin.source_key;
        let records = match self.format {
            Format::ClaudeCode | Format::Codex => self.usage.clone(),
            // Prompts alone: no response was recorded, so there is nothing to count or estimate.
            Format::ClaudeCodeHistory => Vec::new(),
            _ => {
                let tokens: Vec<u32> = import.entries().iter().map(|e| e.tokens).collect();
                self.estimated_usage(&tokens, key)
            }
        };
        let session = match (self.format, self.source_session_id.as_deref()) {
            (Format::ClaudeCode | Format::Codex, Some(id)) => {
                id.split('/').next().unwrap_or(id).to_owned()
            }
            _ => key.clone(),
        };
        ImportUsage {
            session,
            project: self.project.clone(),
            agent: self.format.name().to_owned(),
            records: records.into_iter().map(|u| (u.record, u.message)).collect(),
        }
    }

    /// For a source that records no usage (every format but Claude Code and Codex), an estimate
    /// of each assistant message's usage, marked [`UsageRecord::estimated`]: the whole
    /// transcript before it as fresh input (an agent without a prompt cache resends it all) and
    /// the message itself as output, `tokens[i]` being message `i`'s count (as stored with it).
    /// Each record's id is `<source key>#<message index>`. Empty when the source has usage of
    /// its own.
    pub fn estimated_usage(&self, tokens: &[u32], source_key: &str) -> Vec<ImportedUsage> {
        if !self.usage.is_empty() {
            return Vec::new();
        }
        let mut context: u64 = 0;
        let mut out = Vec::new();
        for (i, (m, &n)) in self.messages.iter().zip(tokens).enumerate() {
            if m.message.role == baton_core::Role::Assistant {
                out.push(ImportedUsage {
                    record: UsageRecord {
                        id: format!("{source_key}#{i}"),
                        model: m.model.clone(),
                        response_id: None,
                        request_id: None,
                        at: m
                            .timestamp
                            .as_deref()
                            .and_then(baton_core::Timestamp::parse),
                        usage: baton_core::usage::Usage {
                            input: context,
                            output: u64::from(n),
                            ..baton_core::usage::Usage::default()
                        },
                        estimated: true,
                    },
                    message: Some(i),
                });
            }
            context += u64::from(n);
        }
        out
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
