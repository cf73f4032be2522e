//! Gateway v2 (issue 18): the Responses API, embeddings, the relayed routes, a faithful relay
//! of headers and query strings, true costs from the vendors' usage fields, a sequential
//! repeat of a stream as a hit, and idempotency records out of reach of `/v1/operations` and
//! of other callers of a shared gateway tenant — each through real HTTP against the scripted
//! upstream on loopback.

use std::sync::Arc;

use baton_core::prices::PriceTable;
use baton_core::usage::Usage;
use baton_core::{TenantId, Timestamp};
use serde_json::{Value, json};

use crate::gateway::{Got, assert_vendor_error, call, gateway, send, upstream};
use crate::on_both_backends;
use crate::support::{Backend, TestServer};

on_both_backends!(
    responses_whole_and_streamed_miss_then_hit,
    a_sequential_repeat_of_a_stream_is_a_hit,
    r18_cache_reads_are_priced_at_the_cache_read_price,
    r18_a_tenant_key_cannot_forge_a_gateway_idempotency_record,
    r18_a_shared_tenant_caller_cannot_squat_another_callers_key,
);

async fn calls(server: &TestServer, tenant: &str) -> Vec<baton_store::CallRecord> {
    server.state.flush_logs().await;
    server
        .store
        .calls(
            &TenantId::new(tenant).unwrap(),
            Timestamp(0),
            Timestamp(i64::MAX),
        )
        .await
        .unwrap()
}

