//! Summaries, working state, pins and compaction over HTTP: installs and activations by
//! compare-and-swap (409 on a stale base, 422 on an invalid candidate, nothing written either
//! way), the working state by claim kind, pins, and every compaction strategy.

use baton_core::{RunId, RunStatus, Seq, SummaryId, TenantId};
use reqwest::Method;
use serde_json::{Value, json};

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, send};

on_both_backends!(
    summaries_are_installed_listed_shown_and_activated,
    a_stale_base_is_409_and_writes_nothing,
    an_invalid_candidate_is_422_and_writes_nothing,
    the_working_state_groups_the_active_claims_by_kind,
    pins_are_put_listed_and_deleted,
    compaction_runs_each_strategy_and_reports_it,
    compaction_refuses_bad_options_unknown_and_cancelled_runs,
);

fn acme() -> TenantId {
    TenantId::new("acme").unwrap()
}

fn rid(id: &str) -> RunId {
    RunId::new(id).unwrap()
}

/// Creates run `id` as `acme` with `n` alternating user and assistant text messages.
async fn run_with_texts(server: &TestServer, id: &str, n: usize) {
    let (status, body) = server.post("/v1/runs", json!({"id": id})).await;
    assert_eq!(status, 201, "{body}");
    if n == 0 {
        return;
    }
    let messages: Vec<Value> = (1..=n)
        .map(|i| {
            let role = if i % 2 == 1 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i}: {}", "some words of context ".repeat(20))})
        })
        .collect();
    let (status, body) = server
        .post(
            &format!("/v1/runs/{id}/messages"),
            json!({"messages": messages}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

async fn active(server: &TestServer, run: &str) -> Option<u64> {
    server
        .store
        .run(&acme(), &rid(run))
        .await
        .unwrap()
        .active_summary_id
        .map(|s| s.0)
}

async fn versions(server: &TestServer, run: &str) -> usize {
    server
        .store
        .summaries(&acme(), &rid(run))
        .await
        .unwrap()
        .len()
}

async fn install(server: &TestServer, run: &str, body: Value) -> (u16, Value) {
    server
        .post(&format!("/v1/runs/{run}/summaries"), body)
        .await
}

async fn summaries_are_installed_listed_shown_and_activated(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 4).await;
    let (status, list) = server.get("/v1/runs/r1/summaries").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list, json!({"active_id": null, "summaries": []}));

    let (status, s1) = install(
        &server,
        "r1",
        json!({"base": null, "cut": 2, "claims": [
            {"kind": "goal", "text": "ship it", "source_seq": 1},
            {"kind": "verified", "text": "tests pass", "source_seq": 2},
        ], "meta": {"by": "test"}}),
    )
    .await;
    assert_eq!(status, 201, "{s1}");
    let id1 = s1["id"].as_u64().unwrap();
    assert_eq!(s1["active"], true);
    assert_eq!(s1["coverage"], 2);
    assert_eq!(s1["previous_id"], Value::Null);
    assert_eq!(s1["run"], "r1");
    assert_eq!(s1["meta"], json!({"by": "test"}));
    assert_eq!(active(&server, "r1").await, Some(id1));
    let stored = server.store.summary(&acme(), SummaryId(id1)).await.unwrap();
    assert_eq!(stored.claims.len(), 2);
    assert_eq!(stored.claims[1].source_seq, Seq(2));
    assert_eq!(stored.meta, Some(json!({"by": "test"})));

    let (status, s2) = install(
        &server,
        "r1",
        json!({"base": id1, "cut": 4, "claims": [
            {"kind": "next_step", "text": "release", "source_seq": 4},
        ]}),
    )
    .await;
    assert_eq!(status, 201, "{s2}");
    let id2 = s2["id"].as_u64().unwrap();
    assert_eq!(s2["previous_id"], id1);
    assert_eq!(s2["meta"], Value::Null);

    let (_, list) = server.get("/v1/runs/r1/summaries").await;
    assert_eq!(list["active_id"], id2);
    let items = list["summaries"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], id1);
    assert_eq!(items[0]["active"], false);
    assert_eq!(items[0]["claims"], 2);
    assert_eq!(items[1]["active"], true);

    let (status, shown) = server.get(&format!("/v1/summaries/{id1}")).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["active"], false);
    assert_eq!(
        shown["claims"][0],
        json!({"kind": "goal", "text": "ship it", "source_seq": 1})
    );

    // Roll back to the first version, by compare-and-swap on the second.
    let (status, back) = server
        .post(
            &format!("/v1/runs/r1/summaries/{id1}/activate"),
            json!({"base": id2}),
        )
        .await;
    assert_eq!(status, 200, "{back}");
    assert_eq!(back["id"], id1);
    assert_eq!(back["active"], true);
    assert_eq!(active(&server, "r1").await, Some(id1));
    let (_, ctx) = server.get("/v1/runs/r1/context").await;
    assert_eq!(ctx["messages"][0]["seq"], 3);

    // Another tenant sees none of it; unknown ones do not exist.
    let theirs = send(
        server
            .client
            .get(server.url(&format!("/v1/summaries/{id1}")))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/summaries"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    let theirs = send(
        server
            .client
            .post(server.url("/v1/runs/r1/summaries"))
            .bearer_auth(&server.other_key)
            .json(&json!({"base": id1, "cut": 4, "claims": []})),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    assert_problem(&server.get("/v1/summaries/999999").await, 404, "not-found");
    assert_problem(&server.get("/v1/summaries/x").await, 400, "bad-request");
    assert_problem(
        &server.get("/v1/runs/nope/summaries").await,
        404,
        "not-found",
    );
    assert_problem(
        &install(
            &server,
            "nope",
            json!({"base": null, "cut": 1, "claims": []}),
        )
        .await,
        404,
        "not-found",
    );
    assert_eq!(versions(&server, "r1").await, 2);
    assert_eq!(active(&server, "r1").await, Some(id1));
    server.stop().await;
}

