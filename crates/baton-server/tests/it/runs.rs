//! `GET /v1/runs` a page at a time with the listing's filters, and `DELETE /v1/runs/{id}`
//! (issue 17, items 6 and 1), over HTTP on both backends.

use baton_core::usage::{Usage, UsageRecord};
use baton_core::{Message, Role, TenantId, Timestamp};
use baton_store::{ImportUsage, Imported, NewEntry, NewImport, Origin, Reimport};
use reqwest::Method;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, make_key, send};

on_both_backends!(
    runs_are_listed_a_page_at_a_time_with_filters,
    a_run_is_deleted_whole_with_its_subagents,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

/// Imports a Claude Code-like session `key` of `project`, last active at `last`, with one
/// response of `input` fresh tokens (priced), as `acme`; returns its run id.
async fn session(server: &TestServer, key: &str, project: &str, last: &str, input: u64) -> String {
    session_of(server, key, None, project, last, input).await
}

async fn session_of(
    server: &TestServer,
    key: &str,
    parent: Option<&str>,
    project: &str,
    last: &str,
    input: u64,
) -> String {
    let entries = vec![
        NewEntry::estimated(Message::text(Role::User, format!("task {key}"))),
        NewEntry::estimated(Message::text(Role::Assistant, "done")),
    ];
    let origin = Origin {
        source_key: key.into(),
        path: format!("/logs/{key}.jsonl"),
        format: "claude-code".into(),
        source_session_id: Some(key.into()),
        parent_key: parent.map(str::to_owned),
        models: vec!["claude-opus-4-6".into()],
        first_at: Some("2026-01-01T00:00:00Z".into()),
        last_at: Some(last.into()),
        project: Some(project.into()),
        title: Some(format!("task {key}")),
        ..Origin::default()
    };
    let mut import = NewImport::new(None, origin, entries, vec![]);
    import.usage = ImportUsage {
        session: key.into(),
        project: Some(project.into()),
        agent: "claude-code".into(),
        records: vec![(
            UsageRecord {
                id: format!("{key}-r"),
                model: Some("claude-opus-4-6".into()),
                response_id: None,
                request_id: None,
                at: Timestamp::parse(last),
                usage: Usage {
                    input,
                    ..Usage::default()
                },
                estimated: false,
            },
            Some(1),
        )],
    };
    match server
        .store
        .import(&acme(), vec![import], Reimport::No)
        .await
        .unwrap()
        .remove(0)
    {
        Imported::Created(run) => run.id.to_string(),
        other => panic!("{other:?}"),
    }
}

fn ids(page: &Value) -> Vec<&str> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect()
}

