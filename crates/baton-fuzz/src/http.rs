//! The HTTP bodies of every route that takes one, sent to the service in process: the whole
//! `baton_server::app` (auth, extractors, problem mapping, handlers, the store) over a
//! temp-file SQLite store, through `tower::ServiceExt::oneshot`, without sockets.
//!
//! A panic in a handler and a 500 are failures; the gateway's upstream is a closed port, so a
//! well-formed gateway request ends in its 502.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use baton_core::{Message, Role, RunId, TenantId, Timestamp};
use baton_server::{AppState, Config};
use baton_store::keys::{NewApiKey, generate};
use baton_store::{NewEntry, NewRun, Store};
use futures_util::FutureExt as _;
use tower::ServiceExt as _;

use crate::{Campaign, HANG, Outcome, Rng, fnv, load_seeds, mutate};

/// A header a route needs besides the key and the content type.
type Header = Option<(&'static str, &'static str)>;

/// The routes with a body: method, path, extra header.
const ROUTES: &[(&str, &str, Header)] = &[
    ("POST", "/v1/runs", None),
    ("POST", "/v1/runs/a/messages", None),
    ("POST", "/v1/runs/r/compact", None),
    ("POST", "/v1/runs/r/summaries", None),
    ("POST", "/v1/runs/r/summaries/1/activate", None),
    (
        "POST",
        "/v1/operations",
        Some(("idempotency-key", "fuzz-op")),
    ),
    ("POST", "/v1/operations/fuzz-op/heartbeat", None),
    ("POST", "/v1/operations/fuzz-op/complete", None),
    ("POST", "/v1/operations/fuzz-op/fail", None),
    ("POST", "/v1/cache/lookup", None),
    ("POST", "/v1/chat/completions", None),
    ("POST", "/v1/messages", None),
    ("POST", "/v1/responses", None),
    ("POST", "/v1/embeddings", None),
    ("POST", "/v1/messages/count_tokens", None),
];

/// Runs every route for `campaign.inputs_per_route` inputs made from the seeds in `dir`.
pub fn campaign(campaign: &Campaign, dir: &Path) -> anyhow::Result<Vec<Outcome>> {
    let seeds = load_seeds(dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let home = tempfile::tempdir()?;
        let store: Arc<dyn Store> =
            Arc::new(baton_sqlite::SqliteStore::open(&home.path().join("fuzz.db")).await?);
        let tenant = TenantId::new("fuzz")?;
        let made = generate()?;
        store
            .create_api_key(&NewApiKey {
                id: &made.id,
                hash: made.hash,
                tenant: &tenant,
                label: None,
                now: Timestamp::now(),
            })
            .await?;
        for id in ["a", "r"] {
            let run = RunId::new(id)?;
            let new = NewRun {
                id: Some(run.clone()),
                ..NewRun::default()
            };
            store.create_run(&tenant, &new).await?;
            let entries: Vec<NewEntry> = (0..6)
                .map(|i| {
                    let role = if i % 2 == 0 {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    NewEntry::estimated(Message::text(role, format!("message {i} of {id}")))
                })
                .collect();
            store.append(&tenant, &run, &entries).await?;
        }
        let config = Config {
            upstream_openai: Some("http://127.0.0.1:9/v1".to_owned()),
            upstream_anthropic: Some("http://127.0.0.1:9".to_owned()),
            ..Config::default()
        };
        let app = baton_server::app(AppState::new(store, config)?);
        let mut outcomes = Vec::new();
        for (method, path, header) in ROUTES {
            let name = format!("http {method} {path}");
            let mut rng = Rng::new(campaign.seed ^ fnv(&name));
            let mut outcome = Outcome {
                target: name,
                ..Outcome::default()
            };
            for i in 0..campaign.inputs_per_route {
                let body = match seeds.get(i as usize) {
                    Some(seed) => seed.clone(),
                    None => mutate(&mut rng, &seeds),
                };
                let mut request = Request::builder()
                    .method(Method::from_bytes(method.as_bytes())?)
                    .uri(*path)
                    .header("authorization", format!("Bearer {}", made.key))
                    .header("x-baton-key", &made.key)
                    .header("content-type", "application/json");
                if let Some((name, value)) = header {
                    request = request.header(*name, *value);
                }
                let request = request.body(Body::from(body.clone()))?;
                let started = Instant::now();
                let answered = AssertUnwindSafe(app.clone().oneshot(request))
                    .catch_unwind()
                    .await;
                let took = started.elapsed();
                outcome.inputs += 1;
                outcome.slowest = outcome.slowest.max(took);
                match answered {
                    Err(panic) => {
                        outcome.failures += 1;
                        outcome
                            .first_failure
                            .get_or_insert(crate::panic_message(&panic));
                        campaign.keep(&mut outcome, "panic", &body);
                    }
                    Ok(Ok(response)) if response.status() == StatusCode::INTERNAL_SERVER_ERROR => {
                        outcome.failures += 1;
                        let text = axum::body::to_bytes(response.into_body(), 1 << 16)
                            .await
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                            .unwrap_or_default();
                        outcome.first_failure.get_or_insert(format!("500: {text}"));
                        campaign.keep(&mut outcome, "500", &body);
                    }
                    Ok(_) if took > HANG => {
                        outcome.hangs += 1;
                        campaign.keep(&mut outcome, "hang", &body);
                    }
                    Ok(_) => {}
                }
            }
            outcomes.push(outcome);
        }
        Ok(outcomes)
    })
}
