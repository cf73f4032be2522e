//! Managed context (issue 18, item 6): with `x-baton-context`, the gateway sends the scripted
//! upstream the run's working state and the conversation's tail instead of the whole
//! transcript — the tail byte for byte, tool pairs whole (the scripted upstream refuses a
//! broken pair as the real APIs do), the prefix stable between compactions — and falls back to
//! the client's own request when the upstream refuses the rewrite. Over real HTTP on loopback,
//! on both backends.

use baton_core::{RunId, Seq, TenantId};
use serde_json::{Value, json};

use crate::gateway::{Got, assert_vendor_error, call, gateway, send, upstream};
use crate::on_both_backends;
use crate::support::{Backend, TestServer};

on_both_backends!(
    a_long_anthropic_conversation_is_sent_as_state_and_tail,
    a_chat_conversation_keeps_its_system_message_first,
    a_conversation_under_the_budget_goes_whole,
    a_refused_rewrite_falls_back_to_the_clients_request,
    a_responses_conversation_keeps_reasoning_with_what_it_produced,
    bad_managed_context_requests_are_refused_in_the_vendor_shape,
    a_tool_result_over_half_the_budget_is_sent_clipped,
    a_tenants_default_policy_manages_requests_that_name_none,
);

const BUDGET: &str = "4000";

fn header<'a>(got: &'a Got, name: &str) -> &'a str {
    got.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header: {:?}", got.headers))
}

/// A tool result's text: about 1,600 bytes that differ from file to file.
fn file_text(i: usize) -> String {
    (0..40)
        .map(|line| format!("fn part_{i}_line_{line}() -> u32 {{ {line} }} // src/part_{i}.rs\n"))
        .collect()
}

/// A coding conversation in Anthropic's shape: the task, then `turns` rounds of an assistant
/// message (a signed thinking block, text, a `read_file` call) and the user's tool result.
fn anthropic_conversation(turns: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content":
        "Task: rename the config loader in src/config.rs to load_settings and keep the tests passing. Do not touch .github/."})];
    for i in 0..turns {
        let id = format!("toolu_{i:04}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("Part {i} may call the loader."), "signature": format!("c2lnLXtpfQ-{i}==")},
            {"type": "text", "text": format!("Reading src/part_{i}.rs.")},
            {"type": "tool_use", "id": id, "name": "read_file", "input": {"path": format!("src/part_{i}.rs")}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file_text(i)},
        ]}));
    }
    messages
}

fn anthropic_request(messages: &[Value]) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
        "system": [{"type": "text", "text": "You are a careful coding agent.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "read_file", "description": "read a file", "input_schema": {"type": "object"}}],
        "messages": messages})
}

fn replies(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"reply": {"text": format!("Answer {i}.")}}))
            .collect(),
    )
}

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

