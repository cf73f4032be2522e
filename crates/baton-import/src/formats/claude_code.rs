//! Claude Code session JSONL (`~/.claude/projects/<project>/<session>.jsonl`, and subagent files
//! `<session>/subagents/agent-<id>.jsonl`): one event per line, threaded into a tree by
//! `uuid`/`parentUuid`.
//!
//! What is read:
//! - `user` and `assistant` lines carry an Anthropic-shaped `message`, read by
//!   [`baton_wire::anthropic::parse_message`]. `queue-operation` lines are read as described
//!   under *Queued messages*. Every other line type (`progress`, `system`, `summary`,
//!   `file-history-snapshot`, `attachment`, and any new one) is passed over and counted in
//!   [`Skipped::non_message_lines`], wherever it sits in the tree. So is an `isMeta` user line
//!   whose parent is not in the file: hook output Claude Code copies from the parent session into
//!   a subagent's file (the compaction agent's, `agent-acompact-*`), which is the parent's.
//! - **The main branch.** The tip is the last message line in file order that is not a
//!   sidechain line (`isSidechain` not true); in a subagent file, where every line is one, the
//!   last message line. The main branch is the tip's chain of ancestors; a `compact_boundary`
//!   (a `system` line whose `parentUuid` is null) is crossed through its `logicalParentUuid`,
//!   and a parent absent from the file (a subagent pointing into its parent session) ends the
//!   chain.
//! - **Parallel tool calls.** Claude Code writes one line per content block of a streamed
//!   response, and for parallel calls each tool result hangs off the piece holding its
//!   `tool_use`, so the chain alone would miss pieces and results. Lines off the chain are taken
//!   back onto the branch when they are assistant pieces of a response (`message.id`) already
//!   on it, or user lines whose every `tool_result` answers a call on it that has no result yet,
//!   repeated until nothing changes.
//! - **Inline subagents.** Claude Code 1.0.x writes each `Task` run into the main file, between
//!   the `Task` call and its result, as its own chain of sidechain lines whose root has
//!   `parentUuid: null` (the root's text is the call's `input.prompt`). In a main file every
//!   sidechain line belongs to the run of its topmost sidechain ancestor, and each run is a
//!   transcript of its own (`index` 1, 2, … in the order the runs start), with
//!   `source_session_id` `<sessionId>/sidechain-<root uuid>`, `parent_session_id` the session,
//!   and `parent_tool_use_id` the first earlier call of the main branch, not yet matched, whose
//!   `input.prompt` is the root's text. The main transcript lists them in
//!   [`Transcript::spawned`], beside the file-based subagents its results name
//!   (`toolUseResult.agentId`, session `<sessionId>/agent-<agentId>`).
//! - **Side branches.** The remaining message lines of a transcript (a branch the user abandoned
//!   by editing an earlier message) are grouped by the topmost off-branch ancestor they hang
//!   from; [`Skipped::side_branches`] counts the groups and [`Skipped::side_branch_messages`]
//!   their message lines. A `parentUuid: null` line that is not a sidechain is, in every file
//!   seen, the session's first line or a `compact_boundary`: `--resume` starts a new file that
//!   carries the history over.
//! - **Streaming.** Assistant lines of one transcript sharing a `message.id` become one message,
//!   at the place of the first piece, blocks concatenated in file order; tool results written
//!   between the pieces therefore follow every `tool_use` they answer.
//! - **Compaction.** A `compact_boundary` on the main branch, and the `isCompactSummary: true`
//!   user line after it, become one [`CompactionEvent`] (summary = that line's text,
//!   `after_messages` = messages before it), not a message: a summary Claude Code logs as a
//!   user message is not user input. A summary line without a boundary is an event of its own.
//! - **Queued messages.** What the user types while the agent works is logged as
//!   `queue-operation` lines: `enqueue` (with the text), then `dequeue` (delivered as a user
//!   line of its own, which follows and is read as any user line) or `remove` (delivered into
//!   the running turn, logged nowhere else). Enqueued texts wait in order; a later user line of
//!   the main branch with the same text delivers the first such one, and `dequeue`/`remove`
//!   deliver the oldest. A removed text becomes a user message at the point of its `remove`
//!   line, moved past the tool results that follow there so no call is separated from its
//!   result. A text still waiting when the user types something else was never delivered, and
//!   one still waiting at the end of the file may yet be: either becomes a user message at its
//!   `enqueue` line (moved past results the same way). A queued slash command (`/mcp`) is run by
//!   Claude Code, which logs its own lines, and a `<task-notification>` is Claude Code's, not
//!   typed: neither is a message. Each queued text becomes at most one message;
//!   [`Transcript::queued`] counts them.
//! - **Identity and metadata.** `source_session_id` is the tip's `sessionId`. In a subagent file
//!   (the tip is a sidechain line) `sessionId` names the parent session, so it becomes
//!   `parent_session_id` and the transcript's own id is `<sessionId>/agent-<agentId>` (none
//!   without `agentId`). Models are the branch's `message.model` values other than
//!   `<synthetic>`. `project` is the first `cwd`, `agent_version` the first `version`, `title`
//!   the first user line that is input (not `isMeta`, not a tool result, not a summary, not a
//!   `<command…>`/`<local-command…>`/`<system-reminder>` wrapper; for an inline subagent its
//!   prompt).
//! - **Usage.** Every assistant line with `message.usage` reports its response's usage; a
//!   streamed response repeats it on each piece with the output count growing, so the last row
//!   per `message.id` + `requestId` is kept (per `message.id` when the line has no
//!   `requestId`; per line when it has no `message.id`). Its [`UsageRecord::id`] is
//!   `claude-code:<message.id>:<requestId>` (or `claude-code:<message.id>`), the same in
//!   every file the response is copied into. `cache_creation.ephemeral_5m_input_tokens` and
//!   `ephemeral_1h_input_tokens` split the writes (all 5-minute when absent). A record belongs
//!   to the transcript whose lines hold it (an abandoned branch's to the main one, with no
//!   message); a `<synthetic>` response with no tokens is no record. A subagent's responses
//!   are also repeated in its parent's `progress` lines of type `agent_progress`
//!   (`data.message.message` with its `usage`, `data.message.requestId`): they are records of the
//!   main transcript, with no message, under the same ids, so that the subagent's file, when it
//!   exists, counts them once, and when it is gone (Claude Code deletes old files; a copy may
//!   lack it) they are still counted.
//!
//! **The last complete unit** ([`Transcript::settled`]). A file being written can end anywhere;
//! a line is read once its JSON object is whole (an unterminated last line that does not parse
//! is dropped and counted). What the file holds so far can still change in three ways, and the
//! settled messages stop before the first message that can:
//! - a streamed response gains pieces until it is *closed*: its last piece has a `stop_reason`,
//!   or a later line of the same thread (the main conversation, one subagent named by its
//!   `agentId` or stream-json's `parent_tool_use_id`, or one inline run, by its root) is an
//!   assistant line of another response, a user line holding no tool result, or a `system`
//!   line of subtype `turn_duration`, `stop_hook_summary` or `compact_boundary`; stream-json's
//!   `result` line closes every thread, and the main conversation's an inline run's (its
//!   `Task` waits for it before the next main response). A subagent's lines do not close its
//!   parent's response (its first lines come while the parent's response may still stream
//!   its next call), nor one run's lines another's. Tool results do not close it: Claude Code runs tools while the
//!   response still streams. An assistant line without `message.id` is closed at once.
//! - a queued text not yet delivered may still become a message at its `enqueue` point.
//! - a queued message with nothing after it moves past tool results still to come while a call
//!   before it is unanswered.
//!
//! A tool call without its result is settled: its result, when written, comes after it.
//! Compactions are settled when placed before a settled message or, at the end, with their
//! summary. So importing the settled part of a cut file, and later of the whole file, gives what
//! importing the whole file's settled part at once gives (a test walks every line cut of the
//! corpus). A session's last response is closed only when something follows it; an importer
//! that knows the file is finished (no longer written) takes the whole transcript.
//!
//! A line that is not a JSON object is an error naming the line, except a last line with no
//! terminating newline (see above). A file without message lines yields no transcript.
//!
//! **stream-json.** The output of `claude -p --output-format stream-json` holds the same lines
//! without their threading; `stream_json::thread` rewrites it, line for line, into the session
//! file it stands for (its module says how), and a `result` line, its last, closes the last
//! response.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};

