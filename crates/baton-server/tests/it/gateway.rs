//! The gateway (`POST /v1/chat/completions`, `POST /v1/messages`) in front of a scripted
//! upstream on loopback (`baton_provider::scripted::ScriptedServer`, which records every request
//! it gets and refuses any its script has no turn for): cache hits and misses, streamed and
//! not, in-flight dedup, `Cache-Control`, `Idempotency-Key`, upstream failures, and the
//! provider's key kept out of everything baton writes.

use std::sync::Arc;
use std::time::Duration;

use baton_core::{TenantId, Timestamp};
use baton_provider::scripted::{Script, ScriptedServer};
use baton_server::Config;
use bytes::Bytes;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer};

/// The provider credential callers send; it must never be kept by baton.
const PROVIDER_KEY: &str = "sk-provider-SECRET-0123456789abcdef";

on_both_backends!(
    json_miss_then_hit,
    streams_miss_then_replay,
    identical_concurrent_requests_reach_the_upstream_once,
    no_cache_and_no_store,
    idempotency_keys_replay_refuse_and_conflict,
    upstream_errors_pass_through_and_are_not_cached,
    the_provider_key_is_never_kept,
);

/// A scripted upstream answering `turns`.
pub fn upstream(turns: Value) -> ScriptedServer {
    let script = Script::from_json(&json!({ "turns": turns }).to_string()).unwrap();
    ScriptedServer::start(script).unwrap()
}

/// A baton server whose gateway forwards to `upstream`.
pub async fn gateway(
    backend: Backend,
    upstream: &ScriptedServer,
    tweak: impl FnOnce(&mut Config),
) -> TestServer {
    let mut config = Config {
        upstream_openai: Some(upstream.openai_url()),
        upstream_anthropic: Some(upstream.anthropic_url()),
        upstream_timeout: Duration::from_secs(10),
        ..Config::default()
    };
    tweak(&mut config);
    TestServer::with_config(backend, config).await
}

fn openai_body(text: &str) -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
}

fn anthropic_body(text: &str, stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "stream": stream,
           "messages": [{"role": "user", "content": text}]})
}