/// The run's messages once it holds `n` (the reply's capture runs after the answer).
async fn stored(server: &TestServer, run: &str, n: usize) -> usize {
    let run = RunId::new(run).unwrap();
    for _ in 0..200 {
        let entries = server
            .store
            .read_range(&acme(), &run, Seq(1), None)
            .await
            .unwrap();
        if entries.len() >= n {
            return entries.len();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("run {run} never held {n} messages");
}

async fn a_long_anthropic_conversation_is_sent_as_state_and_tail(backend: Backend) {
    let up = upstream(replies(2));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/messages";
    let mut messages = anthropic_conversation(30);
    let extra = [
        ("x-baton-context", "structured"),
        ("x-baton-context-budget", BUDGET),
        ("x-baton-run", "managed-1"),
    ];
    let request = anthropic_request(&messages);
    let sent = request.to_string();
    let got = call(&server, path, &request, &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    assert_eq!(header(&got, "x-baton-context-policy"), "structured");
    assert_eq!(header(&got, "x-baton-context-run"), "managed-1");
    let before: u64 = header(&got, "x-baton-context-tokens-before")
        .parse()
        .unwrap();
    let after: u64 = header(&got, "x-baton-context-tokens-after")
        .parse()
        .unwrap();
    assert!(after < before / 2, "{before} -> {after}");
    assert!(after <= 4000, "{after} over the budget");
    let summarized = header(&got, "x-baton-context-summarized").to_owned();
    let last: usize = summarized.strip_prefix("1-").unwrap().parse().unwrap();
    assert!(last > 1 && last < messages.len(), "{summarized}");

    // What the upstream got: the client's body with only the messages changed.
    let first = up.requests().last().unwrap().clone();
    assert!(
        first.text.len() < sent.len() / 2,
        "{} of {}",
        first.text.len(),
        sent.len()
    );
    let body = &first.body;
    for field in ["model", "max_tokens", "system", "tools"] {
        assert_eq!(body[field], request[field], "{field}");
    }
    let upstream_messages = body["messages"].as_array().unwrap();
    let state = upstream_messages[0]["content"][0]["text"].as_str().unwrap();
    assert!(state.contains("summarized by baton"), "{state}");
    // The working state carries the task, which is in the part it stands for.
    assert!(state.contains("load_settings"), "{state}");
    // The tail is the client's messages from `last + 1` on, each byte for byte.
    assert_eq!(&upstream_messages[1..], &messages[last..]);
    for kept in &messages[last..] {
        assert!(first.text.contains(&kept.to_string()), "changed: {kept}");
    }
    // Every byte of the client's system prompt (its cache breakpoint included) and tools.
    let system = serde_json::to_string(&request["system"]).unwrap();
    assert!(first.text.contains(&format!("\"system\":{system}")));

    // The run holds the whole conversation as the client has it, and the reply.
    assert_eq!(
        stored(&server, "managed-1", messages.len() + 1).await,
        messages.len() + 1
    );

    // The same request again (a retry, a regenerate), once its reply is in the run: the same
    // rewrite, so the cache answers it.
    let again = call(&server, path, &request, &extra).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(header(&again, "x-baton-context-action"), "rewritten");
    assert_eq!(header(&again, "x-baton-context-summarized"), summarized);
    assert_eq!(again.cache(), "hit");
    assert_eq!(again.body, got.body);

    // The next request adds the reply and a question: the upstream body is the previous one
    // with the new messages at its end (a stable prefix for the provider's prompt cache).
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Answer 0."}]}));
    messages.push(json!({"role": "user", "content": "Now run the tests."}));
    let got = call(&server, path, &anthropic_request(&messages), &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    assert_eq!(header(&got, "x-baton-context-summarized"), summarized);
    let second = up.requests().last().unwrap().clone();
    let again = second.body["messages"].as_array().unwrap();
    assert_eq!(&again[..upstream_messages.len()], &upstream_messages[..]);
    assert_eq!(
        &again[upstream_messages.len()..],
        &messages[messages.len() - 2..]
    );
}

async fn a_chat_conversation_keeps_its_system_message_first(backend: Backend) {
    let up = upstream(replies(1));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/chat/completions";
    let mut messages = vec![
        json!({"role": "system", "content": "Be terse."}),
        json!({"role": "user", "content": "Task: find every caller of load_config."}),
    ];
    for i in 0..30 {
        let id = format!("call_{i:04}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/part_{i}.rs\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": file_text(i)}));
    }
    let request = json!({"model": "gpt-4o-mini", "messages": messages,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]});
    let extra = [
        ("x-baton-context", "budget"),
        ("x-baton-context-budget", BUDGET),
    ];
    let got = call(&server, path, &request, &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    let run = header(&got, "x-baton-context-run").to_owned();
    assert!(run.starts_with("gw-"), "{run}");
    let body = up.requests().last().unwrap().body.clone();
    let sent = body["messages"].as_array().unwrap();
    assert_eq!(sent[0], messages[0], "the system message stays first");
    assert!(sent.len() < messages.len());
    // The tail the upstream got is the client's own end of the conversation.
    let tail = &sent[sent.len() - 4..];
    assert_eq!(tail, &messages[messages.len() - 4..]);
    assert_eq!(
        stored(&server, &run, messages.len() + 1).await,
        messages.len() + 1
    );
}

async fn a_conversation_under_the_budget_goes_whole(backend: Backend) {
    let up = upstream(replies(1));
    let server = gateway(backend, &up, |_| {}).await;
    // Written by hand, with spacing and escapes a re-serialization would change.
    let text = r#"{ "model": "claude-sonnet-4-5", "max_tokens": 256,
        "messages": [ {"role": "user", "content": "caf\u00e9?"} ] }"#;
    let request = server
        .client
        .post(server.url("/v1/messages"))
        .header("content-type", "application/json")
        .header("x-baton-key", &server.key)
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("x-baton-context", "structured")
        .body(text);
    let got = send(request).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "unchanged");
    assert_eq!(header(&got, "x-baton-context-reason"), "under the budget");
    let recorded = up.requests().last().unwrap().clone();
    assert_eq!(recorded.text, text);
    assert!(!recorded.headers.contains_key("x-baton-context"));
}

