//! Unit tests of the OpenAI Chat Completions shape: one wire message per check.

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Value, json};

use super::{parse_message, render_message, render_request_messages};

/// Parses `wire`, compares with `expect`, then checks that rendering gives `rendered` back.
#[track_caller]
fn check(wire: Value, expect: Message, rendered: Value) {
    let message = parse_message(&wire).unwrap();
    assert_eq!(message, expect);
    assert_eq!(render_message(&message), std::slice::from_ref(&rendered));
    assert_eq!(parse_message(&rendered).unwrap(), expect);
}

#[track_caller]
fn check_err(wire: Value, expect: &str) {
    assert_eq!(parse_message(&wire).unwrap_err().to_string(), expect);
}

/// Renders `message` and compares with `expect`, a JSON array of wire messages.
#[track_caller]
fn check_render(message: Message, expect: Value) {
    assert_eq!(Value::Array(render_message(&message)), expect);
}

fn text(t: &str) -> ContentBlock {
    ContentBlock::Text { text: t.into() }
}

fn call(id: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.into(),
        name: "ls".into(),
        input,
    }
}

fn result(id: &str, content: Vec<ContentBlock>) -> ContentBlock {
    ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content,
        is_error: false,
    }
}

#[test]
fn roles() {
    let system = json!({"role": "system", "content": "rules"});
    check(
        system.clone(),
        Message::text(Role::System, "rules"),
        system.clone(),
    );
    check(
        json!({"role": "developer", "content": "rules", "name": "ops"}),
        Message::text(Role::System, "rules"),
        system,
    );
    let user = json!({"role": "user", "content": "hi"});
    check(user.clone(), Message::text(Role::User, "hi"), user);
    check(
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
        Message::text(Role::User, "hi"),
        json!({"role": "user", "content": "hi"}),
    );
}

#[test]
fn tool_calls_and_results() {
    let wire = json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"/tm"}},
    ]});
    let expect = Message {
        role: Role::Assistant,
        content: vec![
            call("c1", json!({"path": "."})),
            call("c2", json!("{\"path\": \"/tm")),
        ],
    };
    let rendered = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\":\".\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"/tm"}},
    ]});
    check(wire, expect, rendered);

    let tool = json!({"role": "tool", "tool_call_id": "c1", "content": "a\nb"});
    let expect = Message {
        role: Role::Tool,
        content: vec![result("c1", vec![text("a\nb")])],
    };
    check(tool.clone(), expect, tool);
    let empty = json!({"role": "tool", "tool_call_id": "c1", "content": ""});
    let expect = Message {
        role: Role::Tool,
        content: vec![result("c1", vec![])],
    };
    check(empty.clone(), expect, empty);
}

#[test]
fn arguments_that_are_json_strings_stay_raw() {
    let wire = json!({"role": "assistant", "content": "ok", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "\"x\""}},
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": ""}},
    ]});
    let expect = Message {
        role: Role::Assistant,
        content: vec![
            text("ok"),
            call("c1", json!("\"x\"")),
            call("c2", json!("")),
        ],
    };
    check(wire.clone(), expect, wire);
}

#[test]
fn media_parts() {
    let wire = json!({"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "file", "file": {"file_id": "file_1", "filename": "spec.pdf"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}},
    ]});
    let expect = Message {
        role: Role::User,
        content: vec![
            text("look"),
            ContentBlock::Image {
                source: MediaSource::Url {
                    url: "https://x/a.png".into(),
                },
            },
            ContentBlock::Image {
                source: MediaSource::Base64 {
                    media_type: "image/png".into(),
                    data: "AAAA".into(),
                },
            },
            ContentBlock::Document {
                source: MediaSource::File {
                    file_id: "file_1".into(),
                },
                title: Some("spec.pdf".into()),
            },
            ContentBlock::Document {
                source: MediaSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBE".into(),
                },
                title: None,
            },
        ],
    };
    let rendered = json!({"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "file", "file": {"file_id": "file_1", "filename": "spec.pdf"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}},
    ]});
    check(wire, expect, rendered);
}

