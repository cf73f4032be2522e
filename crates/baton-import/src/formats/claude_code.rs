//! Claude Code session JSONL (`~/.claude/projects/<project>/<session>.jsonl`, and subagent files
//! `<session>/subagents/agent-<id>.jsonl`): one event per line, threaded into a tree by
//! `uuid`/`parentUuid`.
//!
//! What is read:
//! - `user` and `assistant` lines carry an Anthropic-shaped `message`, read by
//!   [`baton_wire::anthropic::parse_message`]. Every other line type (`progress`, `system`,
//!   `summary`, `file-history-snapshot`, `queue-operation`, `attachment`, and any new one) is
//!   passed over and counted in [`Skipped::non_message_lines`], wherever it sits in the tree.
//! - **The main branch.** The tip is the last message line in file order (the last one with
//!   `isSidechain` not true, when the file has any: older versions write subagent runs into the
//!   main file as sidechain roots). The main branch is the tip's chain of ancestors; a
//!   `compact_boundary` (a `system` line whose `parentUuid` is null) is crossed through its
//!   `logicalParentUuid`, and a parent absent from the file (a subagent pointing into its
//!   parent session) ends the chain.
//! - **Parallel tool calls.** Claude Code writes one line per content block of a streamed
//!   response, and for parallel calls each tool result hangs off the piece holding its
//!   `tool_use`, so the chain alone would miss pieces and results. Lines off the chain are taken
//!   back onto the main branch when they are assistant pieces of a response (`message.id`)
//!   already on it, or user lines whose every `tool_result` answers a call on it that has no
//!   result yet, repeated until nothing changes.
//! - **Side branches.** The remaining message lines are grouped by the topmost off-branch
//!   ancestor they hang from; [`Skipped::side_branches`] counts the groups and
//!   [`Skipped::side_branch_messages`] their message lines. Two kinds land there, told apart
//!   only by `isSidechain`: a branch a user abandoned by editing an earlier message (a second
//!   child of a main-branch line), and a **subagent run written into the main file**. Claude
//!   Code 1.0.x writes each `Task` run inline, between the `Task` call and its result, as its
//!   own chain of `isSidechain: true` lines whose root has `parentUuid: null`; nothing points
//!   from the main branch to it (the root's text is the call's `input.prompt`, and the result
//!   line's `toolUseResult.totalToolUseCount` counts the run's calls). Each run is one group and
//!   its calls are not the main conversation's: a 437-line 1.0.98 session with 167 `tool_use`
//!   blocks has 11 on the main branch and 156 in five runs. Otherwise a `parentUuid: null`
//!   line is, in every file seen, the session's first line or a `compact_boundary`: `--resume`
//!   starts a new file that carries the history over, so the main branch is not stitched from
//!   one root into an earlier chain. A leading `summary` line's `leafUuid` may name a line of
//!   another file.
//! - **Streaming.** Main-branch assistant lines sharing a `message.id` become one message, at
//!   the place of the first piece, blocks concatenated in file order; tool results written
//!   between the pieces therefore follow every `tool_use` they answer.
//! - **Compaction.** A `compact_boundary` on the main branch, and the `isCompactSummary: true`
//!   user line after it, become one [`CompactionEvent`] (summary = that line's text,
//!   `after_messages` = messages before it), not a message. A summary line without a boundary
//!   is an event of its own.
//! - **Identity.** `source_session_id` is the tip's `sessionId`. In a subagent file (the tip is
//!   a sidechain line) `sessionId` names the parent session, so it becomes `parent_session_id`
//!   and the transcript's own id is `<sessionId>/agent-<agentId>` (none without `agentId`).
//!   Models are the main branch's `message.model` values other than `<synthetic>`.
//!
//! A line that is not a JSON object is an error naming the line, except a last line with no
//! terminating newline: that is a line still being written, and is dropped (counted as a
//! non-message line). A file without message lines yields no transcript.

use std::collections::{HashMap, HashSet};

use baton_core::Message;
use serde_json::{Map, Value};

use crate::{CompactionEvent, Error, Format, ImportedMessage, Skipped, Transcript};

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
const MARKER_KEYS: [&str; 5] = ["sessionId", "uuid", "parentUuid", "leafUuid", "messageId"];

