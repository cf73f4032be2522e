//! The MCP adapter through its crate API (`Baton::call`, what `tools/call` runs), on a real
//! SQLite file and on a fresh PostgreSQL schema (`BATON_TEST_PG`): recall pages through a
//! size cap without losing or repeating a message and answers the stored messages exactly,
//! search names the tool a result answers, every failure is a tool error naming what was
//! wrong, and another tenant sees nothing.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use baton_core::{ContentBlock, Message, Role, RunId, Seq, TenantId};
use baton_mcp::Baton;
use baton_store::{NewEntry, NewRun, Store};
use serde_json::{Value, json};

fn pg_url() -> String {
    std::env::var("BATON_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Both stores: a SQLite file (its directory kept alive with it) and a PostgreSQL schema.
async fn stores() -> Vec<(Arc<dyn Store>, Option<tempfile::TempDir>)> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = baton_sqlite::SqliteStore::open(&dir.path().join("baton.db"))
        .await
        .unwrap();
    let schema = format!("baton_mcp_{}", uuid::Uuid::now_v7().simple());
    let pg = baton_postgres::PgStore::connect(&format!("{}?schema={schema}", pg_url()))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach the test PostgreSQL at {} (set BATON_TEST_PG): {e}",
                pg_url()
            )
        });
    vec![(Arc::new(sqlite), Some(dir)), (Arc::new(pg), None)]
}

/// A run of 40 messages: a user request, then tool calls and their results, some large, with
/// text that is not ASCII.
async fn seeded(store: &dyn Store, tenant: &TenantId) -> (RunId, Vec<Message>) {
    let run = store
        .create_run(
            tenant,
            &NewRun {
                id: Some(RunId::new("r1").unwrap()),
                ..NewRun::default()
            },
        )
        .await
        .unwrap()
        .id;
    let mut messages = vec![Message::text(
        Role::User,
        "Find why the café test is flaky — «naïve» dates?",
    )];
    for i in 0..19 {
        let id = format!("call_{i}");
        messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.clone(),
                name: if i % 2 == 0 { "read_file" } else { "run_tests" }.to_owned(),
                input: json!({"path": format!("src/mod_{i}.rs"), "z": 1, "a": [1.5, "x"]}),
            }],
        });
        messages.push(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id,
                content: vec![ContentBlock::Text {
                    text: format!("line {i}: timezone drift\n{}", "x".repeat(500 * (i % 4))),
                }],
                is_error: i % 5 == 0,
            }],
        });
    }
    messages.push(Message::text(
        Role::Assistant,
        "Fixed: the dates were naïve.",
    ));
    let entries: Vec<NewEntry> = messages.iter().cloned().map(NewEntry::estimated).collect();
    store.append(tenant, &run, &entries).await.unwrap();
    (run, messages)
}

fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => panic!("arguments are an object"),
    }
}

async fn ok(baton: &Baton, tool: &str, arguments: Value) -> rmcp::model::CallToolResult {
    let result = baton.call(tool, args(arguments.clone())).await.unwrap();
    assert_eq!(
        result.is_error,
        Some(false),
        "{tool} {arguments}: {:?}",
        result.content
    );
    result
}

async fn fails(baton: &Baton, tool: &str, arguments: Value, names: &str) {
    let result = baton.call(tool, args(arguments.clone())).await.unwrap();
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {arguments}: {result:?}"
    );
    let text = &result.content[0].as_text().unwrap().text;
    assert!(
        text.contains(names),
        "{tool} {arguments}: {text:?} does not name {names:?}"
    );
}