async fn a_stale_base_is_409_and_writes_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 4).await;
    let (status, s1) = install(&server, "r1", json!({"base": null, "cut": 2, "claims": []})).await;
    assert_eq!(status, 201, "{s1}");
    let id1 = s1["id"].as_u64().unwrap();

    // Built on "no summary", but one was installed since.
    let stale = install(
        &server,
        "r1",
        json!({"base": null, "cut": 3, "claims": [
            {"kind": "note", "text": "late", "source_seq": 3},
        ]}),
    )
    .await;
    assert_problem(&stale, 409, "stale-base");
    assert_eq!(stale.1["active_summary_id"], id1);
    assert_eq!(stale.1["base"], Value::Null);
    assert_eq!(versions(&server, "r1").await, 1);
    assert_eq!(active(&server, "r1").await, Some(id1));

    let (status, s2) = install(&server, "r1", json!({"base": id1, "cut": 4, "claims": []})).await;
    assert_eq!(status, 201, "{s2}");
    let id2 = s2["id"].as_u64().unwrap();
    // An activation that saw the first version active is stale too.
    let stale = server
        .post(
            &format!("/v1/runs/r1/summaries/{id1}/activate"),
            json!({"base": id1}),
        )
        .await;
    assert_problem(&stale, 409, "stale-base");
    assert_eq!(stale.1["active_summary_id"], id2);
    assert_eq!(active(&server, "r1").await, Some(id2));
    assert_eq!(versions(&server, "r1").await, 2);

    // A cancelled run takes no install or activation.
    assert_eq!(server.post("/v1/runs/r1/cancel", json!({})).await.0, 200);
    assert_problem(
        &install(&server, "r1", json!({"base": id2, "cut": 4, "claims": []})).await,
        409,
        "run-not-active",
    );
    assert_problem(
        &server
            .post(
                &format!("/v1/runs/r1/summaries/{id1}/activate"),
                json!({"base": id2}),
            )
            .await,
        409,
        "run-not-active",
    );
    assert_eq!(versions(&server, "r1").await, 2);
    assert_eq!(active(&server, "r1").await, Some(id2));
    server.stop().await;
}

