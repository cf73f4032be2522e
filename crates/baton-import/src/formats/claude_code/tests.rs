//! Unit tests of the Claude Code reader, on hand-made lines.

use baton_core::{ContentBlock, Role};
use serde_json::{Value, json};

use super::{parse, sniff};
use crate::formats::jsonl;
use crate::{Error, Spawn, Transcript};

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
fn an_inline_sidechain_is_a_transcript_of_its_own() {
    let mut side = user("s", None, json!("subtask"));
    side["isSidechain"] = json!(true);
    let mut side_reply = assistant("s2", "s", "ms", json!([{"type": "text", "text": "sub"}]));
    side_reply["isSidechain"] = json!(true);
    let ts = parse(&jsonl(&[
        user("1", None, json!("go")),
        assistant("2", "1", "m1", json!([{"type": "text", "text": "main"}])),
        side,
        side_reply,
    ]))
    .unwrap();
    assert_eq!(ts.len(), 2);
    assert_eq!(shape(&ts[0]), ["user:go", "assistant:main"]);
    assert_eq!(ts[0].skipped.side_branches, 0);
    assert_eq!(shape(&ts[1]), ["user:subtask", "assistant:sub"]);
    assert_eq!(ts[1].index, 1);
    assert_eq!(ts[1].source_session_id.as_deref(), Some("s1/sidechain-s"));
    assert_eq!(ts[1].parent_session_id.as_deref(), Some("s1"));
    // No call asked for it: no link.
    assert_eq!(ts[1].parent_tool_use_id, None);
    assert!(ts[0].spawned.is_empty());
}

