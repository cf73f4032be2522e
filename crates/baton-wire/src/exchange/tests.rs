//! Unit tests of what both formats share: chunking, number rendering, and replies written and
//! read back through [`crate::Format`], streamed and not.

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use super::{chunks, f32_json};
use crate::{Format, Reply, Stream, StreamDelta, Usage};

fn reply(stop: &str) -> Reply {
    Reply {
        message: Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "I'll read it — ünïcode too.".into(),
                },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a.txt"}),
                },
                ContentBlock::ToolUse {
                    id: "t2".into(),
                    name: "read_file".into(),
                    input: json!({"path": "b.txt"}),
                },
            ],
        },
        stop_reason: stop.into(),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            reasoning_tokens: 0,
        },
        model: "scripted".into(),
    }
}

#[test]
fn chunks_split_at_character_boundaries() {
    assert_eq!(chunks("abcdef", 4).collect::<Vec<_>>(), ["abcd", "ef"]);
    assert_eq!(chunks("ééé", 3).collect::<Vec<_>>(), ["éé", "é"]);
    assert_eq!(chunks("", 3).count(), 0);
}

#[test]
fn temperatures_render_as_written() {
    assert_eq!(f32_json(0.7).to_string(), "0.7");
    assert_eq!(f32_json(1.0).to_string(), "1.0");
}

#[test]
fn replies_round_trip_in_both_formats() {
    for (format, stop) in [
        (Format::Anthropic, "tool_use"),
        (Format::OpenAi, "tool_calls"),
    ] {
        let reply = reply(stop);
        let body = format.render_response(&reply, "id_1").to_string();
        assert_eq!(format.parse_response(body.as_bytes()).unwrap(), reply);

        let mut stream = Stream::new(format);
        let mut text = String::new();
        let mut calls = Vec::new();
        for event in format.render_stream(&reply, "id_1") {
            assert!(!stream.is_done());
            for delta in stream.feed(event.as_bytes()).unwrap() {
                match delta {
                    StreamDelta::Text(piece) => text.push_str(&piece),
                    StreamDelta::ToolCall { id, .. } => calls.push(id),
                }
            }
        }
        assert!(stream.is_done());
        assert_eq!(text, "I'll read it — ünïcode too.", "{}", format.name());
        assert_eq!(calls, ["t1", "t2"]);
        assert_eq!(stream.finish().unwrap(), reply);
    }
}
