//! Unit tests of OpenAI response and error bodies.

use baton_core::ContentBlock;
use serde_json::json;

use super::{parse_error, parse_response, render_error, render_response};
use crate::{ApiError, Error, Usage};

const TOOL_RESPONSE: &str = r#"{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1699896916,
  "model": "gpt-4o-mini",
  "choices": [{
    "index": 0,
    "message": {
      "role": "assistant",
      "content": null,
      "tool_calls": [{"id": "call_abc123", "type": "function",
                      "function": {"name": "get_current_weather", "arguments": "{\n\"location\": \"Boston, MA\"\n}"}}],
      "refusal": null,
      "annotations": []
    },
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}},
  "system_fingerprint": "fp_44709d6fcb"
}"#;

#[test]
fn reads_a_tool_call_response() {
    let reply = parse_response(TOOL_RESPONSE.as_bytes()).unwrap();
    assert!(matches!(
        &reply.message.content[..],
        [ContentBlock::ToolUse { id, name, input }]
            if id == "call_abc123" && name == "get_current_weather" && input["location"] == "Boston, MA"
    ));
    assert_eq!(reply.stop_reason, "tool_calls");
    assert_eq!(reply.model, "gpt-4o-mini");
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 82,
            output_tokens: 17,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cache_write_1h_tokens: 0,
            reasoning_tokens: 0,
        }
    );
    let rendered = render_response(&reply, "chatcmpl-abc123");
    assert_eq!(
        parse_response(rendered.to_string().as_bytes()).unwrap(),
        reply
    );
    assert_eq!(rendered["choices"][0]["message"]["refusal"], json!(null));
}

#[test]
fn bad_bodies_are_malformed_and_errors_are_the_vendors() {
    let err = |body: &str| parse_response(body.as_bytes()).unwrap_err();
    assert_eq!(
        err("this is not json").to_string(),
        "response: not JSON (expected ident at line 1 column 2)"
    );
    assert_eq!(
        err(r#"{"choices": []}"#).to_string(),
        "response: no choices"
    );
    assert_eq!(
        err(r#"{"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}}]}"#)
            .to_string(),
        "response: choices[0] has no finish_reason"
    );
    assert_eq!(
        err(
            r#"{"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}"#
        ),
        Error::Api {
            kind: "invalid_request_error".into(),
            message: "Incorrect API key provided.".into()
        }
    );
}

#[test]
fn error_bodies_round_trip() {
    let body = render_error(400, "messages.[2]: bad", Some("messages.[2]"));
    assert_eq!(
        body,
        json!({"error": {"message": "messages.[2]: bad", "type": "invalid_request_error",
                         "param": "messages.[2]", "code": null}})
    );
    assert_eq!(
        parse_error(body.to_string().as_bytes()),
        Some(ApiError {
            kind: "invalid_request_error".into(),
            message: "messages.[2]: bad".into()
        })
    );
    assert_eq!(
        render_error(401, "x", None)["error"]["code"],
        "invalid_api_key"
    );
    assert_eq!(
        render_error(503, "x", None)["error"]["type"],
        "server_error"
    );
    // Ollama and llama.cpp put only a message (or a code) in their error objects.
    assert_eq!(
        parse_error(br#"{"error": {"code": 500, "message": "model failed to load"}}"#),
        Some(ApiError {
            kind: "error".into(),
            message: "model failed to load".into()
        })
    );
}