/// The 1.0.x layout: a `Task` run written inline between the call and its result, as a
/// sidechain chain rooted at `parentUuid: null`, beside a branch abandoned by an edit.
// issue 17: inline subagents were dropped as side branches.
#[test]
fn r17_inline_subagent_run_is_linked_to_its_call_and_the_abandoned_edit_stays_a_side_branch() {
    let side = |mut v: Value| {
        v["isSidechain"] = json!(true);
        v
    };
    let task = json!([{"type": "tool_use", "id": "task", "name": "Task",
                       "input": {"description": "d", "prompt": "subtask"}}]);
    let ts = parse(&jsonl(&[
        json!({"type": "summary", "summary": "title", "leafUuid": "in-another-file"}),
        user("1", None, json!("go")),
        assistant("2", "1", "m1", task),
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
    ]))
    .unwrap();
    assert_eq!(ts.len(), 2);
    let (main, sub) = (&ts[0], &ts[1]);
    assert_eq!(
        shape(main),
        [
            "user:go",
            "assistant:use(task)",
            "user:result(task)",
            "assistant:ok",
            "user:second try",
            "assistant:kept"
        ]
    );
    assert_eq!(
        (
            main.skipped.side_branches,
            main.skipped.side_branch_messages
        ),
        (1, 2)
    );
    assert_eq!(
        shape(sub),
        [
            "user:subtask",
            "assistant:use(inner)",
            "user:result(inner)",
            "assistant:sub done"
        ]
    );
    assert_eq!(sub.parent_tool_use_id.as_deref(), Some("task"));
    assert_eq!(sub.title.as_deref(), Some("subtask"));
    assert_eq!(
        main.spawned,
        [Spawn {
            tool_use_id: "task".into(),
            session_id: "s1/sidechain-s1".into()
        }]
    );
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
    let bad_block = jsonl(&[user("1", None, json!([{"type": "image"}]))]);
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

fn with_usage(mut line: Value, request: Option<&str>, usage: Value) -> Value {
    line["message"]["usage"] = usage;
    if let Some(r) = request {
        line["requestId"] = json!(r);
    }
    line
}

fn queue(operation: &str, content: Option<&str>) -> Value {
    let mut v = json!({"type": "queue-operation", "operation": operation,
                       "timestamp": format!("q-{operation}"), "sessionId": "s1"});
    if let Some(c) = content {
        v["content"] = json!(c);
    }
    v
}

/// The number of messages that are settled after each line of `lines`, cut there.
fn settled_after_each(lines: &[Value]) -> Vec<usize> {
    (1..=lines.len())
        .map(|n| {
            parse(&jsonl(&lines[..n]))
                .unwrap()
                .first()
                .map_or(0, |t| t.settled)
        })
        .collect()
}

#[test]
fn a_streamed_response_is_settled_once_something_closes_it() {
    let lines = [
        user("1", None, json!("go")),
        assistant("2", "1", "m1", json!([{"type": "text", "text": "looking"}])),
        assistant("3", "2", "m1", tool_use("t1")),
        user("4", Some("3"), tool_result("t1")),
        assistant("5", "4", "m1", tool_use("t2")),
        user("6", Some("5"), tool_result("t2")),
        assistant("7", "6", "m2", json!([{"type": "text", "text": "done"}])),
        user("8", Some("7"), json!("thanks")),
    ];
    // A tool result does not close m1 (its pieces go on after it); m2 closes it; the user
    // line closes m2.
    assert_eq!(settled_after_each(&lines), [1, 1, 1, 1, 1, 1, 4, 6]);
    let whole = parse(&jsonl(&lines)).unwrap().remove(0);
    assert_eq!(whole.messages.len(), 6);

    // A stop reason closes the response at once; so does a turn-ending system line.
    let mut stopped = assistant("2", "1", "m1", json!([{"type": "text", "text": "bye"}]));
    stopped["message"]["stop_reason"] = json!("end_turn");
    assert_eq!(
        settled_after_each(&[user("1", None, json!("go")), stopped]),
        [1, 2]
    );
    let end = json!({"type": "system", "subtype": "turn_duration", "uuid": "9",
                     "parentUuid": "2", "sessionId": "s1"});
    let open = assistant("2", "1", "m1", json!([{"type": "text", "text": "bye"}]));
    assert_eq!(
        settled_after_each(&[user("1", None, json!("go")), open, end]),
        [1, 1, 2]
    );
}

#[test]
fn settle_keeps_what_cannot_change() {
    let mut t = parse(&jsonl(&[
        user("1", None, json!("go")),
        with_usage(
            assistant("2", "1", "m1", tool_use("t1")),
            Some("r1"),
            json!({"input_tokens": 1, "output_tokens": 2}),
        ),
    ]))
    .unwrap()
    .remove(0);
    assert_eq!((t.messages.len(), t.settled, t.usage.len()), (2, 1, 1));
    t.settle();
    assert_eq!(shape(&t), ["user:go"]);
    // The open response was paid for as far as it went: its usage stays, naming the message
    // it will be once settled.
    assert_eq!(t.usage.len(), 1);
    assert_eq!(t.usage[0].message, Some(1));
}

// issue 17: a queued message never reached the run.
#[test]
fn r17_queued_messages_become_user_messages_once_each() {
    // `remove`: delivered into the running turn, placed after the results that follow it.
    let t = one(&[
        user("1", None, json!("go")),
        assistant("2", "1", "m1", tool_use("t1")),
        queue("enqueue", Some("also check the tests")),
        queue("remove", None),
        user("3", Some("2"), tool_result("t1")),
        assistant("4", "3", "m2", json!([{"type": "text", "text": "done"}])),
    ]);
    assert_eq!(
        shape(&t),
        [
            "user:go",
            "assistant:use(t1)",
            "user:result(t1)",
            "user:also check the tests",
            "assistant:done"
        ]
    );
    assert_eq!(t.queued, 1);
    assert_eq!(t.messages[3].timestamp.as_deref(), Some("q-remove"));
    assert!(t.problems().is_empty(), "{:?}", t.problems());

    // `dequeue`: delivered as a user line of its own, which is the one message.
    let t = one(&[
        user("1", None, json!("go")),
        assistant("2", "1", "m1", json!([{"type": "text", "text": "working"}])),
        queue("enqueue", Some("design first")),
        queue("dequeue", None),
        user("3", Some("2"), json!("design first")),
        assistant("4", "3", "m2", json!([{"type": "text", "text": "ok"}])),
    ]);
    assert_eq!(
        shape(&t),
        [
            "user:go",
            "assistant:working",
            "user:design first",
            "assistant:ok"
        ]
    );
    assert_eq!(t.queued, 0);

    // Slash commands and notifications are not what the user typed to the model.
    let t = one(&[
        user("1", None, json!("go")),
        queue("enqueue", Some("/mcp")),
        queue("remove", None),
        queue(
            "enqueue",
            Some("<task-notification>done</task-notification>"),
        ),
        queue("remove", None),
        assistant("2", "1", "m1", json!([{"type": "text", "text": "ok"}])),
    ]);
    assert_eq!(shape(&t), ["user:go", "assistant:ok"]);
}

#[test]
fn a_queued_text_not_yet_delivered_holds_back_what_follows_it() {
    let lines = [
        user("1", None, json!("go")),
        assistant("2", "1", "m1", tool_use("t1")),
        queue("enqueue", Some("stop after this")),
        user("3", Some("2"), tool_result("t1")),
        assistant("4", "3", "m2", json!([{"type": "text", "text": "done"}])),
        user("5", Some("4"), json!("next task")),
    ];
    // m1 is open until m2 closes it; then the pending text, past the result that follows it,
    // may still move: nothing from it on is settled.
    assert_eq!(settled_after_each(&lines), [1, 1, 1, 1, 3, 6]);
    // The user typed on: it was never delivered, and stays where it was queued.
    let t = one(&lines);
    assert_eq!(
        shape(&t),
        [
            "user:go",
            "assistant:use(t1)",
            "user:result(t1)",
            "user:stop after this",
            "assistant:done",
            "user:next task"
        ]
    );
    assert_eq!(t.settled, 6);
}

#[test]
fn usage_keeps_the_last_row_of_each_response() {
    let ts = parse(&jsonl(&[
        user("1", None, json!("go")),
        with_usage(
            assistant("2", "1", "m1", json!([{"type": "text", "text": "a"}])),
            Some("r1"),
            json!({"input_tokens": 3, "output_tokens": 1, "cache_read_input_tokens": 10,
                   "cache_creation_input_tokens": 7,
                   "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 5}}),
        ),
        with_usage(
            assistant("3", "2", "m1", tool_use("t1")),
            Some("r1"),
            json!({"input_tokens": 3, "output_tokens": 40, "cache_read_input_tokens": 10,
                   "cache_creation_input_tokens": 7,
                   "cache_creation": {"ephemeral_5m_input_tokens": 2, "ephemeral_1h_input_tokens": 5}}),
        ),
        user("4", Some("3"), tool_result("t1")),
        with_usage(
            assistant("5", "4", "m2", json!([{"type": "text", "text": "b"}])),
            None,
            json!({"input_tokens": 1, "output_tokens": 9, "cache_creation_input_tokens": 4}),
        ),
        with_usage(
            {
                let mut a = assistant("6", "5", "m3", json!([{"type": "text", "text": "err"}]));
                a["message"]["model"] = json!("<synthetic>");
                a
            },
            None,
            json!({"input_tokens": 0, "output_tokens": 0}),
        ),
    ]))
    .unwrap();
    let usage = &ts[0].usage;
    assert_eq!(usage.len(), 2, "{usage:?}");
    let first = &usage[0];
    assert_eq!(first.record.id, "claude-code:m1:r1");
    assert_eq!(first.message, Some(1));
    assert_eq!(
        (
            first.record.usage.input,
            first.record.usage.output,
            first.record.usage.cache_write_5m,
            first.record.usage.cache_write_1h,
            first.record.usage.cache_read
        ),
        (3, 40, 2, 5, 10)
    );
    assert_eq!(first.record.model.as_deref(), Some("claude-x"));
    assert_eq!(first.record.request_id.as_deref(), Some("r1"));
    assert!(!first.record.estimated);
    // No request id: keyed by the response id; no split: all 5-minute writes.
    assert_eq!(usage[1].record.id, "claude-code:m2");
    assert_eq!(usage[1].record.usage.cache_write_5m, 4);
    assert_eq!(usage[1].message, Some(3));
}

#[test]
fn an_abandoned_branch_is_still_paid_for() {
    let t = one(&[
        user("1", None, json!("go")),
        with_usage(
            assistant("2", "1", "m1", json!([{"type": "text", "text": "first"}])),
            Some("r1"),
            json!({"input_tokens": 5, "output_tokens": 5}),
        ),
        user("3", None, json!("go, differently")),
        with_usage(
            assistant("4", "3", "m2", json!([{"type": "text", "text": "second"}])),
            Some("r2"),
            json!({"input_tokens": 6, "output_tokens": 6}),
        ),
    ]);
    assert_eq!(shape(&t), ["user:go, differently", "assistant:second"]);
    let linked: Vec<(&str, Option<usize>)> = t
        .usage
        .iter()
        .map(|u| (u.record.id.as_str(), u.message))
        .collect();
    assert_eq!(
        linked,
        [("claude-code:m1:r1", None), ("claude-code:m2:r2", Some(1))]
    );
}

#[test]
fn file_based_subagents_are_listed_by_the_result_that_names_them() {
    let mut result = user("3", Some("2"), tool_result("task"));
    result["toolUseResult"] = json!({"status": "completed", "agentId": "a1", "content": []});
    let t = one(&[
        user("1", None, json!("go")),
        assistant("2", "1", "m1", tool_use("task")),
        result,
    ]);
    assert_eq!(
        t.spawned,
        [Spawn {
            tool_use_id: "task".into(),
            session_id: "s1/agent-a1".into()
        }]
    );
}

#[test]
fn metadata_comes_from_the_lines() {
    let mut first = user(
        "1",
        None,
        json!("<command-name>/clear</command-name>\n<command-args></command-args>"),
    );
    first["cwd"] = json!("/home/me/project");
    first["version"] = json!("2.1.39");
    let mut meta = user("2", Some("1"), json!("Caveat: local command output"));
    meta["isMeta"] = json!(true);
    let t = one(&[
        first,
        meta,
        user(
            "3",
            Some("2"),
            json!(
                "  \n  Refactor the importer so that a very long instruction is cut at eighty characters\nsecond line"
            ),
        ),
        assistant("4", "3", "m1", json!([{"type": "text", "text": "ok"}])),
    ]);
    assert_eq!(t.project.as_deref(), Some("/home/me/project"));
    assert_eq!(t.agent_version.as_deref(), Some("2.1.39"));
    assert_eq!(
        t.title.as_deref(),
        Some("Refactor the importer so that a very long instruction is cut at eighty character…")
    );
    // A bare command is the title only when nothing else is.
    let t = one(&[user(
        "1",
        None,
        json!("<command-name>/init</command-name>\n<command-args></command-args>"),
    )]);
    assert_eq!(t.title.as_deref(), Some("/init"));
}

#[test]
fn hook_output_copied_from_the_parent_is_not_a_subagent_message() {
    let side = |mut v: Value| {
        v["isSidechain"] = json!(true);
        v["agentId"] = json!("acompact-1");
        v
    };
    let mut hook = side(user(
        "h",
        Some("in-parent"),
        json!("<system-reminder>hook</system-reminder>"),
    ));
    hook["isMeta"] = json!(true);
    let lines = [
        hook,
        side(user("1", Some("in-parent-too"), json!("Summarize"))),
        side(assistant(
            "2",
            "1",
            "m1",
            json!([{"type": "text", "text": "summary"}]),
        )),
    ];
    assert!(parse(&jsonl(&lines[..1])).unwrap().is_empty());
    let t = one(&lines);
    assert_eq!(shape(&t), ["user:Summarize", "assistant:summary"]);
    assert_eq!(t.skipped.side_branches, 0);
    assert_eq!(t.skipped.non_message_lines, 1);
}

#[test]
fn estimates_are_only_for_sources_without_usage() {
    let t = one(&[
        user("1", None, json!("go")),
        with_usage(
            assistant("2", "1", "m1", json!([{"type": "text", "text": "a"}])),
            Some("r"),
            json!({"input_tokens": 1, "output_tokens": 1}),
        ),
    ]);
    assert!(t.estimated_usage(&[10, 20], "k").is_empty());
    let mut bare = t.clone();
    bare.usage.clear();
    let estimated = bare.estimated_usage(&[10, 20], "k");
    assert_eq!(estimated.len(), 1);
    let e = &estimated[0];
    assert_eq!(e.record.id, "k#1");
    assert!(e.record.estimated);
    assert_eq!((e.record.usage.input, e.record.usage.output), (10, 20));
    assert_eq!(e.message, Some(1));
}

#[test]
fn a_subagent_response_repeated_in_a_progress_line_is_a_record_of_the_session() {
    let progress = json!({"type": "progress", "uuid": "p", "parentUuid": "2", "sessionId": "s1",
        "timestamp": "2026-02-10T21:55:00Z",
        "data": {"type": "agent_progress", "message": {"type": "assistant", "requestId": "req_9",
            "timestamp": "2026-02-10T21:55:01Z",
            "message": {"id": "msg_9", "model": "claude-haiku-4-5-20251001",
                        "role": "assistant", "content": [],
                        "usage": {"input_tokens": 24, "output_tokens": 7}}}}});
    let hook = json!({"type": "progress", "uuid": "h", "parentUuid": "2", "sessionId": "s1",
        "data": {"type": "hook_progress", "hookName": "x"}});
    let t = one(&[
        user("1", None, json!("go")),
        assistant("2", "1", "m1", tool_use("task")),
        hook,
        progress,
    ]);
    assert_eq!(t.usage.len(), 1);
    let u = &t.usage[0];
    assert_eq!(u.record.id, "claude-code:msg_9:req_9");
    assert_eq!(u.message, None);
    assert_eq!((u.record.usage.input, u.record.usage.output), (24, 7));
    assert_eq!(u.record.model.as_deref(), Some("claude-haiku-4-5-20251001"));
    assert_eq!(
        u.record.at,
        baton_core::Timestamp::parse("2026-02-10T21:55:01Z")
    );
    assert_eq!(t.skipped.non_message_lines, 2);
}

/// `claude -p --output-format stream-json --verbose` of a run that spawned a subagent: an init
/// line, unthreaded message lines (a streamed response in two pieces, a subagent's lines
/// interleaved under `parent_tool_use_id`), and the closing `result` line.
fn stream_json_run() -> Vec<Value> {
    let line = |kind: &str, uuid: &str, parent_tool: Option<&str>, message: Value| {
        json!({"type": kind, "message": message, "parent_tool_use_id": parent_tool,
               "session_id": "sj-1", "uuid": uuid})
    };
    let said = |id: &str, content: Value, usage: Value| {
        json!({"model": "claude-sonnet-4-5", "id": id, "type": "message", "role": "assistant",
               "content": content, "stop_reason": null, "usage": usage})
    };
    let result = |id: &str| {
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                                            "content": "ok"}]})
    };
    let task = json!([{"type": "tool_use", "id": "toolu_task", "name": "Task",
                       "input": {"description": "look", "prompt": "find the config"}}]);
    vec![
        json!({"type": "system", "subtype": "init", "cwd": "/home/u/app", "session_id": "sj-1",
               "model": "claude-sonnet-4-5", "claude_code_version": "2.0.14", "uuid": "i"}),
        line(
            "assistant",
            "a1",
            None,
            said(
                "m1",
                json!([{"type": "text", "text": "I'll delegate."}]),
                json!({"input_tokens": 3, "output_tokens": 1}),
            ),
        ),
        line(
            "assistant",
            "a2",
            None,
            said("m1", task, json!({"input_tokens": 3, "output_tokens": 30})),
        ),
        line(
            "user",
            "s1",
            Some("toolu_task"),
            json!({"role": "user", "content": [{"type": "text", "text": "find the config"}]}),
        ),
        line(
            "assistant",
            "s2",
            Some("toolu_task"),
            said(
                "m2",
                json!([{"type": "tool_use", "id": "toolu_ls", "name": "Bash",
                        "input": {"command": "ls"}}]),
                json!({"input_tokens": 5, "output_tokens": 9}),
            ),
        ),
        line("user", "s3", Some("toolu_task"), result("toolu_ls")),
        line(
            "assistant",
            "s4",
            Some("toolu_task"),
            said(
                "m3",
                json!([{"type": "text", "text": "config.toml"}]),
                json!({"input_tokens": 6, "output_tokens": 4}),
            ),
        ),
        line("user", "a3", None, result("toolu_task")),
        line(
            "assistant",
            "a4",
            None,
            said(
                "m4",
                json!([{"type": "text", "text": "It is config.toml."}]),
                json!({"input_tokens": 4, "output_tokens": 7}),
            ),
        ),
        json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 2,
               "result": "It is config.toml.", "session_id": "sj-1", "total_cost_usd": 0.01,
               "uuid": "r"}),
    ]
}

