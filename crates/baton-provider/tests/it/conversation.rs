//! Conversations that succeed: streamed text, a tool-call round trip whose second request
//! passes the server's protocol checks, and parallel tool calls.

use baton_core::ContentBlock;
use baton_provider::{Delta, StopReason};
use serde_json::json;

use crate::{BOTH, Options, Vendor, client, results, send, server, text_of, user};

#[tokio::test]
async fn a_text_reply_streams_its_deltas() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"text": "Hello there, this reply arrives in several pieces."}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let (result, deltas) = send(client.as_ref(), vec![user("Say hello.")], false).await;
        let response = result.unwrap();
        assert!(deltas.len() > 2, "{vendor:?}: {deltas:?}");
        assert_eq!(
            text_of(&deltas),
            "Hello there, this reply arrives in several pieces."
        );
        assert_eq!(
            response.message.plain_text(),
            "Hello there, this reply arrives in several pieces."
        );
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        assert!(response.usage.input_tokens > 10 && response.usage.output_tokens > 5);

        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert!(request.auth);
        assert_eq!(request.body["stream"], json!(true));
        match vendor {
            Vendor::Anthropic => {
                assert_eq!(request.path, "/v1/messages");
                assert_eq!(response.model, "claude-test");
                assert_eq!(request.body["max_tokens"], json!(8192));
                assert_eq!(request.body["system"], json!("You are a careful agent."));
                assert_eq!(request.headers["anthropic-version"], "2023-06-01");
            }
            Vendor::OpenAi => {
                assert_eq!(request.path, "/v1/chat/completions");
                assert_eq!(response.model, "gpt-test");
                assert_eq!(
                    request.body["stream_options"],
                    json!({"include_usage": true})
                );
                assert_eq!(request.body["max_tokens"], json!(8192));
                assert_eq!(request.body["messages"][0]["role"], json!("system"));
            }
        }
    }
}

#[tokio::test]
async fn a_tool_call_round_trip_passes_validation() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"text": "I'll read it.", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]}},
            {"expect": {"contains": "contents of a.txt"}, "reply": {"text": "It says hello."}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let mut messages = vec![user("What does a.txt say?")];
        let (result, deltas) = send(client.as_ref(), messages.clone(), true).await;
        let first = result.unwrap();
        assert_eq!(first.stop_reason, StopReason::ToolUse);
        let ids: Vec<String> = first.message.tool_use_ids().map(str::to_owned).collect();
        assert_eq!(ids.len(), 1);
        let prefix = match vendor {
            Vendor::Anthropic => "toolu_",
            Vendor::OpenAi => "call_",
        };
        assert!(ids[0].starts_with(prefix), "{vendor:?}: {ids:?}");
        assert!(deltas.contains(&Delta::ToolCall {
            id: ids[0].clone(),
            name: "read_file".into()
        }));
        assert!(matches!(
            &first.message.content[1],
            ContentBlock::ToolUse { input, .. } if *input == json!({"path": "a.txt"})
        ));

        messages.push(first.message);
        messages.push(results(&[ids[0].as_str()], "contents of a.txt: hello"));
        let (result, _) = send(client.as_ref(), messages, true).await;
        let second = result.unwrap();
        assert_eq!(second.message.plain_text(), "It says hello.");
        assert_eq!(second.stop_reason, StopReason::EndTurn);

        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let body = requests[1].body.to_string();
        match vendor {
            Vendor::Anthropic => assert!(body.contains("\"tool_result\""), "{body}"),
            Vendor::OpenAi => assert!(body.contains("\"role\":\"tool\""), "{body}"),
        }
        assert_eq!(server.remaining_turns(), 0);
    }
}

#[tokio::test]
async fn parallel_tool_calls_in_one_turn() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"tool_calls": [
                {"name": "read_file", "input": {"path": "a.txt"}},
                {"name": "read_file", "input": {"path": "b.txt"}}
            ]}},
            {"reply": {"text": "Both read."}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let (result, deltas) = send(client.as_ref(), vec![user("Read both.")], true).await;
        let first = result.unwrap();
        let ids: Vec<String> = first.message.tool_use_ids().map(str::to_owned).collect();
        assert_eq!(ids.len(), 2, "{vendor:?}");
        assert_ne!(ids[0], ids[1]);
        let announced: Vec<&Delta> = deltas
            .iter()
            .filter(|d| matches!(d, Delta::ToolCall { .. }))
            .collect();
        assert_eq!(announced.len(), 2);

        // Answering only one of them is refused, naming the other.
        let mut messages = vec![user("Read both."), first.message.clone()];
        let (result, _) = send(
            client.as_ref(),
            [messages.clone(), vec![results(&[ids[0].as_str()], "A")]].concat(),
            true,
        )
        .await;
        let err = result.unwrap_err();
        assert!(err.to_string().contains(&ids[1]), "{vendor:?}: {err}");

        // Answering both, in one message, passes.
        messages.push(results(&[ids[1].as_str(), ids[0].as_str()], "text"));
        let (result, _) = send(client.as_ref(), messages, true).await;
        assert_eq!(result.unwrap().message.plain_text(), "Both read.");
        assert_eq!(server.requests().len(), 3);
    }
}
