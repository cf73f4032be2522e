//! Unit tests of the Anthropic shape: one wire message per check.

use baton_core::{ContentBlock, MediaSource, Message, Role};
use serde_json::{Value, json};

use super::{parse_message, render_message, render_request_messages};

/// Parses `wire`, compares with `expect`, then checks that rendering gives `rendered` back.
#[track_caller]
fn check(wire: Value, expect: Message, rendered: Value) {
    let message = parse_message(&wire).unwrap();
    assert_eq!(message, expect);
    assert_eq!(render_message(&message), rendered);
    assert_eq!(parse_message(&rendered).unwrap(), expect);
}

#[track_caller]
fn check_err(wire: Value, expect: &str) {
    assert_eq!(parse_message(&wire).unwrap_err().to_string(), expect);
}

fn text(t: &str) -> ContentBlock {
    ContentBlock::Text { text: t.into() }
}

#[test]
fn string_content_is_one_text_block() {
    let expect = Message::text(Role::User, "hi");
    check(
        json!({"role": "user", "content": "hi"}),
        expect,
        json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
    );
}

#[test]
fn empty_string_content_is_no_blocks() {
    let expect = Message {
        role: Role::User,
        content: vec![],
    };
    check(
        json!({"role": "user", "content": ""}),
        expect,
        json!({"role": "user", "content": []}),
    );
}

#[test]
fn response_fields_are_ignored_and_thinking_keeps_its_signature() {
    let wire = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 3},
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "let me look", "citations": null, "cache_control": {"type": "ephemeral"}},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}, "caller": {"type": "direct"}},
        ],
    });
    let expect = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into()),
            },
            ContentBlock::RedactedThinking {
                data: "opaque".into(),
            },
            text("let me look"),
            ContentBlock::ToolUse {
                id: "t1".into(),
                name: "ls".into(),
                input: json!({"path": "."}),
            },
        ],
    };
    let rendered = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "let me look"},
        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}},
    ]});
    check(wire, expect, rendered);
}

#[test]
fn thinking_without_signature() {
    let wire = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}]});
    let expect = Message {
        role: Role::Assistant,
        content: vec![ContentBlock::Thinking {
            thinking: "hmm".into(),
            signature: None,
        }],
    };
    check(wire.clone(), expect, wire);
}

#[test]
fn tool_result_content_forms() {
    let wire = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "one"}]},
        {"type": "tool_result", "tool_use_id": "c", "content": "", "is_error": false},
        {"type": "tool_result", "tool_use_id": "d"},
        {"type": "tool_result", "tool_use_id": "e", "is_error": true, "content": [
            {"type": "text", "text": "bad"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]},
    ]});
    let result = |id: &str, content: Vec<ContentBlock>, is_error: bool| ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content,
        is_error,
    };
    let png = ContentBlock::Image {
        source: MediaSource::Base64 {
            media_type: "image/png".into(),
            data: "AAAA".into(),
        },
    };
    let expect = Message {
        role: Role::User,
        content: vec![
            result("a", vec![text("ok")], false),
            result("b", vec![text("one")], false),
            result("c", vec![], false),
            result("d", vec![], false),
            result("e", vec![text("bad"), png], true),
        ],
    };
    let rendered = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "ok"},
        {"type": "tool_result", "tool_use_id": "b", "content": "one"},
        {"type": "tool_result", "tool_use_id": "c", "content": ""},
        {"type": "tool_result", "tool_use_id": "d", "content": ""},
        {"type": "tool_result", "tool_use_id": "e", "is_error": true, "content": [
            {"type": "text", "text": "bad"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]},
    ]});
    check(wire, expect, rendered);
}

#[test]
fn media_sources() {
    let wire = json!({"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}, "cache_control": {"type": "ephemeral"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}, "title": "spec", "citations": {"enabled": true}},
        {"type": "document", "source": {"type": "url", "url": "https://x/b.pdf"}},
    ]});
    let expect = Message {
        role: Role::User,
        content: vec![
            ContentBlock::Image {
                source: MediaSource::Url {
                    url: "https://x/a.png".into(),
                },
            },
            ContentBlock::Image {
                source: MediaSource::File {
                    file_id: "file_1".into(),
                },
            },
            ContentBlock::Document {
                source: MediaSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBE".into(),
                },
                title: Some("spec".into()),
            },
            ContentBlock::Document {
                source: MediaSource::Url {
                    url: "https://x/b.pdf".into(),
                },
                title: None,
            },
        ],
    };
    let rendered = json!({"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
        {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}, "title": "spec"},
        {"type": "document", "source": {"type": "url", "url": "https://x/b.pdf"}},
    ]});
    check(wire, expect, rendered);
}

