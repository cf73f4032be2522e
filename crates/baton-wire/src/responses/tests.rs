//! The Responses API: a request with every kind of input item, a reply rendered and read
//! back whole and streamed, and the real usage fields.

#![allow(clippy::unwrap_used)]

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use super::{Stream, parse_request, parse_response, render_response, render_stream};
use crate::{Reply, StreamDelta, Usage};

#[test]
fn a_request_with_every_item_kind() {
    let body = json!({
        "model": "gpt-5", "instructions": "Be brief.", "stream": true, "max_output_tokens": 300,
        "previous_response_id": "resp_0", "store": true,
        "input": [
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris?"}, {"type": "input_image", "image_url": "x"}]},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 degrees"},
            {"type": "function_call_output", "call_id": "call_2", "output": "noon"},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
                  {"type": "web_search"}],
    });
    let request = parse_request(&body).unwrap();
    assert_eq!(request.system.as_deref(), Some("Be brief.\n\nUse tools."));
    assert!(request.stream);
    assert_eq!(request.max_tokens, Some(300));
    assert_eq!(request.tools.len(), 1);
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool
        ]
    );
    assert_eq!(request.messages[2].tool_use_ids().count(), 2);
    crate::openai::check_messages(&request.messages).unwrap();

    let err = parse_request(&json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}))
        .unwrap_err();
    assert!(err.to_string().contains("input[0].role"), "{err}");
    assert!(parse_request(&json!({"input": "x"})).is_err());
}

fn reply() -> Reply {
    Reply {
        message: Message {
            role: Role::Assistant,
            content: vec![
                // Reasoning comes back as reasoning items, read into the same blocks.
                ContentBlock::Thinking {
                    thinking: "**Looking it up**".into(),
                    signature: None,
                },
                ContentBlock::Thinking {
                    thinking: "Rome, today.".into(),
                    signature: None,
                },
                ContentBlock::RedactedThinking {
                    data: "gAAAA-encrypted".into(),
                },
                ContentBlock::Text {
                    text: "Checking the weather for you now.".into(),
                },
                ContentBlock::ToolUse {
                    id: "call_9".into(),
                    name: "get_weather".into(),
                    input: json!({"city": "Rome"}),
                },
            ],
        },
        stop_reason: "completed".into(),
        usage: Usage {
            input_tokens: 200,
            output_tokens: 40,
            cache_read_tokens: 1_200_000,
            reasoning_tokens: 12,
            ..Usage::default()
        },
        model: "gpt-5".into(),
    }
}

#[test]
fn a_reply_round_trips_whole_and_streamed() {
    let reply = reply();
    let body = render_response(&reply, "resp_1");
    assert_eq!(body["usage"]["input_tokens"], 1_200_200);
    assert_eq!(
        body["usage"]["input_tokens_details"]["cached_tokens"],
        1_200_000
    );
    let read = parse_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(read, reply);

    let events = render_stream(&reply, "resp_1");
    assert!(events[0].starts_with("event: response.created\n"));
    assert!(
        events
            .last()
            .unwrap()
            .starts_with("event: response.completed\n")
    );
    let mut stream = Stream::default();
    let mut deltas = Vec::new();
    for event in &events {
        // Fed in awkward pieces, as a network delivers them.
        for piece in event.as_bytes().chunks(7) {
            deltas.extend(stream.feed(piece).unwrap());
        }
    }
    assert!(deltas.contains(&StreamDelta::ToolCall {
        id: "call_9".into(),
        name: "get_weather".into()
    }));
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Checking the weather for you now.");
    assert_eq!(stream.finish().unwrap(), reply);
}

