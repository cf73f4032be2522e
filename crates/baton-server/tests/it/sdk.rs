//! Client compatibility: the official `openai` and `anthropic` Python SDKs
//! (`tests/python/gateway_sdks.py`, in the venv of `support::python_venv`) pointed at the
//! gateway, in front of a scripted upstream on loopback. Each completes a tool-calling exchange
//! with and without streaming, sees its second identical request answered as a cache hit, and
//! sends 50 identical concurrent requests that reach the upstream once.

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