async fn runs_are_listed_a_page_at_a_time_with_filters(backend: Backend) {
    let server = TestServer::start(backend).await;
    // No runs yet: an empty page.
    let (status, empty) = server.get("/v1/runs").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty, json!({"runs": [], "total": 0, "next_cursor": null}));

    let a = session(&server, "a", "/w/alpha", "2026-01-03T00:00:00Z", 1_000_000).await;
    let b = session(&server, "b", "/w/beta", "2026-01-05T00:00:00Z", 3_000_000).await;
    let c = session(&server, "c", "/w/beta", "2026-01-04T00:00:00Z", 2_000_000).await;
    let (status, native) = server
        .post("/v1/runs", json!({"id": "native", "goal": "g"}))
        .await;
    assert_eq!(status, 201, "{native}");

    // Oldest first by default, every field the CLI shows, as before plus the new ones.
    let (status, all) = server.get("/v1/runs").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(ids(&all), [a.as_str(), b.as_str(), c.as_str(), "native"]);
    assert_eq!(
        (all["total"].clone(), all["next_cursor"].clone()),
        (json!(4), Value::Null)
    );
    let first = &all["runs"][0];
    for (field, value) in [
        ("tenant", json!("acme")),
        ("status", json!("active")),
        ("last_seq", json!(2)),
        ("agent", json!("claude-code")),
        ("project", json!("/w/alpha")),
        ("title", json!("task a")),
        ("models", json!(["claude-opus-4-6"])),
        ("last_activity", json!("2026-01-03T00:00:00.000Z")),
        ("messages", json!(2)),
        ("usage_tokens", json!(1_000_000)),
        ("subagents", json!(0)),
        ("parent_run", Value::Null),
    ] {
        assert_eq!(first[field], value, "{field}: {first}");
    }
    assert!(first["cost"].as_f64().unwrap() > 0.0);
    assert_eq!(all["runs"][3]["title"], "g");

    // Pages of two: a cursor, then the rest.
    let (_, page) = server.get("/v1/runs?limit=2&sort=last").await;
    assert_eq!(ids(&page), [native["id"].as_str().unwrap(), b.as_str()]);
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let (_, rest) = server
        .get(&format!("/v1/runs?limit=2&sort=last&cursor={cursor}"))
        .await;
    assert_eq!(ids(&rest), [c.as_str(), a.as_str()]);
    assert_eq!(rest["next_cursor"], Value::Null);
    assert_eq!(rest["total"], 4);

    // Filters and sorts.
    let (_, beta) = server.get("/v1/runs?project=beta&sort=cost").await;
    assert_eq!(ids(&beta), [b.as_str(), c.as_str()]);
    let (_, since) = server
        .get("/v1/runs?since=2026-01-04&project=%2Fw%2Fbeta")
        .await;
    assert_eq!(ids(&since), [b.as_str(), c.as_str()]);
    let (_, since) = server
        .get("/v1/runs?since=2026-01-04T12:00:00Z&sort=first")
        .await;
    assert_eq!(ids(&since), ["native", b.as_str()]);

    // Bad parameters are 400 problems naming what was wrong.
    for (path, says) in [
        ("/v1/runs?sort=size", "expected one of created, last"),
        ("/v1/runs?limit=0", "limit 0"),
        ("/v1/runs?limit=1001", "limit 1001"),
        ("/v1/runs?since=later", "since \"later\""),
        ("/v1/runs?cursor=xyz", "not a cursor"),
        (
            &format!("/v1/runs?sort=cost&cursor={cursor}"),
            "sorted by last",
        ),
        ("/v1/runs?colour=red", "colour"),
    ] {
        let got = server.get(path).await;
        assert_problem(&got, 400, "bad-request");
        assert!(
            got.1["detail"].as_str().unwrap().contains(says),
            "{path}: {}",
            got.1
        );
    }
    // Another tenant sees none of them.
    let other = make_key(&*server.store, "other").await;
    let (status, theirs) = send(
        server
            .client
            .get(server.url("/v1/runs"))
            .bearer_auth(&other),
    )
    .await;
    assert_eq!((status, theirs["total"].clone()), (200, json!(0)));
    server.stop().await;
}

async fn a_run_is_deleted_whole_with_its_subagents(backend: Backend) {
    let server = TestServer::start(backend).await;
    let parent = session(&server, "p", "/w", "2026-01-03T00:00:00Z", 10).await;
    let child = session_of(
        &server,
        "p/agent",
        Some("p"),
        "/w",
        "2026-01-03T00:00:00Z",
        5,
    )
    .await;
    let kept = session(&server, "k", "/w", "2026-01-03T00:00:00Z", 7).await;
    let other = make_key(&*server.store, "other").await;

    // Another tenant's key: not found, nothing deleted.
    let (status, _) = send(
        server
            .client
            .delete(server.url(&format!("/v1/runs/{parent}")))
            .bearer_auth(&other),
    )
    .await;
    assert_eq!(status, 404);

    let (status, deleted) = send(server.req(Method::DELETE, &format!("/v1/runs/{parent}"))).await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        deleted,
        json!({"deleted": parent, "subagents": [child], "messages": 4})
    );
    for run in [&parent, &child] {
        assert_problem(
            &server.get(&format!("/v1/runs/{run}")).await,
            404,
            "not-found",
        );
        let again = send(server.req(Method::DELETE, &format!("/v1/runs/{run}"))).await;
        assert_problem(&again, 404, "not-found");
    }
    let (_, left) = server.get("/v1/runs").await;
    assert_eq!(ids(&left), [kept.as_str()]);
    let usage = server
        .store
        .usage(&acme(), &baton_store::UsageQuery::default())
        .await
        .unwrap();
    assert_eq!(usage.len(), 1, "the deleted runs' usage records are gone");
    assert_problem(
        &send(server.req(Method::DELETE, "/v1/runs/bad%20id")).await,
        400,
        "bad-request",
    );
    server.stop().await;
}