use baton_core::usage::{Usage, UsageRecord};
use baton_core::{ContentBlock, Message, Role, Timestamp};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::{
    CompactionEvent, Error, Format, ImportedMessage, ImportedUsage, Skipped, Spawn, Transcript,
    title_of,
};

/// Line types Claude Code writes; used by [`sniff`].
const KNOWN_TYPES: [&str; 8] = [
    "user",
    "assistant",
    "system",
    "summary",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
];

/// Keys that mark a line as Claude Code's, beside its `type`.
const MARKER_KEYS: [&str; 6] = [
    "sessionId",
    "uuid",
    "parentUuid",
    "leafUuid",
    "messageId",
    "session_id",
];

/// How many leading non-empty lines [`sniff`] looks at.
const SNIFF_LINES: usize = 5;

/// `system` subtypes written when a turn ends, which close the response before them.
const TURN_END: [&str; 3] = ["turn_duration", "stop_hook_summary", "compact_boundary"];

/// Whether `bytes` look like a Claude Code session: one of the first non-empty lines is a JSON
/// object with a known `type` and a threading or session key.
pub fn sniff(bytes: &[u8]) -> bool {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .take(SNIFF_LINES)
        .filter_map(|l| serde_json::from_slice::<Map<String, Value>>(l).ok())
        .any(|obj| {
            let known = obj
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| KNOWN_TYPES.contains(&t));
            known
                && MARKER_KEYS.iter().any(|k| obj.contains_key(*k))
                && !obj.contains_key("payload")
        })
}

/// A string field, or `None` when it is absent, null or not a string (a field of another type
/// is passed over, as an unknown field would be, rather than failing the line).
#[derive(Default)]
struct Str<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Some(Cow::Owned(v))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Str(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Str(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Str(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl Str<'_> {
    fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// `true` only for JSON `true`; any other value is false.
#[derive(Default)]
struct Flag(bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Flag(matches!(Value::deserialize(d)?, Value::Bool(true))))
    }
}

/// The fields of a line baton reads; everything else is skipped without being built.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Str<'a>,
    #[serde(default, borrow)]
    uuid: Str<'a>,
    #[serde(default, borrow)]
    parent_uuid: Str<'a>,
    #[serde(default, borrow)]
    logical_parent_uuid: Str<'a>,
    #[serde(default, borrow)]
    session_id: Str<'a>,
    #[serde(default, borrow)]
    agent_id: Str<'a>,
    /// stream-json's link from a subagent's line to the `Task` call that runs it.
    #[serde(rename = "parent_tool_use_id", default, borrow)]
    parent_tool_use_id: Str<'a>,
    #[serde(default)]
    is_sidechain: Flag,
    #[serde(default)]
    is_meta: Flag,
    #[serde(default)]
    is_compact_summary: Flag,
    #[serde(default, borrow)]
    timestamp: Str<'a>,
    #[serde(default, borrow)]
    request_id: Str<'a>,
    #[serde(default, borrow)]
    cwd: Str<'a>,
    #[serde(default, borrow)]
    version: Str<'a>,
    #[serde(default, borrow)]
    subtype: Str<'a>,
    #[serde(default, borrow)]
    operation: Str<'a>,
    #[serde(default, borrow)]
    content: Str<'a>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default, borrow)]
    tool_use_result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    User,
    Assistant,
    System,
    Queue,
    /// The last line of stream-json output: the run is over.
    Result,
    Other,
}

