//! `Idempotency-Key` through the ledger: begin before the call, keep the lease while it runs,
//! publish the recorded response (or a retryable failure) after it.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_cache::{Answered, CallError};
use baton_core::Timestamp;
use baton_store::ledger::{Begin, DEFAULT_RETENTION, Fenced, GATEWAY_PREFIX, Publish, check_key};
use serde_json::{Value, json};

use super::upstream::Recorded;
use super::{CACHE_HEADER, Call, REPLAYED_HEADER};
use crate::problem::Problem;

/// How long a gateway call holds its idempotency key without renewing (renewed every third).
const LEASE: Duration = Duration::from_secs(30);

/// What `begin` gave.
pub(crate) enum Begun {
    /// This request runs the call and publishes its outcome.
    Lease(Idempotency),
    /// The key's recorded response.
    Replay(Response),
}

/// The lease of a call on its idempotency key.
pub(crate) struct Idempotency {
    key: String,
    fence: u64,
}

fn owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| {
        format!(
            "gateway:{}:{}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        )
    })
}

impl Idempotency {
    /// Begins `call` under the caller's idempotency key `key`.
    pub(crate) async fn begin(call: &Call, key: &str) -> Result<Begun, Problem> {
        // In the gateway's own namespace, which `/v1/operations` cannot reach, and per scope:
        // the tenant, or in the shared gateway tenant the caller's credential (a hash of it).
        let ledger_key = format!("{GATEWAY_PREFIX}{}/{}/{key}", call.operation, call.scope);
        if key.is_empty()
            || key.len() > super::MAX_IDEMPOTENCY_KEY
            || check_key(&ledger_key).is_err()
        {
            return Err(Problem::bad_request(format!(
                "Idempotency-Key: expected 1 to {} visible characters",
                super::MAX_IDEMPOTENCY_KEY
            )));
        }
        let hash = call
            .cache
            .key(&call.request())
            .map_err(|e| Problem::bad_request(e.to_string()))?;
        let state = &call.state;
        let begun = state
            .store
            .begin(
                call.cache.tenant(),
                &ledger_key,
                &hash,
                owner(),
                LEASE,
                DEFAULT_RETENTION,
                Timestamp::now(),
            )
            .await?;
        match begun {
            Begin::Acquired { operation, .. } => Ok(Begun::Lease(Idempotency {
                key: ledger_key,
                fence: operation.fence,
            })),
            Begin::Completed(operation) => {
                let Some(result) = operation.result else {
                    return Err(Problem::internal(
                        &"a completed gateway operation has no result",
                    ));
                };
                replay(call, &result)
            }
            Begin::InProgress(_) => {
                state.metrics.ledger_conflict("in_progress");
                Err(Problem::conflict(
                    "idempotency-in-progress",
                    "Request in progress",
                    "a request with this Idempotency-Key is still being processed; retry later",
                )
                .retry_after(1))
            }
            Begin::Failed(_) => {
                state.metrics.ledger_conflict("failed");
                Err(Problem::conflict(
                    "idempotency-failed",
                    "Request failed",
                    "the request with this Idempotency-Key failed for good; use a new key",
                ))
            }
            Begin::Mismatch { .. } => {
                state.metrics.ledger_conflict("mismatch");
                Err(Problem::unprocessable(
                    "idempotency-key-reused",
                    "Idempotency key reused",
                    "this Idempotency-Key was used with a different request; use a new key",
                ))
            }
        }
    }

    /// Renews the lease every third of it, forever (the caller stops polling it).
    pub(crate) async fn keep_alive(&self, call: &Call) {
        let mut tick = tokio::time::interval(LEASE / 3);
        tick.tick().await;
        loop {
            tick.tick().await;
            let renewed = call
                .state
                .store
                .heartbeat(
                    call.cache.tenant(),
                    &self.key,
                    self.fence,
                    LEASE,
                    Timestamp::now(),
                )
                .await;
            match renewed {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => tracing::warn!(
                    fence = self.fence,
                    "lost an idempotency key's lease; finishing the call anyway"
                ),
                Err(e) => tracing::warn!(error = %e, "could not renew an idempotency key's lease"),
            }
        }
    }

    /// Publishes the call's outcome: the recorded response, or a failure that may be retried
    /// with the same key.
    pub(crate) async fn publish(self, call: &Call, result: &Result<Answered<Recorded>, CallError>) {
        let record;
        let error;
        let outcome = match result {
            Ok(answered) => {
                record = json!({
                    "status": answered.value.status(),
                    "content_type": answered.value.content_type(),
                    "body": answered.value.body_text(),
                    "input_tokens": answered.input_tokens,
                });
                Publish::Complete(&record)
            }
            Err(e) => {
                error = e.to_string();
                Publish::Fail {
                    error: &error,
                    retryable: true,
                }
            }
        };
        let paid = result
            .as_ref()
            .is_ok_and(|a| a.outcome == baton_store::CallOutcome::Executed);
        let published = call
            .state
            .store
            .publish(
                call.cache.tenant(),
                &self.key,
                self.fence,
                outcome,
                paid,
                Timestamp::now(),
            )
            .await;
        match published {
            Ok(Ok(_)) => {}
            Ok(Err(Fenced::Out { .. })) => {
                call.state.metrics.ledger_conflict("fenced_out");
                tracing::warn!(
                    fence = self.fence,
                    "an idempotency key was taken over; this call's outcome was not published"
                );
            }
            Ok(Err(Fenced::NotFound)) => {
                tracing::warn!("an idempotency key's operation vanished before publishing");
            }
            Err(e) => tracing::warn!(error = %e, "could not publish an idempotent call's outcome"),
        }
    }
}

/// The recorded response of a completed operation.
fn replay(call: &Call, result: &Value) -> Result<Begun, Problem> {
    let status = result
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok());
    let body = result.get("body").and_then(Value::as_str);
    let (Some(status), Some(body)) = (status, body) else {
        return Err(Problem::internal(
            &"a completed gateway operation's result is not a recorded response",
        ));
    };
    let tokens = result
        .get("input_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    call.state.metrics.cache("hit");
    call.state.metrics.tokens_saved("cache", tokens);
    let mut response = (status, Body::from(body.to_owned())).into_response();
    let headers = response.headers_mut();
    if let Some(value) = result
        .get("content_type")
        .and_then(Value::as_str)
        .and_then(|ct| HeaderValue::from_str(ct).ok())
    {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
    headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    Ok(Begun::Replay(response))
}