/// How many leading non-empty lines [`sniff`] looks at.
const SNIFF_LINES: usize = 5;

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

/// One line of the file that has a JSON object.
struct Line {
    obj: Map<String, Value>,
    /// The parsed message, for `user`/`assistant` lines.
    message: Option<Message>,
}

impl Line {
    fn str(&self, key: &str) -> Option<&str> {
        self.obj.get(key).and_then(Value::as_str)
    }

    fn flag(&self, key: &str) -> bool {
        self.obj.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    fn kind(&self) -> &str {
        self.str("type").unwrap_or("")
    }

    fn is_boundary(&self) -> bool {
        self.kind() == "system" && self.str("subtype") == Some("compact_boundary")
    }

    /// The parent in the tree: `parentUuid`, or a boundary's `logicalParentUuid`.
    fn parent(&self) -> Option<&str> {
        match self.str("parentUuid") {
            Some(p) => Some(p),
            None if self.is_boundary() => self.str("logicalParentUuid"),
            None => None,
        }
    }

    /// The API response id of an assistant line.
    fn response_id(&self) -> Option<&str> {
        if self.kind() != "assistant" {
            return None;
        }
        self.obj.get("message")?.get("id")?.as_str()
    }

    fn model(&self) -> Option<&str> {
        self.obj.get("message")?.get("model")?.as_str()
    }
}

/// Reads one Claude Code session file.
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let (lines, truncated) = read_lines(bytes)?;
    let mut skipped = Skipped {
        non_message_lines: usize::from(truncated),
        ..Skipped::default()
    };
    skipped.non_message_lines += lines.iter().filter(|l| l.message.is_none()).count();

    let message_idx: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].message.is_some())
        .collect();
    let Some(tip) = message_idx
        .iter()
        .rev()
        .find(|&&i| !lines[i].flag("isSidechain"))
        .or_else(|| message_idx.last())
        .copied()
    else {
        return Ok(Vec::new());
    };

    let by_uuid: HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.str("uuid").map(|u| (u, i)))
        .collect();

    let mut kept = vec![false; lines.len()];
    let mut at = Some(tip);
    while let Some(i) = at {
        if kept[i] {
            break; // a cycle: stop rather than loop
        }
        kept[i] = true;
        at = lines[i].parent().and_then(|p| by_uuid.get(p).copied());
    }
    rescue(&lines, &mut kept, lines[tip].flag("isSidechain"));
    count_side_branches(&lines, &kept, &by_uuid, &mut skipped);

    let tip_line = &lines[tip];
    let mut transcript = Transcript::new(Format::ClaudeCode);
    let session = tip_line.str("sessionId").map(str::to_owned);
    if tip_line.flag("isSidechain") {
        transcript.source_session_id = match (&session, tip_line.str("agentId")) {
            (Some(s), Some(agent)) => Some(format!("{s}/agent-{agent}")),
            _ => None,
        };
        transcript.parent_session_id = session;
    } else {
        transcript.source_session_id = session;
    }
    transcript.skipped = skipped;
    assemble(lines, &kept, &mut transcript);
    Ok(vec![transcript])
}

/// Splits and parses the lines; the flag says a truncated last line was dropped.
fn read_lines(bytes: &[u8]) -> Result<(Vec<Line>, bool), Error> {
    let mut out = Vec::new();
    let mut truncated = false;
    let raw: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let n = raw.len();
    for (i, raw_line) in raw.into_iter().enumerate() {
        let no = i + 1;
        if raw_line.trim_ascii().is_empty() {
            continue;
        }
        // The piece after the last newline, when the file does not end with one.
        let unterminated = i + 1 == n;
        let obj = match serde_json::from_slice::<Value>(raw_line) {
            Ok(Value::Object(obj)) => obj,
            Ok(_) => return Err(Error::at(no, "expected a JSON object")),
            Err(_) if unterminated => {
                truncated = true;
                continue;
            }
            Err(e) => return Err(Error::at(no, format!("invalid JSON: {e}"))),
        };
        let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
        let message = if kind == "user" || kind == "assistant" {
            let wire = obj
                .get("message")
                .ok_or_else(|| Error::at(no, format!("{kind} line without \"message\"")))?;
            Some(
                baton_wire::anthropic::parse_message(wire)
                    .map_err(|e| Error::at(no, e.to_string()))?,
            )
        } else {
            None
        };
        out.push(Line { obj, message });
    }
    Ok((out, truncated))
}

