//! Cache lookups (`/v1/cache/…`) and the reports (`/v1/reports/duplicates`,
//! `/v1/runs/{id}/growth`) over HTTP.

use std::collections::BTreeMap;

use baton_cache::{Answer, CallPolicy, CallRequest};
use baton_core::key::RequestKey;
use baton_core::usage::{Usage, UsageRecord};
use baton_core::{ContentBlock, Message, Role, RunId, TenantId, Timestamp};
use baton_store::{CallOutcome, CallRecord, ImportUsage, NewEntry, NewImport, Origin, Reimport};
use reqwest::Method;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, send};

on_both_backends!(
    cache_lookups_hit_miss_and_stay_in_their_tenant,
    the_duplicate_work_report_over_the_call_log,
    the_duplicate_work_report_over_tool_calls,
    the_growth_report_of_a_run,
    usage_reports_count_each_response_once_and_stay_in_their_tenant,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

/// A cached answer for `body`, stored through the tenant's cache as the gateway stores one.
async fn cache_answer(server: &TestServer, body: &Value, value: Value) -> RequestKey {
    let versions = BTreeMap::from([("schema_version".to_owned(), "2".to_owned())]);
    let request = CallRequest {
        operation: "openai.chat_completions",
        body,
        model: "gpt-4o-mini",
        versions: &versions,
        documents: &["sha256:doc".to_owned()],
    };
    let answered = server
        .state
        .cache(&acme())
        .call(&request, &CallPolicy::default(), || async {
            Ok::<_, std::io::Error>(Answer {
                value,
                model: "gpt-4o-mini".to_owned(),
                usage: baton_core::usage::Usage {
                    input: 12,
                    output: 3,
                    ..Default::default()
                },
                storable: true,
            })
        })
        .await
        .unwrap();
    answered.key
}

async fn cache_lookups_hit_miss_and_stay_in_their_tenant(backend: Backend) {
    let server = TestServer::start(backend).await;
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let reply = json!({"choices": [{"message": {"role": "assistant", "content": "hello"}}]});
    let key = cache_answer(&server, &body, reply.clone()).await;

    // The same request, spelled differently (member order, an ignored field): a hit.
    let lookup = json!({
        "operation": "openai.chat_completions",
        "body": {"messages": [{"content": "hi", "role": "user"}], "model": "gpt-4o-mini", "stream": true},
        "versions": {"schema_version": "2"},
        "documents": ["sha256:doc", "sha256:doc"],
    });
    let (status, hit) = server.post("/v1/cache/lookup", lookup.clone()).await;
    assert_eq!(status, 200, "{hit}");
    assert_eq!(hit["hit"], true);
    assert_eq!(hit["key"], key.to_string());
    let entry = &hit["entry"];
    assert_eq!(entry["result"], reply);
    assert_eq!(entry["model"], "gpt-4o-mini");
    assert_eq!(entry["input_tokens"], 12);
    assert_eq!(entry["output_tokens"], 3);
    assert_eq!(entry["operation"], "openai.chat_completions");
    assert_eq!(entry["hits"], 1);
    assert!(entry["created_at"].as_str().unwrap() < entry["expires_at"].as_str().unwrap());

    // By key: the entry, counted again.
    let (status, by_key) = server.get(&format!("/v1/cache/{key}")).await;
    assert_eq!(status, 200, "{by_key}");
    assert_eq!(by_key["result"], reply);
    assert_eq!(by_key["hits"], 2);

    // Another version: a miss, with its key.
    let mut other = lookup.clone();
    other["versions"] = json!({"schema_version": "3"});
    let (status, miss) = server.post("/v1/cache/lookup", other).await;
    assert_eq!(status, 200, "{miss}");
    assert_eq!(miss["hit"], false);
    assert!(miss.get("entry").is_none(), "{miss}");
    assert_eq!(miss["key"].as_str().unwrap().len(), 64);
    assert_ne!(miss["key"], key.to_string());
    let unknown = "0".repeat(64);
    assert_problem(
        &server.get(&format!("/v1/cache/{unknown}")).await,
        404,
        "not-found",
    );

    // Another tenant: neither the lookup nor the key reaches acme's entry.
    let as_other = |method: Method, path: &str| {
        server
            .client
            .request(method, server.url(path))
            .bearer_auth(&server.other_key)
    };
    let (status, theirs) = send(as_other(Method::POST, "/v1/cache/lookup").json(&lookup)).await;
    assert_eq!(status, 200);
    assert_eq!(theirs["hit"], false);
    assert_ne!(theirs["key"], key.to_string());
    assert_problem(
        &send(as_other(Method::GET, &format!("/v1/cache/{key}"))).await,
        404,
        "not-found",
    );

    // Bad inputs.
    for (body, status, kind) in [
        (json!({"operation": "x", "body": [1]}), 400, "bad-request"),
        (json!({"operation": "", "body": {}}), 400, "bad-request"),
        (json!({"operation": "x"}), 422, "invalid-body"),
        (
            json!({"operation": "x", "body": {}, "ttl": 1}),
            422,
            "invalid-body",
        ),
        (
            json!({"operation": "x", "body": {}, "versions": {"a": 1}}),
            422,
            "invalid-body",
        ),
    ] {
        assert_problem(&server.post("/v1/cache/lookup", body).await, status, kind);
    }
    assert_problem(&server.get("/v1/cache/not-a-key").await, 400, "bad-request");
    assert_problem(
        &server.get(&format!("/v1/cache/{}", "g".repeat(64))).await,
        400,
        "bad-request",
    );
    let metrics = server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"baton_cache_requests_total{outcome="hit"} 2"#),
        "{metrics}"
    );
    server.stop().await;
}