#[test]
fn responses_text_parts_and_refusals_read_as_text() {
    let wire = json!({"role": "assistant", "content": [
        {"type": "output_text", "text": "a", "annotations": []},
        {"type": "refusal", "refusal": "no"},
    ]});
    let expect = Message {
        role: Role::Assistant,
        content: vec![text("a"), text("no")],
    };
    let rendered = json!({"role": "assistant", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "no"},
    ]});
    check(wire, expect, rendered);
    check(
        json!({"role": "assistant", "content": null, "refusal": "I can't"}),
        Message::text(Role::Assistant, "I can't"),
        json!({"role": "assistant", "content": "I can't"}),
    );
}

#[test]
fn user_tool_results_split_into_tool_messages() {
    let png = ContentBlock::Image {
        source: MediaSource::Url {
            url: "https://x/shot.png".into(),
        },
    };
    let message = Message {
        role: Role::User,
        content: vec![
            result("a", vec![text("one")]),
            ContentBlock::ToolResult {
                tool_use_id: "b".into(),
                content: vec![text("two"), text("three"), png],
                is_error: true,
            },
            text("and then?"),
        ],
    };
    check_render(
        message,
        json!([
            {"role": "tool", "tool_call_id": "a", "content": "one"},
            {"role": "tool", "tool_call_id": "b", "content": [
                {"type": "text", "text": "two"}, {"type": "text", "text": "three"},
            ]},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://x/shot.png"}},
                {"type": "text", "text": "and then?"},
            ]},
        ]),
    );
    check_render(
        Message {
            role: Role::User,
            content: vec![result("a", vec![])],
        },
        json!([{"role": "tool", "tool_call_id": "a", "content": ""}]),
    );
}

#[test]
fn thinking_is_dropped() {
    let thinking = ContentBlock::Thinking {
        thinking: "hmm".into(),
        signature: Some("sig".into()),
    };
    check_render(
        Message {
            role: Role::Assistant,
            content: vec![thinking.clone()],
        },
        json!([]),
    );
    check_render(
        Message {
            role: Role::Assistant,
            content: vec![thinking, text("done")],
        },
        json!([{"role": "assistant", "content": "done"}]),
    );
    check_render(
        Message {
            role: Role::Assistant,
            content: vec![],
        },
        json!([{"role": "assistant", "content": ""}]),
    );
}

#[test]
fn request_merges_consecutive_assistant_messages() {
    // Claude Code records one assistant message per block.
    let history = [
        Message::text(Role::User, "list both"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Thinking {
                thinking: "two calls".into(),
                signature: None,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![call("a", json!({}))],
        },
        Message {
            role: Role::Assistant,
            content: vec![call("b", json!({}))],
        },
        Message {
            role: Role::User,
            content: vec![result("a", vec![text("x")])],
        },
        Message {
            role: Role::User,
            content: vec![result("b", vec![text("y")])],
        },
    ];
    assert_eq!(
        Value::Array(render_request_messages(&history)),
        json!([
            {"role": "user", "content": "list both"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "a", "content": "x"},
            {"role": "tool", "tool_call_id": "b", "content": "y"},
        ])
    );
}

#[test]
fn errors_name_what_and_where() {
    check_err(
        json!({"role": "function", "name": "f", "content": "x"}),
        r#"message: role "function" is not one of system, developer, user, assistant, tool"#,
    );
    check_err(
        json!({"role": "tool", "content": "x"}),
        r#"message: missing field "tool_call_id""#,
    );
    check_err(
        json!({"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}}),
        r#"message: field "function_call" is not supported: the legacy function-calling shape has no call id; use tool_calls"#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "input_audio", "input_audio": {}}]}),
        r#"message: content[1]: unknown block type "input_audio""#,
    );
    check_err(
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}),
        r#"message: tool_calls[0]: unknown tool call type "custom""#,
    );
    check_err(
        json!({"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]}),
        "message: tool_calls[0].function.arguments: expected string, found object",
    );
    check_err(
        json!({"role": "assistant", "tool_calls": {"id": "c"}}),
        "message: tool_calls: expected array, found object",
    );
    check_err(
        json!({"role": "user", "content": 3}),
        "message: content: expected string, array or null, found number",
    );
    check_err(
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x", "size": 1}}]}),
        r#"message: content[0].image_url: unknown field "size" in image_url"#,
    );
}