/// One line of the file that has a JSON object.
struct Line<'a> {
    /// Its line in the file (from 1).
    no: usize,
    kind: Kind,
    uuid: Option<Cow<'a, str>>,
    /// `parentUuid`, or a boundary's `logicalParentUuid`.
    parent: Option<Cow<'a, str>>,
    session: Option<Cow<'a, str>>,
    agent: Option<Cow<'a, str>>,
    /// The call that runs the subagent this line belongs to, when the line says (stream-json).
    spawned_by: Option<Cow<'a, str>>,
    sidechain: bool,
    meta: bool,
    compact_summary: bool,
    timestamp: Option<Cow<'a, str>>,
    request_id: Option<Cow<'a, str>>,
    cwd: Option<Cow<'a, str>>,
    version: Option<Cow<'a, str>>,
    subtype: Option<Cow<'a, str>>,
    operation: Option<Cow<'a, str>>,
    /// A `queue-operation` line's text.
    queued: Option<Cow<'a, str>>,
    /// The parsed message, for `user`/`assistant` lines.
    message: Option<Message>,
    /// For assistant lines: `message.id`, `message.model`, whether `stop_reason` is set, and
    /// `message.usage`.
    response_id: Option<String>,
    model: Option<String>,
    stopped: bool,
    usage: Option<Usage>,
    /// `toolUseResult.agentId`: the file-based subagent a `Task` result names.
    spawned_agent: Option<String>,
    /// A subagent response an `agent_progress` line repeats: its `message.id`, `requestId`,
    /// model, timestamp and usage.
    progress: Option<Progress>,
}

/// A subagent's response as its parent's `agent_progress` line records it.
struct Progress {
    response_id: Option<String>,
    request_id: Option<String>,
    model: Option<String>,
    timestamp: Option<String>,
    usage: Usage,
}

impl Line<'_> {
    fn is_boundary(&self) -> bool {
        self.kind == Kind::System && self.subtype.as_deref() == Some("compact_boundary")
    }

    /// Whether the line proves that every response of its thread written before it is
    /// complete.
    fn closes(&self) -> bool {
        match self.kind {
            Kind::Assistant => true,
            Kind::User => self
                .message
                .as_ref()
                .is_some_and(|m| m.tool_result_ids().next().is_none()),
            Kind::System => self
                .subtype
                .as_deref()
                .is_some_and(|s| TURN_END.contains(&s)),
            Kind::Queue | Kind::Result | Kind::Other => false,
        }
    }

    /// Whether the line is something the user typed (for titles and queued-message delivery).
    fn is_input(&self) -> bool {
        self.kind == Kind::User
            && !self.meta
            && !self.compact_summary
            && self.message.as_ref().is_some_and(|m| {
                m.tool_result_ids().next().is_none() && !is_wrapper(&m.plain_text())
            })
    }
}

/// Text Claude Code writes as a user line that the user did not type.
fn is_wrapper(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<command-",
        "<local-command-",
        "<system-reminder>",
        "<task-notification>",
        "Caveat:",
        "[Request interrupted",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// The title a user line gives: its text when the user typed it, the command and its arguments
/// when it is a slash command (`<command-name>/init</command-name>`; the flag says it has no
/// arguments), none for other wrappers or tool results.
fn title(message: &Message) -> Option<(String, bool)> {
    if message.tool_result_ids().next().is_some() {
        return None;
    }
    let text = message.plain_text();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&close)? + start;
        Some(text[start..end].trim().to_owned())
    };
    if let Some(command) = tag("command-name") {
        let args = tag("command-args").unwrap_or_default();
        return title_of(&format!("{command} {args}")).map(|t| (t, args.is_empty()));
    }
    if is_wrapper(&text) {
        return None;
    }
    title_of(&text).map(|t| (t, false))
}

/// Reads one Claude Code session file, or the output of `claude -p --output-format
/// stream-json` (threaded into the session it stands for by [`stream_json::thread`]).
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    match stream_json::thread(bytes) {
        Some(session) => parse_session(&session),
        None => parse_session(bytes),
    }
}