#[tokio::test]
async fn recall_pages_through_its_cap_and_answers_the_stored_messages() {
    for (store, _dir) in stores().await {
        let tenant = TenantId::new("acme").unwrap();
        let (run, messages) = seeded(&*store, &tenant).await;
        let baton = Baton::new(store.clone(), tenant.clone());
        let stored = store.read_range(&tenant, &run, Seq(1), None).await.unwrap();
        let mut seen = Vec::new();
        let mut arguments = json!({"run": "r1", "from": 1, "max_bytes": 1500});
        loop {
            let result = ok(&baton, "recall", arguments).await;
            let page = result.structured_content.clone().unwrap();
            let blocks = &result.content[1..];
            assert!(!blocks.is_empty());
            let mut bytes = 0;
            for block in blocks {
                let text = block.as_text().unwrap();
                let meta = &text.meta.as_ref().unwrap().0;
                assert_eq!(meta["baton/run"], "r1");
                let seq = meta["baton/seq"].as_u64().unwrap();
                let entry = &stored[seq as usize - 1];
                assert_eq!(text.text, serde_json::to_string(&entry.message).unwrap());
                let original: Message = serde_json::from_str(&text.text).unwrap();
                assert_eq!(original, messages[seq as usize - 1], "seq {seq}");
                bytes += text.text.len();
                seen.push(seq);
            }
            // The cap holds, except for a page's first message, which is answered whole.
            assert!(bytes <= 1500 || blocks.len() == 1, "{bytes} bytes");
            match page["next_cursor"].as_str() {
                Some(cursor) => {
                    arguments = json!({"run": "r1", "cursor": cursor, "max_bytes": 1500})
                }
                None => break,
            }
        }
        assert_eq!(seen, (1..=40).collect::<Vec<u64>>());
        // A range's end bounds the pages.
        let result = ok(&baton, "recall", json!({"run": "r1", "from": 38, "to": 39})).await;
        assert_eq!(result.content.len(), 3);
        assert_eq!(
            result.structured_content.unwrap()["next_cursor"],
            Value::Null
        );
    }
}

#[tokio::test]
async fn search_answers_an_index_naming_the_tools() {
    for (store, _dir) in stores().await {
        let tenant = TenantId::new("acme").unwrap();
        seeded(&*store, &tenant).await;
        let baton = Baton::new(store, tenant);
        let found = ok(
            &baton,
            "search",
            json!({"query": "timezone drift", "kind": "tool_result"}),
        )
        .await;
        let hits = found.structured_content.unwrap()["hits"].clone();
        let hits = hits.as_array().unwrap();
        assert_eq!(hits.len(), 19);
        assert_eq!(hits[0]["seq"], 3);
        assert_eq!(hits[0]["tool"], "read_file");
        assert_eq!(hits[1]["tool"], "run_tests");
        assert_eq!(hits[0]["role"], "user");
        for hit in hits {
            let snippet = hit["snippet"].as_str().unwrap();
            assert!(snippet.contains("timezone drift"), "{snippet}");
            assert!(snippet.chars().count() <= 242, "{snippet}");
        }
        let limited = ok(&baton, "search", json!({"query": "drift", "limit": 5})).await;
        let limited = limited.structured_content.unwrap();
        assert_eq!(limited["hits"].as_array().unwrap().len(), 5);
        assert_eq!(limited["more"], true);
        // Case and diacritics fold, as everywhere in baton's search.
        let folded = ok(&baton, "search", json!({"query": "CAFE"})).await;
        assert_eq!(folded.structured_content.unwrap()["hits"][0]["seq"], 1);
        let prefix = ok(&baton, "search", json!({"query": "timez"})).await;
        let prefix = prefix.structured_content.unwrap();
        assert_eq!(prefix["hits"], json!([]));
        assert!(
            prefix["hint"].as_str().unwrap().contains("timez*"),
            "{prefix}"
        );
    }
}

/// Appends one text message saying `text` to `run`, creating the run first when it is new.
async fn say(store: &dyn Store, tenant: &TenantId, run: &str, text: &str) {
    let id = RunId::new(run).unwrap();
    if store.run(tenant, &id).await.is_err() {
        store
            .create_run(
                tenant,
                &NewRun {
                    id: Some(id.clone()),
                    ..NewRun::default()
                },
            )
            .await
            .unwrap();
    }
    let entry = NewEntry::estimated(Message::text(Role::User, text));
    store.append(tenant, &id, &[entry]).await.unwrap();
}

