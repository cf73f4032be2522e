//! Gateway capture (issue 18, item 5): conversations through the gateway become runs — named
//! by `x-baton-run` or derived from the conversation, appended to with only what is new, the
//! reply added once complete, rewritten conversations branched — over real HTTP against the
//! scripted upstream on loopback, on both backends.

use std::time::Duration;

use baton_core::{Message, RunId, Seq, TenantId};
use serde_json::{Value, json};

use crate::gateway::{Got, assert_vendor_error, call, gateway, send, upstream};
use crate::on_both_backends;
use crate::support::{Backend, TestServer};

on_both_backends!(
    anthropic_named_capture_plain_and_streamed_with_tools,
    openai_chat_derived_run_with_tools,
    a_repeated_request_stores_nothing_twice,
    a_rewritten_conversation_branches,
    a_bad_run_name_is_refused_in_the_vendor_shape,
    no_capture_stores_no_run,
    tenants_never_see_each_others_captures,
    responses_plain_and_streamed_are_captured,
    each_answer_is_counted_once_in_the_usage_reports,
    each_request_is_read_from_where_the_last_capture_stopped,
    a_conversation_that_used_a_server_tool_is_captured_whole,
);

/// The runs of `tenant` (none for a tenant that has never stored one).
async fn runs(server: &TestServer, tenant: &TenantId) -> Vec<baton_core::Run> {
    match server.store.list_runs(tenant).await {
        Ok(runs) => runs,
        Err(baton_store::Error::UnknownTenant { .. }) => vec![],
        Err(e) => panic!("{e}"),
    }
}

/// Each turn three times over: the scripted upstream consumes a turn when it answers.
fn script() -> Value {
    let turns = json!([
        {"when": {"last_user_contains": "list"}, "reply": {"text": "Listing.",
            "tool_calls": [{"name": "ls", "input": {"path": "."}}]}},
        {"when": {"last_user_contains": "a.txt"}, "reply": {"text": "Two files: a.txt, b.txt."}},
        {"when": {"last_user_contains": "rewritten"}, "reply": {"text": "Another start."}},
    ]);
    let turns = turns.as_array().unwrap();
    Value::Array([turns.clone(), turns.clone(), turns.clone()].concat())
}

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