/// What a gateway call answered.
pub struct Got {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn cache(&self) -> &str {
        self.headers
            .get("x-baton-cache")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// POSTs `body` to `path` as tenant `acme` with the provider key and `extra` headers.
pub async fn call(server: &TestServer, path: &str, body: &Value, extra: &[(&str, &str)]) -> Got {
    let mut request = server
        .client
        .post(server.url(path))
        .header("content-type", "application/json")
        .header("x-baton-key", &server.key)
        .body(body.to_string());
    request = match path {
        p if p.starts_with("/v1/messages") => request
            .header("x-api-key", PROVIDER_KEY)
            .header("anthropic-version", "2023-06-01"),
        _ => request.bearer_auth(PROVIDER_KEY),
    };
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    Got {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.bytes().await.unwrap(),
    }
}

/// Sends, returning what came back.
pub async fn send(request: reqwest::RequestBuilder) -> Got {
    let response = request.send().await.unwrap();
    Got {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        body: response.bytes().await.unwrap(),
    }
}

/// Asserts `got` is an error baton raised itself, of `kind` with `status`, in the error shape
/// of the vendor `path` belongs to, its message naming what was wrong.
#[track_caller]
pub fn assert_vendor_error(got: &Got, path: &str, status: u16, kind: &str) {
    assert_eq!(got.status, status, "{}", got.text());
    assert_eq!(got.headers["x-baton-error"], kind, "{}", got.text());
    assert!(got.headers.contains_key("x-baton-request-id"));
    assert!(
        got.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let body = got.json();
    let message = match path {
        "/v1/messages" | "/v1/messages/count_tokens" => {
            assert_eq!(body["type"], "error", "{body}");
            assert!(body["error"]["type"].is_string(), "{body}");
            body["error"]["message"].clone()
        }
        _ => {
            assert_eq!(body["error"]["code"], kind, "{body}");
            assert!(body["error"]["type"].is_string(), "{body}");
            body["error"]["message"].clone()
        }
    };
    let message = message.as_str().unwrap_or_default();
    assert!(
        message.starts_with("baton: ") && message.len() > 20,
        "{body}"
    );
}

async fn metrics(server: &TestServer) -> String {
    server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn calls(server: &TestServer) -> Vec<baton_store::CallRecord> {
    // The gateway writes its call log in the background: what was answered is written by now.
    server.state.flush_logs().await;
    server
        .store
        .calls(
            &TenantId::new("acme").unwrap(),
            Timestamp(0),
            Timestamp(i64::MAX),
        )
        .await
        .unwrap()
}

async fn json_miss_then_hit(backend: Backend) {
    let up = upstream(json!([{"reply": {"text": "Hello there."}}]));
    let server = gateway(backend, &up, |_| {}).await;
    let body = openai_body("say hello");
    let first = call(&server, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.cache(), "miss");
    assert_eq!(
        first.json()["choices"][0]["message"]["content"],
        "Hello there."
    );
    assert!(
        first.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let second = call(&server, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(second.status, 200, "{}", second.text());
    assert_eq!(second.cache(), "hit");
    assert_eq!(first.body, second.body, "a hit must be the stored bytes");

    // One upstream call, which got the body unchanged and the caller's own credential.
    let requests = up.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body, body);
    assert!(requests[0].auth, "the provider key was not passed on");

    // The call log has both, with the model and the upstream's usage.
    let log = calls(&server).await;
    let outcomes: Vec<&str> = log.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["executed", "cache_hit"]);
    assert!(
        log.iter()
            .all(|c| c.model == "gpt-4o-mini" && c.input_tokens > 0 && c.output_tokens > 0)
    );
    assert_eq!(log[0].operation, "openai.chat_completions");

    let text = metrics(&server).await;
    assert!(
        text.contains(r#"baton_cache_requests_total{outcome="hit"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"baton_cache_requests_total{outcome="miss"} 1"#),
        "{text}"
    );
    let saved = format!(
        r#"baton_tokens_saved_total{{source="cache"}} {}"#,
        log[1].input_tokens
    );
    assert!(text.contains(&saved), "{text}");
    server.stop().await;
}

async fn streams_miss_then_replay(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "Streaming from Anthropic, in several pieces of text."}},
        {"reply": {"text": "Streaming from OpenAI.", "tool_calls": [{"name": "ls", "input": {"path": "."}}]}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;

    let body = anthropic_body("stream me something", true);
    let first = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.cache(), "miss");
    assert!(
        first.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(
        first.text().contains("event: message_stop"),
        "{}",
        first.text()
    );
    let second = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(second.cache(), "hit");
    assert!(
        second.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(
        first.body, second.body,
        "the replay must be the streamed bytes"
    );
    // The same body without `stream` is another request (a JSON answer, not a stream).
    assert_eq!(up.requests().len(), 1);

    let body = json!({"model": "gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "list the files"}],
                      "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]});
    let first = call(&server, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(
        (first.status, first.cache()),
        (200, "miss"),
        "{}",
        first.text()
    );
    assert!(
        first.text().trim_end().ends_with("data: [DONE]"),
        "{}",
        first.text()
    );
    let second = call(&server, "/v1/chat/completions", &body, &[]).await;
    assert_eq!(second.cache(), "hit");
    assert_eq!(first.body, second.body);
    assert_eq!(up.requests().len(), 2);

    // The log has the streamed calls' usage too.
    let log = calls(&server).await;
    assert_eq!(log.len(), 4);
    assert!(
        log.iter()
            .all(|c| c.input_tokens > 0 && c.output_tokens > 0),
        "{log:?}"
    );
    server.stop().await;
}

async fn identical_concurrent_requests_reach_the_upstream_once(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "Only once.", "delay_ms": 400}},
        {"reply": {"text": "Only once, streamed.", "delay_ms": 400}},
    ]));
    let server = Arc::new(gateway(backend, &up, |_| {}).await);
    for (path, body) in [
        ("/v1/chat/completions", openai_body("the same question")),
        ("/v1/messages", anthropic_body("the same question", true)),
    ] {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let server = server.clone();
                let body = body.clone();
                tokio::spawn(async move { call(&server, path, &body, &[]).await })
            })
            .collect();
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        assert!(
            answers.iter().all(|a| a.status == 200),
            "{}",
            answers[0].text()
        );
        assert!(
            answers.iter().all(|a| a.body == answers[0].body),
            "every caller gets the same bytes"
        );
        let misses = answers.iter().filter(|a| a.cache() == "miss").count();
        assert_eq!(misses, 1, "exactly one leader");
        assert!(
            answers
                .iter()
                .all(|a| matches!(a.cache(), "miss" | "coalesced" | "hit"))
        );
    }
    assert_eq!(
        up.requests().len(),
        2,
        "the upstream was called once per distinct request"
    );
    let log = calls(&server).await;
    assert_eq!(
        log.iter()
            .filter(|c| c.outcome.as_str() == "executed")
            .count(),
        2
    );
    assert_eq!(log.len(), 100);
}

async fn no_cache_and_no_store(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "one"}},
        {"reply": {"text": "two"}},
        {"reply": {"text": "three"}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    let body = openai_body("count");
    let path = "/v1/chat/completions";
    // no-store: answered, not kept.
    let first = call(&server, path, &body, &[("cache-control", "no-store")]).await;
    assert_eq!((first.status, first.cache()), (200, "miss"));
    let second = call(&server, path, &body, &[]).await;
    assert_eq!(second.cache(), "miss");
    assert_eq!(second.json()["choices"][0]["message"]["content"], "two");
    let third = call(&server, path, &body, &[]).await;
    assert_eq!(third.cache(), "hit");
    assert_eq!(third.body, second.body);
    // no-cache: fresh processing, stored for the next caller.
    let fresh = call(&server, path, &body, &[("cache-control", "No-Cache")]).await;
    assert_eq!(fresh.cache(), "bypass");
    assert_eq!(fresh.json()["choices"][0]["message"]["content"], "three");
    let after = call(&server, path, &body, &[]).await;
    assert_eq!(after.cache(), "hit");
    assert_eq!(after.body, fresh.body);
    assert_eq!(up.requests().len(), 3);
    let text = metrics(&server).await;
    assert!(
        text.contains(r#"baton_cache_requests_total{outcome="bypass"} 1"#),
        "{text}"
    );
    server.stop().await;
}

async fn idempotency_keys_replay_refuse_and_conflict(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "first"}},
        {"reply": {"text": "slow", "delay_ms": 800}},
    ]));
    let server = Arc::new(gateway(backend, &up, |_| {}).await);
    let path = "/v1/chat/completions";
    let body = openai_body("charge the card");
    let key = [
        ("idempotency-key", "order-42"),
        ("cache-control", "no-store"),
    ];
    let first = call(&server, path, &body, &key).await;
    assert_eq!(
        (first.status, first.cache()),
        (200, "miss"),
        "{}",
        first.text()
    );
    // The same key and body: the recorded response, though the cache kept nothing.
    let again = call(&server, path, &body, &key).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, first.body);
    // The same key with another body: 422.
    let other = call(&server, path, &openai_body("charge it twice"), &key).await;
    assert_eq!(other.status, 422, "{}", other.text());
    assert_vendor_error(&other, path, 422, "idempotency-key-reused");
    assert_eq!(up.requests().len(), 1);

    // The same key while the first is still running: 409.
    let slow = openai_body("slow one");
    let running = {
        let server = server.clone();
        let slow = slow.clone();
        tokio::spawn(
            async move { call(&server, path, &slow, &[("idempotency-key", "order-43")]).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    let clash = call(&server, path, &slow, &[("idempotency-key", "order-43")]).await;
    assert_eq!(clash.status, 409, "{}", clash.text());
    assert_vendor_error(&clash, path, 409, "idempotency-in-progress");
    let done = running.await.unwrap();
    assert_eq!(done.status, 200, "{}", done.text());
    assert_eq!(up.requests().len(), 2);
}

async fn upstream_errors_pass_through_and_are_not_cached(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"error": {"status": 500, "message": "upstream exploded"}}},
        {"reply": {"error": {"status": 429, "retry_after": 7}}},
        {"reply": {"text": "fine now"}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    let body = anthropic_body("try", false);
    let first = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(first.status, 500);
    assert_eq!(
        first.json()["error"]["message"],
        "upstream exploded",
        "{}",
        first.text()
    );
    assert_eq!(first.json()["type"], "error", "the vendor's own error body");
    let second = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(second.status, 429);
    assert_eq!(second.headers["retry-after"], "7");
    let third = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(
        (third.status, third.cache()),
        (200, "miss"),
        "{}",
        third.text()
    );
    let fourth = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!((fourth.status, fourth.cache()), (200, "hit"));
    assert_eq!(up.requests().len(), 3);
    let log = calls(&server).await;
    let outcomes: Vec<&str> = log.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["error", "error", "executed", "cache_hit"]);
    server.stop().await;
}

