//! Client compatibility: the official `openai` and `anthropic` Python SDKs
//! (`tests/python/gateway_sdks.py`, in the venv of `support::python_venv`) pointed at the
//! gateway, in front of a scripted upstream on loopback. Each completes a tool-calling exchange
//! with and without streaming, sees its second identical request answered as a cache hit, and
//! sends 50 identical concurrent requests that reach the upstream once. The `openai` SDK does
//! the same exchange through the Responses API, and both SDKs show baton's own errors with
//! their explanation.

use std::time::Duration;

use serde_json::{Value, json};

use crate::gateway::{gateway, upstream};
use crate::support::{Backend, python_venv};

async fn sdk_exchange(vendor: &str) {
    let Some(python) = python_venv() else {
        eprintln!("skipped: the {vendor} SDK test needs the Python test environment");
        return;
    };
    let mut turns = Vec::new();
    for city in ["Paris", "Rome"] {
        turns.push(json!({"when": {"tools": true, "last_user_contains": format!("weather in {city}")},
                          "reply": {"tool_calls": [{"name": "get_weather", "input": {"city": city}}]}}));
        turns.push(
            json!({"when": {"last_user_contains": format!("{city}: 18 degrees")},
                          "reply": {"text": format!("It is 18 degrees and sunny in {city}.")}}),
        );
    }
    turns.push(json!({"when": {"last_user_contains": "burst"},
                      "reply": {"text": "One answer for all fifty.", "delay_ms": 300}}));
    let up = upstream(Value::Array(turns));
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_sdks.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .args([vendor, server.base.as_str(), server.key.as_str()])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the SDK script took more than 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{vendor} SDK script failed:\n{stdout}\n{stderr}"
    );
    let seen: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    // Two exchanges of two requests each, then one burst: five upstream calls, each turn once.
    let requests = up.requests();
    assert_eq!(requests.len(), 5, "{seen}");
    assert_eq!(up.remaining_turns(), 0);
    assert!(
        requests.iter().all(|r| r.auth),
        "the SDK's key was passed on"
    );
    let burst: Vec<&str> = seen["burst"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(burst.len(), 50);
    assert_eq!(burst.iter().filter(|c| **c == "miss").count(), 1, "{seen}");
    assert!(
        burst
            .iter()
            .all(|c| matches!(*c, "miss" | "coalesced" | "hit")),
        "{seen}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openai_sdk_through_the_gateway() {
    sdk_exchange("openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_anthropic_sdk_through_the_gateway() {
    sdk_exchange("anthropic").await;
}

/// Runs `gateway_sdks.py MODE` against `server`; its printed JSON, or `None` when the Python
/// environment cannot be made.
async fn script(mode: &str, server: &crate::support::TestServer) -> Option<Value> {
    let python = python_venv()?;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/gateway_sdks.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .args([mode, server.base.as_str(), server.key.as_str()])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the SDK script took more than 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{mode} SDK script failed:\n{stdout}\n{stderr}"
    );
    Some(serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openai_sdk_responses_api_through_the_gateway() {
    let mut turns = Vec::new();
    for city in ["Paris", "Rome"] {
        turns.push(json!({"when": {"tools": true, "last_user_contains": format!("weather in {city}")},
                          "reply": {"tool_calls": [{"name": "get_weather", "input": {"city": city}}]}}));
        turns.push(
            json!({"when": {"last_user_contains": format!("{city}: 18 degrees")},
                          "reply": {"text": format!("It is 18 degrees and sunny in {city}.")}}),
        );
    }
    let up = upstream(Value::Array(turns));
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    let Some(seen) = script("openai-responses", &server).await else {
        eprintln!("skipped: the Responses SDK test needs the Python test environment");
        return;
    };
    let requests = up.requests();
    assert_eq!(requests.len(), 4, "{seen}");
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    assert_eq!(up.remaining_turns(), 0);
    server.stop().await;
}

/// Issue 18: SDKs showed only "Error code: 502" for baton's own errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn r18_sdks_show_the_explanation_of_batons_own_errors() {
    let up = upstream(json!([
        {"when": {"last_user_contains": "hang, openai"}, "reply": {"text": "late", "delay_ms": 3000}},
        {"when": {"last_user_contains": "hang, anthropic"}, "reply": {"text": "late", "delay_ms": 3000}},
    ]));
    let server = gateway(Backend::Sqlite, &up, |c| {
        c.upstream_timeout = Duration::from_millis(300);
    })
    .await;
    let Some(seen) = script("errors", &server).await else {
        eprintln!("skipped: the SDK error test needs the Python test environment");
        return;
    };
    for vendor in ["openai", "anthropic"] {
        assert!(seen[vendor].as_str().unwrap().contains("baton: "), "{seen}");
    }
    server.stop().await;
}