async fn a_refused_rewrite_falls_back_to_the_clients_request(backend: Backend) {
    let turns = json!([
        {"reply": {"error": {"status": 400, "message": "messages.1: this model does not accept that"}}},
        {"reply": {"text": "Done the long way."}},
    ]);
    let up = upstream(turns);
    let server = gateway(backend, &up, |_| {}).await;
    let request = anthropic_request(&anthropic_conversation(30));
    let extra = [
        ("x-baton-context", "structured"),
        ("x-baton-context-budget", BUDGET),
    ];
    let got = call(&server, "/v1/messages", &request, &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "fallback");
    assert!(header(&got, "x-baton-context-reason").contains("400"));
    let requests = up.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].text.contains("summarized by baton"));
    assert_eq!(
        requests[1].body, request,
        "the fallback is the client's request"
    );
}

async fn bad_managed_context_requests_are_refused_in_the_vendor_shape(backend: Backend) {
    let up = upstream(replies(1));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/messages";
    let request = anthropic_request(&anthropic_conversation(1));
    for extra in [
        vec![("x-baton-context", "smart")],
        vec![("x-baton-context", "summarize")],
        vec![
            ("x-baton-context", "structured"),
            ("x-baton-context-budget", "12"),
        ],
        vec![
            ("x-baton-context", "structured"),
            ("x-baton-context-budget", "lots"),
        ],
    ] {
        let got = call(&server, path, &request, &extra).await;
        assert_vendor_error(&got, path, 400, "invalid-context-policy");
    }
    let responses = json!({"model": "gpt-4o-mini", "input": "hi"});
    let got = call(
        &server,
        "/v1/responses",
        &responses,
        &[("x-baton-context", "clear-tool-results")],
    )
    .await;
    assert_vendor_error(&got, "/v1/responses", 400, "invalid-context-policy");
    let embeddings = json!({"model": "text-embedding-3-small", "input": "hi"});
    let got = call(
        &server,
        "/v1/embeddings",
        &embeddings,
        &[("x-baton-context", "structured")],
    )
    .await;
    assert_vendor_error(&got, "/v1/embeddings", 400, "invalid-context-policy");
    drop(server);
    let server = gateway(backend, &up, |c| c.capture = false).await;
    let got = call(
        &server,
        path,
        &request,
        &[("x-baton-context", "structured")],
    )
    .await;
    assert_vendor_error(&got, path, 400, "invalid-context-policy");
    assert!(up.requests().is_empty(), "nothing reached the upstream");
}

/// Codex's shape: the Responses API with `input` items, reasoning items before the calls they
/// produced. The kept items are the client's own, the first kept call keeps its reasoning, and
/// the developer message stays first.
async fn a_responses_conversation_keeps_reasoning_with_what_it_produced(backend: Backend) {
    let up = upstream(replies(1));
    let server = gateway(backend, &up, |_| {}).await;
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Task: find every caller of load_config."}]}),
    ];
    for i in 0..30 {
        let id = format!("call_{i:04}");
        input.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": format!("gAAAA{i}")}));
        input.push(
            json!({"type": "function_call", "call_id": id, "name": "shell",
            "arguments": format!("{{\"cmd\":\"cat src/part_{i}.rs\"}}")}),
        );
        input.push(json!({"type": "function_call_output", "call_id": id, "output": file_text(i)}));
    }
    let request = json!({"model": "gpt-5-codex", "store": false, "input": input,
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]});
    let extra = [
        ("x-baton-context", "structured"),
        ("x-baton-context-budget", BUDGET),
    ];
    let got = call(&server, "/v1/responses", &request, &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(
        header(&got, "x-baton-context-action"),
        "rewritten",
        "{:?}",
        got.headers
    );
    let recorded = up.requests().last().unwrap().clone();
    let sent = recorded.body["input"].as_array().unwrap().clone();
    assert!(sent.len() < input.len());
    assert_eq!(sent[0], input[0], "the developer message stays first");
    assert_eq!(sent[1]["content"][0]["type"], "input_text");
    assert!(
        sent[1]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("summarized by baton")
    );
    // The tail is the client's end of the input, from a reasoning item on, byte for byte.
    let tail = &sent[2..];
    assert_eq!(tail[0]["type"], "reasoning", "{}", tail[0]);
    assert_eq!(tail, &input[input.len() - tail.len()..]);
    for item in tail {
        assert!(recorded.text.contains(&item.to_string()));
    }
    // A request continuing a stored response goes whole.
    let continued = json!({"model": "gpt-5-codex", "previous_response_id": "resp_1",
        "input": input});
    let got = call(&server, "/v1/responses", &continued, &extra).await;
    assert_eq!(header(&got, "x-baton-context-action"), "unchanged");
    assert!(header(&got, "x-baton-context-reason").contains("previous_response_id"));
}