/// The run of `search`'s first hit for `query`, limited to one hit.
async fn first_hit_run(baton: &Baton, query: &str) -> String {
    let found = ok(baton, "search", json!({"query": query, "limit": 1})).await;
    found.structured_content.unwrap()["hits"][0]["run"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn search_follows_runs_that_grow_between_calls_of_one_service() {
    // One service answers many calls and remembers each run's last activity between them;
    // a run that grew must sort by its new activity at once, and a new run must appear.
    for (store, _dir) in stores().await {
        let tenant = TenantId::new("acme").unwrap();
        let baton = Baton::new(store.clone(), tenant.clone());
        say(&*store, &tenant, "older", "the needle is here").await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        say(&*store, &tenant, "newer", "another needle").await;
        assert_eq!(first_hit_run(&baton, "needle").await, "newer");
        assert_eq!(first_hit_run(&baton, "needle").await, "newer");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        say(&*store, &tenant, "older", "a later needle").await;
        assert_eq!(first_hit_run(&baton, "needle").await, "older");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        say(&*store, &tenant, "newest", "the last needle").await;
        assert_eq!(first_hit_run(&baton, "needle").await, "newest");
        let runs = ok(&baton, "runs", json!({})).await;
        let runs = runs.structured_content.unwrap().to_string();
        assert!(runs.contains("newest") && runs.contains("older"), "{runs}");
    }
}

#[tokio::test]
async fn failures_are_tool_errors_and_other_tenants_see_nothing() {
    for (store, _dir) in stores().await {
        let tenant = TenantId::new("acme").unwrap();
        seeded(&*store, &tenant).await;
        let baton = Baton::new(store.clone(), tenant);
        fails(&baton, "search", json!({}), "query").await;
        fails(
            &baton,
            "search",
            json!({"query": "x", "limit": 101}),
            "limit 101",
        )
        .await;
        fails(&baton, "recall", json!({"run": "r1", "seq": 41}), "1..40").await;
        fails(
            &baton,
            "recall",
            json!({"run": "r1", "seq": 1, "from": 2}),
            "one of",
        )
        .await;
        fails(&baton, "recall", json!({"run": "r1", "seq": -1}), "seq").await;
        fails(
            &baton,
            "recall",
            json!({"run": "bad id!", "seq": 1}),
            "bad id!",
        )
        .await;
        fails(
            &baton,
            "recall",
            json!({"run": "r1", "seq": 1, "max_bytes": 5_000_000}),
            "max_bytes",
        )
        .await;
        fails(&baton, "pin", json!({"run": "r1", "seq": 99}), "99").await;
        fails(
            &baton,
            "compact",
            json!({"run": "r1", "strategy": "magic"}),
            "structured",
        )
        .await;
        fails(
            &baton,
            "report",
            json!({"kind": "usage", "since": "someday"}),
            "someday",
        )
        .await;
        fails(&baton, "runs", json!({"since": "2026-13-45"}), "since").await;
        assert!(baton.call("no_such_tool", None).await.is_none());
        // Nothing was written by any of it.
        assert_eq!(
            store
                .pins(&TenantId::new("acme").unwrap(), &RunId::new("r1").unwrap())
                .await
                .unwrap(),
            vec![]
        );

        let other = Baton::new(store.clone(), TenantId::new("other").unwrap());
        let listed = ok(&other, "runs", json!({})).await;
        assert_eq!(listed.structured_content.unwrap()["runs"], json!([]));
        let found = ok(&other, "search", json!({"query": "drift"})).await;
        assert_eq!(found.structured_content.unwrap()["hits"], json!([]));
        let mut covered = vec!["runs", "search"];
        for (tool, arguments) in [
            ("recall", json!({"run": "r1", "seq": 1})),
            ("search", json!({"query": "drift", "run": "r1"})),
            ("run", json!({"run": "r1"})),
            ("working_state", json!({"run": "r1"})),
            ("context", json!({"run": "r1"})),
            ("pin", json!({"run": "r1", "seq": 1})),
            ("unpin", json!({"run": "r1", "seq": 1})),
            (
                "compact",
                json!({"run": "r1", "strategy": "sliding", "dry_run": false}),
            ),
            ("report", json!({"kind": "growth", "run": "r1"})),
        ] {
            fails(&other, tool, arguments, "not found").await;
            covered.push(tool);
        }
        // Every tool the server offers was called with the first tenant's ids.
        for tool in baton_mcp::TOOLS {
            assert!(
                covered.contains(&tool.name),
                "{} is not tried across tenants",
                tool.name
            );
        }
        let run = store
            .run(&TenantId::new("acme").unwrap(), &RunId::new("r1").unwrap())
            .await
            .unwrap();
        assert_eq!(
            run.active_summary_id, None,
            "the other tenant's compact wrote nothing"
        );
    }
}

#[test]
fn every_tool_has_an_object_schema_from_its_type() {
    for tool in baton_mcp::TOOLS {
        let definition = tool.definition();
        assert_eq!(definition.input_schema["type"], "object", "{}", tool.name);
        assert_eq!(
            definition.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}: unknown arguments are refused",
            tool.name
        );
    }
}
