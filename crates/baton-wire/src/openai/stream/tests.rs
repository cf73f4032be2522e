//! Unit tests of the OpenAI stream reader, on chunk sequences shaped as Chat Completions
//! documents them, and of its writer.

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use super::{Stream, render_stream};
use crate::{Error, Reply, StreamDelta, Usage};

/// Two parallel tool calls, their arguments interleaved in pieces, then usage and `[DONE]`.
const PARALLEL_STREAM: &str = r#"data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\": \"Paris"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_ABCD","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":", France\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"location\": \"Bogotá, Colombia\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570284,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":51,"total_tokens":133,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"#;

fn parallel_reply() -> Reply {
    let call = |id: &str, location: &str| ContentBlock::ToolUse {
        id: id.into(),
        name: "get_weather".into(),
        input: json!({"location": location}),
    };
    Reply {
        message: Message {
            role: Role::Assistant,
            content: vec![
                call("call_DdmO9pD3xa9XTPNJ32zg2hcA", "Paris, France"),
                call("call_ABCD", "Bogotá, Colombia"),
            ],
        },
        stop_reason: "tool_calls".into(),
        usage: Usage {
            input_tokens: 18,
            output_tokens: 51,
            cache_read_tokens: 64,
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            reasoning_tokens: 0,
        },
        model: "gpt-4o-2024-08-06".into(),
    }
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
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
fn reads_parallel_tool_calls() {
    let mut stream = Stream::default();
    let deltas = stream.feed(PARALLEL_STREAM.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [
            StreamDelta::ToolCall {
                id: "call_DdmO9pD3xa9XTPNJ32zg2hcA".into(),
                name: "get_weather".into()
            },
            StreamDelta::ToolCall {
                id: "call_ABCD".into(),
                name: "get_weather".into()
            },
        ]
    );
    assert_eq!(stream.finish().unwrap(), parallel_reply());
}

#[test]
fn bytes_may_arrive_one_at_a_time() {
    let mut stream = Stream::default();
    for byte in PARALLEL_STREAM.as_bytes() {
        stream.feed(std::slice::from_ref(byte)).unwrap();
    }
    assert_eq!(stream.finish().unwrap(), parallel_reply());
}

#[test]
fn reads_text_and_reasoning() {
    let body = [
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"reasoning_content": "Think"}), None),
        chunk(json!({"content": "Hello"}), None),
        chunk(json!({"content": " there."}), None),
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let mut stream = Stream::default();
    let deltas = stream.feed(body.as_bytes()).unwrap();
    assert_eq!(
        deltas,
        [
            StreamDelta::Text("Hello".into()),
            StreamDelta::Text(" there.".into())
        ]
    );
    let reply = stream.finish().unwrap();
    assert_eq!(
        reply.message.content,
        [
            ContentBlock::Thinking {
                thinking: "Think".into(),
                signature: None
            },
            ContentBlock::Text {
                text: "Hello there.".into()
            },
        ]
    );
    assert_eq!(reply.usage, Usage::default(), "no usage chunk, no usage");
}

#[test]
fn a_call_without_index_is_one_whole_piece() {
    // As some OpenAI-compatible servers send it.
    let body = [
        chunk(
            json!({"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                                  {"id": "call_2", "type": "function", "function": {"name": "pwd", "arguments": ""}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let mut stream = Stream::default();
    stream.feed(body.as_bytes()).unwrap();
    let reply = stream.finish().unwrap();
    assert_eq!(
        reply.message.tool_use_ids().collect::<Vec<_>>(),
        ["call_1", "call_2"]
    );
    assert!(
        matches!(&reply.message.content[1], ContentBlock::ToolUse { input, .. } if *input == json!({}))
    );
}

#[test]
fn arguments_that_are_not_json_stay_raw() {
    let body = [
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"/tm"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let mut stream = Stream::default();
    stream.feed(body.as_bytes()).unwrap();
    let reply = stream.finish().unwrap();
    assert!(
        matches!(&reply.message.content[0], ContentBlock::ToolUse { input, .. } if *input == json!("{\"path\": \"/tm"))
    );
}

#[test]
fn a_stream_without_done_is_truncated() {
    let cut = PARALLEL_STREAM.replace("data: [DONE]\n\n", "");
    check_err(&cut, "the stream ended before [DONE]");
    check_err(
        &PARALLEL_STREAM[..PARALLEL_STREAM.len() / 2],
        "the stream ended before [DONE]",
    );
    check_err("", "the stream ended before [DONE]");
    let mut stream = Stream::default();
    stream.feed(cut.as_bytes()).unwrap();
    assert_eq!(
        stream.finish().unwrap_err(),
        Error::Truncated { missing: "[DONE]" }
    );
}

#[test]
fn malformed_chunks_and_errors() {
    check_err(
        "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"x\"}}\n\n",
        "stream chunk 1: not JSON (EOF while parsing a list at line 1 column 52)",
    );
    check_err(
        "data: {\"error\": {\"message\": \"The server had an error\", \"type\": \"server_error\", \"param\": null, \"code\": null}}\n\n",
        "server_error: The server had an error",
    );
    check_err(
        &[
            chunk(json!({"content": "x"}), None),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat(),
        "stream: [DONE] came without a finish_reason",
    );
    check_err(
        "data: [DONE]\n\ndata: {}\n\n",
        "stream chunk 2: data after [DONE]",
    );
    check_err(
        &[
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat(),
        "stream tool call 0: no id or no function name",
    );
    check_err(
        "<html><body>502 Bad Gateway</body></html>\n",
        "stream line 1: not a server-sent event field: \"<html><body>502 Bad Gateway</body></html>\"",
    );
}

#[test]
fn render_stream_reads_back() {
    let mut reply = parallel_reply();
    reply.message.content.insert(
        0,
        ContentBlock::Text {
            text: "Checking both cities at once.".into(),
        },
    );
    let events = render_stream(&reply, "chatcmpl-1");
    assert_eq!(events.last().unwrap(), "data: [DONE]\n\n");
    let mut stream = Stream::default();
    let mut deltas = Vec::new();
    for event in &events {
        deltas.extend(stream.feed(event.as_bytes()).unwrap());
    }
    assert!(deltas.len() > 4, "text is streamed in pieces: {deltas:?}");
    assert_eq!(stream.finish().unwrap(), reply);

    let mut stream = Stream::default();
    for event in &events[..events.len() - 1] {
        stream.feed(event.as_bytes()).unwrap();
    }
    assert_eq!(
        stream.finish().unwrap_err(),
        Error::Truncated { missing: "[DONE]" }
    );
}