fn responses_body(text: &str, stream: bool) -> Value {
    json!({"model": "gpt-5", "instructions": "Be brief.", "stream": stream, "store": false,
           "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]})
}

async fn responses_whole_and_streamed_miss_then_hit(backend: Backend) {
    let up = upstream(json!([
        {"when": {"last_user_contains": "whole"}, "reply": {"text": "A whole answer.", "usage": {"cache_read": 64, "reasoning": 7}}},
        {"when": {"last_user_contains": "streamed"}, "reply": {"text": "A streamed answer, in pieces.",
            "tool_calls": [{"name": "ls", "input": {"path": "."}}]}},
        {"when": {"last_user_contains": "continue"}, "reply": {"text": "Continued."}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/responses";

    let body = responses_body("whole please", false);
    let first = call(&server, path, &body, &[]).await;
    assert_eq!(
        (first.status, first.cache()),
        (200, "miss"),
        "{}",
        first.text()
    );
    let reply = first.json();
    assert_eq!(reply["object"], "response");
    assert_eq!(reply["output"][0]["content"][0]["text"], "A whole answer.");
    let second = call(&server, path, &body, &[]).await;
    assert_eq!(second.cache(), "hit");
    assert_eq!(first.body, second.body);

    let body = responses_body("streamed please", true);
    let first = call(&server, path, &body, &[]).await;
    assert_eq!(
        (first.status, first.cache()),
        (200, "miss"),
        "{}",
        first.text()
    );
    let text = first.text();
    for event in [
        "event: response.created",
        "event: response.output_text.delta",
        "event: response.function_call_arguments.delta",
    ] {
        assert!(text.contains(event), "{event} missing: {text}");
    }
    assert!(
        text.trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap()
            .starts_with("event: response.completed"),
        "{text}"
    );
    let second = call(&server, path, &body, &[]).await;
    assert_eq!(second.cache(), "hit");
    assert_eq!(first.body, second.body, "the replay is the streamed bytes");

    // `previous_response_id` reaches the upstream as sent, and is part of the key.
    let previous = reply["id"].as_str().unwrap().to_owned();
    let body = json!({"model": "gpt-5", "previous_response_id": previous, "input": "continue"});
    let got = call(&server, path, &body, &[]).await;
    assert_eq!((got.status, got.cache()), (200, "miss"), "{}", got.text());
    let requests = up.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].path, "/v1/responses");
    assert_eq!(requests[2].body["previous_response_id"], previous);

    let log = calls(&server, "acme").await;
    assert_eq!(log.len(), 5);
    assert!(log.iter().all(|c| c.operation == "openai.responses"));
    // The streamed call's usage was read from `response.completed`; the whole one's cached
    // tokens are input, its reasoning output.
    assert!(
        log.iter()
            .all(|c| c.input_tokens > 0 && c.output_tokens > 0),
        "{log:?}"
    );
    assert!(
        log[0].input_tokens >= 64 && log[0].output_tokens >= 7,
        "{log:?}"
    );
    server.stop().await;
}

/// Sends a streamed request and reads it only until `last` (its final event) has arrived, as
/// SDKs do: the next request may follow before the body ends.
async fn call_until(server: &TestServer, path: &str, body: &Value, last: &str) -> (String, String) {
    let mut response = server
        .client
        .post(server.url(path))
        .header("content-type", "application/json")
        .header("x-baton-key", &server.key)
        .header("x-api-key", "sk-provider")
        .header("anthropic-version", "2023-06-01")
        .bearer_auth("sk-provider")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let cache = response.headers()["x-baton-cache"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut text = String::new();
    while !text.contains(last) {
        let chunk = response.chunk().await.unwrap();
        let chunk = chunk.unwrap_or_else(|| panic!("the stream ended before {last}: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    (cache, text)
}

/// Issue 18: sequential streamed repeats were `coalesced` (10 of 10) when the upstream closed
/// its body a little after the final event, and counted as overlapping in `report duplicates`.
async fn a_sequential_repeat_of_a_stream_is_a_hit(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "Streamed, then held open.", "close_delay_ms": 300}},
        {"reply": {"text": "OpenAI, held open too.", "close_delay_ms": 300}},
        {"reply": {"text": "Responses, held open too.", "close_delay_ms": 300}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    for (path, body, last) in [
        (
            "/v1/messages",
            json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": true,
                   "messages": [{"role": "user", "content": "repeat me"}]}),
            "event: message_stop",
        ),
        (
            "/v1/chat/completions",
            json!({"model": "gpt-4o-mini", "stream": true,
                   "messages": [{"role": "user", "content": "repeat me"}]}),
            "data: [DONE]",
        ),
        (
            "/v1/responses",
            responses_body("repeat me", true),
            "event: response.completed",
        ),
    ] {
        let mut outcomes = Vec::new();
        let mut texts = Vec::new();
        for _ in 0..10 {
            let (cache, text) = call_until(&server, path, &body, last).await;
            outcomes.push(cache);
            texts.push(text);
        }
        assert_eq!(outcomes[0], "miss");
        assert!(
            outcomes[1..].iter().all(|o| o == "hit"),
            "{path}: {outcomes:?}"
        );
        assert!(texts.iter().all(|t| *t == texts[0]));
    }
    assert_eq!(up.requests().len(), 3);
    server.state.flush_logs().await;
    let (status, report) = server.get("/v1/reports/duplicates").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["total"]["calls"], 30, "{report}");
    assert_eq!(report["total"]["repeats"], 27, "{report}");
    assert_eq!(report["total"]["coincident"], 0, "{report}");
    assert_eq!(report["total"]["saved_by_coalescing"], 0.0, "{report}");
    server.stop().await;
}

/// Issue 18: a reply with 1.2M cache tokens was logged at $0.000228.
async fn r18_cache_reads_are_priced_at_the_cache_read_price(backend: Backend) {
    let up = upstream(json!([
        {"when": {"last_user_contains": "anthropic whole"}, "reply": {"text": "Read from the cache.",
            "usage": {"cache_read": 1_200_000, "cache_write_5m": 3000, "cache_write_1h": 5000}}},
        {"when": {"last_user_contains": "anthropic streamed"}, "reply": {"text": "Streamed from the cache.",
            "usage": {"cache_read": 1_200_000, "cache_write_1h": 5000}}},
        {"when": {"last_user_contains": "openai streamed"}, "reply": {"text": "Cached and reasoned.",
            "usage": {"cache_read": 1_200_000, "reasoning": 900}}},
        {"when": {"last_user_contains": "responses streamed"}, "reply": {"text": "Responses, cached.",
            "usage": {"cache_read": 1_200_000, "reasoning": 900}}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    let anthropic = |text: &str, stream: bool| {
        json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
               "messages": [{"role": "user", "content": text}]})
    };
    let openai = json!({"model": "gpt-5", "stream": true, "stream_options": {"include_usage": true},
                        "messages": [{"role": "user", "content": "openai streamed"}]});
    let sent = [
        ("/v1/messages", anthropic("anthropic whole", false)),
        ("/v1/messages", anthropic("anthropic streamed", true)),
        ("/v1/chat/completions", openai),
        ("/v1/responses", responses_body("responses streamed", true)),
    ];
    for (path, body) in &sent {
        let got = call(&server, path, body, &[]).await;
        assert_eq!(got.status, 200, "{}", got.text());
        let again = call(&server, path, body, &[]).await;
        assert_eq!(again.cache(), "hit");
    }
    let log = calls(&server, "acme").await;
    assert_eq!(log.len(), 8);
    let table = PriceTable::defaults();
    for pair in log.chunks(2) {
        let (executed, hit) = (&pair[0], &pair[1]);
        let price = table.get(&executed.model).unwrap();
        let cost = executed.cost_usd.unwrap();
        // The cache-read share alone: 1.2M at the cache-read price, not the input price.
        let read_cost = price.cached_input * 1.2;
        let at_input_price = price.input * 1.2;
        assert!(cost >= read_cost, "{executed:?}: {cost} < {read_cost}");
        assert!(
            cost < at_input_price / 2.0,
            "{executed:?}: {cost} priced as input"
        );
        assert!(executed.input_tokens > 1_200_000, "{executed:?}");
        // The hit is logged at what it would have cost: the same.
        assert_eq!(hit.cost_usd, executed.cost_usd);
    }
    // The whole Anthropic reply exactly: fresh input, output, 5-minute and 1-hour writes, reads.
    let first = &log[0];
    let price = table.get("claude-sonnet-4-5").unwrap();
    let fresh = first.input_tokens - 1_200_000 - 8000;
    let expected = price.usage_cost(&Usage {
        input: fresh,
        output: first.output_tokens,
        cache_write_5m: 3000,
        cache_write_1h: 5000,
        cache_read: 1_200_000,
    });
    assert!(
        (first.cost_usd.unwrap() - expected).abs() < 1e-9,
        "{first:?} vs {expected}"
    );
    // And the report counts the hits at that price.
    let (_, report) = server.get("/v1/reports/duplicates").await;
    let saved = report["total"]["saved_by_cache"].as_f64().unwrap();
    let hits: f64 = log
        .iter()
        .skip(1)
        .step_by(2)
        .map(|c| c.cost_usd.unwrap())
        .sum();
    assert!((saved - hits).abs() < 1e-9, "{report}");
    server.stop().await;
}

/// Issue 18: gateway records lived in the tenant's public `/v1/operations` namespace, so any
/// key of the tenant could pre-complete one with a forged result that the victim's call
/// replayed.
async fn r18_a_tenant_key_cannot_forge_a_gateway_idempotency_record(backend: Backend) {
    let up = upstream(json!([{"reply": {"text": "the real answer"}}]));
    let server = gateway(backend, &up, |_| {}).await;
    let attacker = crate::support::make_key(&*server.store, "acme").await;
    let path = "/v1/chat/completions";
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "pay the invoice"}]});
    let forged = json!({"status": 200, "content_type": "application/json",
                        "body": "{\"forged\": true}", "input_tokens": 1});
    let ops = |key: &str| {
        server
            .client
            .post(server.url("/v1/operations"))
            .bearer_auth(&attacker)
            .header("idempotency-key", key)
            .json(&json!({"request": body, "owner": "attacker"}))
    };
    // The gateway's namespace is refused by name…
    for key in [
        "baton.gateway/openai.chat_completions/tenant/order-1",
        "baton.gateway/anything",
    ] {
        let (status, problem) = crate::support::send(ops(key)).await;
        assert_eq!(status, 400, "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("reserved for the gateway"),
            "{problem}"
        );
    }
    // …and the old name is an ordinary operation now, which the attacker may complete.
    let (status, begun) =
        crate::support::send(ops("gateway:openai.chat_completions:order-1")).await;
    assert!(status == 201 || status == 200, "{status} {begun}");
    let fence = begun["fence"].as_u64().unwrap();
    let (status, done) = crate::support::send(
        server
            .client
            .post(server.url("/v1/operations/gateway:openai.chat_completions:order-1/complete"))
            .bearer_auth(&attacker)
            .json(&json!({"fence": fence, "result": forged})),
    )
    .await;
    assert_eq!(status, 200, "{done}");

    // The victim's call runs for real, and its record stays out of the public API.
    let victim = call(&server, path, &body, &[("idempotency-key", "order-1")]).await;
    assert_eq!(
        (victim.status, victim.cache()),
        (200, "miss"),
        "{}",
        victim.text()
    );
    assert!(!victim.headers.contains_key("idempotent-replayed"));
    assert_eq!(
        victim.json()["choices"][0]["message"]["content"],
        "the real answer"
    );
    let again = call(&server, path, &body, &[("idempotency-key", "order-1")]).await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, victim.body);
    let (status, listed) = server.get("/v1/operations").await;
    assert_eq!(status, 200);
    let keys: Vec<&str> = listed["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| op["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["gateway:openai.chat_completions:order-1"],
        "{listed}"
    );
    let (status, _) = server
        .get("/v1/operations/baton.gateway%2Fopenai.chat_completions%2Ftenant%2Forder-1")
        .await;
    assert_eq!(status, 400);
    assert_eq!(up.requests().len(), 1);
    server.stop().await;
}

/// Issue 18: in a shared `--gateway-tenant`, one caller could squat another's
/// `Idempotency-Key`.
async fn r18_a_shared_tenant_caller_cannot_squat_another_callers_key(backend: Backend) {
    let up = upstream(json!([
        {"when": {"last_user_contains": "squat"}, "reply": {"text": "for the squatter"}},
        {"when": {"last_user_contains": "transfer"}, "reply": {"text": "for the owner"}},
        {"when": {"last_user_contains": "transfer"}, "reply": {"text": "for the squatter again"}},
    ]));
    let server = Arc::new(
        gateway(backend, &up, |c| {
            c.gateway_tenant = Some(TenantId::new("shared").unwrap());
        })
        .await,
    );
    let as_caller = |credential: &'static str, text: &'static str| {
        let request = server
            .client
            .post(server.url("/v1/chat/completions"))
            .header("content-type", "application/json")
            .header("idempotency-key", "transfer-7")
            .bearer_auth(credential)
            .body(
                json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
                    .to_string(),
            );
        send(request)
    };
    let content = |got: &Got| got.json()["choices"][0]["message"]["content"].clone();
    // The squatter takes the key first, with another body.
    let squat = as_caller("sk-squatter-000000000000", "squat").await;
    assert_eq!(squat.status, 200, "{}", squat.text());
    // The owner's call is neither refused (422) nor answered with the squatter's record.
    let owner = as_caller("sk-owner-1111111111111111", "transfer").await;
    assert_eq!(
        (owner.status, owner.cache()),
        (200, "miss"),
        "{}",
        owner.text()
    );
    assert_eq!(content(&owner), "for the owner");
    // The squatter repeating the owner's exact request gets its own call, not the owner's record.
    let copy = as_caller("sk-squatter-000000000000", "transfer").await;
    assert_eq!(copy.status, 422, "{}", copy.text());
    assert_vendor_error(&copy, "/v1/chat/completions", 422, "idempotency-key-reused");
    // The owner's repeat replays its own record.
    let again = as_caller("sk-owner-1111111111111111", "transfer").await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(content(&again), "for the owner");
    assert_eq!(up.requests().len(), 2);
    // Neither credential is in what was stored.
    let ops = server
        .store
        .operations(&TenantId::new("shared").unwrap(), None)
        .await
        .unwrap();
    assert_eq!(ops.len(), 2);
    let stored = format!("{ops:?}");
    assert!(!stored.contains("sk-owner") && !stored.contains("sk-squatter"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embeddings_are_cached_and_models_and_count_tokens_relayed() {
    let up = upstream(json!([]));
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    let body = json!({"model": "text-embedding-3-small", "input": ["one text", "another"]});
    let first = call(&server, "/v1/embeddings", &body, &[]).await;
    assert_eq!(
        (first.status, first.cache()),
        (200, "miss"),
        "{}",
        first.text()
    );
    assert_eq!(first.json()["data"].as_array().unwrap().len(), 2);
    let second = call(&server, "/v1/embeddings", &body, &[]).await;
    assert_eq!(second.cache(), "hit");
    assert_eq!(first.body, second.body);

    // Models: OpenAI's list for an OpenAI client, Anthropic's for one that says
    // `anthropic-version`.
    let models = |anthropic: bool| {
        let mut request = server
            .client
            .get(server.url("/v1/models?limit=5"))
            .header("x-baton-key", &server.key)
            .bearer_auth("sk-provider");
        if anthropic {
            request = request.header("anthropic-version", "2023-06-01");
        }
        send(request)
    };
    let openai = models(false).await;
    assert_eq!(openai.status, 200, "{}", openai.text());
    assert_eq!(openai.json()["object"], "list");
    assert!(!openai.headers.contains_key("x-baton-cache"));
    let anthropic = models(true).await;
    assert_eq!(anthropic.json()["data"][0]["type"], "model");
    assert!(anthropic.headers.contains_key("request-id"));

    let count = json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "count me"}]});
    let counted = call(&server, "/v1/messages/count_tokens", &count, &[]).await;
    assert_eq!(counted.status, 200, "{}", counted.text());
    assert!(counted.json()["input_tokens"].as_u64().unwrap() > 0);
    assert!(!counted.headers.contains_key("x-baton-cache"));

    // A relayed route needs the tenant too, and answers baton's errors in the vendor's shape.
    let anonymous = send(
        server
            .client
            .post(server.url("/v1/messages/count_tokens"))
            .header("content-type", "application/json")
            .body(count.to_string()),
    )
    .await;
    assert_vendor_error(&anonymous, "/v1/messages/count_tokens", 401, "unauthorized");

    // A stored response's routes are relayed as they are, the upstream's answer with them
    // (this upstream stores nothing: its own 404, not baton's error).
    let stored = send(
        server
            .client
            .delete(server.url("/v1/responses/resp_123?include=x"))
            .header("x-baton-key", &server.key)
            .bearer_auth("sk-provider"),
    )
    .await;
    assert_eq!(stored.status, 404, "{}", stored.text());
    assert!(!stored.headers.contains_key("x-baton-error"));
    assert!(
        stored
            .text()
            .contains("scripted server: no route /v1/responses/resp_123")
    );

    let requests = up.requests();
    let seen: Vec<(&str, &str, Option<&str>)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.query.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "/v1/embeddings", None),
            ("GET", "/v1/models", Some("limit=5")),
            ("GET", "/v1/models", Some("limit=5")),
            ("POST", "/v1/messages/count_tokens", None),
            ("DELETE", "/v1/responses/resp_123", Some("include=x")),
        ]
    );
    // Only the embeddings calls are model calls in the log.
    let log = calls(&server, "acme").await;
    let ops: Vec<&str> = log.iter().map(|c| c.operation.as_str()).collect();
    assert_eq!(ops, ["openai.embeddings", "openai.embeddings"]);
    assert!(log[0].input_tokens > 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn headers_and_query_strings_are_relayed_both_ways() {
    let up = upstream(json!([
        {"when": {"last_user_contains": "headers"}, "reply": {"text": "ok"}},
        {"when": {"last_user_contains": "limited"}, "reply": {"error": {"status": 429, "retry_after": 3, "message": "slow down"}}},
    ]));
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "headers"}]});
    let extra = [
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("openai-organization", "org-123"),
        ("openai-project", "proj-456"),
        ("x-stainless-lang", "python"),
        ("idempotency-key", "h-1"),
        ("cache-control", "no-store"),
        ("x-request-id", "client-id-1"),
    ];
    let got = call(&server, "/v1/messages?beta=true", &body, &extra).await;
    assert_eq!((got.status, got.cache()), (200, "miss"), "{}", got.text());
    let sent = &up.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.query.as_deref(), Some("beta=true"));
    for (name, value) in [
        ("anthropic-beta", "prompt-caching-2024-07-31"),
        ("anthropic-version", "2023-06-01"),
        ("openai-organization", "org-123"),
        ("openai-project", "proj-456"),
        ("x-stainless-lang", "python"),
    ] {
        assert_eq!(
            sent.headers.get(name).map(String::as_str),
            Some(value),
            "{name}: {sent:?}"
        );
    }
    for name in [
        "x-baton-key",
        "idempotency-key",
        "cache-control",
        "x-request-id",
    ] {
        assert!(
            !sent.headers.contains_key(name),
            "{name} went upstream: {sent:?}"
        );
    }
    assert!(sent.auth);
    // The upstream's headers come back, baton's request id in its own header.
    let upstream_id = got.headers["request-id"].to_str().unwrap();
    assert!(upstream_id.starts_with("req_"), "{:?}", got.headers);
    assert_eq!(
        got.headers["anthropic-ratelimit-requests-remaining"],
        "4999"
    );
    assert_eq!(got.headers["x-baton-request-id"], "client-id-1");
    // A replay did not reach the upstream: none of its headers.
    let again = call(&server, "/v1/messages?beta=true", &body, &extra).await;
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert!(!again.headers.contains_key("request-id"));
    // Without `?beta=true` it is another request.
    let plain = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(
        plain.status,
        500,
        "the script has no turn left: {}",
        plain.text()
    );

    // An upstream error comes back with its retry hints and request id.
    let limited =
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "limited"}]});
    let got = call(&server, "/v1/chat/completions", &limited, &[]).await;
    assert_eq!(got.status, 429);
    assert_eq!(got.headers["retry-after"], "3");
    assert_eq!(got.headers["x-should-retry"], "true");
    assert!(
        got.headers["x-request-id"]
            .to_str()
            .unwrap()
            .starts_with("req_")
    );
    assert_ne!(
        got.headers["x-request-id"],
        got.headers["x-baton-request-id"]
    );
    assert_eq!(got.json()["error"]["message"], "slow down");
    assert!(
        !got.headers.contains_key("x-baton-error"),
        "the upstream's own error"
    );
    server.stop().await;
}

/// `baton serve --prices FILE`: the call log costs calls at the server's table, the one
/// `report usage --prices` reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_call_log_prices_at_the_servers_table() {
    let up = upstream(json!([
        {"reply": {"text": "cached", "usage": {"cache_read": 1_000_000}}},
    ]));
    let table = PriceTable::parse(
        "[models.claude-sonnet-4-5]\ninput = 0.0\ncached_input = 2.0\ncache_write = 0.0\noutput = 0.0\n",
    )
    .unwrap();
    let server = gateway(Backend::Sqlite, &up, |c| c.prices = table).await;
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 8,
                      "messages": [{"role": "user", "content": "price me"}]});
    let got = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let log = calls(&server, "acme").await;
    assert_eq!(log[0].cost_usd, Some(2.0), "{log:?}");
    server.stop().await;
}