/// Claude Code's `ToolSearch` answers with the tools it made available (deferred MCP tools), as
/// `tool_reference` blocks in the tool result; they read, store and render back unchanged, and
/// Chat Completions, which has no such part, gets the tool's name as text.
#[test]
fn tool_references_in_a_tool_result_round_trip() {
    let wire = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "tool_reference", "tool_name": "mcp__echo__echo"},
            {"type": "tool_reference", "tool_name": "mcp__echo__ping"},
        ]},
    ]});
    let expect = Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "toolu_1".into(),
            content: vec![
                ContentBlock::ToolReference {
                    tool_name: "mcp__echo__echo".into(),
                },
                ContentBlock::ToolReference {
                    tool_name: "mcp__echo__ping".into(),
                },
            ],
            is_error: false,
        }],
    };
    check(wire.clone(), expect.clone(), wire);
    let chat = crate::openai::render_message(&expect);
    assert_eq!(
        chat,
        [
            json!({"role": "tool", "tool_call_id": "toolu_1", "content": [
                {"type": "text", "text": "mcp__echo__echo"},
                {"type": "text", "text": "mcp__echo__ping"},
            ]})
        ]
    );
    assert_eq!(
        crate::responses::render_input(std::slice::from_ref(&expect)),
        [json!({"type": "function_call_output", "call_id": "toolu_1",
                "output": "mcp__echo__echo\nmcp__echo__ping"})]
    );
    check_err(
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a",
                "content": [{"type": "tool_reference", "name": "x"}]}]}),
        r#"message: content[0].content[0]: unknown field "name" in tool_reference block"#,
    );
}

/// A block of a type baton's model has no variant for (a server tool's call and result) is kept
/// whole, less its `cache_control`, and rendered back as it came; Chat Completions leaves it
/// out, as it leaves out thinking.
#[test]
fn blocks_of_unknown_types_are_kept_whole() {
    let call = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                      "input": {"query": "q"}});
    let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
                        "content": [{"type": "web_search_result", "url": "https://e.com",
                                     "title": "t", "encrypted_content": "z"}]});
    let mut marked = result.clone();
    marked["cache_control"] = json!({"type": "ephemeral"});
    let wire = json!({"role": "assistant", "content": [
        call, marked, {"type": "text", "text": "found it"},
    ]});
    let expect = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::Opaque {
                block: call.clone(),
            },
            ContentBlock::Opaque {
                block: result.clone(),
            },
            ContentBlock::Text {
                text: "found it".into(),
            },
        ],
    };
    let rendered = json!({"role": "assistant", "content": [
        call, result, {"type": "text", "text": "found it"},
    ]});
    check(wire, expect.clone(), rendered);
    assert_eq!(
        crate::openai::render_message(&expect),
        [json!({"role": "assistant", "content": "found it"})]
    );
}

#[test]
fn errors_name_what_and_where() {
    check_err(json!({"content": "hi"}), r#"message: missing field "role""#);
    check_err(json!(["hi"]), "message: expected object, found array");
    check_err(
        json!({"role": "robot", "content": "hi"}),
        r#"message: role "robot" is not one of user, assistant, system"#,
    );
    check_err(
        json!({"role": 7, "content": "hi"}),
        "message: role: expected string, found number",
    );
    check_err(
        json!({"role": "user"}),
        r#"message: missing field "content""#,
    );
    check_err(
        json!({"role": "user", "content": null}),
        "message: content: expected string or array, found null",
    );
    check_err(
        json!({"role": "user", "content": [{"text": "a"}]}),
        r#"message: content[0]: missing field "type""#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "text", "text": "a", "color": 1}]}),
        r#"message: content[0]: unknown field "color" in text block"#,
    );
    check_err(
        json!({"role": "assistant", "content": [{"type": "tool_use", "name": "ls", "input": {}}]}),
        r#"message: content[0]: missing field "id""#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}),
        r#"message: content[0].source: unknown source type "text""#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text"}]}]}),
        r#"message: content[0].content[0]: missing field "text""#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}]}),
        "message: content[0].is_error: expected boolean, found string",
    );
}

#[test]
fn tool_role_renders_as_user() {
    let message = Message {
        role: Role::Tool,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "a".into(),
            content: vec![text("ok")],
            is_error: false,
        }],
    };
    assert_eq!(
        render_message(&message),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]})
    );
}

#[test]
fn request_hoists_system_and_merges_parallel_results() {
    let result = |id: &str| Message {
        role: Role::Tool,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![text(id)],
            is_error: false,
        }],
    };
    let calls = Message {
        role: Role::Assistant,
        content: ["a", "b"]
            .map(|id| ContentBlock::ToolUse {
                id: id.into(),
                name: "ls".into(),
                input: json!({}),
            })
            .to_vec(),
    };
    let history = [
        Message::text(Role::System, "be brief"),
        Message::text(Role::User, "list"),
        calls,
        result("a"),
        result("b"),
        Message::text(Role::User, "thanks"),
        Message::text(Role::System, "late rule"),
    ];
    let (system, messages) = render_request_messages(&history);
    assert_eq!(system.as_deref(), Some("be brief\n\nlate rule"));
    assert_eq!(
        Value::Array(messages),
        json!([
            {"role": "user", "content": [{"type": "text", "text": "list"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "a", "name": "ls", "input": {}},
                {"type": "tool_use", "id": "b", "name": "ls", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "a"},
                {"type": "tool_result", "tool_use_id": "b", "content": "b"},
            ]},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
        ])
    );
    assert_eq!(render_request_messages(&[]), (None, vec![]));
}
