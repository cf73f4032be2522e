//! Unit tests of the Anthropic stream reader, on event sequences shaped as the Messages API
//! documents them, and of its writer.

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use super::{Stream, render_stream};
use crate::{Error, Reply, StreamDelta, Usage};

/// A streamed reply as the API sends it: text, then a tool call whose input arrives in pieces.
const TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":128},"content":[],"stop_reason":null}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, let's"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" check the weather."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San Francisco, CA\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"#;

fn tool_reply() -> Reply {
    Reply {
        message: Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: "Okay, let's check the weather.".into(),
                },
                ContentBlock::ToolUse {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "San Francisco, CA"}),
                },
            ],
        },
        stop_reason: "tool_use".into(),
        usage: Usage {
            input_tokens: 472,
            output_tokens: 89,
            cache_read_tokens: 128,
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            reasoning_tokens: 0,
        },
        model: "claude-sonnet-4-5-20250929".into(),
    }
}

#[track_caller]
fn check_err(stream: &str, expect: &str) {
    let mut reader = Stream::default();
    let err = match reader.feed(stream.as_bytes()) {
        Err(err) => err,
        Ok(_) => reader.finish().unwrap_err(),
    };
    assert_eq!(err.to_string(), expect);
}

#[test]
fn reads_text_and_a_tool_call() {
    let mut stream = Stream::default();
    let deltas = stream.feed(TOOL_STREAM.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [
            StreamDelta::Text("Okay, let's".into()),
            StreamDelta::Text(" check the weather.".into()),
            StreamDelta::ToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into()
            },
        ]
    );
    assert!(stream.is_done());
    assert_eq!(stream.finish().unwrap(), tool_reply());
}

#[test]
fn bytes_may_arrive_one_at_a_time() {
    let mut stream = Stream::default();
    let mut text = String::new();
    for byte in TOOL_STREAM.as_bytes() {
        for delta in stream.feed(std::slice::from_ref(byte)).unwrap() {
            if let StreamDelta::Text(piece) = delta {
                text.push_str(&piece);
            }
        }
    }
    assert_eq!(text, "Okay, let's check the weather.");
    assert_eq!(stream.finish().unwrap(), tool_reply());
}

#[test]
fn reads_thinking_with_its_signature() {
    let stream = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"27"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}
"#;
    let mut reader = Stream::default();
    reader.feed(stream.as_bytes()).unwrap();
    let reply = reader.finish().unwrap();
    assert_eq!(
        reply.message.content,
        [
            ContentBlock::Thinking {
                thinking: "Let me think.".into(),
                signature: Some("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds".into()),
            },
            ContentBlock::Text { text: "27".into() },
        ]
    );
    assert_eq!(reply.stop_reason, "end_turn");
}

#[test]
fn a_stream_without_message_stop_is_truncated() {
    let cut = TOOL_STREAM
        .split_once("event: message_stop")
        .map(|(head, _)| head)
        .unwrap();
    check_err(cut, "the stream ended before message_stop");
    // Cut in the middle of an event: still truncated, not malformed.
    check_err(
        &TOOL_STREAM[..TOOL_STREAM.len() / 2],
        "the stream ended before message_stop",
    );
    check_err("", "the stream ended before message_start");
    let mut stream = Stream::default();
    stream.feed(cut.as_bytes()).unwrap();
    assert_eq!(
        stream.finish().unwrap_err(),
        Error::Truncated {
            missing: "message_stop"
        }
    );
}

#[test]
fn an_error_event_is_the_vendors_error() {
    check_err(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n\
         event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n",
        "overloaded_error: Overloaded",
    );
}

#[test]
fn malformed_events_name_what_was_wrong() {
    let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\"}}\n\n";
    check_err(
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "stream event 1 (content_block_start): an event before message_start",
    );
    check_err(
        &format!(
            "{start}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":3,\"delta\":{{\"type\":\"text_delta\",\"text\":\"x\"}}}}\n\n"
        ),
        "stream event 2 (content_block_delta): block 3 was never started",
    );
    check_err(
        &format!(
            "{start}data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"hologram\"}}}}\n\n"
        ),
        "stream event 2 (content_block_start): unknown block type \"hologram\"",
    );
    check_err(
        &format!(
            "{start}data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\"}}}}\n\n"
        ),
        "stream event 3 (content_block_delta): a input_json_delta delta for text block 0",
    );
    check_err(
        &format!(
            "{start}data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}}\n\n"
        ),
        "stream event 2: not JSON (EOF while parsing an object at line 1 column 58)",
    );
    check_err(
        &format!("{start}data: {{\"type\":\"message_stop\"}}\n\n"),
        "stream: message_stop came without a stop_reason",
    );
    check_err(
        &format!(
            "{start}data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{{}}}}}}\n\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"a\\\":\"}}}}\n\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}}}}\n\ndata: {{\"type\":\"message_stop\"}}\n\n"
        ),
        "stream block 0 (tool_use f): its input is not JSON (EOF while parsing a value at line 1 column 5): \"{\\\"a\\\":\"",
    );
}

#[test]
fn unknown_event_types_and_citations_are_ignored() {
    let stream = TOOL_STREAM.replace(
        "event: ping\ndata: {\"type\": \"ping\"}",
        "event: future_event\ndata: {\"type\": \"future_event\"}\n\n\
         data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}",
    );
    let mut reader = Stream::default();
    reader.feed(stream.as_bytes()).unwrap();
    assert_eq!(reader.finish().unwrap(), tool_reply());
}

#[test]
fn render_stream_reads_back() {
    let reply = tool_reply();
    let events = render_stream(&reply, "msg_1");
    assert!(events.last().unwrap().starts_with("event: message_stop\n"));
    let mut stream = Stream::default();
    let mut deltas = Vec::new();
    for event in &events {
        deltas.extend(stream.feed(event.as_bytes()).unwrap());
    }
    assert!(deltas.len() > 3, "text is streamed in pieces: {deltas:?}");
    assert_eq!(stream.finish().unwrap(), reply);

    let mut stream = Stream::default();
    for event in &events[..events.len() - 1] {
        stream.feed(event.as_bytes()).unwrap();
    }
    assert_eq!(
        stream.finish().unwrap_err(),
        Error::Truncated {
            missing: "message_stop"
        }
    );
}

/// A reply that used the server's web search: the call streams its input like a tool call, the
/// result arrives whole. Both are kept as the API sent them (the call with its whole input),
/// and written back the same way.
#[test]
fn server_tool_blocks_are_kept_whole_and_written_back() {
    let stream = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"rust 2024\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","title":"Rust 2024","url":"https://example.org/r","encrypted_content":"EqgfCioIARgB"}]}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"It shipped."}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}
"#;
    let mut reader = Stream::default();
    reader.feed(stream.as_bytes()).unwrap();
    let reply = reader.finish().unwrap();
    let call = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                      "input": {"query": "rust 2024"}});
    let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "title": "Rust 2024",
                     "url": "https://example.org/r", "encrypted_content": "EqgfCioIARgB"}]});
    assert_eq!(
        reply.message.content,
        [
            ContentBlock::Opaque { block: call },
            ContentBlock::Opaque { block: result },
            ContentBlock::Text {
                text: "It shipped.".into()
            },
        ]
    );
    let mut again = Stream::default();
    for event in render_stream(&reply, "msg_1") {
        again.feed(event.as_bytes()).unwrap();
    }
    assert_eq!(again.finish().unwrap(), reply);
}