/// 2024-05-01T00:00:00Z.
const MAY_1: i64 = 1_714_521_600_000;

fn record(at: i64, hash: u8, outcome: CallOutcome, cost: f64, latency_ms: u64) -> CallRecord {
    CallRecord {
        at: Timestamp(at),
        operation: "openai.chat_completions".to_owned(),
        request_hash: RequestKey([hash; 32]),
        model: "gpt-4o-mini".to_owned(),
        input_tokens: 100,
        output_tokens: 10,
        cost_usd: Some(cost),
        outcome,
        latency_ms,
        overlapped: false,
    }
}

#[track_caller]
fn close(got: &Value, want: f64) {
    let got = got.as_f64().unwrap();
    assert!((got - want).abs() < 1e-9, "{got} != {want}");
}

async fn the_duplicate_work_report_over_the_call_log(backend: Backend) {
    let server = TestServer::start(backend).await;
    // Nothing logged yet: an empty report.
    let (status, empty) = server.get("/v1/reports/duplicates").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["rows"], json!([]));
    assert_eq!(empty["total"]["calls"], 0);

    let records = [
        record(MAY_1 + 1_000, 1, CallOutcome::Executed, 0.01, 2_000),
        // Started while the first was still running: a coincident repeat, coalesced.
        record(MAY_1 + 1_500, 1, CallOutcome::Coalesced, 0.01, 1_500),
        record(MAY_1 + 60_000, 1, CallOutcome::CacheHit, 0.01, 5),
        record(MAY_1 + 70_000, 2, CallOutcome::Executed, 0.02, 900),
        // The next day: the first of its day is not a repeat.
        record(MAY_1 + 86_400_000 + 10, 1, CallOutcome::Executed, 0.01, 900),
    ];
    server.store.log_calls(&acme(), &records).await.unwrap();

    let (status, day) = server.get("/v1/reports/duplicates?day=2024-05-01").await;
    assert_eq!(status, 200, "{day}");
    assert_eq!(day["tools"], false);
    let rows = day["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{day}");
    let row = &rows[0];
    assert_eq!(row["day"], "2024-05-01");
    assert_eq!(row["operation"], "openai.chat_completions");
    assert_eq!(row["calls"], 4);
    assert_eq!(row["repeats"], 2);
    close(&row["ratio"], 0.5);
    close(&row["repeat_cost"], 0.02);
    assert_eq!(row["coincident"], 1);
    close(&row["saved_by_cache"], 0.01);
    close(&row["saved_by_coalescing"], 0.01);
    assert_eq!(day["total"]["day"], "all");
    assert_eq!(day["total"]["calls"], 4);

    let (_, both) = server
        .get("/v1/reports/duplicates?since=2024-05-01&until=2024-05-02")
        .await;
    let days: Vec<&str> = both["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["day"].as_str().unwrap())
        .collect();
    assert_eq!(days, ["2024-05-01", "2024-05-02"]);
    assert_eq!(both["total"]["calls"], 5);
    assert_eq!(both["total"]["repeats"], 2);
    let (_, open) = server.get("/v1/reports/duplicates?since=2024-05-02").await;
    assert_eq!(open["total"]["calls"], 1);
    let (_, none) = server
        .get("/v1/reports/duplicates?day=2024-05-01&operation=anthropic.messages")
        .await;
    assert_eq!(none["rows"], json!([]));

    // Another tenant sees none of it.
    let (_, theirs) = send(
        server
            .client
            .get(server.url("/v1/reports/duplicates"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_eq!(theirs["total"]["calls"], 0);

    for query in [
        "day=2024-13-01",
        "day=2023-02-29",
        "day=2024-5-1",
        "day=yesterday",
        "day=1969-12-31",
        "since=2024-05-03&until=2024-05-01",
        "day=2024-05-01&since=2024-05-01",
        "tools=maybe",
        "days=2024-05-01",
    ] {
        assert_problem(
            &server.get(&format!("/v1/reports/duplicates?{query}")).await,
            400,
            "bad-request",
        );
    }
    server.stop().await;
}

fn tool_use(id: &str, input: Value) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.to_owned(),
            name: "read_file".to_owned(),
            input,
        }],
    })
}

