//! The contract test: schemathesis (pinned in `support::PYTHON_PACKAGES`) reads the served
//! `/openapi.json` and sends generated requests, valid and invalid, to every route of it;
//! every answer must be no 5xx, a status the document lists for the route, the content type
//! it lists, and a body matching the listed schema.

use std::time::Instant;

use baton_core::{ContentBlock, Message, Role, RunId, TenantId};
use baton_store::NewEntry;
use serde_json::json;

use crate::support::{Backend, TestServer, python_venv};

/// Test cases per operation: enough to reach every documented status of most routes, small
/// enough to keep the whole run around a minute.
const MAX_EXAMPLES: &str = "60";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_route_answers_as_the_openapi_document_says() {
    let Some(python) = python_venv() else {
        eprintln!("skipped: no Python environment for schemathesis");
        return;
    };
    let schemathesis = python.with_file_name("schemathesis");
    let server = TestServer::start(Backend::Sqlite).await;
    seed(&server).await;

    // One worker: with several, hypothesis's `ast.parse` of its own sources fails on CPython
    // 3.11 ("AST constructor recursion depth mismatch"), an error in the tool, not the API.
    // No stateful phase: the document declares no links. A fixed seed makes a failure
    // reproducible with `st replay`.
    let work = tempfile::tempdir().unwrap();
    let args = vec![
        "run".to_owned(),
        server.url("/openapi.json"),
        "--checks".to_owned(),
        "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance"
            .to_owned(),
        "-H".to_owned(),
        format!("Authorization: Bearer {}", server.key),
        "--max-examples".to_owned(),
        MAX_EXAMPLES.to_owned(),
        "--phases".to_owned(),
        "examples,coverage,fuzzing".to_owned(),
        "--seed".to_owned(),
        "20240501".to_owned(),
        "--workers".to_owned(),
        "1".to_owned(),
        "--request-timeout".to_owned(),
        "20".to_owned(),
        "--generation-database".to_owned(),
        "none".to_owned(),
        "--suppress-health-check".to_owned(),
        "all".to_owned(),
        "--no-color".to_owned(),
    ];
    let started = Instant::now();
    let dir = work.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&schemathesis)
            .args(&args)
            .current_dir(&dir)
            .output()
    })
    .await
    .unwrap()
    .expect("running schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "schemathesis found failures ({:?}, {:.0?}):\n{stdout}\n{stderr}",
        output.status,
        started.elapsed()
    );
    eprintln!(
        "schemathesis passed in {:.0?}:\n{}",
        started.elapsed(),
        stdout
            .lines()
            .filter(|l| l.contains("passed") || l.contains("Operations"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    server.stop().await;
}

/// Data for the routes to find: a run with a tool call and its result, an operation, a cache
/// entry and call-log records.
async fn seed(server: &TestServer) {
    let tenant = TenantId::new("acme").unwrap();
    let (status, run) = server
        .post(
            "/v1/runs",
            json!({"id": "contract", "goal": "exercise every route", "rules": "be brief"}),
        )
        .await;
    assert_eq!(status, 201, "{run}");
    let run = RunId::new("contract").unwrap();
    let mut entries = Vec::new();
    for i in 0..6 {
        entries.push(NewEntry::estimated(Message::text(
            Role::User,
            format!("question {i}: {}", "words ".repeat(50)),
        )));
        entries.push(NewEntry::estimated(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: format!("call_{i}"),
                name: "read_file".to_owned(),
                input: json!({"path": "src/main.rs"}),
            }],
        }));
        entries.push(NewEntry::estimated(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: format!("call_{i}"),
                content: vec![ContentBlock::Text {
                    text: "fn main() {}".to_owned(),
                }],
                is_error: false,
            }],
        }));
        entries.push(NewEntry::estimated(Message::text(
            Role::Assistant,
            format!("answer {i}: {}", "words ".repeat(50)),
        )));
    }
    server.store.append(&tenant, &run, &entries).await.unwrap();
    let begun = server
        .client
        .post(server.url("/v1/operations"))
        .bearer_auth(&server.key)
        .header("idempotency-key", "charge-42")
        .json(&json!({"request": {"charge": {"amount": 1200, "currency": "EUR"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(begun.status(), 201);
    let versions = Default::default();
    let body = json!({"model": "gpt-4o-mini", "messages": []});
    let request = baton_cache::CallRequest {
        operation: "openai.chat_completions",
        body: &body,
        model: "gpt-4o-mini",
        versions: &versions,
        documents: &[],
    };
    server
        .state
        .cache(&tenant)
        .call(&request, &Default::default(), || async {
            Ok::<_, std::io::Error>(baton_cache::Answer {
                value: json!({"choices": []}),
                model: "gpt-4o-mini".to_owned(),
                usage: baton_core::usage::Usage {
                    input: 1,
                    output: 1,
                    ..Default::default()
                },
                storable: true,
            })
        })
        .await
        .unwrap();
}