fn parse_session(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let (mut lines, truncated) = read_lines(bytes)?;
    // Keyed by the file's own bytes (ids are written without escapes), so that the lines stay
    // free to change below.
    let by_uuid: HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| match &l.uuid {
            Some(Cow::Borrowed(u)) => Some((*u, i)),
            _ => None,
        })
        .collect();
    // Hook output Claude Code copies from the parent session into a subagent file hangs off a
    // line of the parent: it is the parent's, not a message of this file.
    for line in &mut lines {
        if line.meta
            && line
                .parent
                .as_deref()
                .is_some_and(|p| !by_uuid.contains_key(p))
        {
            line.message = None;
        }
    }
    let non_message = usize::from(truncated) + lines.iter().filter(|l| l.message.is_none()).count();
    // A line closes the responses of its own thread only (a subagent's first lines come while
    // its parent's response may still stream), and stream-json's `result` line every thread's.
    let threads = threads(&lines, &by_uuid);
    let mut last_closer: HashMap<Thread<'_>, usize> = HashMap::new();
    for i in (0..lines.len()).filter(|&i| lines[i].closes()) {
        last_closer.insert(threads[i], i);
    }
    let ended = lines.iter().rposition(|l| l.kind == Kind::Result);
    let file = File {
        lines: &lines,
        by_uuid: &by_uuid,
        threads,
        last_closer,
        ended,
    };

    let main_members: Vec<usize> = (0..lines.len()).filter(|&i| !lines[i].sidechain).collect();
    let Some(main_tip) = main_members
        .iter()
        .rev()
        .find(|&&i| lines[i].message.is_some())
        .copied()
    else {
        // A subagent file: every line is a sidechain line.
        let all: Vec<usize> = (0..lines.len()).collect();
        let Some(&tip) = all.iter().rev().find(|&&i| lines[i].message.is_some()) else {
            return Ok(Vec::new());
        };
        let mut t = file.transcript(&all, tip, 0, false);
        t.skipped.non_message_lines = non_message;
        let session = lines[tip].session.as_deref().map(str::to_owned);
        t.source_session_id = match (&session, lines[tip].agent.as_deref()) {
            (Some(s), Some(agent)) => Some(format!("{s}/agent-{agent}")),
            _ => None,
        };
        t.parent_session_id = session;
        return Ok(vec![t]);
    };

    let mut main = file.transcript(&main_members, main_tip, 0, true);
    main.skipped.non_message_lines = non_message;
    let session = lines[main_tip].session.as_deref().map(str::to_owned);
    main.source_session_id = session.clone();

    // Inline subagent runs: sidechain lines grouped by their topmost sidechain ancestor.
    let mut runs: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut run_of: HashMap<usize, usize> = HashMap::new();
    for i in (0..lines.len()).filter(|&i| lines[i].sidechain) {
        let root = file.sidechain_root(i);
        let at = *run_of.entry(root).or_insert_with(|| {
            runs.push((root, Vec::new()));
            runs.len() - 1
        });
        runs[at].1.push(i);
    }
    runs.sort_by_key(|(root, _)| *root);
    let mut matched: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(runs.len() + 1);
    let mut subagents = Vec::new();
    for (root, members) in &runs {
        let Some(&tip) = members.iter().rev().find(|&&i| lines[i].message.is_some()) else {
            continue;
        };
        let mut t = file.transcript(members, tip, subagents.len() + 1, false);
        let root_uuid = lines[*root].uuid.as_deref().unwrap_or("root");
        t.source_session_id = session
            .as_ref()
            .map(|s| format!("{s}/sidechain-{root_uuid}"));
        t.parent_session_id = session.clone();
        let prompt = lines[*root]
            .message
            .as_ref()
            .map(Message::plain_text)
            .unwrap_or_default();
        t.parent_tool_use_id = match lines[*root].spawned_by.as_deref() {
            Some(call) => matched.insert(call.to_owned()).then(|| call.to_owned()),
            None => file.spawning_call(&main_members, *root, &prompt, &mut matched),
        };
        if let (Some(call), Some(id)) = (&t.parent_tool_use_id, &t.source_session_id) {
            main.spawned.push(Spawn {
                tool_use_id: call.clone(),
                session_id: id.clone(),
            });
        }
        if t.title.is_none() {
            t.title = title_of(&prompt);
        }
        subagents.push(t);
    }
    out.push(main);
    out.extend(subagents);
    Ok(out)
}

/// The conversation a line belongs to, whose responses only its own lines close.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Thread<'l> {
    /// The session's own conversation: every line that is not a sidechain line.
    Main,
    /// A subagent the line names: its `agentId` (a subagent file), or the `Task` call that runs
    /// it (stream-json's `parent_tool_use_id`).
    Named(&'l str),
    /// An inline subagent run of Claude Code 1.0.x, by its root line.
    Inline(usize),
}

/// Each line's [`Thread`]. An inline run's root is found once per line, from its parent's.
fn threads<'l>(lines: &'l [Line<'_>], by_uuid: &HashMap<&str, usize>) -> Vec<Thread<'l>> {
    let parent_of = |i: usize| {
        lines[i]
            .parent
            .as_deref()
            .and_then(|p| by_uuid.get(p).copied())
            .filter(|&p| lines[p].sidechain)
    };
    let mut out: Vec<Thread<'l>> = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let thread = match (
            line.sidechain,
            line.spawned_by.as_deref().or(line.agent.as_deref()),
        ) {
            (false, _) => Thread::Main,
            (true, Some(name)) => Thread::Named(name),
            (true, None) => match parent_of(i) {
                Some(p) if p < i => match out[p] {
                    Thread::Inline(root) => Thread::Inline(root),
                    _ => Thread::Inline(p),
                },
                // A parent written after its child (never seen): walk up.
                Some(_) => {
                    let (mut at, mut seen) = (i, HashSet::new());
                    while seen.insert(at) {
                        match parent_of(at) {
                            Some(p) => at = p,
                            None => break,
                        }
                    }
                    Thread::Inline(at)
                }
                None => Thread::Inline(i),
            },
        };
        out.push(thread);
    }
    out
}

/// The file's lines and what every transcript of it needs.
struct File<'l, 'a> {
    lines: &'l [Line<'a>],
    by_uuid: &'l HashMap<&'a str, usize>,
    /// Per thread ([`Line::thread`]), the last line that closes the responses before it.
    last_closer: HashMap<Thread<'l>, usize>,
    /// Each line's thread.
    threads: Vec<Thread<'l>>,
    /// The last `result` line: the run is over, and every response before it complete.
    ended: Option<usize>,
}

