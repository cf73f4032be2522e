//! The idempotency ledger over HTTP: `POST /v1/operations` with `Idempotency-Key`, then
//! heartbeat, complete, fail, read and list, with the IETF draft's statuses.

use std::time::Duration;

use baton_core::key::canonical_json;
use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, send};

on_both_backends!(
    begin_complete_and_replay,
    conflicts_follow_the_idempotency_key_draft,
    a_late_worker_is_fenced_out_and_its_result_kept,
    bad_inputs_are_problems,
    keys_are_percent_encoded_and_scoped_to_their_tenant,
    concurrent_begins_elect_one_holder,
);

/// `POST /v1/operations` as `acme` with `key` (none when `None`): status, body, headers.
async fn begin(server: &TestServer, key: Option<&str>, body: Value) -> (u16, Value, HeaderMap) {
    begin_as(server, &server.key, key, body).await
}

async fn begin_as(
    server: &TestServer,
    bearer: &str,
    key: Option<&str>,
    body: Value,
) -> (u16, Value, HeaderMap) {
    let mut request = server
        .client
        .post(server.url("/v1/operations"))
        .bearer_auth(bearer)
        .json(&body);
    if let Some(key) = key {
        request = request.header(
            "idempotency-key",
            HeaderValue::from_bytes(key.as_bytes()).unwrap(),
        );
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        headers,
    )
}

/// The path of operation `key`, percent-encoded as a client would.
fn op_path(key: &str, action: &str) -> String {
    let mut encoded = String::new();
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("/v1/operations/{encoded}{action}")
}

