//! The crate's one integration test binary: every probe rule on hand-made transcripts, the
//! crate's independence from the extractor it grades, and structural facts on the real corpus
//! in `../shared/corpus` (skipped, saying so, when it is absent).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod corpus;
mod coverage;
mod independence;
mod rules;

use baton_core::{ContentBlock, Entry, Message, Role, Seq, Timestamp};
use serde_json::Value;

/// A history in a compact line format, one message per line, seqs from 1:
/// `u TEXT` (user text), `a TEXT` (assistant text), `call ID TOOL JSON` (an assistant message
/// with one tool call; `+call ID TOOL JSON` adds a call to the message before), `ok ID TEXT` /
/// `err ID TEXT` (a user message with the call's result, `err` setting the error flag),
/// `tool ID TEXT` (a `tool`-role result, as Codex's are imported). In TEXT (not in JSON, which
/// escapes its own), `\n` is a line break. Lines are trimmed; empty lines are skipped.
pub fn history(lines: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for line in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (kind, raw) = line.split_once(' ').unwrap_or((line, ""));
        let rest = raw.replace("\\n", "\n");
        let text = |t: &str| ContentBlock::Text { text: t.to_owned() };
        let result = |rest: &str, is_error| {
            let (id, body) = rest.split_once(' ').unwrap_or((rest, ""));
            ContentBlock::ToolResult {
                tool_use_id: id.to_owned(),
                content: if body.is_empty() {
                    vec![]
                } else {
                    vec![text(body)]
                },
                is_error,
            }
        };
        let call = |rest: &str| {
            let mut parts = rest.splitn(3, ' ');
            let id = parts.next().unwrap().to_owned();
            let name = parts.next().unwrap().to_owned();
            let input: Value = serde_json::from_str(parts.next().unwrap_or("{}"))
                .unwrap_or_else(|e| panic!("bad JSON in {line:?}: {e}"));
            ContentBlock::ToolUse { id, name, input }
        };
        let message = match kind {
            "u" => Message {
                role: Role::User,
                content: vec![text(&rest)],
            },
            "a" => Message {
                role: Role::Assistant,
                content: vec![text(&rest)],
            },
            "call" => Message {
                role: Role::Assistant,
                content: vec![call(raw)],
            },
            "+call" => {
                out.last_mut().unwrap().message.content.push(call(raw));
                continue;
            }
            "ok" => Message {
                role: Role::User,
                content: vec![result(&rest, false)],
            },
            "err" => Message {
                role: Role::User,
                content: vec![result(&rest, true)],
            },
            "tool" => Message {
                role: Role::Tool,
                content: vec![result(&rest, false)],
            },
            other => panic!("unknown line kind {other:?} in {line:?}"),
        };
        out.push(Entry {
            seq: Seq(out.len() as u64 + 1),
            message,
            tokens: 0,
            created_at: Timestamp(0),
        });
    }
    out
}

/// Checks the probes of `context` at `cut` against `expect` (their `Display`, lines trimmed).
#[track_caller]
pub fn check(transcript: &str, cut: u64, context: &str, expect: &str) {
    let got = baton_probes::probe(&history(transcript), Seq(cut), context).to_string();
    let expect: Vec<&str> = expect
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(got, expect.join("\n"), "context: {context:?}");
}