impl File<'_, '_> {
    fn parent_of(&self, i: usize) -> Option<usize> {
        self.lines[i]
            .parent
            .as_deref()
            .and_then(|p| self.by_uuid.get(p).copied())
    }

    /// The topmost sidechain ancestor of sidechain line `i`.
    fn sidechain_root(&self, i: usize) -> usize {
        let mut at = i;
        let mut seen = HashSet::new();
        while seen.insert(at) {
            match self.parent_of(at) {
                Some(p) if self.lines[p].sidechain => at = p,
                _ => break,
            }
        }
        at
    }

    /// The first call of the main branch before line `root`, not matched yet, whose
    /// `input.prompt` is `prompt`.
    fn spawning_call(
        &self,
        main: &[usize],
        root: usize,
        prompt: &str,
        matched: &mut HashSet<String>,
    ) -> Option<String> {
        if prompt.is_empty() {
            return None;
        }
        for &i in main.iter().take_while(|&&i| i < root) {
            let Some(m) = &self.lines[i].message else {
                continue;
            };
            for block in &m.content {
                if let ContentBlock::ToolUse { id, input, .. } = block
                    && input.get("prompt").and_then(Value::as_str) == Some(prompt)
                    && !matched.contains(id)
                {
                    matched.insert(id.clone());
                    return Some(id.clone());
                }
            }
        }
        None
    }

    /// The transcript of the lines `members` (file order) whose branch ends at `tip`;
    /// `main` says whether it is the session's main transcript (queued messages are its).
    fn transcript(&self, members: &[usize], tip: usize, index: usize, main: bool) -> Transcript {
        let lines = self.lines;
        // Per line: None outside this transcript, else whether it is on the branch.
        let mut kept: Vec<Option<bool>> = vec![None; lines.len()];
        for &i in members {
            kept[i] = Some(false);
        }
        let mut at = Some(tip);
        while let Some(i) = at {
            match kept[i] {
                Some(false) => kept[i] = Some(true),
                _ => break, // a cycle, or a parent outside this transcript
            }
            at = self.parent_of(i);
        }
        self.rescue(members, &mut kept);

        let mut t = Transcript::new(Format::ClaudeCode);
        t.index = index;
        self.count_side_branches(members, &kept, &mut t.skipped);
        let kept_lines: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| kept[i] == Some(true))
            .collect();

        // Items in file order: messages (streamed pieces merged), compactions, queued texts.
        let mut items: Vec<Item> = Vec::new();
        let mut by_response: HashMap<&str, usize> = HashMap::new();
        for &i in &kept_lines {
            let line = &lines[i];
            let timestamp = line.timestamp.as_deref().map(str::to_owned);
            if line.is_boundary() {
                items.push(Item::Compaction {
                    summary: None,
                    timestamp,
                });
                continue;
            }
            let Some(message) = &line.message else {
                continue;
            };
            if line.kind == Kind::User && line.compact_summary {
                let summary = Some(message.plain_text());
                match items.last_mut() {
                    Some(Item::Compaction { summary: s, .. }) if s.is_none() => *s = summary,
                    _ => items.push(Item::Compaction { summary, timestamp }),
                }
                continue;
            }
            if let Some(m) = line.model.as_deref().filter(|m| *m != "<synthetic>") {
                t.saw_model(m);
            }
            if let Some(id) = line.response_id.as_deref()
                && let Some(&at) = by_response.get(id)
                && let Item::Message { imported, open, .. } = &mut items[at]
            {
                imported
                    .message
                    .content
                    .extend(message.content.iter().cloned());
                if imported.model.is_none() {
                    imported.model = line.model.clone().filter(|m| m != "<synthetic>");
                }
                *open = !self.closed(i, line);
                continue;
            }
            if let Some(id) = line.response_id.as_deref() {
                by_response.insert(id, items.len());
            }
            items.push(Item::Message {
                imported: ImportedMessage {
                    message: message.clone(),
                    timestamp,
                    model: line.model.clone().filter(|m| m != "<synthetic>"),
                    line: Some(line.no),
                },
                line: i,
                response: line.response_id.clone(),
                open: line.kind == Kind::Assistant && !self.closed(i, line),
                queued: QueuedState::No,
            });
        }
        if main {
            self.queue(&kept_lines, &mut items);
        }
        let responses = self.finish(items, &mut t);

