//! `baton call` and `baton report duplicates`: real processes racing on one SQLite file (and
//! one PostgreSQL schema) against one loopback upstream that counts its requests.

use std::process::Stdio;

use baton_provider::scripted::{Script, ScriptedServer};
use serde_json::json;

use crate::support::Sandbox;

fn upstream(turns: serde_json::Value) -> ScriptedServer {
    ScriptedServer::start(Script::from_json(&json!({ "turns": turns }).to_string()).unwrap())
        .unwrap()
}

fn race(sb: &Sandbox, server: &ScriptedServer) {
    let url = server.openai_url();
    // On PostgreSQL, 8 processes' pools must fit the server's connections beside the other
    // tests: 4 each.
    let db = match sb.db_arg() {
        pg if pg.starts_with("postgres") => format!("{pg}&pool_size=4"),
        file => file.to_owned(),
    };
    let children: Vec<_> = (0..8)
        .map(|_| {
            crate::support::command(
                &db,
                &[
                    "--json",
                    "call",
                    "--provider",
                    "openai",
                    "--base-url",
                    &url,
                    "--model",
                    "gpt-4o-mini",
                    "-m",
                    "Summarize the incident report.",
                    "--repeat",
                    "100",
                    "--concurrency",
                    "100",
                ],
            )
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for child in children {
        let out = crate::support::ran(child.wait_with_output().unwrap());
        assert_eq!(out.code, 0, "{}", out.stderr);
        let value: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(value["reply"], "The incident was a DNS outage.", "{value}");
        assert_eq!(
            (value["calls"].as_u64(), value["distinct_replies"].as_u64()),
            (Some(100), Some(1))
        );
    }
    assert_eq!(
        server.requests().len(),
        1,
        "exactly one upstream execution for 800 calls"
    );
    let report = sb.run(&["--json", "report", "duplicates"]).ok().json();
    let row = &report["rows"][0];
    assert_eq!(row["operation"], "openai.chat_completions");
    assert_eq!(
        (row["calls"].as_u64(), row["repeats"].as_u64()),
        (Some(800), Some(799))
    );
    assert!(row["coincident"].as_u64().unwrap() > 0, "{report}");
}

#[test]
fn eight_processes_of_a_hundred_identical_calls_make_one_upstream_call_on_sqlite() {
    let sb = Sandbox::new();
    let server =
        upstream(json!([{"reply": {"delay_ms": 1500, "text": "The incident was a DNS outage."}}]));
    race(&sb, &server);
}

#[test]
fn eight_processes_of_a_hundred_identical_calls_make_one_upstream_call_on_postgres() {
    let sb = Sandbox::postgres();
    let server =
        upstream(json!([{"reply": {"delay_ms": 1500, "text": "The incident was a DNS outage."}}]));
    race(&sb, &server);
}

#[test]
fn the_seeds_worked_example_through_the_cli() {
    let sb = Sandbox::new();
    // A generated call log: 40,000 calls on 2026-12-02, 6,000 repeating an earlier one.
    let db = sb.dir.path().join("baton.db");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use baton_store::{CacheStore, CallOutcome, CallRecord};
        let store = baton_sqlite::SqliteStore::open(&db).await.unwrap();
        let start = 1_796_169_600_000i64;
        let records: Vec<CallRecord> = (0..40_000u32)
            .map(|i| {
                let n = if i % 20 >= 17 { i - 10 } else { i };
                let mut hash = [0u8; 32];
                hash[..4].copy_from_slice(&n.to_be_bytes());
                CallRecord {
                    at: baton_core::Timestamp(start + i64::from(i) * 2_000),
                    operation: "extract".into(),
                    request_hash: baton_core::key::RequestKey(hash),
                    model: "gpt-4o-mini".into(),
                    input_tokens: 1000,
                    output_tokens: 100,
                    cost_usd: Some(0.004),
                    outcome: CallOutcome::Executed,
                    latency_ms: 900,
                    overlapped: false,
                }
            })
            .collect();
        store
            .log_calls(&baton_core::TenantId::default_tenant(), &records)
            .await
            .unwrap();
    });
    let json = sb
        .run(&["--json", "report", "duplicates", "--day", "2026-12-02"])
        .ok()
        .json();
    let row = &json["rows"][0];
    assert_eq!(
        (row["calls"].as_u64(), row["repeats"].as_u64()),
        (Some(40_000), Some(6_000))
    );
    assert!((row["ratio"].as_f64().unwrap() - 0.15).abs() < 1e-9);
    assert!((row["repeat_cost"].as_f64().unwrap() - 24.0).abs() < 1e-6);
    let text = sb
        .run(&[
            "report",
            "duplicates",
            "--since",
            "2026-12-01",
            "--until",
            "2026-12-02",
        ])
        .ok()
        .stdout;
    assert!(text.contains("15.0%"), "{text}");
    assert!(
        text.contains("repeats cost $24.00 a day on average ($720 over 30 days)"),
        "{text}"
    );
    // Another day has nothing; another operation neither.
    let empty = sb
        .run(&["report", "duplicates", "--day", "2026-12-03"])
        .ok()
        .stdout;
    assert!(
        empty.contains("no calls in the call log in that range"),
        "{empty}"
    );
    let none = sb
        .run(&["--json", "report", "duplicates", "--operation", "other"])
        .ok()
        .json();
    assert!(none["rows"].as_array().unwrap().is_empty());
}

#[test]
fn tool_call_repeats_in_imported_runs() {
    let sb = Sandbox::new();
    let transcript = json!([
        {"role": "user", "content": "check the config"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.toml", "limit": 10}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "read_file", "input": {"limit": 10.0, "path": "a.toml"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "x = 1"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "read_file", "input": {"path": "b.toml"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "y = 2"}]}
    ]);
    let file = sb.file("session.json", &transcript.to_string());
    sb.run(&["import", file.to_str().unwrap(), "--quiet"]).ok();
    let json = sb
        .run(&["--json", "report", "duplicates", "--tools"])
        .ok()
        .json();
    let row = &json["rows"][0];
    assert_eq!(row["operation"], "read_file");
    // Key order and number spelling do not hide a repeat.
    assert_eq!(
        (row["calls"].as_u64(), row["repeats"].as_u64()),
        (Some(3), Some(1))
    );
}

#[test]
fn bad_inputs_are_named_and_exit_4() {
    let sb = Sandbox::new();
    // A report only reads: the store must exist first.
    sb.run(&["migrate"]).ok();
    sb.run(&["report", "duplicates", "--day", "2026-13-01"])
        .fails(4, "--day \"2026-13-01\": expected a day as YYYY-MM-DD");
    sb.run(&[
        "report",
        "duplicates",
        "--since",
        "2026-12-05",
        "--until",
        "2026-12-01",
    ])
    .fails(4, "--since is after --until");
    let prices = sb.file("prices.toml", "[models.gpt-4o]\ninput = \"cheap\"\n");
    let server = upstream(json!([]));
    let url = server.openai_url();
    sb.run(&[
        "call",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "-m",
        "hi",
        "--prices",
        prices.to_str().unwrap(),
    ])
    .fails(4, "prices.toml: price table");
    sb.run(&[
        "call",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "-m",
        "hi",
        "--ttl",
        "0s",
    ])
    .fails(4, "--ttl must be more than zero");
    sb.run(&[
        "call",
        "--provider",
        "openai",
        "--base-url",
        &url,
        "-m",
        "hi",
        "--repeat",
        "0",
    ])
    .fails(4, "--repeat and --concurrency must be at least 1");
    assert!(server.requests().is_empty());
}
