//! Issue 20: the defects an attack on `baton serve` found, each pinned by a test that failed
//! before its fix (the items' numbers are the issue's).

use std::time::{Duration, Instant};

use baton_core::{Message, Role, RunId, TenantId};
use baton_server::Config;
use baton_store::{NewEntry, NewRun};

use reqwest::Method;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer, send};

on_both_backends!(
    r20_4_out_of_range_ids_are_invalid_input,
    r20_7_dot_ids_and_keys_are_refused,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

/// The CPU work the server runs on the blocking pool right now (its gauge on `/metrics`).
async fn blocking_tasks(server: &TestServer) -> i64 {
    let text = server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("baton_blocking_tasks "))
        .unwrap_or_else(|| panic!("no baton_blocking_tasks in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// A run long enough that its `structured` growth replay takes many seconds in a test build.
async fn long_run(server: &TestServer, id: &str, messages: u64) -> RunId {
    let run = RunId::new(id).unwrap();
    let new = NewRun {
        id: Some(run.clone()),
        ..NewRun::default()
    };
    server.store.create_run(&acme(), &new).await.unwrap();
    let entries: Vec<NewEntry> = (1..=messages)
        .map(|s| {
            let role = if s % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            let text = if s % 7 == 1 {
                format!("Do not touch /etc/file{s}. Run cargo test -p x{s}. ")
            } else {
                format!("Confirmed: the value is {s} in src/main{s}.rs. ")
            };
            NewEntry {
                message: Message::text(role, text.repeat(5)),
                tokens: 50,
            }
        })
        .collect();
    server.store.append(&acme(), &run, &entries).await.unwrap();
    run
}

/// Waits until no CPU work runs, up to `limit`; returns how long it took.
async fn until_idle(server: &TestServer, limit: Duration) -> Duration {
    let started = Instant::now();
    while blocking_tasks(server).await != 0 {
        assert!(
            started.elapsed() < limit,
            "the replay still runs {limit:?} after its request was gone"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// Item 1: a growth replay stops when its caller hangs up, and when the request times out, so
/// N abandoned requests cannot keep N cores busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn r20_1_growth_work_stops_when_its_request_is_gone() {
    let config = Config {
        request_timeout: Duration::from_millis(1500),
        ..Config::default()
    };
    let server = TestServer::with_config(Backend::Sqlite, config).await;
    let run = long_run(&server, "long", 12_000).await;
    let path = format!("/v1/runs/{run}/growth?strategy=structured");

    // A caller that gives up after half a second: the client drops the connection.
    let gone = server
        .req(reqwest::Method::GET, &path)
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(gone.is_err(), "the replay finished within 0.5 s: {gone:?}");
    assert_eq!(
        blocking_tasks(&server).await,
        1,
        "the replay should be running"
    );
    until_idle(&server, Duration::from_secs(3)).await;

    // A caller that waits: the request times out (503) and the work stops with it.
    let (status, body) = server.get(&path).await;
    assert_eq!(status, 503, "{body}");
    until_idle(&server, Duration::from_secs(3)).await;
}

/// Item 4: a number past the databases' range, in any id, seq or base a caller names, is
/// invalid input (4xx, a problem naming the value), never a 500 "corrupt store".
async fn r20_4_out_of_range_ids_are_invalid_input(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, _) = server.post("/v1/runs", json!({"id": "r"})).await;
    assert_eq!(status, 201);
    let (status, _) = server
        .post(
            "/v1/runs/r/messages",
            json!({"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]}),
        )
        .await;
    assert_eq!(status, 201);
    let (status, installed) = server
        .post(
            "/v1/runs/r/summaries",
            json!({"base": null, "cut": 1, "claims": []}),
        )
        .await;
    assert_eq!(status, 201, "{installed}");
    let sid = installed["id"].as_u64().unwrap();
    for big in [i64::MAX as u64 + 1, u64::MAX] {
        let requests: Vec<(Method, String, Option<Value>)> = vec![
            (
                Method::POST,
                format!("/v1/runs/r/summaries/{sid}/activate"),
                Some(json!({"base": big})),
            ),
            (
                Method::POST,
                format!("/v1/runs/r/summaries/{big}/activate"),
                Some(json!({"base": sid})),
            ),
            (
                Method::POST,
                "/v1/runs/r/summaries".to_owned(),
                Some(json!({"base": big, "cut": 2, "claims": []})),
            ),
            (
                Method::POST,
                "/v1/runs/r/summaries".to_owned(),
                Some(json!({"base": sid, "cut": big, "claims": []})),
            ),
            (
                Method::POST,
                "/v1/runs/r/summaries".to_owned(),
                Some(
                    json!({"base": sid, "cut": 2, "claims": [{"kind": "note", "text": "x", "source_seq": big}]}),
                ),
            ),
            (Method::GET, format!("/v1/summaries/{big}"), None),
            (Method::GET, format!("/v1/runs/r/messages/{big}"), None),
            (Method::GET, format!("/v1/runs/r/messages?from={big}"), None),
            (
                Method::GET,
                format!("/v1/runs/r/messages?from=1&to={big}"),
                None,
            ),
            (Method::PUT, format!("/v1/runs/r/pins/{big}"), None),
        ];
        for (method, path, body) in requests {
            let mut request = server.req(method.clone(), &path);
            if let Some(body) = &body {
                request = request.json(body);
            }
            let (status, answer) = send(request).await;
            // A range past the end reads what there is; everything else is refused.
            if path.contains("messages?") {
                assert_eq!(status, 200, "{method} {path}: {answer}");
                continue;
            }
            assert!(
                (400..500).contains(&status),
                "{method} {path} {body:?}: {status} {answer}"
            );
            assert!(answer["type"].is_string(), "{method} {path}: {answer}");
        }
    }
    // Unpinning what is not pinned changes nothing, whatever the number.
    let (status, unpinned) =
        send(server.req(Method::DELETE, &format!("/v1/runs/r/pins/{}", u64::MAX))).await;
    assert_eq!(
        (status, &unpinned["changed"]),
        (200, &json!(false)),
        "{unpinned}"
    );
    // Nothing moved: the summary installed first is still the active one.
    let (_, run) = server.get("/v1/runs/r").await;
    assert_eq!(run["active_summary_id"], sid, "{run}");
}

/// Item 7: `.` and `..` are path segments: no client can address a run or an operation named
/// so, so neither may be created.
async fn r20_7_dot_ids_and_keys_are_refused(backend: Backend) {
    let server = TestServer::start(backend).await;
    for dots in [".", ".."] {
        let (status, problem) = server.post("/v1/runs", json!({"id": dots})).await;
        assert_eq!(status, 400, "{problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains("'..'"),
            "{problem}"
        );
        let (status, problem) = send(
            server
                .req(Method::POST, "/v1/operations")
                .header("idempotency-key", dots)
                .json(&json!({"request": {"to": "x"}, "owner": "w"})),
        )
        .await;
        assert_eq!(status, 400, "{problem}");
    }
    let (_, runs) = server.get("/v1/runs").await;
    assert_eq!(runs["runs"], json!([]));
    let (_, ops) = server.get("/v1/operations").await;
    assert_eq!(ops["operations"], json!([]), "{ops}");
}