        t.project = members
            .iter()
            .find_map(|&i| lines[i].cwd.as_deref().map(str::to_owned));
        t.agent_version = members
            .iter()
            .find_map(|&i| lines[i].version.as_deref().map(str::to_owned));
        // The first instruction; a bare command (`/clear`) only when there is none.
        let titles: Vec<(String, bool)> = kept_lines
            .iter()
            .map(|&i| &lines[i])
            .filter(|l| l.kind == Kind::User && !l.meta && !l.compact_summary)
            .filter_map(|l| l.message.as_ref().and_then(title))
            .collect();
        t.title = titles
            .iter()
            .find(|(_, bare)| !bare)
            .or(titles.first())
            .map(|(text, _)| text.clone());
        t.usage = self.usage(members, &responses);
        if main {
            let session = lines[tip].session.as_deref().unwrap_or("");
            for &i in &kept_lines {
                let line = &lines[i];
                if let (Some(agent), Some(m)) = (&line.spawned_agent, &line.message)
                    && let Some(call) = m.tool_result_ids().next()
                {
                    t.spawned.push(Spawn {
                        tool_use_id: call.to_owned(),
                        session_id: format!("{session}/agent-{agent}"),
                    });
                }
            }
        }
        t
    }

    /// Whether the response whose (latest) piece is line `i` is complete. An inline run of
    /// Claude Code 1.0.x is also over once the main conversation goes on: its `Task` waits
    /// for it before the main conversation's next response.
    fn closed(&self, i: usize, line: &Line<'_>) -> bool {
        let after = |thread: &Thread<'_>| self.last_closer.get(thread).is_some_and(|&c| c > i);
        line.response_id.is_none()
            || line.stopped
            || after(&self.threads[i])
            || matches!(self.threads[i], Thread::Inline(_)) && after(&Thread::Main)
            || self.ended.is_some_and(|e| e > i)
    }

    /// Adds the queued texts of the session to `items` (see the module documentation).
    fn queue(&self, kept: &[usize], items: &mut Vec<Item>) {
        let lines = self.lines;
        let on_branch: HashSet<usize> = kept.iter().copied().collect();
        let mut pending: VecDeque<(usize, &str)> = VecDeque::new();
        let mut delivered: Vec<(usize, usize, QueuedState)> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            match (line.kind, line.operation.as_deref()) {
                (Kind::Queue, Some("enqueue")) => {
                    if let Some(text) = line.queued.as_deref().map(str::trim)
                        && !text.is_empty()
                        && !text.starts_with('/')
                        && !text.starts_with('<')
                    {
                        pending.push_back((i, text));
                    }
                }
                (Kind::Queue, Some("dequeue")) => {
                    pending.pop_front();
                }
                (Kind::Queue, Some("remove")) => {
                    if let Some((enqueued, _)) = pending.pop_front() {
                        delivered.push((i, enqueued, QueuedState::Delivered));
                    }
                }
                (Kind::User, _) if on_branch.contains(&i) && line.is_input() => {
                    let text = line.message.as_ref().map(Message::plain_text);
                    let text = text.as_deref().map(str::trim).unwrap_or("");
                    match pending.iter().position(|(_, q)| *q == text) {
                        Some(at) => {
                            pending.remove(at);
                        }
                        // The user typed on: what is still queued was never delivered.
                        None => delivered.extend(
                            pending
                                .drain(..)
                                .map(|(enqueued, _)| (enqueued, enqueued, QueuedState::Lost)),
                        ),
                    }
                }
                _ => {}
            }
        }
        delivered.extend(
            pending
                .into_iter()
                .map(|(i, _)| (i, i, QueuedState::Pending)),
        );
        delivered.sort_by_key(|(at, _, _)| *at);
        for (at, enqueued, state) in delivered {
            let Some(text) = lines[enqueued].queued.as_deref() else {
                continue;
            };
            let pos = items
                .iter()
                .position(|item| item.line().is_some_and(|l| l > at))
                .unwrap_or(items.len());
            items.insert(
                pos,
                Item::Message {
                    imported: ImportedMessage {
                        message: Message::text(Role::User, text.trim()),
                        timestamp: lines[at].timestamp.as_deref().map(str::to_owned),
                        model: None,
                        line: Some(lines[enqueued].no),
                    },
                    line: at,
                    response: None,
                    open: false,
                    queued: state,
                },
            );
        }
        // A queued message goes after the tool results that follow it, so that no call is
        // separated from its result.
        for i in (0..items.len()).rev() {
            if !items[i].is_queued() {
                continue;
            }
            let mut j = i;
            while j + 1 < items.len() && items[j + 1].is_tool_results() {
                items.swap(j, j + 1);
                j += 1;
            }
        }
    }

    /// Turns the items into the transcript's messages, compactions and settled count; returns
    /// each message's response id.
    fn finish(&self, items: Vec<Item>, t: &mut Transcript) -> Vec<Option<String>> {
        let mut responses = Vec::new();
        let mut unsettled: Option<usize> = None;
        let mut unanswered: HashSet<String> = HashSet::new();
        let n = items.len();
        for (k, item) in items.into_iter().enumerate() {
            match item {
                Item::Compaction { summary, timestamp } => {
                    t.compactions.push(CompactionEvent {
                        after_messages: t.messages.len(),
                        summary,
                        timestamp,
                    });
                }
                Item::Message {
                    imported,
                    open,
                    queued,
                    response,
                    ..
                } => {
                    responses.push(response);
                    let at = t.messages.len();
                    let movable = match queued {
                        QueuedState::No | QueuedState::Lost => false,
                        QueuedState::Pending => true,
                        // Results still to come would move it unless something follows it.
                        QueuedState::Delivered => k + 1 == n && !unanswered.is_empty(),
                    };
                    if (open || movable) && unsettled.is_none() {
                        unsettled = Some(at);
                    }
                    if queued != QueuedState::No {
                        t.queued += 1;
                    }
                    for id in imported.message.tool_result_ids() {
                        unanswered.remove(id);
                    }
                    unanswered.extend(imported.message.tool_use_ids().map(str::to_owned));
                    t.messages.push(imported);
                }
            }
        }
        t.settled = unsettled.unwrap_or(t.messages.len());
        responses
    }

    /// The usage records of the responses among `members`, each linked to the message that
    /// holds its response (`responses[k]` is message `k`'s response id).
    fn usage(&self, members: &[usize], responses: &[Option<String>]) -> Vec<ImportedUsage> {
        let lines = self.lines;
        let message_of: HashMap<&str, usize> = responses
            .iter()
            .enumerate()
            .filter_map(|(k, r)| r.as_deref().map(|r| (r, k)))
            .collect();
        let mut records: Vec<ImportedUsage> = Vec::new();
        let mut slot: HashMap<String, usize> = HashMap::new();
        for &i in members {
            let line = &lines[i];
            // A response of this transcript, or a subagent's its progress line repeats.
            let (response_id, request_id, model, timestamp, usage) =
                match (&line.usage, &line.progress) {
                    (Some(usage), _) => (
                        line.response_id.as_deref(),
                        line.request_id.as_deref(),
                        line.model.as_deref(),
                        line.timestamp.as_deref(),
                        *usage,
                    ),
                    (None, Some(p)) => (
                        p.response_id.as_deref(),
                        p.request_id.as_deref(),
                        p.model.as_deref(),
                        p.timestamp.as_deref(),
                        p.usage,
                    ),
                    (None, None) => continue,
                };
            let synthetic = model == Some("<synthetic>");
            if synthetic && usage.total() == 0 {
                continue;
            }
            let id = match (response_id, request_id) {
                (Some(m), Some(r)) => format!("claude-code:{m}:{r}"),
                (Some(m), None) => format!("claude-code:{m}"),
                (None, _) => format!(
                    "claude-code:{}:{}",
                    line.session.as_deref().unwrap_or(""),
                    line.uuid.as_deref().unwrap_or("")
                ),
            };
            let imported = ImportedUsage {
                record: UsageRecord {
                    id: id.clone(),
                    model: model.filter(|_| !synthetic).map(str::to_owned),
                    response_id: response_id.map(str::to_owned),
                    request_id: request_id.map(str::to_owned),
                    at: timestamp.and_then(Timestamp::parse),
                    usage,
                    estimated: false,
                },
                message: line
                    .usage
                    .and(response_id)
                    .and_then(|r| message_of.get(r).copied()),
            };
            // The last row of a response is kept: a streamed response's output count grows.
            match slot.get(&id) {
                Some(&at) => records[at] = imported,
                None => {
                    slot.insert(id, records.len());
                    records.push(imported);
                }
            }
        }
        records
    }

    /// Takes back onto the branch the streamed pieces and parallel tool results that hang off
    /// it (see the module documentation).
    fn rescue(&self, members: &[usize], kept: &mut [Option<bool>]) {
        let lines = self.lines;
        let mut responses: HashSet<&str> = HashSet::new();
        let mut uses: HashSet<&str> = HashSet::new();
        let mut results: HashSet<&str> = HashSet::new();
        for &i in members {
            if kept[i] == Some(true) {
                add_ids(&lines[i], &mut responses, &mut uses, &mut results);
            }
        }
        loop {
            let mut changed = false;
            for &i in members {
                let line = &lines[i];
                let Some(message) = &line.message else {
                    continue;
                };
                if kept[i] == Some(true) {
                    continue;
                }
                let take = if let Some(id) = line.response_id.as_deref() {
                    responses.contains(id)
                } else {
                    let mut ids = message.tool_result_ids().peekable();
                    ids.peek().is_some() && ids.all(|id| uses.contains(id) && !results.contains(id))
                };
                if take {
                    kept[i] = Some(true);
                    add_ids(line, &mut responses, &mut uses, &mut results);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// Counts the side branches (groups of off-branch lines under one topmost off-branch
    /// ancestor) that hold messages, and their message lines.
    fn count_side_branches(&self, members: &[usize], kept: &[Option<bool>], skipped: &mut Skipped) {
        let lines = self.lines;
        let mut root_of: HashMap<usize, usize> = HashMap::new();
        let mut branches: HashSet<usize> = HashSet::new();
        for &i in members {
            if kept[i] == Some(true) || lines[i].message.is_none() {
                continue;
            }
            let mut path = Vec::new();
            let mut seen = HashSet::new();
            let mut at = i;
            let root = loop {
                if let Some(&r) = root_of.get(&at) {
                    break r;
                }
                path.push(at);
                seen.insert(at);
                match self.parent_of(at) {
                    Some(p) if kept[p] == Some(false) && !seen.contains(&p) => at = p,
                    _ => break at,
                }
            };
            for p in path {
                root_of.insert(p, root);
            }
            branches.insert(root);
            skipped.side_branch_messages += 1;
        }
        skipped.side_branches = branches.len();
    }
}

/// Whether a queued text is one, and how it was delivered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum QueuedState {
    /// Not a queued text.
    No,
    /// Delivered into the running turn (`remove`).
    Delivered,
    /// Never delivered (the user typed on): placed at its `enqueue` line.
    Lost,
    /// Not delivered yet: placed at its `enqueue` line, and it may still be delivered later.
    Pending,
}

/// A message or compaction of a transcript being assembled.
enum Item {
    Message {
        imported: ImportedMessage,
        /// The line of its first piece (for a queued text, the line it was delivered at).
        line: usize,
        /// Its response id, for assistant messages.
        response: Option<String>,
        /// A response that may still gain pieces.
        open: bool,
        queued: QueuedState,
    },
    Compaction {
        summary: Option<String>,
        timestamp: Option<String>,
    },
}

impl Item {
    fn line(&self) -> Option<usize> {
        match self {
            Item::Message { line, .. } => Some(*line),
            Item::Compaction { .. } => None,
        }
    }

    fn is_queued(&self) -> bool {
        matches!(self, Item::Message { queued, .. } if *queued != QueuedState::No)
    }

    fn is_tool_results(&self) -> bool {
        match self {
            Item::Message { imported, .. } => {
                imported.message.tool_result_ids().next().is_some()
                    && imported
                        .message
                        .content
                        .iter()
                        .all(|b| matches!(b, ContentBlock::ToolResult { .. }))
            }
            Item::Compaction { .. } => false,
        }
    }
}

fn add_ids<'a>(
    line: &'a Line<'_>,
    responses: &mut HashSet<&'a str>,
    uses: &mut HashSet<&'a str>,
    results: &mut HashSet<&'a str>,
) {
    if let Some(id) = line.response_id.as_deref() {
        responses.insert(id);
    }
    if let Some(m) = &line.message {
        uses.extend(m.tool_use_ids());
        results.extend(m.tool_result_ids());
    }
}

/// Splits and parses the lines; the flag says a truncated last line was dropped.
fn read_lines(bytes: &[u8]) -> Result<(Vec<Line<'_>>, bool), Error> {
    let mut out = Vec::new();
    let mut truncated = false;
    for (no, raw_line, unterminated) in super::jsonl_lines(bytes) {
        if raw_line.trim_ascii().is_empty() {
            continue;
        }
        if raw_line.trim_ascii_start().first() != Some(&b'{') {
            return Err(Error::at(no, "expected a JSON object"));
        }
        let raw: Raw<'_> = match serde_json::from_slice(raw_line) {
            Ok(raw) => raw,
            Err(_) if unterminated => {
                truncated = true;
                continue;
            }
            Err(e) => return Err(Error::at(no, format!("invalid JSON: {e}"))),
        };
        out.push(line(no, raw)?);
    }
    Ok((out, truncated))
}