fn tool_result(id: &str) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.to_owned(),
            content: vec![ContentBlock::Text {
                text: "fn main() {}".to_owned(),
            }],
            is_error: false,
        }],
    })
}

async fn the_duplicate_work_report_over_tool_calls(backend: Backend) {
    let server = TestServer::start(backend).await;
    assert_eq!(server.post("/v1/runs", json!({"id": "t1"})).await.0, 201);
    let run = RunId::new("t1").unwrap();
    server
        .store
        .append(
            &acme(),
            &run,
            &[
                NewEntry::estimated(Message::text(Role::User, "read main.rs")),
                tool_use("c1", json!({"path": "src/main.rs", "limit": 10})),
                tool_result("c1"),
                // The same input, another member order and number spelling: a repeat.
                tool_use("c2", json!({"limit": 10.0, "path": "src/main.rs"})),
                tool_result("c2"),
                tool_use("c3", json!({"path": "src/lib.rs"})),
                tool_result("c3"),
            ],
        )
        .await
        .unwrap();
    let (status, report) = server.get("/v1/reports/duplicates?tools=true").await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["tools"], true);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(rows[0]["operation"], "read_file");
    assert_eq!(rows[0]["calls"], 3);
    assert_eq!(rows[0]["repeats"], 1);
    let (_, other_tool) = server
        .get("/v1/reports/duplicates?tools=true&operation=grep")
        .await;
    assert_eq!(other_tool["rows"], json!([]));
    let (_, long_ago) = server
        .get("/v1/reports/duplicates?tools=true&day=2000-01-01")
        .await;
    assert_eq!(long_ago["rows"], json!([]));
    server.stop().await;
}

