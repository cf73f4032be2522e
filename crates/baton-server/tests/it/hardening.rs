//! Issue 20: the defects an attack on `baton serve` found, each pinned by a test that failed
//! before its fix (the items' numbers are the issue's).

use std::time::{Duration, Instant};

use baton_core::{Message, Role, RunId, TenantId};
use baton_server::Config;
use baton_store::{NewEntry, NewRun};

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::on_both_backends;
use crate::support::{Backend, TestServer, send};

on_both_backends!(
    r20_4_out_of_range_ids_are_invalid_input,
    r20_7_dot_ids_and_keys_are_refused,
    r20_10_followers_of_a_failed_leader_are_coalesced,
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

    // A caller that gives up after half a second: the client drops the connection. The
    // replay is seen running while the request lives (polled, since once the caller is gone
    // it stops at its next step, which may come before any later look).
    let gone = tokio::spawn(
        server
            .req(reqwest::Method::GET, &path)
            .timeout(Duration::from_millis(500))
            .send(),
    );
    let mut seen_running = false;
    while !gone.is_finished() {
        if blocking_tasks(&server).await == 1 {
            seen_running = true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let gone = gone.await.unwrap();
    assert!(gone.is_err(), "the replay finished within 0.5 s: {gone:?}");
    assert!(
        seen_running,
        "the replay should run while its request lives"
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

/// `host:port` of the server.
fn addr(server: &TestServer) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// Reads what the server sends until it closes the connection; `None` when it has not closed
/// it within `limit`.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&got).into_owned())
}

/// Sends `bytes` on a new connection and returns everything the server answers before closing.
async fn raw(server: &TestServer, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr(server)).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    read_until_closed(&mut stream, Duration::from_secs(10))
        .await
        .expect("the server neither answered nor closed")
}

/// The status and problem body of a raw HTTP/1.1 response.
#[track_caller]
fn problem_of(response: &str) -> (u16, Value) {
    let status = response
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/problem+json"),
        "{head}"
    );
    (status, serde_json::from_str(body).unwrap())
}

/// Item 2: a silent socket, a client sending its head a byte at a time and a keep-alive
/// connection nobody reuses are all closed; connections past the cap are answered 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn r20_2_connections_time_out_and_are_capped() {
    let config = Config {
        header_read_timeout: Duration::from_millis(600),
        idle_timeout: Duration::from_millis(1200),
        max_connections: 3,
        ..Config::default()
    };
    let server = TestServer::with_config(Backend::Sqlite, config).await;

    // Silent: closed after the idle timeout.
    let started = Instant::now();
    let mut silent = TcpStream::connect(addr(&server)).await.unwrap();
    let said = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert_eq!(said.as_deref(), Some(""), "a silent socket stayed open");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );

    // A byte every 100 ms: closed after the header timeout, while it still sends.
    let started = Instant::now();
    let mut slow = TcpStream::connect(addr(&server)).await.unwrap();
    let head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut closed = false;
    for byte in head {
        if slow.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "a head sent a byte at a time was never cut off");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "closed only after {took:?}");

    // Keep-alive, then nothing: the answer comes, then the connection is closed.
    let mut idle = TcpStream::connect(addr(&server)).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = read_until_closed(&mut idle, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection stayed open");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");

    // The cap: three connections held open, the fourth is told to come back.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(addr(&server)).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = c.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        held.push(c);
    }
    let refused = raw(&server, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let (status, problem) = problem_of(&refused);
    assert_eq!(status, 503, "{refused}");
    assert_eq!(problem["type"], "urn:baton:problem:too-many-connections");
    drop(held);
    // Once they are gone, connections are served again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, _) = server.get("/v1/runs").await;
    assert_eq!(status, 200);
}