/// The messages of `run`, waiting (up to 10 s) until it holds `n` of them.
async fn stored(server: &TestServer, tenant: &TenantId, run: &str, n: usize) -> Vec<Message> {
    let run = RunId::new(run).unwrap();
    for _ in 0..200 {
        if let Ok(entries) = server.store.read_range(tenant, &run, Seq(1), None).await
            && entries.len() >= n
        {
            return entries.into_iter().map(|e| e.message).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} of {tenant} never held {n} messages");
}

/// Waits until `n` captures stored something or found nothing new, none having failed. (A
/// request's capture may run after the next request's, which stored its messages already:
/// then it is `unchanged`.)
async fn settled(server: &TestServer, n: u64) {
    for _ in 0..200 {
        let text = server.metrics().await;
        let count = |outcome: &str| -> u64 {
            let prefix = format!("baton_gateway_captures_total{{outcome=\"{outcome}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .map_or(0, |n| n.parse().unwrap())
        };
        assert_eq!(count("failed"), 0);
        if count("stored") + count("unchanged") == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{n} captures never finished");
}

/// Waits until the capture counter for `outcome` reaches `n`.
async fn captures(server: &TestServer, outcome: &str, n: u64) {
    let line = format!("baton_gateway_captures_total{{outcome=\"{outcome}\"}} {n}");
    let mut seen = String::new();
    for _ in 0..200 {
        let text = server.metrics().await;
        if text.lines().any(|l| l == line) {
            return;
        }
        seen = text
            .lines()
            .filter(|l| l.starts_with("baton_gateway_captures_total"))
            .collect::<Vec<_>>()
            .join("; ");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never saw {line}: {seen}");
}

/// The body of an SSE or JSON answer as the vendor's response JSON: the streamed reply is
/// assembled with the wire crate's own reader.
fn reply_message(path: &str, got: &Got) -> Message {
    let format = match path {
        "/v1/messages" => baton_wire::Format::Anthropic,
        _ => baton_wire::Format::OpenAi,
    };
    let is_sse = got
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_sse {
        let mut stream = baton_wire::Stream::new(format);
        stream.feed(&got.body).unwrap();
        stream.finish().unwrap().message
    } else {
        format.parse_response(&got.body).unwrap().message
    }
}

/// What a direct import of the conversation `request` + `reply` stores: the request's
/// messages as the vendor's parser reads them, then the reply.
fn direct(path: &str, request: &Value, reply: Message) -> Vec<Message> {
    let format = match path {
        "/v1/messages" => baton_wire::Format::Anthropic,
        _ => baton_wire::Format::OpenAi,
    };
    let mut messages = format.parse_request(request).unwrap().messages;
    messages.push(reply);
    messages
}

/// The Anthropic tool turn: the first request, its reply, then the request carrying the
/// tool result; returns the second request and its answer.
async fn anthropic_tool_conversation(
    server: &TestServer,
    stream: bool,
    extra: &[(&str, &str)],
) -> (Value, Got) {
    let path = "/v1/messages";
    let first = json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
        "system": "You are terse.",
        "tools": [{"name": "ls", "description": "list", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "please list the files"}]});
    let got = call(server, path, &first, extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let reply = reply_message(path, &got);
    let rendered = baton_wire::anthropic::render_message(&reply);
    let tool_id = rendered["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut second = first.clone();
    second["messages"] = json!([
        {"role": "user", "content": "please list the files"},
        rendered,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "a.txt\nb.txt"}]},
    ]);
    let got = call(server, path, &second, extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    (second, got)
}

async fn anthropic_named_capture_plain_and_streamed_with_tools(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    for (stream, name) in [(false, "conv-plain"), (true, "conv-streamed")] {
        let (request, got) =
            anthropic_tool_conversation(&server, stream, &[("x-baton-run", name)]).await;
        let want = direct(
            "/v1/messages",
            &request,
            reply_message("/v1/messages", &got),
        );
        assert_eq!(want.len(), 4);
        let have = stored(&server, &acme(), name, 4).await;
        assert_eq!(have, want, "stream={stream}");
        // The tool pair is intact: the call's id is answered by the result.
        let json = serde_json::to_string(&have).unwrap();
        assert!(
            json.contains("tool_use") && json.contains("tool_result"),
            "{json}"
        );
        let report = server
            .store
            .run_report(&acme(), &RunId::new(name).unwrap())
            .await
            .unwrap();
        let origin = report.origin.expect("a captured run has an origin");
        assert_eq!(origin.source_key, format!("gateway:{name}"));
    }
    // Two conversations of two requests each: four captures, none failed.
    settled(&server, 4).await;
}

async fn openai_chat_derived_run_with_tools(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/chat/completions";
    let first = json!({"model": "gpt-4o-mini",
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
        "messages": [{"role": "system", "content": "Be terse."},
                     {"role": "user", "content": "please list the files"}]});
    let got = call(&server, path, &first, &[]).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let reply = got.json()["choices"][0]["message"].clone();
    let call_id = reply["tool_calls"][0]["id"].as_str().unwrap().to_owned();
    let mut second = first.clone();
    second["stream"] = json!(true);
    second["messages"] = json!([
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "please list the files"},
        reply,
        {"role": "tool", "tool_call_id": call_id, "content": "a.txt\nb.txt"},
    ]);
    let got = call(&server, path, &second, &[]).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let want = direct(path, &second, reply_message(path, &got));
    settled(&server, 2).await;
    // Both requests went to the one run derived from the conversation's start.
    let all = runs(&server, &acme()).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(all[0].id.as_str().starts_with("gw-"), "{}", all[0].id);
    let have = stored(&server, &acme(), all[0].id.as_str(), want.len()).await;
    assert_eq!(have, want);
}

async fn a_repeated_request_stores_nothing_twice(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let extra = [("x-baton-run", "again")];
    let (request, got) = anthropic_tool_conversation(&server, false, &extra).await;
    let want = direct(
        "/v1/messages",
        &request,
        reply_message("/v1/messages", &got),
    );
    stored(&server, &acme(), "again", 4).await;
    settled(&server, 2).await;
    let repeat = call(&server, "/v1/messages", &request, &extra).await;
    assert_eq!(repeat.cache(), "hit");
    settled(&server, 3).await;
    let have = stored(&server, &acme(), "again", 4).await;
    assert_eq!(have, want, "the hit stored nothing more");
}

async fn a_rewritten_conversation_branches(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let extra = [("x-baton-run", "tree")];
    let (_, _) = anthropic_tool_conversation(&server, false, &extra).await;
    let original = stored(&server, &acme(), "tree", 4).await;
    let rewritten = json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": "a rewritten question"}]});
    let got = call(&server, "/v1/messages", &rewritten, &extra).await;
    assert_eq!(got.status, 200, "the client never sees a capture problem");
    captures(&server, "branched", 1).await;
    // The first run is untouched; the branch holds the new conversation, linked to it.
    assert_eq!(stored(&server, &acme(), "tree", 4).await, original);
    let all = runs(&server, &acme()).await;
    let branch = all
        .iter()
        .find(|r| r.id.as_str().starts_with("tree."))
        .unwrap_or_else(|| panic!("no branch in {all:?}"));
    let want = direct(
        "/v1/messages",
        &rewritten,
        reply_message("/v1/messages", &got),
    );
    assert_eq!(stored(&server, &acme(), branch.id.as_str(), 2).await, want);
    let report = server.store.run_report(&acme(), &branch.id).await.unwrap();
    assert_eq!(
        report.origin.unwrap().parent_run,
        Some(RunId::new("tree").unwrap())
    );
    // The branch's next request extends the branch, not a third run.
    let mut next = rewritten.clone();
    next["messages"] = json!([
        {"role": "user", "content": "a rewritten question"},
        baton_wire::anthropic::render_message(&want[1]),
        {"role": "user", "content": "rewritten again, list please"},
    ]);
    let got = call(&server, "/v1/messages", &next, &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    captures(&server, "branched", 2).await;
    assert_eq!(
        stored(&server, &acme(), branch.id.as_str(), 4).await.len(),
        4
    );
    assert_eq!(runs(&server, &acme()).await.len(), 2);
}

async fn a_bad_run_name_is_refused_in_the_vendor_shape(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let anthropic = json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
        "messages": [{"role": "user", "content": "list"}]});
    let got = call(
        &server,
        "/v1/messages",
        &anthropic,
        &[("x-baton-run", "a b")],
    )
    .await;
    assert_vendor_error(&got, "/v1/messages", 400, "invalid-run-name");
    let openai = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "list"}]});
    let long = "x".repeat(200);
    let got = call(
        &server,
        "/v1/chat/completions",
        &openai,
        &[("x-baton-run", &long)],
    )
    .await;
    assert_vendor_error(&got, "/v1/chat/completions", 400, "invalid-run-name");
    assert!(runs(&server, &acme()).await.is_empty());
}