async fn the_growth_report_of_a_run(backend: Backend) {
    let server = TestServer::start(backend).await;
    assert_eq!(
        server
            .post("/v1/runs", json!({"id": "g1", "goal": "grow"}))
            .await
            .0,
        201
    );
    let run = RunId::new("g1").unwrap();
    let entries: Vec<NewEntry> = (1..=40)
        .map(|i| {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            NewEntry::estimated(Message::text(
                role,
                format!("step {i} ") + &"word ".repeat(200),
            ))
        })
        .collect();
    server.store.append(&acme(), &run, &entries).await.unwrap();

    let (status, none) = server.get("/v1/runs/g1/growth?strategy=none").await;
    assert_eq!(status, 200, "{none}");
    assert_eq!(none["run"], "g1");
    assert_eq!(none["strategy"], "none");
    let steps = none["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 20);
    assert_eq!(steps[0]["seq"], 2);
    assert_eq!(none["full_total"], none["context_total"]);

    let (status, sliding) = server.get("/v1/runs/g1/growth?strategy=sliding").await;
    assert_eq!(status, 200, "{sliding}");
    assert!(
        sliding["context_total"].as_u64().unwrap() < sliding["full_total"].as_u64().unwrap(),
        "{sliding}"
    );
    assert!(sliding["ratio"].as_f64().unwrap() > 1.0);
    assert_eq!(sliding["full_total"], none["full_total"]);
    let (status, budget) = server
        .get("/v1/runs/g1/growth?strategy=budget&budget=2000")
        .await;
    assert_eq!(status, 200, "{budget}");
    assert!(
        budget["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["compacted"] == true)
    );
    let (status, default) = server.get("/v1/runs/g1/growth").await;
    assert_eq!(status, 200, "{default}");
    assert_eq!(default["strategy"], "structured");

    // A run without model calls has an empty report.
    assert_eq!(server.post("/v1/runs", json!({"id": "g0"})).await.0, 201);
    let (status, empty) = server.get("/v1/runs/g0/growth").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["steps"], json!([]));
    assert_eq!(empty["ratio"], 0.0);

    assert_problem(&server.get("/v1/runs/nope/growth").await, 404, "not-found");
    assert_problem(
        &send(
            server
                .client
                .get(server.url("/v1/runs/g1/growth"))
                .bearer_auth(&server.other_key),
        )
        .await,
        404,
        "not-found",
    );
    for query in [
        "strategy=slidng",
        "budget=0",
        "budget=-1",
        "budget=many",
        "strategy=budget&budget=0",
        "every=2",
    ] {
        assert_problem(
            &server.get(&format!("/v1/runs/g1/growth?{query}")).await,
            400,
            "bad-request",
        );
    }
    assert_problem(
        &server.get("/v1/runs/bad%20id/growth").await,
        400,
        "bad-request",
    );
    server.stop().await;
}

/// One imported transcript of one assistant message, whose response has `usage` (and id
/// `response`), at `at`.
fn usage_import(source: &str, response: &str, at: &str, usage: Usage) -> NewImport {
    let origin = Origin {
        source_key: format!("claude-code:{source}"),
        path: format!("/tmp/{source}.jsonl"),
        format: "claude-code".into(),
        source_session_id: Some(source.into()),
        ..Origin::default()
    };
    let mut import = NewImport::new(
        None,
        origin,
        vec![NewEntry::estimated(Message::text(Role::Assistant, "done"))],
        Vec::new(),
    );
    import.usage = ImportUsage {
        session: source.into(),
        project: Some("-home-me-app".into()),
        agent: "claude-code".into(),
        records: vec![(
            UsageRecord {
                id: format!("claude-code:{response}:req"),
                model: Some("claude-sonnet-4-5-20250929".into()),
                response_id: Some(response.into()),
                request_id: Some("req".into()),
                at: Timestamp::parse(at),
                usage,
                estimated: false,
            },
            Some(0),
        )],
    };
    import
}

// issue 17: usage reports over HTTP, each response counted once.
async fn usage_reports_count_each_response_once_and_stay_in_their_tenant(backend: Backend) {
    let server = TestServer::start(backend).await;
    let streamed = Usage {
        input: 3,
        output: 10,
        cache_write_5m: 1000,
        cache_write_1h: 0,
        cache_read: 5000,
    };
    let whole = Usage {
        output: 250,
        ..streamed
    };
    // The same response in two sessions' files (a continued session copies it), the first
    // copy read mid-stream; and another response of another day.
    for import in [
        usage_import("s1", "msg_a", "2026-02-10T10:00:00Z", streamed),
        usage_import("s2", "msg_a", "2026-02-10T10:00:00Z", whole),
        usage_import("s2", "msg_b", "2026-02-11T23:30:00Z", streamed),
    ] {
        let _ = server
            .store
            .import(&acme(), vec![import], Reimport::AppendNew)
            .await
            .unwrap();
    }
    let (status, daily) = server.get("/v1/reports/usage/daily").await;
    assert_eq!(status, 200, "{daily}");
    let days: Vec<_> = daily["daily"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["period"].clone(), d["outputTokens"].clone()))
        .collect();
    assert_eq!(
        days,
        [
            (json!("2026-02-10"), json!(250)),
            (json!("2026-02-11"), json!(10))
        ]
    );
    assert_eq!(daily["totals"]["inputTokens"], 6);
    assert_eq!(daily["totals"]["cacheReadTokens"], 10_000);
    // Days in another zone, newest first, from a day on.
    let (_, shifted) = server
        .get("/v1/reports/usage/daily?timezone=%2B02:00&order=desc&since=20260211")
        .await;
    let dates: Vec<_> = shifted["daily"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["period"].clone())
        .collect();
    assert_eq!(dates, [json!("2026-02-12")]);
    let (status, sessions) = server.get("/v1/reports/usage/session").await;
    assert_eq!(status, 200);
    assert_eq!(sessions["session"].as_array().unwrap().len(), 2);
    let (status, blocks) = server.get("/v1/reports/usage/blocks").await;
    assert_eq!(status, 200);
    assert!(!blocks["blocks"].as_array().unwrap().is_empty());
    // Another tenant has none of it.
    let other = send(
        server
            .client
            .get(server.url("/v1/reports/usage/monthly"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_eq!(other.0, 200);
    assert_eq!(other.1["monthly"], json!([]));
    assert_eq!(other.1["totals"]["totalTokens"], 0);
    for bad in [
        "/v1/reports/usage/hourly",
        "/v1/reports/usage/daily?since=2026-13-01",
        "/v1/reports/usage/daily?since=2026-02-02&until=2026-02-01",
        "/v1/reports/usage/daily?timezone=Mars",
        "/v1/reports/usage/daily?order=sideways",
        "/v1/reports/usage/daily?limit=3",
    ] {
        assert_problem(&server.get(bad).await, 400, "bad-request");
    }
    server.stop().await;
}
