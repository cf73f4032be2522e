//! One upstream execution for many identical calls; hits, fresh processing, errors, corrupt
//! entries, tenants and expired leases.

use std::sync::Arc;
use std::time::Duration;

use baton_cache::{Answer, Cache, CachedProvider, CallError, CallPolicy, CallRequest};
use baton_core::key::RequestKey;
use baton_core::{Message, Role, TenantId, Timestamp};
use baton_provider::scripted::{Script, ScriptedServer};
use baton_provider::{Provider, Request, openai};
use baton_sqlite::SqliteStore;
use baton_store::{CallOutcome, Flight, Store};
use serde_json::json;

struct Setup {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    store: Arc<dyn Store>,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
    Setup {
        _dir: dir,
        path,
        store,
    }
}

fn server(turns: serde_json::Value) -> ScriptedServer {
    ScriptedServer::start(Script::from_json(&json!({ "turns": turns }).to_string()).unwrap())
        .unwrap()
}

fn client(server: &ScriptedServer) -> Arc<dyn Provider> {
    let mut config = openai::Config::new("gpt-4o-mini");
    config.base_url = server.openai_url();
    config.max_retries = 0;
    Arc::new(openai::Client::new(config).unwrap())
}

fn question(text: &str) -> Request {
    Request {
        model: String::new(),
        system: None,
        messages: vec![Message::text(Role::User, text)],
        tools: vec![],
        max_tokens: 64,
        temperature: None,
    }
}