#[test]
fn stream_json_output_is_threaded_into_the_session_it_stands_for() {
    let bytes = jsonl(&stream_json_run());
    assert!(sniff(&bytes));
    assert_eq!(crate::detect(&bytes), Some(crate::Format::ClaudeCode));
    let ts = parse(&bytes).unwrap();
    assert_eq!(ts.len(), 2, "the main run and its subagent's");
    let (main, sub) = (&ts[0], &ts[1]);
    assert_eq!(
        shape(main),
        [
            "assistant:I'll delegate.,use(toolu_task)",
            "user:result(toolu_task)",
            "assistant:It is config.toml."
        ]
    );
    assert_eq!(main.skipped.side_branches, 0);
    assert_eq!(main.source_session_id.as_deref(), Some("sj-1"));
    assert_eq!(main.project.as_deref(), Some("/home/u/app"));
    assert_eq!(main.agent_version.as_deref(), Some("2.0.14"));
    // The `result` line closes the last response: nothing is held back.
    assert_eq!(main.settled, 3);
    assert_eq!(
        shape(sub),
        [
            "user:find the config",
            "assistant:use(toolu_ls)",
            "user:result(toolu_ls)",
            "assistant:config.toml"
        ]
    );
    assert_eq!(sub.parent_session_id.as_deref(), Some("sj-1"));
    assert_eq!(sub.parent_tool_use_id.as_deref(), Some("toolu_task"));
    // One record per response, the last piece's: m1 once, with 30 output tokens.
    let outputs: Vec<(String, u64)> = ts
        .iter()
        .flat_map(|t| &t.usage)
        .map(|u| (u.record.id.clone(), u.record.usage.output))
        .collect();
    assert_eq!(outputs.len(), 4, "{outputs:?}");
    assert!(
        outputs.contains(&("claude-code:m1".to_owned(), 30)),
        "{outputs:?}"
    );
}