#[test]
fn a_truncated_or_failed_stream_is_an_error() {
    let events = render_stream(&reply(), "resp_1");
    let mut stream = Stream::default();
    for event in &events[..events.len() - 1] {
        stream.feed(event.as_bytes()).unwrap();
    }
    assert!(!stream.is_done());
    assert!(matches!(
        stream.finish(),
        Err(crate::Error::Truncated { .. })
    ));
    let mut stream = Stream::default();
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":3,\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n";
    let err = stream.feed(failed.as_bytes()).unwrap_err();
    assert_eq!(err.to_string(), "server_error: boom");
    let err = parse_response(br#"{"error": {"message": "bad", "type": "invalid_request_error"}}"#)
        .unwrap_err();
    assert_eq!(err.to_string(), "invalid_request_error: bad");
}

/// Anthropic's 5-minute and 1-hour cache writes, and OpenAI's cached and reasoning tokens,
/// from the real wire fields, whole and streamed.
#[test]
fn cache_and_reasoning_tokens_from_the_real_fields() {
    let body = br#"{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 9, "cache_read_input_tokens": 1200000,
                  "cache_creation_input_tokens": 700,
                  "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 500}}}"#;
    let reply = crate::anthropic::parse_response(body).unwrap();
    let priced = reply.usage.priced();
    assert_eq!(
        (
            priced.input,
            priced.output,
            priced.cache_write_5m,
            priced.cache_write_1h,
            priced.cache_read
        ),
        (3, 9, 200, 500, 1_200_000)
    );
    let body = br#"{"id": "c", "object": "chat.completion", "model": "o3", "choices": [{"index": 0,
        "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 300, "prompt_tokens_details": {"cached_tokens": 800},
                  "completion_tokens_details": {"reasoning_tokens": 250}}}"#;
    let u = crate::openai::parse_response(body).unwrap().usage;
    assert_eq!(
        (
            u.input_tokens,
            u.cache_read_tokens,
            u.output_tokens,
            u.reasoning_tokens
        ),
        (200, 800, 300, 250)
    );
}

#[test]
fn input_items_map_to_the_messages_they_are_read_into() {
    let value = json!({"model": "m", "input": [
        {"role": "developer", "content": "rules"},
        {"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "x"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a"},
        {"type": "function_call_output", "call_id": "c2", "output": "b"},
    ]});
    let owners = super::input_messages(&value).unwrap();
    assert_eq!(
        owners,
        [
            Some(0),
            Some(1),
            Some(2),
            Some(2),
            Some(2),
            Some(2),
            Some(3),
            Some(4)
        ]
    );
    let messages = super::parse_request(&value).unwrap().messages;
    assert_eq!(messages.len(), 5);
    // The reasoning, the text and the calls are one assistant message, in their order.
    let kinds: Vec<&str> = messages[2]
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::RedactedThinking { .. } => "redacted",
            ContentBlock::Text { .. } => "text",
            ContentBlock::ToolUse { .. } => "call",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["redacted", "text", "call", "call"]);
    // An empty reasoning item carries nothing.
    let empty = json!({"model": "m", "input": [{"role": "user", "content": "go"},
        {"type": "reasoning", "id": "rs_2", "summary": []}]});
    assert_eq!(super::input_messages(&empty).unwrap(), [Some(0), None]);
    assert_eq!(
        super::input_messages(&json!({"model": "m", "input": "hi"})).unwrap(),
        []
    );
}

#[test]
fn input_rendered_from_messages_reads_back_into_them() {
    let text = |role, t: &str| Message {
        role,
        content: vec![ContentBlock::Text { text: t.into() }],
    };
    let thinking = |t: &str| ContentBlock::Thinking {
        thinking: t.into(),
        signature: None,
    };
    let call = |id: &str| ContentBlock::ToolUse {
        id: id.into(),
        name: "exec".into(),
        input: json!({"cmd": "ls"}),
    };
    let result = |id: &str| Message {
        role: Role::Tool,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text {
                text: "a.txt".into(),
            }],
            is_error: false,
        }],
    };
    let messages = vec![
        text(Role::System, "rules"),
        text(Role::User, "list the files"),
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "<image name=[Image #1]>".into(),
                },
                ContentBlock::Image {
                    source: baton_core::MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo".into(),
                    },
                },
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                thinking("**Listing**"),
                ContentBlock::RedactedThinking {
                    data: "enc1".into(),
                },
                call("c1"),
            ],
        },
        result("c1"),
        Message {
            role: Role::Assistant,
            content: vec![
                thinking("one"),
                thinking("two"),
                ContentBlock::RedactedThinking {
                    data: "enc2".into(),
                },
                ContentBlock::Text {
                    text: "Here:".into(),
                },
                ContentBlock::Text {
                    text: "a.txt".into(),
                },
                call("c2"),
                call("c3"),
            ],
        },
        result("c2"),
        result("c3"),
        text(Role::Assistant, "Done."),
    ];
    let input = super::render_input(&messages);
    let read = parse_request(&json!({"model": "m", "input": input})).unwrap();
    assert_eq!(read.messages, messages);
}
