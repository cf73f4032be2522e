//! The scripted server on its own: non-streaming replies, the documented script's replies in
//! order, unknown paths, and shutdown.

use baton_provider::scripted::{Script, ScriptedServer};
use baton_wire::Format;
use serde_json::{Value, json};

async fn post(url: String, body: Value) -> (u16, Vec<u8>) {
    let response = reqwest::Client::new()
        .post(url)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn a_request_without_stream_gets_one_json_body() {
    let server = crate::server(json!({"turns": [
        {"reply": {"text": "Reading.", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]}},
        {"reply": {"text": "Plain.", "stop": "max_tokens"}}
    ]}));
    let (status, body) = post(
        format!("{}/v1/messages", server.anthropic_url()),
        json!({"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let reply = Format::Anthropic.parse_response(&body).unwrap();
    assert_eq!(reply.stop_reason, "tool_use");
    assert_eq!(reply.model, "claude-x");
    assert!(
        reply
            .message
            .tool_use_ids()
            .all(|id| id.starts_with("toolu_01"))
    );

    let (status, body) = post(
        format!("{}/chat/completions", server.openai_url()),
        json!({"model": "gpt-x", "messages": [{"role": "user", "content": "go"}]}),
    )
    .await;
    assert_eq!(status, 200);
    let reply = Format::OpenAi.parse_response(&body).unwrap();
    assert_eq!(reply.stop_reason, "length");
    assert_eq!(reply.message.plain_text(), "Plain.");
}

#[tokio::test]
async fn unknown_paths_are_404_and_recorded() {
    let server = crate::server(json!({"turns": []}));
    let (status, _) = post(format!("{}/v1/complete", server.anthropic_url()), json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(server.requests()[0].path, "/v1/complete");
}

#[tokio::test]
async fn ids_differ_across_servers() {
    let script = json!({"turns": [{"reply": {"tool_calls": [{"name": "ls"}]}}]});
    let mut ids = Vec::new();
    for _ in 0..2 {
        let server = crate::server(script.clone());
        let (_, body) = post(
            format!("{}/v1/messages", server.anthropic_url()),
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}]}),
        )
        .await;
        let reply = Format::Anthropic.parse_response(&body).unwrap();
        ids.push(reply.message.tool_use_ids().next().unwrap().to_owned());
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn shutdown_stops_serving() {
    let server = ScriptedServer::start(Script::default()).unwrap();
    let addr = server.addr();
    server.shutdown().await;
    let refused = reqwest::Client::new()
        .post(format!("http://{addr}/v1/messages"))
        .send()
        .await;
    assert!(refused.is_err());
}

#[test]
fn it_serves_without_a_runtime_of_the_callers() {
    let server = crate::server(json!({"turns": []}));
    let stream = std::net::TcpStream::connect(server.addr());
    assert!(stream.is_ok());
    drop(server);
}

#[tokio::test]
async fn a_scripted_message_is_answered_with_its_ids_and_the_prompt_cache_is_modelled() {
    let reply = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "look first", "signature": "c2ln"},
        {"type": "tool_use", "id": "toolu_fixed", "name": "ls", "input": {"path": "."}}]});
    let server = crate::server(json!({"prompt_cache": true, "turns": [
        {"reply": {"message": reply}}, {"reply": {"text": "Two."}}, {"reply": {"text": "Three."}}
    ]}));
    let url = format!("{}/v1/messages", server.anthropic_url());
    let marked = |text: &str| json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]);
    let system = "s".repeat(4000);
    let first = json!({"model": "m", "max_tokens": 10, "system": marked(&system),
        "messages": [{"role": "user", "content": marked("list the files")}]});
    let (status, body) = post(url.clone(), first.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = Format::Anthropic.parse_response(&body).unwrap();
    assert_eq!(
        answer.message.tool_use_ids().collect::<Vec<_>>(),
        ["toolu_fixed"]
    );
    // Nothing was cached yet: the marked prefix (system and first message) is written.
    assert_eq!(answer.usage.cache_read_tokens, 0);
    assert!(
        answer.usage.cache_write_tokens >= 1000,
        "{:?}",
        answer.usage
    );

    // The next request repeats that prefix (its markers moved on): read from the cache.
    let mut second = first.clone();
    second["messages"][0]["content"] = json!([{"type": "text", "text": "list the files"}]);
    second["messages"].as_array_mut().unwrap().extend([
        reply.clone(),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_fixed", "content": "a", "cache_control": {"type": "ephemeral"}}]}),
    ]);
    let (status, body) = post(url.clone(), second).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let usage = Format::Anthropic.parse_response(&body).unwrap().usage;
    assert!(usage.cache_read_tokens >= 1000, "{usage:?}");
    assert!(
        usage.cache_write_tokens > 0 && usage.cache_write_tokens < 100,
        "{usage:?}"
    );

    // A changed system prompt shares no prefix.
    let mut third = first;
    third["system"] = marked(&"t".repeat(4000));
    let (_, body) = post(url, third).await;
    let usage = Format::Anthropic.parse_response(&body).unwrap().usage;
    assert_eq!(usage.cache_read_tokens, 0, "{usage:?}");
}