#[test]
fn stream_json_lines_without_uuids_are_threaded_by_their_place() {
    let mut lines = stream_json_run();
    for l in &mut lines {
        l.as_object_mut().unwrap().remove("uuid");
    }
    let ts = parse(&jsonl(&lines)).unwrap();
    assert_eq!(
        ts.iter().map(|t| t.messages.len()).collect::<Vec<_>>(),
        [3, 4]
    );
}

#[test]
fn stream_json_cut_at_any_line_settles_to_a_prefix_of_the_whole() {
    let lines = stream_json_run();
    let settled = crate::formats::settled_at_every_cut(&lines, parse);
    // Before the `result` line, the last response may still stream.
    assert_eq!(settled[lines.len() - 2], 2);
}

/// Review of the stream-json reader: a tool input naming `sessionId` does not make the output
/// a session file; a subagent that starts with the assistant is linked by its
/// `parent_tool_use_id`; and with two `Task` calls in one response, the first subagent's lines
/// do not close the parent's response before its second call arrives.
#[test]
fn stream_json_threads_are_kept_apart() {
    let mut lines = stream_json_run();
    lines[5]["message"]["content"][0]["content"] = json!("sessionId: abc");
    lines[4]["message"]["content"][0]["input"]["sessionId"] = json!("abc");
    let ts = parse(&jsonl(&lines)).unwrap();
    assert_eq!(
        ts.iter().map(|t| t.messages.len()).collect::<Vec<_>>(),
        [3, 4]
    );

    let piece = |uuid: &str, thread: Option<&str>, id: &str, block: Value| {
        json!({"type": "assistant", "uuid": uuid, "session_id": "sj-2",
               "parent_tool_use_id": thread,
               "message": {"id": id, "role": "assistant", "model": "claude-x",
                           "content": [block], "stop_reason": null}})
    };
    let task = |id: &str, prompt: &str| json!({"type": "tool_use", "id": id, "name": "Task", "input": {"prompt": prompt}});
    let text = |t: &str| json!({"type": "text", "text": t});
    let lines = vec![
        json!({"type": "system", "subtype": "init", "session_id": "sj-2", "uuid": "i"}),
        piece("a1", None, "m1", task("tA", "same prompt")),
        // The first subagent starts (with the assistant, no prompt echoed) while its parent's
        // response still streams its second call.
        piece("s1", Some("tA"), "ms1", text("working on A")),
        piece("a2", None, "m1", task("tB", "same prompt")),
        piece("t1", Some("tB"), "mt1", text("working on B")),
        json!({"type": "user", "uuid": "r1", "session_id": "sj-2", "parent_tool_use_id": null,
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "tA", "content": "A done"},
                   {"type": "tool_result", "tool_use_id": "tB", "content": "B done"}]}}),
    ];
    let whole = parse(&jsonl(&lines)).unwrap();
    assert_eq!(
        shape(&whole[0]),
        ["assistant:use(tA),use(tB)", "user:result(tA),result(tB)"]
    );
    let links: Vec<Option<&str>> = whole[1..]
        .iter()
        .map(|t| t.parent_tool_use_id.as_deref())
        .collect();
    assert_eq!(links, [Some("tA"), Some("tB")]);
    crate::formats::settled_at_every_cut(&lines, parse);
}

