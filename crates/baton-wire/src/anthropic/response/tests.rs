//! Unit tests of Anthropic response and error bodies.

use baton_core::{ContentBlock, Role};
use serde_json::json;

use super::{parse_error, parse_response, render_error, render_response};
use crate::{ApiError, Error, Usage};

const TOOL_RESPONSE: &str = r#"{
  "id": "msg_01Aq9w938a90dw8q",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "text", "text": "I'll check the current weather."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
     "input": {"location": "San Francisco, CA", "unit": "celsius"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 384, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 0, "output_tokens": 76, "cache_creation": {"ephemeral_5m_input_tokens": 50, "ephemeral_1h_input_tokens": 0}}
}"#;

#[test]
fn reads_a_tool_use_response() {
    let reply = parse_response(TOOL_RESPONSE.as_bytes()).unwrap();
    assert_eq!(reply.message.role, Role::Assistant);
    assert!(matches!(
        &reply.message.content[1],
        ContentBlock::ToolUse { id, name, input }
            if id == "toolu_01A09q90qw90lq917835lq9" && name == "get_weather" && input["unit"] == "celsius"
    ));
    assert_eq!(reply.stop_reason, "tool_use");
    assert_eq!(reply.model, "claude-sonnet-4-5-20250929");
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 384,
            output_tokens: 76,
            cache_read_tokens: 0,
            cache_write_tokens: 50,
            cache_write_1h_tokens: 0,
            reasoning_tokens: 0,
        }
    );
    let rendered = render_response(&reply, "msg_01Aq9w938a90dw8q");
    let original: serde_json::Value = serde_json::from_str(TOOL_RESPONSE).unwrap();
    assert_eq!(rendered, original);
}

#[test]
fn bad_bodies_are_malformed_and_errors_are_the_vendors() {
    let err = |body: &str| parse_response(body.as_bytes()).unwrap_err();
    assert_eq!(
        err("this is not json").to_string(),
        "response: not JSON (expected ident at line 1 column 2)"
    );
    assert_eq!(
        err(r#"{"role": "user", "content": "hi", "stop_reason": "end_turn"}"#).to_string(),
        "response: role is \"user\", not \"assistant\""
    );
    assert_eq!(
        err(r#"{"role": "assistant", "content": []}"#).to_string(),
        "response: no stop_reason"
    );
    assert_eq!(
        err(r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#),
        Error::Api {
            kind: "overloaded_error".into(),
            message: "Overloaded".into()
        }
    );
}

#[test]
fn error_bodies_round_trip() {
    let body = render_error(
        429,
        "Number of request tokens has exceeded your per-minute rate limit",
    );
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit"}})
    );
    assert_eq!(
        parse_error(body.to_string().as_bytes()),
        Some(ApiError {
            kind: "rate_limit_error".into(),
            message: "Number of request tokens has exceeded your per-minute rate limit".into()
        })
    );
    assert_eq!(
        render_error(401, "x")["error"]["type"],
        "authentication_error"
    );
    assert_eq!(render_error(529, "x")["error"]["type"], "overloaded_error");
    assert_eq!(render_error(500, "x")["error"]["type"], "api_error");
    assert_eq!(parse_error(b"<html>bad gateway</html>"), None);
}