/// Item 5: a declared length over the limit is refused at once, before any body is sent; a
/// body that stops arriving is a 408, not the request timeout's 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn r20_5_oversized_and_slow_bodies() {
    let config = Config {
        body_limit: 1024,
        body_read_timeout: Duration::from_millis(700),
        request_timeout: Duration::from_secs(20),
        ..Config::default()
    };
    let server = TestServer::with_config(Backend::Sqlite, config).await;
    let auth = format!("authorization: Bearer {}\r\n", server.key);

    let started = Instant::now();
    let mut big = TcpStream::connect(addr(&server)).await.unwrap();
    big.write_all(
        format!("POST /v1/runs HTTP/1.1\r\nhost: x\r\n{auth}content-type: application/json\r\ncontent-length: 50000000\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let answer = read_until_closed(&mut big, Duration::from_secs(5))
        .await
        .expect("no answer to a declared length over the limit");
    let (status, problem) = problem_of(&answer);
    assert_eq!(status, 413, "{answer}");
    assert_eq!(problem["type"], "urn:baton:problem:body-too-large");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    for path in ["/v1/runs", "/v1/runs/x/messages"] {
        let started = Instant::now();
        let mut slow = TcpStream::connect(addr(&server)).await.unwrap();
        slow.write_all(
            format!("POST {path} HTTP/1.1\r\nhost: x\r\n{auth}content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"id\": ")
                .as_bytes(),
        )
        .await
        .unwrap();
        let answer = read_until_closed(&mut slow, Duration::from_secs(10))
            .await
            .expect("no answer to a body that stopped");
        let (status, problem) = problem_of(&answer);
        assert_eq!(status, 408, "{path}: {answer}");
        assert_eq!(problem["type"], "urn:baton:problem:body-timeout");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
    let (_, runs) = server.get("/v1/runs").await;
    assert_eq!(runs["runs"], json!([]));
}

/// Item 6: a caller's request id is cut to 128 safe characters before it is logged or echoed.
#[tokio::test]
async fn r20_6_request_ids_are_capped_and_sanitized() {
    let server = TestServer::start(Backend::Sqlite).await;
    let echoed = |id: String| {
        let request = server
            .client
            .get(server.url("/healthz"))
            .header("x-request-id", id);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.headers()["x-request-id"]
                .to_str()
                .unwrap()
                .to_owned()
        }
    };
    let long = echoed("a".repeat(100_000)).await;
    assert_eq!(long, "a".repeat(128));
    assert_eq!(
        echoed("ok-id_1.2:3/4+5=6@x".to_owned()).await,
        "ok-id_1.2:3/4+5=6@x"
    );
    assert_eq!(
        echoed("bad id<script>\"x\"".to_owned()).await,
        "badidscriptx"
    );
    let replaced = echoed("<>  {}".to_owned()).await;
    assert!(uuid::Uuid::parse_str(&replaced).is_ok(), "{replaced}");
}

/// Item 8: what hyper rejects before any route (too many headers, a target too long, a byte
/// that is no part of HTTP) is a problem+json too.
#[tokio::test]
async fn r20_8_rejections_before_the_router_are_problems() {
    let server = TestServer::start(Backend::Sqlite).await;
    let mut many = String::from("GET /healthz HTTP/1.1\r\nhost: x\r\n");
    for i in 0..150 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let (status, problem) = problem_of(&raw(&server, many.as_bytes()).await);
    assert_eq!(status, 431);
    assert_eq!(problem["type"], "urn:baton:problem:headers-too-large");

    let long = format!(
        "GET /v1/runs/{} HTTP/1.1\r\nhost: x\r\n\r\n",
        "a".repeat(70_000)
    );
    let (status, problem) = problem_of(&raw(&server, long.as_bytes()).await);
    assert_eq!(status, 414);
    assert_eq!(problem["type"], "urn:baton:problem:uri-too-long");

    let (status, problem) = problem_of(
        &raw(
            &server,
            b"GET /v1/runs/\xff\xfe HTTP/1.1\r\nhost: x\r\n\r\n",
        )
        .await,
    );
    assert_eq!(status, 400);
    assert_eq!(problem["type"], "urn:baton:problem:malformed-request");
    assert_eq!(problem["status"], 400);

    // And the server goes on answering.
    let (status, _) = server.get("/v1/runs").await;
    assert_eq!(status, 200);
}

/// Item 10: callers that shared a failed leader's call are labelled `coalesced`, not `miss`:
/// exactly one caller made the call.
async fn r20_10_followers_of_a_failed_leader_are_coalesced(backend: Backend) {
    let up = crate::gateway::upstream(json!([
        {"reply": {"error": {"status": 500, "message": "upstream exploded"}, "delay_ms": 400}},
    ]));
    let server = std::sync::Arc::new(crate::gateway::gateway(backend, &up, |_| {}).await);
    let body =
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "fail together"}]});
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let server = server.clone();
            let body = body.clone();
            tokio::spawn(async move {
                crate::gateway::call(&server, "/v1/chat/completions", &body, &[]).await
            })
        })
        .collect();
    let mut labels = Vec::new();
    for task in tasks {
        let got = task.await.unwrap();
        assert_eq!(got.status, 500, "{}", got.text());
        labels.push(got.cache().to_owned());
    }
    assert_eq!(
        up.requests().len(),
        1,
        "the failure was shared, not repeated"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "miss").count(),
        1,
        "{labels:?}"
    );
    assert_eq!(
        labels.iter().filter(|l| *l == "coalesced").count(),
        7,
        "{labels:?}"
    );
}

/// Item 11: `/metrics` speaks the Prometheus text format unless OpenMetrics is asked for, so
/// `promtool check metrics` passes; the ledger's conflicts and the compactions are counted
/// from the start, at 0.
#[tokio::test]
async fn r20_11_metrics_negotiate_the_format_and_start_at_zero() {
    let server = TestServer::start(Backend::Sqlite).await;
    server.get("/v1/runs").await;
    let scrape = |accept: &'static str| {
        let request = server
            .client
            .get(server.url("/metrics"))
            .header("accept", accept);
        async move {
            let response = request.send().await.unwrap();
            let content_type = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned();
            (content_type, response.text().await.unwrap())
        }
    };
    let (content_type, text) = scrape("text/plain").await;
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    for zero in [
        r#"baton_ledger_conflicts_total{code="mismatch"} 0"#,
        r#"baton_ledger_conflicts_total{code="fenced_out"} 0"#,
        r#"baton_compactions_total{outcome="compacted"} 0"#,
        r#"baton_cache_requests_total{outcome="coalesced"} 0"#,
    ] {
        assert!(text.contains(zero), "no {zero} in {text}");
    }
    assert!(
        text.contains("# TYPE baton_http_requests_total counter"),
        "{text}"
    );
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package; `cargo xtask test` installs it)");
    use std::io::Write as _;
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let (content_type, text) =
        scrape("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5").await;
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}