async fn the_provider_key_is_never_kept(backend: Backend) {
    let up = upstream(json!([
        {"reply": {"text": "a"}},
        {"reply": {"text": "b"}},
        {"reply": {"error": {"status": 401, "message": "bad key"}}},
    ]));
    let server = gateway(backend, &up, |_| {}).await;
    let path = "/v1/chat/completions";
    call(&server, path, &openai_body("one"), &[]).await;
    call(&server, path, &openai_body("one"), &[]).await;
    call(
        &server,
        "/v1/messages",
        &anthropic_body("two", true),
        &[("idempotency-key", "k-1")],
    )
    .await;
    call(&server, path, &openai_body("three"), &[]).await;

    let log = calls(&server).await;
    assert_eq!(log.len(), 4);
    assert!(!format!("{log:?}").contains(PROVIDER_KEY));
    let acme = TenantId::new("acme").unwrap();
    let ops = server.store.operations(&acme, None).await.unwrap();
    assert_eq!(ops.len(), 1);
    assert!(!format!("{ops:?}").contains(PROVIDER_KEY));
    assert!(!metrics(&server).await.contains(PROVIDER_KEY));
    // Nothing anywhere in the database holds it.
    match backend {
        Backend::Sqlite => {}
        Backend::Postgres => {
            let (client, conn) =
                tokio_postgres::connect(&crate::support::pg_url(), tokio_postgres::NoTls)
                    .await
                    .unwrap();
            tokio::spawn(conn);
            let tables = client
                .query(
                    "SELECT table_schema, table_name FROM information_schema.tables \
                     WHERE table_schema LIKE 'baton_srv_%' AND table_type = 'BASE TABLE'",
                    &[],
                )
                .await
                .unwrap();
            for row in tables {
                let (schema, table): (String, String) = (row.get(0), row.get(1));
                let found = client
                    .query_one(
                        &format!(
                            "SELECT count(*) FROM \"{schema}\".\"{table}\" t WHERE t::text LIKE $1"
                        ),
                        &[&format!("%{PROVIDER_KEY}%")],
                    )
                    .await;
                if let Ok(found) = found {
                    assert_eq!(
                        found.get::<_, i64>(0),
                        0,
                        "the provider key in {schema}.{table}"
                    );
                }
            }
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_provider_key_is_not_in_the_sqlite_files() {
    let up = upstream(json!([{"reply": {"text": "a"}}, {"reply": {"text": "b", "delay_ms": 10}}]));
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn baton_store::Store> = Arc::new(
        baton_sqlite::SqliteStore::open(&dir.path().join("baton.db"))
            .await
            .unwrap(),
    );
    let key = crate::support::make_key(&*store, "acme").await;
    let config = Config {
        upstream_openai: Some(up.openai_url()),
        upstream_anthropic: Some(up.anthropic_url()),
        ..Config::default()
    };
    let state = baton_server::AppState::new(store, config).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(baton_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    for (path, body, idem) in [
        ("/v1/chat/completions", openai_body("x"), "i-1"),
        ("/v1/chat/completions", openai_body("x"), "i-1"),
        ("/v1/messages", anthropic_body("y", true), "i-2"),
    ] {
        let response = client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("x-baton-key", &key)
            .header("idempotency-key", idem)
            .header("x-api-key", PROVIDER_KEY)
            .bearer_auth(PROVIDER_KEY)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
    }
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes
            .windows(PROVIDER_KEY.len())
            .any(|w| w == PROVIDER_KEY.as_bytes());
        assert!(!found, "the provider key is in {}", path.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hanging_upstream_is_a_504_and_garbage_a_502() {
    let up = upstream(json!([
        {"when": {"last_user_contains": "hang"}, "reply": {"text": "too late", "delay_ms": 5000}},
        {"when": {"last_user_contains": "garbage"}, "reply": {"raw": "this is not json"}},
        {"when": {"last_user_contains": "half"}, "reply": {"text": "cut off in the middle", "truncate": true}},
        {"when": {"last_user_contains": "broken stream"}, "reply": {"text": "cut off", "truncate": true}},
        {"when": {"last_user_contains": "broken stream"}, "reply": {"text": "whole now"}},
    ]));
    let server = gateway(Backend::Sqlite, &up, |c| {
        c.upstream_timeout = Duration::from_millis(300);
    })
    .await;
    let hung = call(&server, "/v1/chat/completions", &openai_body("hang"), &[]).await;
    assert_eq!(hung.status, 504, "{}", hung.text());
    assert_vendor_error(&hung, "/v1/chat/completions", 504, "upstream-timeout");

    let garbage = call(
        &server,
        "/v1/chat/completions",
        &openai_body("garbage"),
        &[],
    )
    .await;
    assert_vendor_error(&garbage, "/v1/chat/completions", 502, "upstream-malformed");
    let half = call(&server, "/v1/messages", &anthropic_body("half", false), &[]).await;
    assert_vendor_error(&half, "/v1/messages", 502, "upstream-malformed");

    // A stream that breaks off: its leader has its head already, and gets the vendor's error
    // event last; nothing is cached, so the next identical call goes upstream again.
    let body = anthropic_body("broken stream", true);
    let broken = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!(broken.status, 200);
    let text = broken.text();
    assert!(!text.contains("event: message_stop"), "{text}");
    assert!(
        text.trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap()
            .starts_with("event: error"),
        "{text}"
    );
    let whole = call(&server, "/v1/messages", &body, &[]).await;
    assert_eq!((whole.status, whole.cache()), (200, "miss"));
    assert!(whole.text().contains("event: message_stop"));

    // The server is still up.
    let health = server
        .client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_credentials_and_bad_requests() {
    let up = upstream(json!([
        {"reply": {"text": "for key A"}},
        {"reply": {"text": "for key B"}},
    ]));
    // No x-baton-key and no gateway tenant: 401.
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    let anonymous = server
        .client
        .post(server.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .bearer_auth(PROVIDER_KEY)
        .body(openai_body("hi").to_string());
    let got = send(anonymous).await;
    assert_vendor_error(&got, "/v1/chat/completions", 401, "unauthorized");
    let bad_key = server
        .client
        .post(server.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("x-baton-key", "bk_nope_nope")
        .body(openai_body("hi").to_string());
    assert_vendor_error(
        &send(bad_key).await,
        "/v1/chat/completions",
        401,
        "unauthorized",
    );
    // Bad bodies.
    let raw = |ct: &'static str, body: &'static str| {
        send(
            server
                .client
                .post(server.url("/v1/chat/completions"))
                .header("content-type", ct)
                .header("x-baton-key", &server.key)
                .body(body),
        )
    };
    assert_vendor_error(
        &raw("text/plain", "{}").await,
        "/v1/chat/completions",
        415,
        "unsupported-media-type",
    );
    assert_vendor_error(
        &raw("application/json", "{\"model\":").await,
        "/v1/chat/completions",
        400,
        "invalid-json",
    );
    assert_vendor_error(
        &raw("application/json", "[1, 2]").await,
        "/v1/chat/completions",
        400,
        "invalid-json",
    );
    assert!(up.requests().is_empty());
    server.stop().await;

    // No upstream configured: 503 naming the flag.
    let server = TestServer::start(Backend::Sqlite).await;
    let got = call(&server, "/v1/messages", &anthropic_body("hi", false), &[]).await;
    assert_vendor_error(&got, "/v1/messages", 503, "upstream-not-configured");
    assert!(
        got.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--upstream-anthropic")
    );
    server.stop().await;

    // A gateway tenant: callers without a baton key share answers only with callers holding
    // the same provider credential.
    let server = gateway(Backend::Sqlite, &up, |c| {
        c.gateway_tenant = Some(TenantId::new("shared").unwrap());
    })
    .await;
    let as_provider_key = |key: &'static str| {
        let request = server
            .client
            .post(server.url("/v1/chat/completions"))
            .header("content-type", "application/json")
            .bearer_auth(key)
            .body(openai_body("shared question").to_string());
        async move {
            let response = request.send().await.unwrap();
            let cache = response.headers()["x-baton-cache"]
                .to_str()
                .unwrap()
                .to_owned();
            let body: Value = response.json().await.unwrap();
            (cache, body["choices"][0]["message"]["content"].clone())
        }
    };
    assert_eq!(
        as_provider_key("sk-key-A-000000000").await,
        ("miss".to_owned(), json!("for key A"))
    );
    assert_eq!(
        as_provider_key("sk-key-A-000000000").await,
        ("hit".to_owned(), json!("for key A"))
    );
    assert_eq!(
        as_provider_key("sk-key-B-111111111").await,
        ("miss".to_owned(), json!("for key B"))
    );
    assert_eq!(up.requests().len(), 2);
    server.stop().await;
}