async fn no_capture_stores_no_run(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |c| c.capture = false).await;
    let (_, got) = anthropic_tool_conversation(&server, true, &[("x-baton-run", "off")]).await;
    assert_eq!(got.status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(runs(&server, &acme()).await.is_empty());
    captures(&server, "stored", 0).await;
}

async fn tenants_never_see_each_others_captures(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a.txt?"}]});
    let got = call(
        &server,
        "/v1/chat/completions",
        &body,
        &[("x-baton-run", "shared")],
    )
    .await;
    assert_eq!(got.status, 200);
    let other = server
        .client
        .post(server.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("x-baton-key", &server.other_key)
        .header("x-baton-run", "shared")
        .bearer_auth("sk-test")
        .body(json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "rewritten b"}]}).to_string());
    assert_eq!(send(other).await.status, 200);
    let other_tenant = TenantId::new("other").unwrap();
    let a = stored(&server, &acme(), "shared", 2).await;
    let b = stored(&server, &other_tenant, "shared", 2).await;
    assert!(a[0].plain_text().contains("a.txt"));
    assert!(b[0].plain_text().contains("rewritten b"));
    captures(&server, "stored", 2).await;
    assert_eq!(runs(&server, &acme()).await.len(), 1);
    assert_eq!(runs(&server, &other_tenant).await.len(), 1);
}

