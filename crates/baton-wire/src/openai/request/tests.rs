//! Unit tests of OpenAI request bodies: rendering, parsing back, and the checks made on a
//! conversation.

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use super::{check_messages, parse_request, render_request};
use crate::{MaxTokensField, RequestBody, ToolDef};

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

fn result(id: &str) -> Message {
    Message {
        role: Role::Tool,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text { text: "ok".into() }],
            is_error: false,
        }],
    }
}

#[track_caller]
fn check_violation(messages: &[Message], expect: &str) {
    assert_eq!(check_messages(messages).unwrap_err().to_string(), expect);
}

#[test]
fn renders_every_field_and_reads_back() {
    let body = RequestBody {
        model: "gpt-4.1".into(),
        system: Some("Rules.".into()),
        messages: vec![user("Read a.txt"), calls(&["call_1"]), result("call_1")],
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        max_tokens: Some(4096),
        temperature: Some(0.2),
        stream: true,
    };
    let wire = render_request(&body, MaxTokensField::MaxCompletionTokens);
    assert_eq!(
        wire,
        json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": "Rules."},
                {"role": "user", "content": "Read a.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            ],
            "tools": [{"type": "function", "function": {"name": "read_file", "description": "Reads a file.",
                       "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
            "max_completion_tokens": 4096,
            "temperature": 0.2,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    let parsed = parse_request(&wire).unwrap();
    assert_eq!(parsed.system.as_deref(), Some("Rules."));
    assert_eq!(parsed.messages[0], Message::text(Role::System, "Rules."));
    assert_eq!(parsed.messages[1..], body.messages);
    assert_eq!(parsed.tools, body.tools);
    assert_eq!(
        (parsed.max_tokens, parsed.temperature, parsed.stream),
        (Some(4096), Some(0.2), true)
    );
    check_messages(&parsed.messages).unwrap();

    let plain = render_request(
        &RequestBody {
            stream: false,
            tools: vec![],
            ..body
        },
        MaxTokensField::MaxTokens,
    );
    assert_eq!(plain["max_tokens"], 4096);
    assert!(plain.get("stream_options").is_none() && plain.get("tools").is_none());
}

#[test]
fn parse_errors_name_the_field() {
    let err = |wire: Value| parse_request(&wire).unwrap_err().to_string();
    assert_eq!(
        err(json!({"messages": []})),
        "model: you must provide a model parameter"
    );
    assert_eq!(
        err(json!({"model": "m"})),
        "messages: Missing required parameter: 'messages'."
    );
    assert_eq!(
        err(
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}]})
        ),
        "messages.[1]: message: role \"robot\" is not one of system, developer, user, assistant, tool"
    );
}

#[test]
fn a_valid_conversation_passes() {
    check_messages(&[
        Message::text(Role::System, "rules"),
        user("go"),
        calls(&["a", "b"]),
        result("b"),
        result("a"),
        Message::text(Role::Assistant, "done"),
    ])
    .unwrap();
}

#[test]
fn violations_name_the_index() {
    check_violation(
        &[
            Message::text(Role::System, "rules"),
            Message::text(Role::Assistant, "hi"),
        ],
        "messages.[1]: Invalid parameter: the conversation must start with a 'user' message (after any 'system' messages), not an 'assistant' message.",
    );
    check_violation(
        &[
            user("go"),
            Message::text(Role::Assistant, "ok"),
            result("a"),
        ],
        "messages.[2]: Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
    );
    check_violation(
        &[user("go"), calls(&["a"]), result("zzz")],
        "messages.[1]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: a",
    );
    check_violation(
        &[user("go"), calls(&["a"]), result("a"), result("zzz")],
        "messages.[3]: Invalid parameter: 'tool_call_id' of 'zzz' not found in 'tool_calls' of previous message.",
    );
    check_violation(
        &[user("go"), calls(&["a", "b"]), result("a"), user("and?")],
        "messages.[1]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: b",
    );
    check_violation(
        &[user("go"), calls(&["a"])],
        "messages.[1]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: a",
    );
}
