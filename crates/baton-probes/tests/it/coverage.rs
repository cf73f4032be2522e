//! `coverage` (paths, whole commands, whole user messages) on hand-made transcripts, and the
//! source agent's compaction points read from imported Claude Code and Codex files.

use baton_core::Seq;
use baton_import::{Format, parse};
use baton_probes::{compaction_points, coverage, history_of};
use serde_json::{Value, json};

use crate::history;

const SESSION: &str = r#"
u Refactor the parser.\nKeep the API.
call r1 Read {"file_path":"/repo/src/parser.rs"}
ok r1 fn parse() {}
call g1 Grep {"pattern":"fn parse","path":"/repo/src"}
ok g1 src/parser.rs:1
call b1 Bash {"command":"cat <<'EOF' > /repo/notes.md\nhello\nEOF"}
ok b1
call b2 Bash {"command":"cargo test"}
ok b2 test result: ok
call b3 exec_command {"cmd":["git","status"]}
tool b3 clean
"#;

#[test]
fn coverage_counts_paths_by_the_path_rules_and_commands_and_messages_whole() {
    let h = history(SESSION);
    let text = "We refactored src/parser.rs; ran `cargo test` and `git status`.\n\
                The user said: Refactor the parser. Keep the API.";
    assert_eq!(
        coverage(&h, Seq(11), text).to_string(),
        "paths 1/2, commands 2/3, user messages 1/1\n\
         missing path @4: /repo/src\n\
         missing command @6: cat <<'EOF' > /repo/notes.md hello EOF"
    );
    // The heredoc counts only whole; through seq 5 only what was issued by then is asked for.
    let whole = "cat <<'EOF' > /repo/notes.md\nhello\nEOF";
    assert_eq!(
        coverage(&h, Seq(7), whole).to_string(),
        "paths 0/2, commands 1/1, user messages 0/1\n\
         missing path @2: /repo/src/parser.rs\n\
         missing path @4: /repo/src\n\
         missing user message @1: Refactor the parser. Keep the API."
    );
    // Only the first sentence of a message is not the message.
    assert_eq!(
        coverage(&h, Seq(1), "Refactor the parser.")
            .user_messages
            .kept,
        0
    );
}

#[test]
fn a_long_user_message_counts_by_its_first_600_characters() {
    let long = "word ".repeat(300);
    let h = history(&format!("u {long}"));
    let head: String = long.trim().chars().take(600).collect();
    assert_eq!(coverage(&h, Seq(1), &head).user_messages.kept, 1);
    assert_eq!(coverage(&h, Seq(1), &head[..590]).user_messages.kept, 0);
}

fn jsonl(lines: &[Value]) -> Vec<u8> {
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn compaction_points_are_the_seq_a_source_summary_covers_and_its_text() {
    let user = |uuid: &str, parent: Option<&str>, text: &str| {
        json!({"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
               "message": {"role": "user", "content": text}})
    };
    let assistant = |uuid: &str, parent: &str, id: &str, text: &str| {
        json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
               "message": {"role": "assistant", "id": id, "content": [{"type": "text", "text": text}]}})
    };
    let bytes = jsonl(&[
        user("1", None, "hello"),
        assistant("2", "1", "m1", "hi"),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b", "parentUuid": null,
               "logicalParentUuid": "2", "sessionId": "s"}),
        json!({"type": "user", "uuid": "3", "parentUuid": "b", "isCompactSummary": true,
               "sessionId": "s", "message": {"role": "user",
               "content": "This session is being continued from a previous conversation. We said hello."}}),
        user("4", Some("3"), "go on"),
    ]);
    let transcript = parse(Format::ClaudeCode, &bytes).unwrap().remove(0);
    let points = compaction_points(&transcript);
    assert_eq!(points.len(), 1);
    assert_eq!(points[0].seq, Seq(2));
    assert!(
        points[0]
            .summary
            .as_deref()
            .unwrap()
            .ends_with("We said hello.")
    );
    let h = history_of(&transcript);
    assert_eq!(
        h.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
        [1, 2, 3],
        "the summary line is an event, not a message"
    );
    assert_eq!(h[2].message.plain_text(), "go on");

    // Codex: a `compacted` line without a message has no text; one before any message covers
    // nothing and is left out.
    let line =
        |kind: &str, payload: Value| json!({"timestamp": "t", "type": kind, "payload": payload});
    let say = |role: &str, text: &str| {
        line(
            "response_item",
            json!({"type": "message", "role": role,
             "content": [{"type": "input_text", "text": text}]}),
        )
    };
    let bytes = jsonl(&[
        line("compacted", json!({"message": "before anything"})),
        say("user", "hi"),
        say("assistant", "hello"),
        line("compacted", json!({"message": ""})),
        say("user", "bye"),
    ]);
    let transcript = parse(Format::Codex, &bytes).unwrap().remove(0);
    let points = compaction_points(&transcript);
    assert_eq!(points.len(), 1);
    assert_eq!(
        (points[0].seq, points[0].summary.as_deref()),
        (Seq(2), None)
    );
}