async fn responses_plain_and_streamed_are_captured(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    for (stream, name) in [(false, "resp-plain"), (true, "resp-streamed")] {
        let body = json!({"model": "gpt-5", "instructions": "Be brief.", "stream": stream, "store": false,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "what is in a.txt"}]}]});
        let got = call(&server, "/v1/responses", &body, &[("x-baton-run", name)]).await;
        assert_eq!(got.status, 200, "{}", got.text());
        let reply = if stream {
            let mut reader = baton_wire::Stream::Responses(Default::default());
            reader.feed(&got.body).unwrap();
            reader.finish().unwrap()
        } else {
            baton_wire::responses::parse_response(&got.body).unwrap()
        };
        let mut want = baton_wire::responses::parse_request(&body)
            .unwrap()
            .messages;
        want.push(reply.message);
        assert_eq!(
            stored(&server, &acme(), name, 2).await,
            want,
            "stream={stream}"
        );
    }
}

/// The usage the upstream reported for each answer is kept with the captured run, under the
/// response's id, so the usage reports cover gateway traffic; a cache hit (the same response)
/// adds nothing.
async fn each_answer_is_counted_once_in_the_usage_reports(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let extra = [("x-baton-run", "usage")];
    let (request, got) = anthropic_tool_conversation(&server, false, &extra).await;
    settled(&server, 2).await;
    let again = call(&server, "/v1/messages", &request, &extra).await;
    assert_eq!(again.cache(), "hit");
    settled(&server, 3).await;
    let query = baton_store::UsageQuery::default();
    let usage = server.store.usage(&acme(), &query).await.unwrap();
    assert_eq!(
        usage.len(),
        2,
        "one record per upstream response: {usage:?}"
    );
    let id = got.json()["id"].as_str().unwrap().to_owned();
    let last = usage
        .iter()
        .find(|u| u.record.response_id.as_deref() == Some(id.as_str()))
        .expect("the last answer's record");
    let reported = baton_wire::Format::Anthropic
        .parse_response(&got.body)
        .unwrap()
        .usage;
    assert_eq!(last.record.usage, reported.priced());
    assert_eq!(last.record.id, format!("gateway:{id}"));
    assert_eq!(
        (last.run.as_str(), last.agent.as_str()),
        ("usage", "gateway")
    );
    assert!(!last.record.estimated);
}