fn text_of(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            baton_core::ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

async fn log(store: &Arc<dyn Store>, tenant: &TenantId) -> Vec<CallOutcome> {
    store
        .calls(tenant, Timestamp(0), Timestamp(i64::MAX))
        .await
        .unwrap()
        .iter()
        .map(|r| r.outcome)
        .collect()
}

fn count(outcomes: &[CallOutcome], which: CallOutcome) -> usize {
    outcomes.iter().filter(|o| **o == which).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_identical_requests_make_one_upstream_call() {
    let s = setup().await;
    let upstream = server(json!([{"reply": {"delay_ms": 500, "text": "The answer is 42."}}]));
    let tenant = TenantId::default_tenant();
    let cache = Arc::new(Cache::new(s.store.clone(), tenant.clone()));
    let provider = Arc::new(CachedProvider::new(
        client(&upstream),
        cache.clone(),
        CallPolicy::default(),
    ));
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let provider = provider.clone();
        tasks.push(tokio::spawn(async move {
            let mut streamed = String::new();
            let (response, outcome) = provider
                .send_traced(&question("What is the answer?"), &mut |d| {
                    if let baton_provider::Delta::Text(t) = d {
                        streamed.push_str(&t);
                    }
                })
                .await
                .unwrap();
            assert_eq!(
                streamed,
                text_of(&response.message),
                "every caller sees the text"
            );
            (text_of(&response.message), outcome)
        }));
    }
    for task in tasks {
        let (text, _) = task.await.unwrap();
        assert_eq!(text, "The answer is 42.");
    }
    assert_eq!(
        upstream.requests().len(),
        1,
        "exactly one upstream execution"
    );
    let outcomes = log(&s.store, &tenant).await;
    assert_eq!(outcomes.len(), 1000, "every caller's call is logged");
    assert_eq!(count(&outcomes, CallOutcome::Executed), 1);
    assert_eq!(
        count(&outcomes, CallOutcome::Executed)
            + count(&outcomes, CallOutcome::Coalesced)
            + count(&outcomes, CallOutcome::CacheHit),
        1000
    );

    // Later, the same request is a cache hit, with the tokens and cost of the answer.
    let (_, outcome) = provider
        .send_traced(&question("What is the answer?"), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(outcome, CallOutcome::CacheHit);
    let last = s
        .store
        .calls(&tenant, Timestamp(0), Timestamp(i64::MAX))
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(last.outcome, CallOutcome::CacheHit);
    assert!(
        last.input_tokens > 0 && last.cost_usd.unwrap() > 0.0,
        "{last:?}"
    );
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fresh_processing_skips_the_read_and_no_store_keeps_nothing() {
    let s = setup().await;
    let upstream = server(json!([
        {"reply": {"text": "first"}},
        {"reply": {"text": "second"}},
        {"reply": {"text": "third"}},
        {"reply": {"text": "fourth"}}
    ]));
    let tenant = TenantId::default_tenant();
    let cache = Arc::new(Cache::new(s.store.clone(), tenant.clone()));
    let send = |policy: CallPolicy| {
        let provider = CachedProvider::new(client(&upstream), cache.clone(), policy);
        async move {
            let (r, o) = provider
                .send_traced(&question("q"), &mut |_| {})
                .await
                .unwrap();
            (text_of(&r.message), o)
        }
    };
    let no_store = CallPolicy {
        no_store: true,
        ..CallPolicy::default()
    };
    assert_eq!(
        send(no_store.clone()).await,
        ("first".into(), CallOutcome::Executed)
    );
    // Nothing was kept: the next call goes upstream and is stored.
    assert_eq!(
        send(CallPolicy::default()).await,
        ("second".into(), CallOutcome::Executed)
    );
    assert_eq!(
        send(CallPolicy::default()).await,
        ("second".into(), CallOutcome::CacheHit)
    );
    // Fresh processing goes upstream although an entry exists, and replaces it.
    let fresh = CallPolicy {
        no_cache: true,
        ..CallPolicy::default()
    };
    assert_eq!(send(fresh).await, ("third".into(), CallOutcome::Executed));
    assert_eq!(
        send(CallPolicy::default()).await,
        ("third".into(), CallOutcome::CacheHit)
    );
    assert_eq!(upstream.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_error_reaches_every_follower_and_is_never_cached() {
    let s = setup().await;
    let upstream = server(json!([
        {"reply": {"delay_ms": 300, "error": {"status": 503, "message": "overloaded"}}},
        {"reply": {"text": "recovered"}}
    ]));
    let tenant = TenantId::default_tenant();
    let cache = Arc::new(Cache::new(s.store.clone(), tenant.clone()));
    let provider = Arc::new(CachedProvider::new(
        client(&upstream),
        cache,
        CallPolicy::default(),
    ));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let provider = provider.clone();
        tasks.push(tokio::spawn(async move {
            provider.send(&question("q"), &mut |_| {}).await
        }));
    }
    for task in tasks {
        let err = task.await.unwrap().unwrap_err();
        assert!(
            matches!(err, baton_provider::Error::Status { status: 503, .. }),
            "the follower gets the leader's error as the provider's own: {err}"
        );
    }
    assert_eq!(upstream.requests().len(), 1);
    assert_eq!(count(&log(&s.store, &tenant).await, CallOutcome::Error), 20);
    // The error was not stored: the next call executes.
    let ok = provider.send(&question("q"), &mut |_| {}).await.unwrap();
    assert_eq!(text_of(&ok.message), "recovered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_entry_is_a_reported_miss_and_never_served() {
    let s = setup().await;
    let upstream = server(json!([
        {"reply": {"text": "original"}},
        {"reply": {"text": "recomputed"}},
        {"reply": {"text": "third"}}
    ]));
    let tenant = TenantId::default_tenant();
    let cache = Arc::new(Cache::new(s.store.clone(), tenant.clone()));
    let provider = CachedProvider::new(client(&upstream), cache.clone(), CallPolicy::default());
    provider.send(&question("q"), &mut |_| {}).await.unwrap();
    let conn = rusqlite_conn(&s.path);
    conn.execute("UPDATE cache_entries SET body = X'7b7d'", [])
        .unwrap();
    let again = provider.send(&question("q"), &mut |_| {}).await.unwrap();
    assert_eq!(text_of(&again.message), "recomputed");
    assert_eq!(cache.corrupt_entries(), 1);
    // A body that matches its checksum but is not a result of this type is not served either.
    let digest = {
        use sha2_shim::digest;
        digest(b"[1,2,3]")
    };
    conn.execute(
        "UPDATE cache_entries SET body = X'5b312c322c335d', body_sha256 = ?1",
        [digest.to_vec()],
    )
    .unwrap();
    let third = provider.send(&question("q"), &mut |_| {}).await.unwrap();
    assert_eq!(text_of(&third.message), "third");
    assert_eq!(cache.corrupt_entries(), 2);
}

mod sha2_shim {
    pub fn digest(bytes: &[u8]) -> [u8; 32] {
        baton_store::cache::body_digest(bytes)
    }
}

fn rusqlite_conn(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_identical_request_neither_reads_nor_shares_the_entry() {
    let s = setup().await;
    let upstream = server(json!([
        {"reply": {"text": "for a"}},
        {"reply": {"text": "for b"}}
    ]));
    let (a, b) = (TenantId::new("a").unwrap(), TenantId::new("b").unwrap());
    let for_a = CachedProvider::new(
        client(&upstream),
        Arc::new(Cache::new(s.store.clone(), a.clone())),
        CallPolicy::default(),
    );
    let for_b = CachedProvider::new(
        client(&upstream),
        Arc::new(Cache::new(s.store.clone(), b.clone())),
        CallPolicy::default(),
    );
    let ra = for_a.send(&question("q"), &mut |_| {}).await.unwrap();
    let rb = for_b.send(&question("q"), &mut |_| {}).await.unwrap();
    assert_eq!(
        (text_of(&ra.message), text_of(&rb.message)),
        ("for a".into(), "for b".into())
    );
    // B holding A's exact key still reads nothing.
    let a_key = s
        .store
        .calls(&a, Timestamp(0), Timestamp(i64::MAX))
        .await
        .unwrap()[0]
        .request_hash;
    assert_eq!(
        s.store.cache_get(&b, &a_key).await.unwrap(),
        baton_store::Lookup::Miss
    );
    // A policy hook refuses before anything is read or sent.
    let limited = Cache::new(s.store.clone(), b.clone()).with_policy(Arc::new(
        baton_cache::AllowOperations(vec!["anthropic.messages".into()]),
    ));
    let body = json!({"model": "m"});
    let versions = Default::default();
    let request = CallRequest {
        operation: "openai.chat_completions",
        body: &body,
        model: "m",
        versions: &versions,
        documents: &[],
    };
    let err = limited
        .call(&request, &CallPolicy::default(), || async {
            Ok::<_, std::io::Error>(Answer {
                value: 1,
                model: "m".into(),
                usage: baton_core::usage::Usage {
                    input: 1,
                    output: 1,
                    ..Default::default()
                },
                storable: true,
            })
        })
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Denied(_)), "{err}");
    assert!(
        err.to_string()
            .contains("may not call openai.chat_completions"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_named_errors() {
    let s = setup().await;
    let cache = Cache::new(s.store.clone(), TenantId::default_tenant());
    let versions = Default::default();
    let not_an_object = json!(["a"]);
    let request = CallRequest {
        operation: "op",
        body: &not_an_object,
        model: "m",
        versions: &versions,
        documents: &[],
    };
    let work = || async {
        Ok::<_, std::io::Error>(Answer {
            value: 1,
            model: "m".into(),
            usage: baton_core::usage::Usage {
                input: 1,
                output: 1,
                ..Default::default()
            },
            storable: true,
        })
    };
    let err = cache
        .call(&request, &CallPolicy::default(), work)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expected an object"), "{err}");
    let body = json!({});
    let request = CallRequest {
        body: &body,
        ..request
    };
    let zero = CallPolicy {
        ttl: Some(Duration::ZERO),
        ..CallPolicy::default()
    };
    let err = cache.call(&request, &zero, work).await.unwrap_err();
    assert!(
        err.to_string().contains("TTL must be more than zero"),
        "{err}"
    );
    let err = Cache::new(s.store.clone(), TenantId::default_tenant())
        .with_ttl(Some("op"), Duration::ZERO)
        .err()
        .unwrap();
    assert!(err.to_string().contains("TTL"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_holders_expired_lease_lets_one_waiter_take_over() {
    let s = setup().await;
    let tenant = TenantId::default_tenant();
    let upstream = server(json!([{"reply": {"text": "taken over"}}]));
    let provider = client(&upstream);
    let cache = Arc::new(
        Cache::new(s.store.clone(), tenant.clone())
            .with_lease(Duration::from_secs(5))
            .unwrap(),
    );
    // Another process claimed the flight with a short lease, then died without releasing it.
    let request = question("q");
    let body = provider.request_body(&request);
    let key: RequestKey = cache
        .key(&CallRequest {
            operation: provider.operation(),
            body: &body,
            model: provider.model(),
            // What CachedProvider declares: the endpoint that answers.
            versions: &std::collections::BTreeMap::from([(
                "endpoint".to_owned(),
                provider.endpoint().trim_end_matches('/').to_owned(),
            )]),
            documents: &[],
        })
        .unwrap();
    let dead = s
        .store
        .claim_flight(&tenant, &key, "dead-process", Duration::from_millis(300))
        .await
        .unwrap();
    assert!(matches!(dead, Flight::Leader { token: 1, .. }));
    let cached = Arc::new(CachedProvider::new(provider, cache, CallPolicy::default()));
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let cached = cached.clone();
        tasks.push(tokio::spawn(async move {
            cached.send(&question("q"), &mut |_| {}).await.unwrap()
        }));
    }
    for task in tasks {
        assert_eq!(text_of(&task.await.unwrap().message), "taken over");
    }
    assert_eq!(upstream.requests().len(), 1);
    // The flight was released by its new holder (token 2): the next claim is fresh, token 3.
    assert!(matches!(
        s.store
            .claim_flight(&tenant, &key, "next", Duration::from_secs(1))
            .await
            .unwrap(),
        Flight::Leader {
            token: 3,
            took_over: false
        }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_background_log_writes_every_call_by_the_time_it_is_flushed() {
    let s = setup().await;
    let tenant = TenantId::new("acme").unwrap();
    let cache = Arc::new(Cache::new(s.store.clone(), tenant.clone()).with_background_log());
    let versions = std::collections::BTreeMap::<String, String>::new();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300 {
        let cache = cache.clone();
        let versions = versions.clone();
        tasks.spawn(async move {
            // 30 distinct requests, each asked 10 times: executed, hits and coalesced calls.
            let body = json!({"model": "m", "messages": [{"role": "user", "content": format!("q{}", i % 30)}]});
            let request = CallRequest {
                operation: "openai.chat_completions",
                body: &body,
                model: "m",
                versions: &versions,
                documents: &[],
            };
            cache
                .call(&request, &CallPolicy::default(), || async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok::<_, std::io::Error>(Answer {
                        value: "a".to_owned(),
                        model: "m".into(),
                        usage: baton_core::usage::Usage { input: 3, output: 1, ..Default::default() },
                        storable: true,
                    })
                })
                .await
                .unwrap()
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    cache.flush_log().await;
    let outcomes = log(&s.store, &tenant).await;
    assert_eq!(outcomes.len(), 300, "every call has its record once");
    assert_eq!(count(&outcomes, CallOutcome::Executed), 30);
    // A second flush with nothing queued returns at once; a later call is written by the next.
    cache.flush_log().await;
    assert_eq!(log(&s.store, &tenant).await.len(), 300);
}
