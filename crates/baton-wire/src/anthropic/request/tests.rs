//! Unit tests of Anthropic request bodies: rendering, parsing back, and the checks the
//! Messages API makes on a conversation.

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use super::{check_messages, parse_request, render_request};
use crate::{RequestBody, ToolDef};

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn calls(ids: &[&str]) -> Message {
    Message {
        role: Role::Assistant,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolUse {
                id: (*id).into(),
                name: "read_file".into(),
                input: json!({"path": "a.txt"}),
            })
            .collect(),
    }
}

fn results(ids: &[&str]) -> Message {
    Message {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolResult {
                tool_use_id: (*id).into(),
                content: vec![ContentBlock::Text { text: "ok".into() }],
                is_error: false,
            })
            .collect(),
    }
}

#[track_caller]
fn check_violation(messages: &[Message], expect: &str) {
    assert_eq!(check_messages(messages).unwrap_err().to_string(), expect);
}

#[test]
fn renders_every_field_and_reads_back() {
    let body = RequestBody {
        model: "claude-sonnet-4-5".into(),
        system: Some("Rules.".into()),
        messages: vec![
            Message::text(Role::System, "Summary so far."),
            user("Read a.txt"),
            calls(&["toolu_1"]),
            results(&["toolu_1"]),
        ],
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_tokens: Some(4096),
        temperature: Some(0.7),
        stream: true,
    };
    let wire = render_request(&body);
    assert_eq!(
        wire,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "system": "Rules.\n\nSummary so far.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
            ],
            "tools": [{"name": "read_file", "description": "Reads a file.",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
            "temperature": 0.7,
            "stream": true,
        })
    );
    let parsed = parse_request(&wire).unwrap();
    assert_eq!(parsed.system.as_deref(), Some("Rules.\n\nSummary so far."));
    assert_eq!(parsed.messages, body.messages[1..]);
    assert_eq!(parsed.tools, body.tools);
    assert_eq!(
        (parsed.max_tokens, parsed.temperature, parsed.stream),
        (Some(4096), Some(0.7), true)
    );
    check_messages(&parsed.messages).unwrap();
}

#[test]
fn system_may_be_a_list_of_text_blocks() {
    let wire = json!({"model": "m", "max_tokens": 10, "messages": [],
        "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "b"}]});
    assert_eq!(
        parse_request(&wire).unwrap().system.as_deref(),
        Some("a\n\nb")
    );
}

#[test]
fn parse_errors_name_the_field() {
    let err = |wire: Value| parse_request(&wire).unwrap_err().to_string();
    assert_eq!(
        err(json!({"model": "m", "messages": []})),
        "max_tokens: Field required"
    );
    assert_eq!(
        err(json!({"max_tokens": 1, "messages": []})),
        "model: Field required"
    );
    assert_eq!(
        err(json!({"model": "m", "max_tokens": 1, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "text"}]},
        ]})),
        "messages.1: message: content[0]: missing field \"text\""
    );
}

#[test]
fn a_valid_conversation_passes() {
    check_messages(&[
        user("go"),
        calls(&["a", "b"]),
        results(&["b", "a"]),
        Message::text(Role::Assistant, "done"),
        user("thanks"),
    ])
    .unwrap();
}

#[test]
fn violations_are_worded_as_the_api_words_them() {
    check_violation(
        &[Message::text(Role::Assistant, "hi"), user("x")],
        "messages.0: the first message must use the \"user\" role",
    );
    check_violation(
        &[
            user("go"),
            Message::text(Role::Assistant, "ok"),
            results(&["a"]),
        ],
        "messages.2: `tool_result` block(s) provided when previous message does not have `tool_use` blocks",
    );
    check_violation(
        &[results(&["a"])],
        "messages.0: `tool_result` block(s) provided when previous message does not have `tool_use` blocks",
    );
    check_violation(
        &[user("go"), calls(&["a"]), results(&["a", "zzz"])],
        "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: zzz. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
    );
    check_violation(
        &[user("go"), calls(&["a", "b"]), results(&["a"])],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: b. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    );
    check_violation(
        &[
            user("go"),
            calls(&["a"]),
            user("never mind"),
            results(&["a"]),
        ],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: a. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    );
    check_violation(
        &[user("go"), calls(&["a"])],
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: a. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
    );
    check_violation(
        &[user("go"), Message::text(Role::System, "rules")],
        "messages.1.role: Input should be 'user' or 'assistant'",
    );
}