async fn an_invalid_candidate_is_422_and_writes_nothing(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 0).await;
    let (status, body) = server
        .post(
            "/v1/runs/r1/messages",
            json!({"messages": [
                {"role": "user", "content": "look"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a b c"},
                ]},
                {"role": "assistant", "content": "three files"},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    run_with_texts(&server, "r2", 2).await;
    let (status, other) =
        install(&server, "r2", json!({"base": null, "cut": 1, "claims": []})).await;
    assert_eq!(status, 201, "{other}");
    let other_id = other["id"].as_u64().unwrap();

    let claim = |seq: u64| json!({"kind": "note", "text": "x", "source_seq": seq});
    let cases = [
        // Between the call and its result.
        (json!({"base": null, "cut": 2, "claims": []}), "unsafe_cut"),
        (
            json!({"base": null, "cut": 3, "claims": [claim(4)]}),
            "source_after_cut",
        ),
        (
            json!({"base": null, "cut": 3, "claims": [claim(9)]}),
            "source_not_found",
        ),
        (
            json!({"base": null, "cut": 3, "claims": [claim(0)]}),
            "source_not_found",
        ),
        (
            json!({"base": null, "cut": 3, "claims": [{"kind": "note", "text": "  ", "source_seq": 1}]}),
            "empty_text",
        ),
        (
            json!({"base": null, "cut": 99, "claims": []}),
            "cut_not_found",
        ),
        (
            json!({"base": null, "cut": 0, "claims": []}),
            "cut_not_beyond_base",
        ),
        (
            json!({"base": other_id, "cut": 3, "claims": []}),
            "base_not_in_run",
        ),
    ];
    for (body, reason) in cases {
        let got = install(&server, "r1", body.clone()).await;
        assert_problem(&got, 422, "invalid-candidate");
        assert_eq!(got.1["rejection"]["reason"], reason, "{body}: {}", got.1);
    }
    // Malformed bodies: no base, an unknown kind, an unknown field, a claim field too many.
    for body in [
        json!({"cut": 3, "claims": []}),
        json!({"base": null, "cut": 3, "claims": [{"kind": "rumor", "text": "x", "source_seq": 1}]}),
        json!({"base": null, "cut": 3, "claims": [], "extra": true}),
        json!({"base": null, "cut": 3, "claims": [{"kind": "note", "text": "x", "source_seq": 1, "why": 1}]}),
        json!({"base": null, "cut": 3, "claims": [], "meta": 5}),
        json!({"base": null, "cut": -1, "claims": []}),
    ] {
        assert_problem(&install(&server, "r1", body).await, 422, "invalid-body");
    }
    let raw = send(
        server
            .req(Method::POST, "/v1/runs/r1/summaries")
            .header("content-type", "application/json")
            .body("{\"base\": null,"),
    )
    .await;
    assert_problem(&raw, 400, "invalid-json");
    assert_eq!(versions(&server, "r1").await, 0);
    assert_eq!(active(&server, "r1").await, None);

    // Activating a version of another run.
    let got = server
        .post(
            &format!("/v1/runs/r1/summaries/{other_id}/activate"),
            json!({"base": null}),
        )
        .await;
    assert_problem(&got, 422, "invalid-candidate");
    assert_eq!(got.1["rejection"]["reason"], "version_not_in_run");
    assert_problem(
        &server
            .post(
                &format!("/v1/runs/r1/summaries/{other_id}/activate"),
                json!({}),
            )
            .await,
        422,
        "invalid-body",
    );
    assert_eq!(active(&server, "r1").await, None);
    assert_eq!(active(&server, "r2").await, Some(other_id));

    // The safe cut after the result is taken.
    let (status, ok) = install(
        &server,
        "r1",
        json!({"base": null, "cut": 3, "claims": [claim(3)]}),
    )
    .await;
    assert_eq!(status, 201, "{ok}");
    assert_eq!(versions(&server, "r1").await, 1);
    server.stop().await;
}

async fn the_working_state_groups_the_active_claims_by_kind(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 6).await;
    let (status, empty) = server.get("/v1/runs/r1/state").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty["summary_id"], Value::Null);
    assert_eq!(empty["constraints"], json!([]));
    assert_eq!(empty["next_steps"], json!([]));

    let claim =
        |kind: &str, text: &str, seq: u64| json!({"kind": kind, "text": text, "source_seq": seq});
    let (status, s) = install(
        &server,
        "r1",
        json!({"base": null, "cut": 6, "claims": [
            claim("goal", "make CI green", 1),
            claim("constraint", "read-only", 1),
            claim("verified", "the test sleeps 10ms", 3),
            claim("hypothesis", "a race on startup", 4),
            claim("failed_approach", "raising the timeout", 5),
            claim("pending", "rerun of job 7", 5),
            claim("artifact", "tests/flaky.rs", 3),
            claim("next_step", "add a barrier", 6),
            claim("note", "owner is on leave", 2),
            claim("constraint", "no force pushes", 2),
        ]}),
    )
    .await;
    assert_eq!(status, 201, "{s}");
    let (status, state) = server.get("/v1/runs/r1/state").await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(state["summary_id"], s["id"]);
    assert_eq!(state["coverage"], 6);
    assert_eq!(
        state["objective"],
        json!([{"text": "make CI green", "source_seq": 1}])
    );
    assert_eq!(
        state["constraints"],
        json!([
            {"text": "read-only", "source_seq": 1},
            {"text": "no force pushes", "source_seq": 2},
        ])
    );
    assert_eq!(state["findings"][0]["source_seq"], 3);
    assert_eq!(state["hypotheses"][0]["text"], "a race on startup");
    assert_eq!(state["failed_approaches"][0]["text"], "raising the timeout");
    assert_eq!(state["pending"][0]["source_seq"], 5);
    assert_eq!(state["artifacts"][0]["text"], "tests/flaky.rs");
    assert_eq!(state["next_steps"][0]["text"], "add a barrier");
    assert_eq!(state["notes"][0]["text"], "owner is on leave");

    assert_problem(&server.get("/v1/runs/nope/state").await, 404, "not-found");
    let theirs = send(
        server
            .client
            .get(server.url("/v1/runs/r1/state"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    server.stop().await;
}

async fn pins_are_put_listed_and_deleted(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 3).await;
    let stored = |server: &TestServer| {
        let store = server.store.clone();
        async move {
            store
                .pins(&acme(), &rid("r1"))
                .await
                .unwrap()
                .iter()
                .map(|s| s.0)
                .collect::<Vec<_>>()
        }
    };
    let (status, pins) = server.get("/v1/runs/r1/pins").await;
    assert_eq!(status, 200, "{pins}");
    assert_eq!(pins["pins"], json!([]));

    let put = send(server.req(Method::PUT, "/v1/runs/r1/pins/2")).await;
    assert_eq!(put.0, 200, "{}", put.1);
    assert_eq!(put.1, json!({"pins": [2], "changed": true}));
    let again = send(server.req(Method::PUT, "/v1/runs/r1/pins/2")).await;
    assert_eq!(again.1, json!({"pins": [2], "changed": false}));
    let put = send(server.req(Method::PUT, "/v1/runs/r1/pins/1")).await;
    assert_eq!(put.1["pins"], json!([1, 2]));
    assert_eq!(stored(&server).await, [1, 2]);
    assert_problem(
        &send(server.req(Method::PUT, "/v1/runs/r1/pins/4")).await,
        404,
        "not-found",
    );
    assert_problem(
        &send(server.req(Method::PUT, "/v1/runs/r1/pins/0")).await,
        404,
        "not-found",
    );
    assert_problem(
        &send(server.req(Method::PUT, "/v1/runs/r1/pins/two")).await,
        400,
        "bad-request",
    );
    assert_eq!(
        server.get("/v1/runs/r1/pins").await.1["pins"],
        json!([1, 2])
    );

    let del = send(server.req(Method::DELETE, "/v1/runs/r1/pins/2")).await;
    assert_eq!(del.0, 200, "{}", del.1);
    assert_eq!(del.1, json!({"pins": [1], "changed": true}));
    let del = send(server.req(Method::DELETE, "/v1/runs/r1/pins/2")).await;
    assert_eq!(del.1, json!({"pins": [1], "changed": false}));
    assert_eq!(stored(&server).await, [1]);

    // Unknown and foreign runs.
    assert_problem(&server.get("/v1/runs/nope/pins").await, 404, "not-found");
    assert_problem(
        &send(server.req(Method::PUT, "/v1/runs/nope/pins/1")).await,
        404,
        "not-found",
    );
    assert_problem(
        &send(server.req(Method::DELETE, "/v1/runs/nope/pins/1")).await,
        404,
        "not-found",
    );
    for method in [Method::PUT, Method::DELETE] {
        let theirs = send(
            server
                .client
                .request(method, server.url("/v1/runs/r1/pins/1"))
                .bearer_auth(&server.other_key),
        )
        .await;
        assert_problem(&theirs, 404, "not-found");
    }
    assert_eq!(stored(&server).await, [1]);
    server.stop().await;
}

/// A run whose odd seqs are tool calls and even seqs their (large) results.
async fn run_with_tools(server: &TestServer, id: &str, pairs: usize) {
    run_with_texts(server, id, 0).await;
    let mut messages = vec![json!({"role": "user", "content": "inspect the repository"})];
    for i in 0..pairs {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{i}"), "name": "read_file", "input": {"path": format!("src/f{i}.rs")}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": format!("fn f{i}() {{}}\n").repeat(60)},
        ]}));
    }
    let (status, body) = server
        .post(
            &format!("/v1/runs/{id}/messages"),
            json!({"messages": messages}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

async fn metric(server: &TestServer, line_start: &str) -> Option<f64> {
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
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn compaction_runs_each_strategy_and_reports_it(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 30).await;

    // A dry run plans and installs nothing.
    let (status, planned) = server
        .post(
            "/v1/runs/r1/compact",
            json!({"strategy": "sliding", "keep_last": 5, "dry_run": true}),
        )
        .await;
    assert_eq!(status, 200, "{planned}");
    assert_eq!(planned["outcome"], "planned");
    assert_eq!(planned["plan"], "drop");
    assert_eq!(planned["cut"], 25);
    assert_eq!(planned["dropped"], json!({"from": 1, "through": 25}));
    assert_eq!(planned["summary_id"], Value::Null);
    assert!(planned["claims"].is_array());
    assert_eq!(active(&server, "r1").await, None);

    // The real one installs a version covering the dropped part.
    let (status, done) = server
        .post(
            "/v1/runs/r1/compact",
            json!({"strategy": "sliding", "keep_last": 5}),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["outcome"], "compacted");
    assert_eq!(done["strategy"], "sliding");
    assert_eq!(done["dropped"], json!({"from": 1, "through": 25}));
    assert_eq!(done["messages_before"], 30);
    assert_eq!(done["messages_after"], 5);
    let before = done["tokens_before"].as_u64().unwrap();
    let after = done["tokens_after"].as_u64().unwrap();
    assert!(after < before, "{done}");
    let sid = done["summary_id"].as_u64().unwrap();
    assert_eq!(active(&server, "r1").await, Some(sid));
    let summary = server.store.summary(&acme(), SummaryId(sid)).await.unwrap();
    assert_eq!(summary.coverage, Seq(25));
    assert_eq!(summary.meta.as_ref().unwrap()["strategy"], "sliding");
    let ctx = server.store.context(&acme(), &rid("r1")).await.unwrap();
    assert_eq!(ctx.messages.len(), 5);
    assert_eq!(ctx.tokens, after);
    assert_eq!(
        metric(&server, "baton_compactions_total{outcome=\"compacted\"}").await,
        Some(1.0)
    );
    assert_eq!(
        metric(&server, "baton_compactions_total{outcome=\"planned\"}").await,
        Some(1.0)
    );
    assert_eq!(
        metric(&server, "baton_tokens_saved_total{source=\"compaction\"}").await,
        Some((before - after) as f64)
    );

    // Nothing left to drop: kept, with the reason.
    let (status, kept) = server
        .post(
            "/v1/runs/r1/compact",
            json!({"strategy": "sliding", "keep_last": 5}),
        )
        .await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(kept["outcome"], "kept");
    assert_eq!(kept["why"]["reason"], "nothing_old");
    assert!(kept["reason"].as_str().is_some());
    // `none` never compacts.
    let (_, none) = server
        .post("/v1/runs/r1/compact", json!({"strategy": "none"}))
        .await;
    assert_eq!(none["outcome"], "kept");
    assert_eq!(none["why"]["reason"], "baseline");
    assert_eq!(versions(&server, "r1").await, 1);

    // Budget under its maximum is kept; over it, it compacts at once, whatever the trigger's
    // threshold says (a context over its strategy's limit is never held back). A strategy that
    // holds no limit is refused by that threshold, then forced past the trigger.
    run_with_texts(&server, "r2", 20).await;
    let (_, kept) = server
        .post(
            "/v1/runs/r2/compact",
            json!({"strategy": "budget", "max_tokens": 1000000}),
        )
        .await;
    assert_eq!(kept["outcome"], "kept");
    assert_eq!(kept["why"]["reason"], "under_threshold");
    let (_, refused) = server
        .post(
            "/v1/runs/r2/compact",
            json!({"strategy": "sliding", "keep_last": 4, "min_context_tokens": 1000000}),
        )
        .await;
    assert_eq!(refused["outcome"], "refused", "{refused}");
    assert_eq!(refused["why"]["reason"], "under_threshold");
    assert!(refused["tokens_before"].as_u64().unwrap() > 0);
    assert_eq!(versions(&server, "r2").await, 0);
    let (_, forced) = server
        .post(
            "/v1/runs/r2/compact",
            json!({"strategy": "sliding", "keep_last": 4, "min_context_tokens": 1000000, "force": true}),
        )
        .await;
    assert_eq!(forced["outcome"], "compacted", "{forced}");
    assert_eq!(versions(&server, "r2").await, 1);
    run_with_texts(&server, "r2b", 20).await;
    let (_, over) = server
        .post(
            "/v1/runs/r2b/compact",
            json!({"strategy": "budget", "max_tokens": 500, "min_context_tokens": 1000000}),
        )
        .await;
    assert_eq!(over["outcome"], "compacted", "{over}");
    assert!(over["tokens_after"].as_u64().unwrap() <= 500, "{over}");

    // Structured: the working state is written from the old messages.
    run_with_texts(&server, "r3", 20).await;
    let (_, structured) = server
        .post(
            "/v1/runs/r3/compact",
            json!({"strategy": "structured", "threshold": 1, "keep_recent": 4}),
        )
        .await;
    assert_eq!(structured["outcome"], "compacted", "{structured}");
    assert_eq!(structured["plan"], "update_state");
    assert!(structured["retention"].is_object());
    let sid = structured["summary_id"].as_u64().unwrap();
    assert_eq!(active(&server, "r3").await, Some(sid));
    let (_, state) = server.get("/v1/runs/r3/state").await;
    assert_eq!(state["summary_id"], sid);

    // Summarize needs a model, and this service has no provider: 422, naming why, nothing
    // installed.
    run_with_texts(&server, "r4", 20).await;
    let (status, summarized) = server
        .post(
            "/v1/runs/r4/compact",
            json!({"strategy": "summarize", "threshold": 1, "keep_recent": 4}),
        )
        .await;
    assert_eq!(status, 422, "{summarized}");
    assert!(
        summarized["type"]
            .as_str()
            .unwrap()
            .ends_with("needs-model"),
        "{summarized}"
    );
    assert_eq!(versions(&server, "r4").await, 0);

    // Clearing old tool results writes no summary; the run's setting moves.
    run_with_tools(&server, "r5", 6).await;
    let (_, cleared) = server
        .post(
            "/v1/runs/r5/compact",
            json!({"strategy": "clear-tool-results", "keep_recent": 2, "min_tokens": 10}),
        )
        .await;
    assert_eq!(cleared["outcome"], "compacted", "{cleared}");
    assert_eq!(cleared["plan"], "clear_tool_results");
    assert_eq!(cleared["summary_id"], Value::Null);
    assert_eq!(cleared["dropped"], Value::Null);
    assert_eq!(versions(&server, "r5").await, 0);
    let run = server.store.run(&acme(), &rid("r5")).await.unwrap();
    assert!(run.cleared.is_some());
    let (_, ctx) = server.get("/v1/runs/r5/context").await;
    assert!(!ctx["cleared"].as_array().unwrap().is_empty(), "{ctx}");
    // The original is still recallable.
    let (_, original) = server.get("/v1/runs/r5/messages/3").await;
    assert!(
        original["content"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("fn f0()")
    );
    server.stop().await;
}

async fn compaction_refuses_bad_options_unknown_and_cancelled_runs(backend: Backend) {
    let server = TestServer::start(backend).await;
    run_with_texts(&server, "r1", 10).await;
    for (body, kind) in [
        (json!({"strategy": "slidng"}), "invalid-body"),
        (json!({}), "invalid-body"),
        (json!({"strategy": "sliding", "keep": 3}), "invalid-body"),
        (
            json!({"strategy": "sliding", "keep_last": -1}),
            "invalid-body",
        ),
        (
            json!({"strategy": "sliding", "keep_last": 0}),
            "invalid-options",
        ),
        (
            json!({"strategy": "budget", "max_tokens": 0}),
            "invalid-options",
        ),
        (
            json!({"strategy": "budget", "max_tokens": 10, "target_tokens": 20}),
            "invalid-options",
        ),
        (
            json!({"strategy": "summarize", "min_reduction": 1.5}),
            "invalid-options",
        ),
        (
            json!({"strategy": "summarize", "min_growth": 1e9}),
            "invalid-options",
        ),
        (
            json!({"strategy": "structured", "keep_recent": 0}),
            "invalid-options",
        ),
    ] {
        assert_problem(&server.post("/v1/runs/r1/compact", body).await, 422, kind);
    }
    let sliding = json!({"strategy": "sliding", "keep_last": 2});
    assert_problem(
        &server.post("/v1/runs/nope/compact", sliding.clone()).await,
        404,
        "not-found",
    );
    let theirs = send(
        server
            .client
            .post(server.url("/v1/runs/r1/compact"))
            .bearer_auth(&server.other_key)
            .json(&sliding),
    )
    .await;
    assert_problem(&theirs, 404, "not-found");
    assert_eq!(versions(&server, "r1").await, 0);

    // A cancelled run: a conflict, nothing written, counted.
    assert_eq!(server.post("/v1/runs/r1/cancel", json!({})).await.0, 200);
    let got = server.post("/v1/runs/r1/compact", sliding).await;
    assert_problem(&got, 409, "run-not-active");
    let run = server.store.run(&acme(), &rid("r1")).await.unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.active_summary_id, None);
    assert_eq!(versions(&server, "r1").await, 0);
    assert_eq!(
        metric(&server, "baton_compactions_total{outcome=\"conflict\"}").await,
        Some(1.0)
    );
    server.stop().await;
}
