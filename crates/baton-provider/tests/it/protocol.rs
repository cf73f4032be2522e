//! Each protocol violation the real APIs refuse is refused by the scripted server with HTTP
//! 400 in the vendor's shape, and surfaces as `Error::Status { status: 400, message }` naming
//! it; none is retried and none consumes a turn.

use baton_core::{ContentBlock, Message, Role};
use baton_provider::Error;
use serde_json::json;

use crate::{BOTH, Options, Vendor, client, results, send, server, user};

fn call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "read_file".into(),
            input: json!({"path": "a.txt"}),
        }],
    }
}

#[track_caller]
fn check(err: Error, expect: &str) {
    match err {
        Error::Status {
            status: 400,
            message,
            ..
        } => assert_eq!(message, expect),
        other => panic!("expected HTTP 400, got {other:?}"),
    }
}

#[tokio::test]
async fn violations_are_refused_with_400_naming_them() {
    for vendor in BOTH {
        let server = server(json!({"turns": [{"reply": {"text": "never sent"}}]}));
        let client = client(vendor, &server, Options::default());
        let cases = [
            (
                vec![Message::text(Role::Assistant, "I start."), user("hi")],
                "messages.0: the first message must use the \"user\" role",
                "messages.[1]: Invalid parameter: the conversation must start with a 'user' message (after any 'system' messages), not an 'assistant' message.",
            ),
            (
                vec![
                    user("go"),
                    Message::text(Role::Assistant, "ok"),
                    results(&["toolu_orphan"], "x"),
                ],
                "messages.2: `tool_result` block(s) provided when previous message does not have `tool_use` blocks",
                "messages.[3]: Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
            ),
            (
                vec![user("go"), call("toolu_a"), user("never mind")],
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                "messages.[2]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: toolu_a",
            ),
            (
                vec![user("go"), call("toolu_a"), results(&["toolu_b"], "x")],
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                "messages.[2]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: toolu_a",
            ),
        ];
        let count = cases.len();
        for (messages, anthropic, openai) in cases {
            let (result, _) = send(client.as_ref(), messages, true).await;
            let expect = match vendor {
                Vendor::Anthropic => anthropic,
                Vendor::OpenAi => openai, // one index later: the system message comes first
            };
            check(result.unwrap_err(), expect);
        }
        assert_eq!(
            server.requests().len(),
            count,
            "{vendor:?}: 400 is never retried"
        );
        assert_eq!(server.remaining_turns(), 1);
    }
}

#[tokio::test]
async fn the_error_body_has_the_vendors_shape() {
    let server = server(json!({"turns": []}));
    let http = reqwest::Client::new();
    let anthropic = http
        .post(format!("{}/v1/messages", server.anthropic_url()))
        .body(
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "assistant", "content": "hi"}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 400);
    let body: serde_json::Value =
        serde_json::from_slice(&anthropic.bytes().await.unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "messages.0: the first message must use the \"user\" role"}})
    );
    let openai = http
        .post(format!("{}/chat/completions", server.openai_url()))
        .body(
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c", "content": "x"}]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(openai.status(), 400);
    let body: serde_json::Value = serde_json::from_slice(&openai.bytes().await.unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "messages.[1]: Invalid parameter: messages with role 'tool' must be a response to a preceding message with 'tool_calls'.",
                         "type": "invalid_request_error", "param": "messages.[1]", "code": null}})
    );
}

#[tokio::test]
async fn a_failed_expectation_is_a_400_naming_it() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"expect": {"contains": "read-only"}, "reply": {"text": "Done."}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let (result, _) = send(client.as_ref(), vec![user("write it")], true).await;
        check(
            result.unwrap_err(),
            "scripted server: turns[0]: expect.contains: the request does not contain \"read-only\"",
        );
    }
}

#[tokio::test]
async fn an_exhausted_script_says_which_when_failed() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"when": {"tools": false}, "reply": {"text": "summary"}}
        ]}));
        let options = Options {
            max_retries: 0,
            ..Options::default()
        };
        let client = client(vendor, &server, options);
        let (result, _) = send(client.as_ref(), vec![user("go")], true).await;
        match result.unwrap_err() {
            Error::Status {
                status: 500,
                message,
                ..
            } => assert_eq!(
                message,
                "scripted server: the script is exhausted for this request: no unconsumed turn matches (turns[0]: when.tools is false, but the request offers 1 tools)"
            ),
            other => panic!("{other:?}"),
        }
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        result.unwrap();
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        assert!(
            result
                .unwrap_err()
                .to_string()
                .ends_with("the script is exhausted: all 1 turns were consumed")
        );
    }
}