/// One parsed line.
fn line(no: usize, raw: Raw<'_>) -> Result<Line<'_>, Error> {
    let kind = match raw.kind.get() {
        Some("user") => Kind::User,
        Some("assistant") => Kind::Assistant,
        Some("system") => Kind::System,
        Some("queue-operation") => Kind::Queue,
        Some("result") => Kind::Result,
        _ => Kind::Other,
    };
    let (mut message, mut response_id, mut model, mut stopped, mut usage) =
        (None, None, None, false, None);
    if matches!(kind, Kind::User | Kind::Assistant) {
        let name = if kind == Kind::User {
            "user"
        } else {
            "assistant"
        };
        let wire = raw
            .message
            .as_ref()
            .ok_or_else(|| Error::at(no, format!("{name} line without \"message\"")))?;
        message = Some(
            baton_wire::anthropic::parse_message(wire).map_err(|e| Error::at(no, e.to_string()))?,
        );
        if kind == Kind::Assistant {
            let str_at = |k: &str| wire.get(k).and_then(Value::as_str).map(str::to_owned);
            response_id = str_at("id");
            model = str_at("model");
            stopped = wire.get("stop_reason").is_some_and(|s| !s.is_null());
            usage = wire.get("usage").and_then(usage_of);
        }
    }
    let is_boundary = kind == Kind::System && raw.subtype.get() == Some("compact_boundary");
    let parent = match raw.parent_uuid.0 {
        Some(p) => Some(p),
        None if is_boundary => raw.logical_parent_uuid.0,
        None => None,
    };
    let spawned_agent = raw
        .tool_use_result
        .filter(|r| memchr::memmem::find(r.get().as_bytes(), b"\"agentId\"").is_some())
        .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
        .and_then(|v| v.get("agentId").and_then(Value::as_str).map(str::to_owned));
    let progress = raw
        .data
        .filter(|d| memchr::memmem::find(d.get().as_bytes(), b"agent_progress").is_some())
        .and_then(|d| serde_json::from_str::<Value>(d.get()).ok())
        .filter(|d| d.get("type").and_then(Value::as_str) == Some("agent_progress"))
        .and_then(|d| {
            let outer = d.get("message")?;
            let inner = outer.get("message")?;
            let str_at = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
            Some(Progress {
                response_id: str_at(inner, "id"),
                request_id: str_at(outer, "requestId"),
                model: str_at(inner, "model"),
                timestamp: str_at(outer, "timestamp"),
                usage: usage_of(inner.get("usage")?)?,
            })
        });
    Ok(Line {
        no,
        kind,
        uuid: raw.uuid.0,
        parent,
        session: raw.session_id.0,
        agent: raw.agent_id.0,
        spawned_by: raw.parent_tool_use_id.0,
        sidechain: raw.is_sidechain.0,
        meta: raw.is_meta.0,
        compact_summary: raw.is_compact_summary.0,
        timestamp: raw.timestamp.0,
        request_id: raw.request_id.0,
        cwd: raw.cwd.0,
        version: raw.version.0,
        subtype: raw.subtype.0,
        operation: raw.operation.0,
        queued: if kind == Kind::Queue {
            raw.content.0
        } else {
            None
        },
        message,
        response_id,
        model,
        stopped,
        usage,
        spawned_agent,
        progress,
    })
}

/// `message.usage` as baton's [`Usage`].
fn usage_of(u: &Value) -> Option<Usage> {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let obj = u.as_object()?;
    let written = n(obj.get("cache_creation_input_tokens"));
    let split = obj.get("cache_creation").and_then(Value::as_object);
    let (w5, w1) = match split {
        Some(s) => {
            let (w5, w1) = (
                n(s.get("ephemeral_5m_input_tokens")),
                n(s.get("ephemeral_1h_input_tokens")),
            );
            // A split that does not add up to the total: the rest is a 5-minute write.
            (w5 + written.saturating_sub(w5 + w1), w1)
        }
        None => (written, 0),
    };
    Some(Usage {
        input: n(obj.get("input_tokens")),
        output: n(obj.get("output_tokens")),
        cache_write_5m: w5,
        cache_write_1h: w1,
        cache_read: n(obj.get("cache_read_input_tokens")),
    })
}

mod stream_json;
#[cfg(test)]
mod tests;