/// How many request messages captures parsed so far: (continued, whole).
async fn reads(server: &TestServer) -> (u64, u64) {
    let text = server.metrics().await;
    let count = |read: &str| -> u64 {
        let prefix = format!("baton_gateway_capture_messages_read_total{{read=\"{read}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map_or_else(|| panic!("no {prefix} in /metrics"), |n| n.parse().unwrap())
    };
    (count("continued"), count("whole"))
}

/// The work of capturing a request does not grow with the conversation: each later request of
/// a conversation is read from where the last capture stopped (its capture parses the message
/// whose `cache_control` mark moved on, as Claude Code moves it, the reply the client sends
/// back and the new question, nothing before), and the run still equals the whole conversation
/// as a direct reading of it has it, a secret redacted. A rewritten conversation is read whole,
/// and branches.
async fn each_request_is_read_from_where_the_last_capture_stopped(backend: Backend) {
    const TURNS: usize = 12;
    let mut turns: Vec<Value> = (0..TURNS)
        .map(|i| json!({"when": {"last_user_contains": format!("step {i}.")}, "reply": {"text": format!("done {i}")}}))
        .collect();
    turns.push(json!({"when": {"last_user_contains": "rewritten"}, "reply": {"text": "again"}}));
    let up = upstream(Value::Array(turns));
    let server = gateway(backend, &up, |_| {}).await;
    let (path, extra) = ("/v1/messages", [("x-baton-run", "long")]);
    let request = |messages: &[Value]| {
        let mut messages = messages.to_vec();
        if let Some(last) = messages.last_mut() {
            last["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        }
        json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "terse", "messages": messages})
    };
    let mut messages: Vec<Value> = Vec::new();
    let mut last = None;
    for i in 0..TURNS {
        let secret = match i {
            5 => " the key is sk-ant-api03-abcDEF1234567890ghijKLMN",
            _ => "",
        };
        let text = format!("step {i}.{secret}");
        messages.push(json!({"role": "user", "content": [{"type": "text", "text": text}]}));
        let got = call(&server, path, &request(&messages), &extra).await;
        assert_eq!(got.status, 200, "{}", got.text());
        // Sequential, as an agent's calls are: the next request comes once this one is kept.
        settled(&server, i as u64 + 1).await;
        let reply = reply_message(path, &got);
        messages.push(baton_wire::anthropic::render_message(&reply));
        last = Some(reply);
    }
    let last_request = request(&messages[..messages.len() - 1]);
    let mut want = direct(path, &last_request, last.unwrap());
    let redacted: usize = want
        .iter_mut()
        .map(baton_import::redact::redact_message)
        .sum();
    assert_eq!(redacted, 1);
    let have = stored(&server, &acme(), "long", want.len()).await;
    assert_eq!(have, want);
    assert!(
        !serde_json::to_string(&have)
            .unwrap()
            .contains("sk-ant-api03")
    );
    // The first two requests were read whole (1 and 3 messages: the second shares no message
    // with the first, whose only one lost its mark); each later one from the question before,
    // which lost its mark: it, the reply sent back and the new question.
    assert_eq!(reads(&server).await, (3 * (TURNS as u64 - 2), 4));

    // The client rewrites its first message: read whole, kept in a branch.
    let mut rewritten = messages.clone();
    rewritten[0] =
        json!({"role": "user", "content": [{"type": "text", "text": "step 0, said otherwise."}]});
    rewritten
        .push(json!({"role": "user", "content": [{"type": "text", "text": "rewritten: go on"}]}));
    let got = call(&server, path, &request(&rewritten), &extra).await;
    assert_eq!(got.status, 200, "{}", got.text());
    captures(&server, "branched", 1).await;
    assert_eq!(
        reads(&server).await,
        (3 * (TURNS as u64 - 2), 4 + rewritten.len() as u64)
    );
    assert_eq!(
        stored(&server, &acme(), "long", want.len()).await,
        want,
        "the first run is kept as it was"
    );
}

/// A conversation whose history holds a server tool's call and result (Anthropic's web search)
/// is captured whole: the blocks baton's model has no variant for are stored as they came (and
/// relayed unchanged). Before, they failed the request's capture, and with it every later one.
async fn a_conversation_that_used_a_server_tool_is_captured_whole(backend: Backend) {
    let up = upstream(script());
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/messages";
    let searched = json!([
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
         "input": {"query": "rust 2024"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "title": "Rust 2024", "url": "https://example.org/r",
             "encrypted_content": "EqgfCioIARgB"}]},
        {"type": "text", "text": "It shipped in February."},
    ]);
    let request = json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
    "tools": [{"type": "web_search_20250305", "name": "web_search"}],
    "messages": [
        {"role": "user", "content": "when did rust 2024 ship?"},
        {"role": "assistant", "content": searched},
        {"role": "user", "content": "now please list the files"},
    ]});
    let got = call(&server, path, &request, &[("x-baton-run", "searched")]).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let want = direct(path, &request, reply_message(path, &got));
    let have = stored(&server, &acme(), "searched", 4).await;
    assert_eq!(have, want);
    assert_eq!(
        baton_wire::anthropic::render_message(&have[1])["content"],
        searched
    );
    settled(&server, 1).await;
}