/// Takes back onto the main branch the streamed pieces and parallel tool results that hang off
/// it (see the module documentation).
fn rescue(lines: &[Line], kept: &mut [bool], sidechain: bool) {
    let mut responses: HashSet<&str> = HashSet::new();
    let mut uses: HashSet<&str> = HashSet::new();
    let mut results: HashSet<&str> = HashSet::new();
    for (i, line) in lines.iter().enumerate() {
        if kept[i] {
            add_ids(line, &mut responses, &mut uses, &mut results);
        }
    }
    loop {
        let mut changed = false;
        for (i, line) in lines.iter().enumerate() {
            let Some(message) = &line.message else {
                continue;
            };
            if kept[i] || line.flag("isSidechain") != sidechain {
                continue;
            }
            let take = if let Some(id) = line.response_id() {
                responses.contains(id)
            } else {
                let mut ids = message.tool_result_ids().peekable();
                ids.peek().is_some() && ids.all(|id| uses.contains(id) && !results.contains(id))
            };
            if take {
                kept[i] = true;
                add_ids(line, &mut responses, &mut uses, &mut results);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

fn add_ids<'a>(
    line: &'a Line,
    responses: &mut HashSet<&'a str>,
    uses: &mut HashSet<&'a str>,
    results: &mut HashSet<&'a str>,
) {
    if let Some(id) = line.response_id() {
        responses.insert(id);
    }
    if let Some(m) = &line.message {
        uses.extend(m.tool_use_ids());
        results.extend(m.tool_result_ids());
    }
}

/// Counts the side branches (groups of off-branch lines under one topmost off-branch ancestor)
/// that hold messages, and their message lines.
fn count_side_branches(
    lines: &[Line],
    kept: &[bool],
    by_uuid: &HashMap<&str, usize>,
    skipped: &mut Skipped,
) {
    let mut root_of: Vec<Option<usize>> = vec![None; lines.len()];
    let mut branches: HashSet<usize> = HashSet::new();
    for i in 0..lines.len() {
        if kept[i] || lines[i].message.is_none() {
            continue;
        }
        // Walk up to the topmost off-branch ancestor, then record it along the path.
        let mut path = Vec::new();
        let mut seen = HashSet::new();
        let mut at = i;
        let root = loop {
            if let Some(r) = root_of[at] {
                break r;
            }
            path.push(at);
            seen.insert(at);
            match lines[at].parent().and_then(|p| by_uuid.get(p).copied()) {
                Some(p) if !kept[p] && !seen.contains(&p) => at = p,
                _ => break at,
            }
        };
        for p in path {
            root_of[p] = Some(root);
        }
        branches.insert(root);
        skipped.side_branch_messages += 1;
    }
    skipped.side_branches = branches.len();
}

/// Builds the messages and compaction events from the main-branch lines, in file order.
fn assemble(lines: Vec<Line>, kept: &[bool], transcript: &mut Transcript) {
    let mut by_response: HashMap<String, usize> = HashMap::new();
    for (i, mut line) in lines.into_iter().enumerate() {
        if !kept[i] {
            continue;
        }
        let timestamp = line.str("timestamp").map(str::to_owned);
        if line.is_boundary() {
            transcript.compactions.push(CompactionEvent {
                after_messages: transcript.messages.len(),
                summary: None,
                timestamp,
            });
            continue;
        }
        let Some(message) = line.message.take() else {
            continue;
        };
        if line.kind() == "user" && line.flag("isCompactSummary") {
            let summary = Some(message.plain_text());
            match transcript.compactions.last_mut() {
                Some(event)
                    if event.summary.is_none()
                        && event.after_messages == transcript.messages.len() =>
                {
                    event.summary = summary;
                }
                _ => transcript.compactions.push(CompactionEvent {
                    after_messages: transcript.messages.len(),
                    summary,
                    timestamp,
                }),
            }
            continue;
        }
        let model = line
            .model()
            .filter(|m| *m != "<synthetic>")
            .map(str::to_owned);
        if let Some(m) = &model {
            transcript.saw_model(m);
        }
        if let Some(id) = line.response_id() {
            if let Some(&at) = by_response.get(id) {
                let target: &mut ImportedMessage = &mut transcript.messages[at];
                target.message.content.extend(message.content);
                if target.model.is_none() {
                    target.model = model;
                }
                continue;
            }
            by_response.insert(id.to_owned(), transcript.messages.len());
        }
        transcript.messages.push(ImportedMessage {
            message,
            timestamp,
            model,
        });
    }
}

#[cfg(test)]
mod tests {
    use baton_core::{ContentBlock, Role};
    use serde_json::{Value, json};

    use super::{parse, sniff};
    use crate::{Error, Transcript};

    fn user(uuid: &str, parent: Option<&str>, content: Value) -> Value {
        json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
               "isSidechain": false, "timestamp": format!("t-{uuid}"),
               "message": {"role": "user", "content": content}})
    }

    fn assistant(uuid: &str, parent: &str, id: &str, content: Value) -> Value {
        json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s1",
               "isSidechain": false, "timestamp": format!("t-{uuid}"),
               "message": {"role": "assistant", "id": id, "model": "claude-x", "content": content}})
    }

    fn tool_use(id: &str) -> Value {
        json!([{"type": "tool_use", "id": id, "name": "ls", "input": {}}])
    }

    fn tool_result(id: &str) -> Value {
        json!([{"type": "tool_result", "tool_use_id": id, "content": "ok"}])
    }

    fn jsonl(lines: &[Value]) -> Vec<u8> {
        let mut out = String::new();
        for l in lines {
            out.push_str(&l.to_string());
            out.push('\n');
        }
        out.into_bytes()
    }

    fn one(lines: &[Value]) -> Transcript {
        let mut ts = parse(&jsonl(lines)).unwrap();
        assert_eq!(ts.len(), 1);
        ts.remove(0)
    }

    /// The transcript in a compact form: `role:block,block` per message.
    fn shape(t: &Transcript) -> Vec<String> {
        t.messages
            .iter()
            .map(|m| {
                let blocks: Vec<String> = m
                    .message
                    .content
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { text } => text.clone(),
                        ContentBlock::ToolUse { id, .. } => format!("use({id})"),
                        ContentBlock::ToolResult { tool_use_id, .. } => {
                            format!("result({tool_use_id})")
                        }
                        other => other.type_name().to_owned(),
                    })
                    .collect();
                format!("{}:{}", m.message.role.as_str(), blocks.join(","))
            })
            .collect()
    }

    #[test]
    fn follows_the_branch_of_the_last_message_and_counts_side_branches() {
        let t = one(&[
            json!({"type": "file-history-snapshot", "messageId": "1", "snapshot": {}}),
            user("1", None, json!("hello")),
            assistant("2", "1", "m1", json!([{"type": "text", "text": "hi"}])),
            user("3", Some("2"), json!("first try")),
            json!({"type": "progress", "uuid": "p", "parentUuid": "3", "sessionId": "s1"}),
            assistant(
                "4",
                "p",
                "m2",
                json!([{"type": "text", "text": "abandoned"}]),
            ),
            user("5", Some("2"), json!("second try")),
            assistant("6", "5", "m3", json!([{"type": "text", "text": "kept"}])),
            json!({"type": "summary", "summary": "title", "leafUuid": "6"}),
        ]);
        assert_eq!(
            shape(&t),
            [
                "user:hello",
                "assistant:hi",
                "user:second try",
                "assistant:kept"
            ]
        );
        assert_eq!(t.skipped.non_message_lines, 3);
        assert_eq!(t.skipped.side_branches, 1);
        assert_eq!(t.skipped.side_branch_messages, 2);
        assert_eq!(t.source_session_id.as_deref(), Some("s1"));
        assert_eq!(t.parent_session_id, None);
        assert_eq!(t.models, ["claude-x"]);
        assert_eq!(t.messages[3].timestamp.as_deref(), Some("t-6"));
    }

    #[test]
    fn compact_boundary_and_summary_line_become_one_event() {
        let t = one(&[
            user("1", None, json!("hello")),
            assistant("2", "1", "m1", json!([{"type": "text", "text": "hi"}])),
            json!({"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": null,
                   "logicalParentUuid": "2", "timestamp": "tb", "sessionId": "s1"}),
            json!({"type": "user", "uuid": "3", "parentUuid": "b", "isCompactSummary": true,
                   "sessionId": "s1", "message": {"role": "user", "content": "the summary"}}),
            user("4", Some("3"), json!("go on")),
            assistant("5", "4", "m2", json!([{"type": "text", "text": "ok"}])),
        ]);
        assert_eq!(
            shape(&t),
            ["user:hello", "assistant:hi", "user:go on", "assistant:ok"]
        );
        assert_eq!(t.compactions.len(), 1);
        assert_eq!(t.compactions[0].after_messages, 2);
        assert_eq!(t.compactions[0].summary.as_deref(), Some("the summary"));
        assert_eq!(t.compactions[0].timestamp.as_deref(), Some("tb"));
        assert_eq!(t.skipped.non_message_lines, 1);
        assert_eq!(t.skipped.side_branches, 0);
    }

    #[test]
    fn merges_streamed_pieces_and_takes_back_parallel_results() {
        // Pieces of m1 chain one after the other; each result hangs off its own piece.
        let t = one(&[
            user("1", None, json!("go")),
            assistant(
                "2",
                "1",
                "m1",
                json!([{"type": "text", "text": "two calls"}]),
            ),
            assistant("3", "2", "m1", tool_use("t1")),
            assistant("4", "3", "m1", tool_use("t2")),
            user("5", Some("3"), tool_result("t1")),
            user("6", Some("4"), tool_result("t2")),
            assistant("7", "6", "m2", json!([{"type": "text", "text": "done"}])),
        ]);
        assert_eq!(
            shape(&t),
            [
                "user:go",
                "assistant:two calls,use(t1),use(t2)",
                "user:result(t1)",
                "user:result(t2)",
                "assistant:done"
            ]
        );
        assert_eq!(t.skipped.side_branches, 0);
        assert_eq!(t.tool_calls(), 2);
        assert_eq!(t.messages[1].timestamp.as_deref(), Some("t-2"));
    }

    #[test]
    fn a_result_between_pieces_follows_the_merged_call() {
        let t = one(&[
            user("1", None, json!("go")),
            assistant("2", "1", "m1", tool_use("t1")),
            user("3", Some("2"), tool_result("t1")),
            assistant("4", "3", "m1", tool_use("t2")),
            user("5", Some("4"), tool_result("t2")),
        ]);
        assert_eq!(
            shape(&t),
            [
                "user:go",
                "assistant:use(t1),use(t2)",
                "user:result(t1)",
                "user:result(t2)"
            ]
        );
    }

    #[test]
    fn sidechain_file_names_its_parent_session() {
        let mut first = user("1", Some("in-parent"), json!("task"));
        first["isSidechain"] = json!(true);
        first["agentId"] = json!("a1");
        let mut reply = assistant("2", "1", "m1", json!([{"type": "text", "text": "x"}]));
        reply["isSidechain"] = json!(true);
        reply["agentId"] = json!("a1");
        reply["message"]["model"] = json!("<synthetic>");
        let t = one(&[first, reply]);
        assert_eq!(t.parent_session_id.as_deref(), Some("s1"));
        assert_eq!(t.source_session_id.as_deref(), Some("s1/agent-a1"));
        assert!(t.models.is_empty());
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[1].message.role, Role::Assistant);
    }

    #[test]
    fn old_style_sidechains_in_the_main_file_are_side_branches() {
        let mut side = user("s", None, json!("subtask"));
        side["isSidechain"] = json!(true);
        let mut side_reply = assistant("s2", "s", "ms", json!([{"type": "text", "text": "sub"}]));
        side_reply["isSidechain"] = json!(true);
        let t = one(&[
            user("1", None, json!("go")),
            assistant("2", "1", "m1", json!([{"type": "text", "text": "main"}])),
            side,
            side_reply,
        ]);
        assert_eq!(shape(&t), ["user:go", "assistant:main"]);
        assert_eq!(
            (t.skipped.side_branches, t.skipped.side_branch_messages),
            (1, 2)
        );
        assert_eq!(t.parent_session_id, None);
    }

    /// The 1.0.x layout: a `Task` run written inline between the call and its result, as a
    /// sidechain chain rooted at `parentUuid: null`, beside a branch abandoned by an edit.
    #[test]
    fn inline_subagent_run_and_abandoned_edit_are_separate_side_branches() {
        let side = |mut v: Value| {
            v["isSidechain"] = json!(true);
            v
        };
        let t = one(&[
            json!({"type": "summary", "summary": "title", "leafUuid": "in-another-file"}),
            user("1", None, json!("go")),
            assistant("2", "1", "m1", tool_use("task")),
            side(user("s1", None, json!("subtask"))),
            side(assistant("s2", "s1", "ms1", tool_use("inner"))),
            side(user("s3", Some("s2"), tool_result("inner"))),
            side(assistant(
                "s4",
                "s3",
                "ms2",
                json!([{"type": "text", "text": "sub done"}]),
            )),
            user("3", Some("2"), tool_result("task")),
            assistant("4", "3", "m2", json!([{"type": "text", "text": "ok"}])),
            user("5", Some("4"), json!("first try")),
            assistant(
                "6",
                "5",
                "m3",
                json!([{"type": "text", "text": "abandoned"}]),
            ),
            user("7", Some("4"), json!("second try")),
            assistant("8", "7", "m4", json!([{"type": "text", "text": "kept"}])),
        ]);
        assert_eq!(
            shape(&t),
            [
                "user:go",
                "assistant:use(task)",
                "user:result(task)",
                "assistant:ok",
                "user:second try",
                "assistant:kept"
            ]
        );
        assert_eq!(t.tool_calls(), 1);
        assert_eq!(
            (t.skipped.side_branches, t.skipped.side_branch_messages),
            (2, 6)
        );
        assert_eq!(t.parent_session_id, None);
    }

    #[test]
    fn malformed_line_is_an_error_naming_it_but_a_truncated_last_line_is_dropped() {
        let good = jsonl(&[user("1", None, json!("hello"))]);
        let mut bad = good.clone();
        bad.extend_from_slice(b"{\"type\": \"user\"\n");
        bad.extend_from_slice(&good);
        let err = parse(&bad).unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(2), .. }),
            "{err}"
        );
        assert!(err.to_string().starts_with("line 2: invalid JSON"), "{err}");

        let mut truncated = good.clone();
        truncated.extend_from_slice(b"{\"type\": \"assistant\", \"mess");
        let t = parse(&truncated).unwrap();
        assert_eq!(t[0].messages.len(), 1);
        assert_eq!(t[0].skipped.non_message_lines, 1);

        let no_message = br#"{"type": "user", "uuid": "1"}"#.to_vec();
        assert_eq!(
            parse(&no_message).unwrap_err(),
            Error::at(1, "user line without \"message\"")
        );
        let bad_block = jsonl(&[user("1", None, json!([{"type": "video"}]))]);
        assert!(matches!(
            parse(&bad_block),
            Err(Error::Malformed { line: Some(1), .. })
        ));
        assert_eq!(
            parse(b"[1]\n").unwrap_err(),
            Error::at(1, "expected a JSON object")
        );
        assert_eq!(parse(b"\n\n").unwrap(), Vec::new());
    }

    #[test]
    fn sniffs_by_content() {
        assert!(sniff(&jsonl(&[user("1", None, json!("hi"))])));
        assert!(sniff(
            br#"{"type":"file-history-snapshot","messageId":"x","snapshot":{}}"#
        ));
        assert!(!sniff(br#"{"type":"session_meta","payload":{"id":"x"}}"#));
        assert!(!sniff(br#"[{"role":"user","content":"hi"}]"#));
        assert!(!sniff(b"# aider chat started at 2024"));
        assert!(!sniff(b""));
    }
}