/// One tool result larger than the whole budget (a build log), the newest message, so no
/// summary can take it: the upstream gets its head and tail and a line naming its seq, its
/// other fields kept, and the run keeps it whole. (The same bytes each time: `clip_results`'s
/// unit tests.)
async fn a_tool_result_over_half_the_budget_is_sent_clipped(backend: Backend) {
    let up = upstream(replies(2));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/messages";
    let log: String = (0..1_500)
        .map(|i| format!("step {i:04}: compiling crate_{i} ... ok\n"))
        .collect();
    assert!(log.len() > 50_000);
    let mut messages = anthropic_conversation(2);
    messages.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_big", "name": "read_file", "input": {"path": "build.log"}}]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_big", "content": log, "cache_control": {"type": "ephemeral"}}]}));
    let extra = [
        ("x-baton-context", "structured"),
        ("x-baton-context-budget", "8000"),
        ("x-baton-run", "clipped-1"),
    ];
    let got = call(&server, path, &anthropic_request(&messages), &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    assert_eq!(header(&got, "x-baton-context-clipped"), "1");
    let after: u64 = header(&got, "x-baton-context-tokens-after")
        .parse()
        .unwrap();
    assert!(after <= 8000, "{after} over the budget");
    let first = up.requests().last().unwrap().clone();
    assert!(
        first.text.len() <= 32_000,
        "{} bytes sent",
        first.text.len()
    );
    let sent = first.body["messages"].as_array().unwrap().clone();
    let result = &sent.last().unwrap()["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_big");
    assert_eq!(result["cache_control"], json!({"type": "ephemeral"}));
    let text = result["content"].as_str().unwrap();
    assert!(
        text.starts_with("step 0000: compiling crate_0 ... ok\n"),
        "{text:.80}"
    );
    assert!(text.ends_with("step 1499: compiling crate_1499 ... ok\n"));
    assert!(
        text.contains("recall seq 7 for the original"),
        "{text:.200}"
    );
    assert!(text.len() < 16_500, "{} characters kept", text.len());
    // The tool call stays with its result.
    let call_block = &sent[sent.len() - 2]["content"][0];
    assert_eq!(call_block["id"], "toolu_big");

    // The run holds the result whole, at the seq the line names.
    stored(&server, "clipped-1", messages.len() + 1).await;
    let held = server
        .store
        .read_range(
            &acme(),
            &RunId::new("clipped-1").unwrap(),
            Seq(7),
            Some(Seq(7)),
        )
        .await
        .unwrap();
    assert!(
        serde_json::to_string(&held[0].message)
            .unwrap()
            .contains("step 0750: compiling crate_750"),
        "the run lost the middle of the result"
    );

    // Once answered, the result is no longer what the model answers: the next request may
    // summarize it, and stays within the budget.
    messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Answer 0."}]}));
    messages.push(json!({"role": "user", "content": "Fix the first warning."}));
    let got = call(&server, path, &anthropic_request(&messages), &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    let after: u64 = header(&got, "x-baton-context-tokens-after")
        .parse()
        .unwrap();
    assert!(after <= 8000, "{after} over the budget");
}

/// `baton serve --managed-context acme=structured:4000`: the tenant's requests are managed
/// without a header, a request opts out with `x-baton-context: off`, and the header still
/// names another policy.
async fn a_tenants_default_policy_manages_requests_that_name_none(backend: Backend) {
    let up = upstream(replies(3));
    let server = gateway(backend, &up, |config| {
        let default = baton_server::TenantContext::new("structured", Some(4000)).unwrap();
        config.managed_context.insert(acme(), default);
    })
    .await;
    let path = "/v1/messages";
    let request = anthropic_request(&anthropic_conversation(30));
    let got = call(&server, path, &request, &[]).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(header(&got, "x-baton-context-policy"), "structured");
    assert_eq!(header(&got, "x-baton-context-action"), "rewritten");
    let after: u64 = header(&got, "x-baton-context-tokens-after")
        .parse()
        .unwrap();
    assert!(after <= 4000, "{after} over the tenant's budget");

    let off = call(&server, path, &request, &[("x-baton-context", "off")]).await;
    assert_eq!(off.status, 200, "{}", off.text());
    assert!(off.headers.get("x-baton-context-action").is_none());
    let sent = up.requests().last().unwrap().clone();
    assert_eq!(sent.body["messages"], request["messages"], "sent whole");

    let other = call(
        &server,
        path,
        &request,
        &[
            ("x-baton-context", "budget"),
            ("x-baton-context-budget", "6000"),
        ],
    )
    .await;
    assert_eq!(other.status, 200, "{}", other.text());
    assert_eq!(header(&other, "x-baton-context-policy"), "budget");
}
