//! Issue 20: the defects an attack on `baton serve` found, each pinned by a test that failed
//! before its fix (the items' numbers are the issue's).

use std::time::{Duration, Instant};

use baton_core::{Message, Role, RunId, TenantId};
use baton_server::Config;
use baton_store::{NewEntry, NewRun};

use crate::support::{Backend, TestServer};

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
