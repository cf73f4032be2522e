//! What every route shares: keys and tenants, problem+json for every bad input, the request id,
//! health, metrics, the OpenAPI document, graceful shutdown.

use baton_core::Timestamp;
use baton_store::keys::Revoke;
use reqwest::Method;
use serde_json::json;

use crate::on_both_backends;
use crate::support::{Backend, TestServer, assert_problem, send};

on_both_backends!(
    keys_scope_every_route_to_their_tenant,
    bad_requests_are_problems
);

async fn keys_scope_every_route_to_their_tenant(backend: Backend) {
    let server = TestServer::start(backend).await;
    let (status, run) = server
        .post("/v1/runs", json!({"id": "r1", "goal": "ship"}))
        .await;
    assert_eq!(status, 201, "{run}");
    assert_eq!(run["goal"], "ship");
    assert_eq!(server.get("/v1/runs/r1").await.0, 200);

    // No key, a malformed key, an unknown key: 401, each a problem.
    let none = send(server.client.get(server.url("/v1/runs/r1"))).await;
    assert_problem(&none, 401, "unauthorized");
    let junk = send(
        server
            .client
            .get(server.url("/v1/runs/r1"))
            .bearer_auth("sk-not-ours"),
    )
    .await;
    assert_problem(&junk, 401, "unauthorized");
    // Another tenant's key: the run does not exist for it.
    let other = send(
        server
            .client
            .get(server.url("/v1/runs/r1"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_problem(&other, 404, "not-found");
    let listed = send(
        server
            .client
            .get(server.url("/v1/runs"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_eq!(listed.1["runs"], json!([]));

    // A revoked tenant ("deleted"): its key no longer works, the other tenant's still does.
    let acme = baton_core::TenantId::new("acme").unwrap();
    server
        .store
        .revoke_api_keys(Revoke::Tenant(&acme), Timestamp::now())
        .await
        .unwrap();
    assert_problem(&server.get("/v1/runs/r1").await, 401, "unauthorized");
    let still = send(
        server
            .client
            .get(server.url("/v1/runs"))
            .bearer_auth(&server.other_key),
    )
    .await;
    assert_eq!(still.0, 200);
    server.stop().await;
}

async fn bad_requests_are_problems(backend: Backend) {
    let config = baton_server::Config {
        body_limit: 1024,
        ..Default::default()
    };
    let server = TestServer::with_config(backend, config).await;
    let post = |body: &'static str, ct: Option<&'static str>| {
        let mut r = server.req(Method::POST, "/v1/runs").body(body);
        if let Some(ct) = ct {
            r = r.header("content-type", ct);
        }
        send(r)
    };
    assert_problem(
        &post("{\"goal\":", Some("application/json")).await,
        400,
        "invalid-json",
    );
    assert_problem(
        &post("{\"goal\":\"x\"}", Some("text/plain")).await,
        415,
        "unsupported-media-type",
    );
    assert_problem(
        &post("{\"goal\":\"x\"}", None).await,
        415,
        "unsupported-media-type",
    );
    assert_problem(
        &post("{\"gaol\":\"x\"}", Some("application/json")).await,
        422,
        "invalid-body",
    );
    assert_problem(
        &post("{\"goal\":7}", Some("application/json")).await,
        422,
        "invalid-body",
    );
    assert_problem(
        &post("{\"id\":\"bad id!\"}", Some("application/json")).await,
        400,
        "bad-request",
    );
    let big = format!("{{\"goal\":\"{}\"}}", "x".repeat(4096));
    let too_big = send(
        server
            .req(Method::POST, "/v1/runs")
            .header("content-type", "application/json")
            .body(big),
    )
    .await;
    assert_problem(&too_big, 413, "body-too-large");
    assert_problem(&server.get("/v1/nothing-here").await, 404, "no-route");
    assert_problem(
        &send(server.req(Method::DELETE, "/v1/runs")).await,
        405,
        "method-not-allowed",
    );
    // Nothing of it was stored, and the server still answers.
    assert_eq!(server.get("/v1/runs").await.1["runs"], json!([]));
    assert_eq!(send(server.client.get(server.url("/healthz"))).await.0, 200);
}

#[tokio::test]
async fn request_ids_health_metrics_and_the_openapi_document() {
    let server = TestServer::start(Backend::Sqlite).await;
    let response = server
        .client
        .get(server.url("/healthz"))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "trace-me-42");
    let minted = server
        .client
        .get(server.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(minted.status(), 200);
    assert!(!minted.headers()["x-request-id"].is_empty());

    let (_, doc) = send(server.client.get(server.url("/openapi.json"))).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/v1/runs"]["post"].is_object(), "{doc}");
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());

    server.get("/v1/runs").await;
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
        metrics
            .contains(r#"baton_http_requests_total{route="/v1/runs",method="GET",status="200"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("baton_http_request_duration_seconds_bucket"));
    assert!(!metrics.contains(&server.key), "a key in the metrics");
}