fn hash_of(request: &Value) -> String {
    let digest: [u8; 32] = sha2::Sha256::digest(canonical_json(request).as_bytes()).into();
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

async fn metrics(server: &TestServer) -> String {
    server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn begin_complete_and_replay(backend: Backend) {
    let server = TestServer::start(backend).await;
    let request = json!({"charge": {"amount": 1200, "currency": "EUR"}, "to": "acct_1"});
    let (status, begun, headers) = begin(
        &server,
        Some("charge-1"),
        json!({"request": request, "owner": "worker-a", "lease": "30s"}),
    )
    .await;
    assert_eq!(status, 201, "{begun}");
    assert_eq!(begun["outcome"], "acquired");
    let op = &begun;
    assert_eq!(op["key"], "charge-1");
    assert_eq!(op["status"], "running");
    assert_eq!(op["fence"], 1);
    assert_eq!(op["lease_owner"], "worker-a");
    assert_eq!(op["request_hash"], hash_of(&request));
    assert!(op["downstream_key"].as_str().unwrap().starts_with("baton-"));
    assert_eq!(headers["location"], "/v1/operations/charge-1");

    let (status, beat) = server
        .post(
            "/v1/operations/charge-1/heartbeat",
            json!({"fence": 1, "lease": 60000}),
        )
        .await;
    assert_eq!(status, 200, "{beat}");
    assert!(beat["lease_expires_at"].as_str().unwrap() > op["lease_expires_at"].as_str().unwrap());

    let result = json!({"charge_id": "ch_42", "ok": true});
    let (status, done) = server
        .post(
            "/v1/operations/charge-1/complete",
            json!({"fence": 1, "result": result, "paid": true}),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"], result);
    // The same completion again by its fence is answered with the record.
    let again = server
        .post(
            "/v1/operations/charge-1/complete",
            json!({"fence": 1, "result": result, "paid": true}),
        )
        .await;
    assert_eq!(again.0, 200, "{}", again.1);

    // A replay, with the request's members in another order, or named by its hash.
    let reordered = json!({"to": "acct_1", "charge": {"currency": "EUR", "amount": 1200.0}});
    for body in [
        json!({"request": reordered}),
        json!({"request_hash": hash_of(&request), "owner": "worker-b"}),
    ] {
        let (status, replay, _) = begin(&server, Some("charge-1"), body).await;
        assert_eq!(status, 200, "{replay}");
        assert_eq!(replay["outcome"], "completed");
        assert_eq!(replay["result"], result);
        assert_eq!(replay["fence"], 1);
    }

    let (status, detail) = server.get("/v1/operations/charge-1").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["status"], "completed");
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{detail}");
    assert_eq!(attempts[0]["owner"], "worker-a");
    assert_eq!(attempts[0]["outcome"], "completed");
    assert_eq!(attempts[0]["paid"], true);

    // A second operation, still running; the list filters by status.
    let (status, _, _) = begin(&server, Some("charge-2"), json!({"request": [1, 2]})).await;
    assert_eq!(status, 201);
    let (_, all) = server.get("/v1/operations").await;
    let keys: Vec<&str> = all["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["charge-1", "charge-2"]);
    let (_, completed) = server.get("/v1/operations?status=completed").await;
    assert_eq!(completed["operations"].as_array().unwrap().len(), 1);
    assert_eq!(completed["operations"][0]["key"], "charge-1");
    let (_, running) = server.get("/v1/operations?status=running").await;
    assert_eq!(running["operations"][0]["key"], "charge-2");
    // The default owner names the caller's key.
    assert!(
        running["operations"][0]["lease_owner"]
            .as_str()
            .unwrap()
            .starts_with("key:"),
        "{running}"
    );
    let (_, failed) = server.get("/v1/operations?status=failed").await;
    assert_eq!(failed["operations"], json!([]));
    server.stop().await;
}

async fn conflicts_follow_the_idempotency_key_draft(backend: Backend) {
    let server = TestServer::start(backend).await;
    let body = json!({"request": {"send": "invoice-7"}, "lease": "1h"});
    // No key: 400, and nothing begun.
    let (status, problem, _) = begin(&server, None, body.clone()).await;
    assert_problem(&(status, problem), 400, "missing-idempotency-key");
    assert_eq!(
        server.get("/v1/operations").await.1["operations"],
        json!([])
    );

    assert_eq!(begin(&server, Some("inv-7"), body.clone()).await.0, 201);
    // Still running under another worker's live lease: 409 with Retry-After.
    let (status, problem, headers) = begin(&server, Some("inv-7"), body.clone()).await;
    assert_problem(&(status, problem.clone()), 409, "in-progress");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&retry), "{retry}");
    assert_eq!(problem["operation"]["status"], "running");
    // The key with another request: 422, naming both hashes.
    let (status, problem, _) = begin(
        &server,
        Some("inv-7"),
        json!({"request": {"send": "invoice-8"}}),
    )
    .await;
    assert_problem(&(status, problem.clone()), 422, "idempotency-key-mismatch");
    assert_eq!(problem["given"], hash_of(&json!({"send": "invoice-8"})));
    assert_eq!(
        problem["request_hash"],
        hash_of(&json!({"send": "invoice-7"}))
    );

    // A failure for good: its own problem, 409.
    let (status, failed) = server
        .post(
            "/v1/operations/inv-7/fail",
            json!({"fence": 1, "error": "card declined", "retryable": false}),
        )
        .await;
    assert_eq!(status, 200, "{failed}");
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"], "card declined");
    let (status, problem, _) = begin(&server, Some("inv-7"), body.clone()).await;
    assert_problem(&(status, problem.clone()), 409, "operation-failed");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("card declined")
    );

    // A retryable failure is taken over by the next begin, with the next fence.
    assert_eq!(begin(&server, Some("inv-9"), body.clone()).await.0, 201);
    let (status, _) = server
        .post(
            "/v1/operations/inv-9/fail",
            json!({"fence": 1, "error": "upstream 503", "retryable": true, "paid": false}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, took, _) = begin(&server, Some("inv-9"), body.clone()).await;
    assert_eq!(status, 201, "{took}");
    assert_eq!(took["outcome"], "took_over");
    assert_eq!(took["fence"], 2);

    // A structured-field string names the same key as the bare token.
    let (status, problem, _) = begin(&server, Some("\"inv-9\""), body.clone()).await;
    assert_problem(&(status, problem), 409, "in-progress");

    let text = metrics(&server).await;
    for line in [
        r#"baton_ledger_conflicts_total{code="in_progress"} 2"#,
        r#"baton_ledger_conflicts_total{code="mismatch"} 1"#,
        r#"baton_ledger_conflicts_total{code="failed"} 1"#,
    ] {
        assert!(text.contains(line), "{line} not in {text}");
    }
    server.stop().await;
}

async fn a_late_worker_is_fenced_out_and_its_result_kept(backend: Backend) {
    let server = TestServer::start(backend).await;
    let body = |owner: &str| json!({"request": {"job": 1}, "owner": owner, "lease": "150ms"});
    let (status, a, _) = begin(&server, Some("job-1"), body("worker-a")).await;
    assert_eq!(status, 201, "{a}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A's lease ran out: B takes over with fence 2.
    let (status, b, _) = begin(&server, Some("job-1"), body("worker-b")).await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["outcome"], "took_over");
    assert_eq!(b["fence"], 2);

    // A, late: every call with fence 1 is fenced out, naming the current fence.
    let beat = server
        .post("/v1/operations/job-1/heartbeat", json!({"fence": 1}))
        .await;
    assert_problem(&beat, 409, "fenced-out");
    assert_eq!(beat.1["fence"], 2);
    let late = json!({"answer": "from A"});
    let published = server
        .post(
            "/v1/operations/job-1/complete",
            json!({"fence": 1, "result": late, "paid": true}),
        )
        .await;
    assert_problem(&published, 409, "fenced-out");
    assert_eq!(published.1["fence"], 2);
    assert_eq!(published.1["given"], 1);
    assert_eq!(published.1["operation"]["status"], "running");
    let failed = server
        .post(
            "/v1/operations/job-1/fail",
            json!({"fence": 1, "error": "late"}),
        )
        .await;
    assert_problem(&failed, 409, "fenced-out");

    // B completes; the published result is B's, and A's late result is kept for audit.
    let mine = json!({"answer": "from B"});
    let (status, done) = server
        .post(
            "/v1/operations/job-1/complete",
            json!({"fence": 2, "result": mine}),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"], mine);
    let (_, detail) = server.get("/v1/operations/job-1").await;
    assert_eq!(detail["result"], mine);
    let attempts = detail["attempts"].as_array().unwrap();
    let a = attempts.iter().find(|a| a["owner"] == "worker-a").unwrap();
    assert_eq!(a["fence"], 1);
    assert_eq!(a["outcome"], "fenced_out", "{detail}");
    assert_eq!(a["result"], late, "{detail}");
    assert_eq!(a["paid"], true, "{detail}");
    let b = attempts.iter().find(|a| a["owner"] == "worker-b").unwrap();
    assert_eq!(b["outcome"], "completed");
    // A completed operation fences out even its own holder's other outcome.
    let after = server
        .post(
            "/v1/operations/job-1/fail",
            json!({"fence": 2, "error": "changed my mind"}),
        )
        .await;
    assert_problem(&after, 409, "fenced-out");
    assert!(
        metrics(&server)
            .await
            .contains(r#"baton_ledger_conflicts_total{code="fenced_out"} 4"#)
    );
    server.stop().await;
}

async fn bad_inputs_are_problems(backend: Backend) {
    let server = TestServer::start(backend).await;
    let ok = json!({"request": {"x": 1}});
    for (key, body, status, kind) in [
        // Keys: empty, too long, a control character.
        ("", ok.clone(), 400, "bad-request"),
        (&*"k".repeat(256), ok.clone(), 400, "bad-request"),
        ("a\tb", ok.clone(), 400, "bad-request"),
        // The request: not named, named twice, a bad hash.
        ("k", json!({}), 400, "bad-request"),
        (
            "k",
            json!({"request": 1, "request_hash": "ab"}),
            400,
            "bad-request",
        ),
        ("k", json!({"request_hash": "xyz"}), 400, "bad-request"),
        (
            "k",
            json!({"request_hash": "AB".repeat(33)}),
            400,
            "bad-request",
        ),
        // Leases and retention: unparsable, zero, too long.
        (
            "k",
            json!({"request": 1, "lease": "soon"}),
            400,
            "bad-request",
        ),
        ("k", json!({"request": 1, "lease": 0}), 400, "bad-request"),
        (
            "k",
            json!({"request": 1, "lease": "0s"}),
            400,
            "bad-request",
        ),
        (
            "k",
            json!({"request": 1, "lease": "8days"}),
            400,
            "bad-request",
        ),
        (
            "k",
            json!({"request": 1, "retention": "400days"}),
            400,
            "bad-request",
        ),
        ("k", json!({"request": 1, "owner": ""}), 400, "bad-request"),
        // Unknown and mistyped fields.
        (
            "k",
            json!({"request": 1, "leas": "1s"}),
            422,
            "invalid-body",
        ),
        ("k", json!({"request": 1, "lease": -5}), 422, "invalid-body"),
        ("k", json!({"request": 1, "owner": 7}), 422, "invalid-body"),
    ] {
        let (got, problem, _) = begin(&server, Some(key), body.clone()).await;
        assert_problem(&(got, problem), status, kind);
    }
    // Nothing of it was begun.
    assert_eq!(
        server.get("/v1/operations").await.1["operations"],
        json!([])
    );
    // A null request is a request like any other.
    assert_eq!(
        begin(&server, Some("k"), json!({"request": null})).await.0,
        201
    );

    for (path, body, status, kind) in [
        (
            "/v1/operations/nope/heartbeat",
            json!({"fence": 1}),
            404,
            "not-found",
        ),
        (
            "/v1/operations/nope/complete",
            json!({"fence": 1, "result": 1}),
            404,
            "not-found",
        ),
        (
            "/v1/operations/nope/fail",
            json!({"fence": 1, "error": "x"}),
            404,
            "not-found",
        ),
        (
            "/v1/operations/k/complete",
            json!({"fence": 1}),
            422,
            "invalid-body",
        ),
        (
            "/v1/operations/k/complete",
            json!({"fence": 1, "result": 1, "extra": 1}),
            422,
            "invalid-body",
        ),
        (
            "/v1/operations/k/fail",
            json!({"fence": -1, "error": "x"}),
            422,
            "invalid-body",
        ),
        (
            "/v1/operations/k/heartbeat",
            json!({"fence": 1, "lease": "forever"}),
            400,
            "bad-request",
        ),
        (
            "/v1/operations/k/complete",
            json!({"fence": u64::MAX, "result": 1}),
            400,
            "bad-request",
        ),
        (
            "/v1/operations/k%09x/complete",
            json!({"fence": 1, "result": 1}),
            400,
            "bad-request",
        ),
    ] {
        assert_problem(&server.post(path, body).await, status, kind);
    }
    assert_problem(&server.get("/v1/operations/nope").await, 404, "not-found");
    assert_problem(
        &server.get("/v1/operations?status=done").await,
        400,
        "bad-request",
    );
    assert_problem(
        &server.get("/v1/operations?state=running").await,
        400,
        "bad-request",
    );
    let unsupported = send(
        server
            .req(Method::POST, "/v1/operations")
            .header("idempotency-key", "k2")
            .body("{}"),
    )
    .await;
    assert_problem(&unsupported, 415, "unsupported-media-type");
    // Still the one operation, untouched.
    let (_, detail) = server.get("/v1/operations/k").await;
    assert_eq!(detail["status"], "running");
    assert_eq!(detail["fence"], 1);
    server.stop().await;
}

async fn keys_are_percent_encoded_and_scoped_to_their_tenant(backend: Backend) {
    let server = TestServer::start(backend).await;
    let key = "orders/2024 #7?ü=1%";
    let (status, begun, headers) = begin(&server, Some(key), json!({"request": "r"})).await;
    assert_eq!(status, 201, "{begun}");
    assert_eq!(begun["key"], key);
    let location = headers["location"].to_str().unwrap().to_owned();
    assert_eq!(location, op_path(key, ""));
    let (status, detail) = server.get(&location).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["key"], key);
    let (status, done) = server
        .post(
            &op_path(key, "/complete"),
            json!({"fence": 1, "result": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{done}");

    // Another tenant: the same key is a different operation, and acme's is not found.
    let other = |method: Method, path: &str| {
        server
            .client
            .request(method, server.url(path))
            .bearer_auth(&server.other_key)
    };
    assert_problem(&send(other(Method::GET, &location)).await, 404, "not-found");
    assert_problem(
        &send(
            other(Method::POST, &op_path(key, "/complete"))
                .json(&json!({"fence": 1, "result": "mine"})),
        )
        .await,
        404,
        "not-found",
    );
    assert_problem(
        &send(other(Method::POST, &op_path(key, "/heartbeat")).json(&json!({"fence": 1}))).await,
        404,
        "not-found",
    );
    let listed = send(other(Method::GET, "/v1/operations")).await;
    assert_eq!(listed.1["operations"], json!([]));
    let (status, theirs, _) = begin_as(
        &server,
        &server.other_key,
        Some(key),
        json!({"request": "other"}),
    )
    .await;
    assert_eq!(status, 201, "{theirs}");
    assert_ne!(theirs["downstream_key"], begun["downstream_key"]);
    // acme's record is unchanged.
    let (_, detail) = server.get(&location).await;
    assert_eq!(detail["result"], "ok");
    // No key at all.
    let anonymous = send(server.client.get(server.url("/v1/operations"))).await;
    assert_problem(&anonymous, 401, "unauthorized");
    server.stop().await;
}

async fn concurrent_begins_elect_one_holder(backend: Backend) {
    let server = TestServer::start(backend).await;
    let body = json!({"request": {"pay": 5}, "lease": "1h"});
    let race = |n: usize| {
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let request = server
                    .client
                    .post(server.url("/v1/operations"))
                    .bearer_auth(&server.key)
                    .header("idempotency-key", "race-1")
                    .json(&json!({"request": body["request"], "lease": "1h", "owner": format!("w{i}")}));
                tokio::spawn(send(request))
            })
            .collect();
        async move {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        }
    };
    let answers = race(20).await;
    let acquired: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(acquired.len(), 1, "{answers:?}");
    for (status, b) in &answers {
        assert!(*status == 201 || *status == 409, "{status} {b}");
        if *status == 409 {
            assert_eq!(b["type"], "urn:baton:problem:in-progress");
        }
    }
    let winner = acquired[0]["lease_owner"].clone();
    let result = json!({"paid": "tx_9"});
    let (status, _) = server
        .post(
            "/v1/operations/race-1/complete",
            json!({"fence": 1, "result": result}),
        )
        .await;
    assert_eq!(status, 200);
    let replays = race(20).await;
    for (status, b) in &replays {
        assert_eq!(*status, 200, "{b}");
        assert_eq!(b["result"], result);
        assert_eq!(b["lease_owner"], winner);
    }
    let (_, detail) = server.get("/v1/operations/race-1").await;
    assert_eq!(detail["attempts"].as_array().unwrap().len(), 1, "{detail}");
    let _ = body;
    server.stop().await;
}