/// Two inline subagent runs (Claude Code 1.0.x) writing at once: a line of one run does not
/// close the other's streamed response, whatever line the file is cut at.
#[test]
fn parallel_inline_runs_close_only_their_own_responses() {
    let side = |mut line: Value| {
        line["isSidechain"] = json!(true);
        line
    };
    let task = |id: &str, prompt: &str| json!([{"type": "tool_use", "id": id, "name": "Task", "input": {"prompt": prompt}}]);
    let text = |t: &str| json!([{"type": "text", "text": t}]);
    let lines = vec![
        user("1", None, json!("go")),
        assistant("2", "1", "m1", task("tA", "pa")),
        assistant("3", "2", "m1", task("tB", "pb")),
        side(user("sa", None, json!("pa"))),
        side(user("sb", None, json!("pb"))),
        side(assistant("a1", "sa", "mA", text("a one"))),
        side(assistant("b1", "sb", "mB", text("b one"))),
        side(assistant("a2", "a1", "mA", text("a two"))),
        user(
            "4",
            Some("3"),
            json!([{"type": "tool_result", "tool_use_id": "tA", "content": "A"},
                   {"type": "tool_result", "tool_use_id": "tB", "content": "B"}]),
        ),
    ];
    let whole = parse(&jsonl(&lines)).unwrap();
    assert_eq!(whole.len(), 3);
    assert_eq!(shape(&whole[1]), ["user:pa", "assistant:a one,a two"]);
    crate::formats::settled_at_every_cut(&lines, parse);
}
