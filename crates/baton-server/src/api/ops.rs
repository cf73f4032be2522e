//! Operations: the idempotency ledger over HTTP, after the IETF `Idempotency-Key` draft.
//!
//! `POST /v1/operations` with `Idempotency-Key: K` begins operation `K` for the request the
//! body names (`request`, any JSON, hashed as the SHA-256 of its RFC 8785 canonical form; or
//! `request_hash`, 64 hex digits the caller computed the same way or any other way):
//! - 201: the caller holds the lease with the returned `fence` and should do the work
//!   (`outcome` is `acquired`, or `took_over` for an expired lease or a retryable failure);
//! - 200: the operation completed before; its recorded result is replayed (`outcome`
//!   `completed`), and the work must not be done again;
//! - 409 `in-progress`: another worker holds a live lease (`Retry-After` says when it ends);
//! - 409 `operation-failed`: it failed and may not be retried (a new key is needed);
//! - 422 `idempotency-key-mismatch`: the key was begun with another request;
//! - 400 `missing-idempotency-key` without the header, `bad-request` for a key that is not
//!   1 to 255 characters or holds control characters.
//!
//! The holder then calls `/heartbeat`, `/complete` or `/fail` under `/v1/operations/{key}`
//! with its fence; a fence that is not the current one is a 409 `fenced-out` naming the
//! current fence, and what it tried to publish is kept in the attempts log for audit.
//! The key in those paths is percent-encoded (`/` as `%2F`, a space as `%20`, …).
//!
//! The header value may be a bare token (`K`) or, as the draft writes it, a structured-field
//! string (`"K"`, with `\"` and `\\` escapes); both name the same key.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_core::key::{RequestKey, canonical_json};
use baton_core::{TenantId, Timestamp};
use baton_store::ledger::{DEFAULT_RETENTION, GATEWAY_PREFIX, check_key, is_gateway_key};
use baton_store::{Begin, Fenced, OpStatus, Operation, Publish};
use baton_view::{
    Begun, BegunOutcome, OperationDetail, OperationList, OperationStatus, OperationView,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use sha2::Digest as _;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, ApiQuery, Problem, ProblemBody, http_status};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(begin_operation, list_operations))
        .routes(routes!(get_operation))
        .routes(routes!(heartbeat_operation))
        .routes(routes!(complete_operation))
        .routes(routes!(fail_operation))
}

/// The lease a worker holds when it names none: 30 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The longest lease a request may ask for: 7 days.
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest retention a request may ask for: 366 days.
pub const MAX_RETENTION: Duration = Duration::from_secs(366 * 24 * 3600);

/// The largest fence a store can hold (the databases' signed 64-bit integers).
const MAX_FENCE: u64 = i64::MAX as u64;

/// A duration: whole milliseconds, or a humantime text such as `30s`, `5m` or `1h 30m`.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum DurationSpec {
    /// Milliseconds.
    Millis(u64),
    /// A humantime duration (`30s`, `1500ms`, `5m`, `1h 30m`).
    Text(String),
}

/// What beginning an operation names.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"request": {"charge": {"amount": 1200, "currency": "EUR"}}, "owner": "worker-1", "lease": "30s"}))]
pub struct BeginOperation {
    /// The request, any JSON: its key is the SHA-256 of its RFC 8785 canonical form, so member
    /// order and number spelling do not matter. Give this or `request_hash`.
    #[serde(default, deserialize_with = "present")]
    pub request: Option<Value>,
    /// The request's hash, 64 hex digits, computed by the caller. Give this or
    /// `request`.
    #[schema(pattern = "^[0-9a-fA-F]{64}$")]
    pub request_hash: Option<String>,
    /// Who does the work (recorded with the attempt); `key:<key id>` when absent.
    #[schema(min_length = 1, max_length = 255)]
    pub owner: Option<String>,
    /// How long the lease lasts without a heartbeat (default 30 s, at most 7 days).
    pub lease: Option<DurationSpec>,
    /// How long the record is kept after it last changed (default a day, at most 366 days).
    pub retention: Option<DurationSpec>,
}

/// A heartbeat: the holder's fence and the lease from now.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"fence": 1, "lease": "30s"}))]
pub struct HeartbeatOperation {
    /// The fence `begin` gave.
    #[schema(maximum = 9223372036854775807_u64)]
    pub fence: u64,
    /// How long the lease lasts from now (default 30 s, at most 7 days).
    pub lease: Option<DurationSpec>,
}

/// A completion: the holder's fence and the result.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"fence": 1, "result": {"charge_id": "ch_42"}, "paid": true}))]
pub struct CompleteOperation {
    /// The fence `begin` gave.
    #[schema(maximum = 9223372036854775807_u64)]
    pub fence: u64,
    /// The result, any JSON; replayed to every later `begin` of the key.
    pub result: Value,
    /// Whether the attempt made a paid external call.
    #[serde(default)]
    pub paid: bool,
}

/// A failure: the holder's fence and what went wrong.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"fence": 1, "error": "upstream answered 503", "retryable": true}))]
pub struct FailOperation {
    /// The fence `begin` gave.
    #[schema(maximum = 9223372036854775807_u64)]
    pub fence: u64,
    /// What went wrong.
    pub error: String,
    /// Whether another attempt may be made (a later `begin` takes it over).
    #[serde(default)]
    pub retryable: bool,
    /// Whether the attempt made a paid external call.
    #[serde(default)]
    pub paid: bool,
}

/// Which operations to list.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OperationsQuery {
    /// Only operations with this status.
    pub status: Option<OperationStatus>,
}

/// The `Idempotency-Key` header, checked: 400 when it is missing or not a valid key.
#[derive(Clone, Debug)]
pub struct IdempotencyKey(pub String);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "missing-idempotency-key",
                "Missing Idempotency-Key",
                "this route needs an `Idempotency-Key` header naming the operation",
            ));
        };
        let text = std::str::from_utf8(value.as_bytes()).map_err(|_| {
            Problem::bad_request("the Idempotency-Key header is not UTF-8".to_owned())
        })?;
        let key = unquote(text.trim());
        // A header that does not hold a key is an unreadable request (400), as a missing one is.
        public_key(&key)?;
        Ok(IdempotencyKey(key))
    }
}

/// A structured-field string (`"K"`, RFC 8941) unquoted; anything else as it is.
fn unquote(text: &str) -> String {
    let Some(inner) = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return text.to_owned();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

/// Deserializes a present field as `Some`, `null` included.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A duration field, checked: at least 1 ms and at most `max`.
fn duration(
    spec: Option<&DurationSpec>,
    what: &str,
    default: Duration,
    max: Duration,
) -> Result<Duration, Problem> {
    let d = match spec {
        None => default,
        Some(DurationSpec::Millis(ms)) => Duration::from_millis(*ms),
        Some(DurationSpec::Text(text)) => humantime::parse_duration(text.trim()).map_err(|e| {
            Problem::bad_request(format!(
                "{what} {text:?}: {e}; expected milliseconds or a duration such as \"30s\""
            ))
        })?,
    };
    if d < Duration::from_millis(1) || d > max {
        return Err(Problem::bad_request(format!(
            "{what} {}: expected at least 1ms and at most {}",
            humantime::format_duration(d),
            humantime::format_duration(max)
        )));
    }
    Ok(d)
}

/// A key from the path (already percent-decoded), checked.
fn path_key(key: &str) -> Result<&str, Problem> {
    public_key(key)?;
    Ok(key)
}

/// Checks a key the public ledger API may name: a valid key outside the gateway's namespace
/// (its records answer only the gateway, so no key of the tenant can forge one).
fn public_key(key: &str) -> Result<(), Problem> {
    check_key(key).map_err(|e| Problem::bad_request(e.to_string()))?;
    if is_gateway_key(key) {
        return Err(Problem::bad_request(format!(
            "idempotency key {:?}: keys starting with {GATEWAY_PREFIX:?} are reserved for the gateway",
            key.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}

/// A fence, checked against what a store can hold.
fn fence(fence: u64) -> Result<u64, Problem> {
    if fence > MAX_FENCE {
        return Err(Problem::bad_request(format!(
            "fence {fence}: expected at most {MAX_FENCE}"
        )));
    }
    Ok(fence)
}

/// The request hash `body` names.
fn request_hash(body: &BeginOperation) -> Result<RequestKey, Problem> {
    match (&body.request, &body.request_hash) {
        (Some(request), None) => Ok(RequestKey(
            sha2::Sha256::digest(canonical_json(request).as_bytes()).into(),
        )),
        (None, Some(hash)) => hash
            .parse::<RequestKey>()
            .map_err(|e| Problem::bad_request(format!("request_hash: {e}"))),
        (Some(_), Some(_)) => Err(Problem::bad_request(
            "give `request` or `request_hash`, not both",
        )),
        (None, None) => Err(Problem::bad_request(
            "name the request: give `request` (any JSON) or `request_hash` (64 hex digits)",
        )),
    }
}

/// An owner name, checked: 1 to 255 characters, none of them control characters.
fn owner(caller: &Caller, owner: Option<&str>) -> Result<String, Problem> {
    let Some(owner) = owner else {
        return Ok(format!("key:{}", caller.key_id));
    };
    if owner.is_empty() || owner.len() > 255 || owner.chars().any(char::is_control) {
        return Err(Problem::bad_request(format!(
            "owner {:?}: expected 1 to 255 characters, none of them control characters",
            owner.chars().take(64).collect::<String>()
        )));
    }
    Ok(owner.to_owned())
}

/// `key` percent-encoded for a path segment.
fn encode_segment(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn not_found(key: &str) -> Problem {
    Problem::not_found(format!("operation {key:?} not found"))
}

/// Begins (or finds) the operation the `Idempotency-Key` header names.
#[utoipa::path(
    post, path = "/v1/operations", tag = "operations",
    params(("Idempotency-Key" = String, Header, description = "The operation's key: 1 to 255 characters, no control characters; bare or as a structured-field string (`\"K\"`)", example = "charge-42")),
    request_body = BeginOperation,
    responses(
        (status = 201, description = "Acquired: do the work with the returned fence", body = Begun,
            headers(("Location" = String, description = "The operation's URL"))),
        (status = 200, description = "Completed before: the recorded result, replayed", body = Begun),
        (status = 400, description = "No or a bad Idempotency-Key, no request named, a bad hash, lease or owner", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "In progress (`in-progress`, with Retry-After), or failed for good (`operation-failed`)", body = ProblemBody, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until the holder's lease runs out (in progress only)"))),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "The key was used with another request (`idempotency-key-mismatch`), or an unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn begin_operation(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    IdempotencyKey(key): IdempotencyKey,
    ApiJson(body): ApiJson<BeginOperation>,
) -> Result<Response, Problem> {
    let hash = request_hash(&body)?;
    let lease = duration(body.lease.as_ref(), "lease", DEFAULT_LEASE, MAX_LEASE)?;
    let retention = duration(
        body.retention.as_ref(),
        "retention",
        DEFAULT_RETENTION,
        MAX_RETENTION,
    )?;
    let owner = owner(&caller, body.owner.as_deref())?;
    let now = Timestamp::now();
    let begun = state
        .store
        .begin(&caller.tenant, &key, &hash, &owner, lease, retention, now)
        .await?;
    let status = http_status(&begun);
    let tenant = &caller.tenant;
    match begun {
        Begin::Acquired {
            operation,
            takeover,
        } => {
            let location = format!("/v1/operations/{}", encode_segment(&operation.key));
            let body = Begun {
                outcome: if takeover {
                    BegunOutcome::TookOver
                } else {
                    BegunOutcome::Acquired
                },
                operation: OperationView::of(tenant, &operation),
            };
            let mut response = (StatusCode::CREATED, ApiJson(body)).into_response();
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            Ok(response)
        }
        Begin::Completed(operation) => {
            let code = status.and_then(|s| StatusCode::from_u16(s).ok());
            let body = Begun {
                outcome: BegunOutcome::Completed,
                operation: OperationView::of(tenant, &operation),
            };
            Ok((code.unwrap_or(StatusCode::OK), ApiJson(body)).into_response())
        }
        Begin::InProgress(operation) => {
            state.metrics.ledger_conflict("in_progress");
            let wait_ms = operation
                .lease_expires_at
                .map_or(1000, |at| at.0.saturating_sub(now.0));
            let secs = u64::try_from(wait_ms.saturating_add(999) / 1000)
                .unwrap_or(1)
                .max(1);
            let detail = format!(
                "operation {key:?} is in progress: {} holds fence {} until {}; retry later",
                operation.lease_owner.as_deref().unwrap_or("another worker"),
                operation.fence,
                operation
                    .lease_expires_at
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            );
            Err(
                conflict(status, "in-progress", "Operation in progress", detail)
                    .with("operation", OperationView::of(tenant, &operation))
                    .retry_after(secs),
            )
        }
        Begin::Failed(operation) => {
            state.metrics.ledger_conflict("failed");
            let detail = format!(
                "operation {key:?} failed and may not be retried: {}; use a new Idempotency-Key to try again",
                operation.error.as_deref().unwrap_or("no error recorded")
            );
            Err(
                conflict(status, "operation-failed", "Operation failed", detail)
                    .with("operation", OperationView::of(tenant, &operation)),
            )
        }
        Begin::Mismatch { operation, given } => {
            state.metrics.ledger_conflict("mismatch");
            let detail = format!(
                "Idempotency-Key {key:?} was used with request {}, not {given}: use a new key for another request",
                operation.request_hash
            );
            let code = status
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
            Err(Problem::new(
                code,
                "idempotency-key-mismatch",
                "Idempotency-Key reused",
                detail,
            )
            .with("request_hash", operation.request_hash.to_string())
            .with("given", given.to_string()))
        }
    }
}

/// A conflict at the status `http_status` chose (409).
fn conflict(
    status: Option<u16>,
    kind: &'static str,
    title: &'static str,
    detail: String,
) -> Problem {
    let code = status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::CONFLICT);
    Problem::new(code, kind, title, detail)
}

/// Lists the tenant's operations, by key.
#[utoipa::path(
    get, path = "/v1/operations", tag = "operations",
    params(OperationsQuery),
    responses(
        (status = 200, description = "The operations", body = OperationList),
        (status = 400, description = "A bad status", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_operations(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<OperationsQuery>,
) -> Result<ApiJson<OperationList>, Problem> {
    let mut ops = state
        .store
        .operations(&caller.tenant, query.status.map(OpStatus::from))
        .await?;
    // The gateway's records are not the tenant's operations.
    ops.retain(|op| !is_gateway_key(&op.key));
    Ok(ApiJson(OperationList::of(&caller.tenant, &ops)))
}

/// Gets an operation and its attempts.
#[utoipa::path(
    get, path = "/v1/operations/{key}", tag = "operations",
    params(("key" = String, Path, description = "The idempotency key, percent-encoded", example = "charge-42")),
    responses(
        (status = 200, description = "The operation and its attempts", body = OperationDetail),
        (status = 400, description = "A bad key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such operation for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_operation(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(key): ApiPath<String>,
) -> Result<ApiJson<OperationDetail>, Problem> {
    let (op, attempts) = state
        .store
        .operation(&caller.tenant, path_key(&key)?)
        .await?
        .ok_or_else(|| not_found(&key))?;
    Ok(ApiJson(OperationDetail::of(&caller.tenant, &op, &attempts)))
}

/// What a heartbeat or a publish answers: the record, a 404, or a 409 `fenced-out`.
fn fenced(
    state: &AppState,
    tenant: &TenantId,
    key: &str,
    done: Result<Operation, Fenced>,
) -> Result<ApiJson<OperationView>, Problem> {
    match done {
        Ok(op) => Ok(ApiJson(OperationView::of(tenant, &op))),
        Err(Fenced::NotFound) => Err(not_found(key)),
        Err(Fenced::Out { operation, given }) => {
            state.metrics.ledger_conflict("fenced_out");
            let detail = format!(
                "operation {key:?}: fence {given} is not the current one (the operation is {}, fence {}); nothing was published",
                operation.status.as_str(),
                operation.fence
            );
            Err(Problem::conflict("fenced-out", "Fenced out", detail)
                .with("fence", operation.fence)
                .with("given", given)
                .with("operation", OperationView::of(tenant, &operation)))
        }
    }
}

/// Extends the holder's lease.
#[utoipa::path(
    post, path = "/v1/operations/{key}/heartbeat", tag = "operations",
    params(("key" = String, Path, description = "The idempotency key, percent-encoded", example = "charge-42")),
    request_body = HeartbeatOperation,
    responses(
        (status = 200, description = "The lease was extended", body = OperationView),
        (status = 400, description = "A bad key, fence or lease", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such operation for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Fenced out: the fence is not the current one (`fenced-out`, with the current `fence`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "An unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn heartbeat_operation(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<HeartbeatOperation>,
) -> Result<ApiJson<OperationView>, Problem> {
    let lease = duration(body.lease.as_ref(), "lease", DEFAULT_LEASE, MAX_LEASE)?;
    let done = state
        .store
        .heartbeat(
            &caller.tenant,
            path_key(&key)?,
            fence(body.fence)?,
            lease,
            Timestamp::now(),
        )
        .await?;
    fenced(&state, &caller.tenant, &key, done)
}

/// Publishes the holder's result.
#[utoipa::path(
    post, path = "/v1/operations/{key}/complete", tag = "operations",
    params(("key" = String, Path, description = "The idempotency key, percent-encoded", example = "charge-42")),
    request_body = CompleteOperation,
    responses(
        (status = 200, description = "Completed (or this fence's completion, answered again)", body = OperationView),
        (status = 400, description = "A bad key or fence", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such operation for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Fenced out: nothing was published; the result is kept in the attempts log for audit (`fenced-out`, with the current `fence`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "An unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn complete_operation(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<CompleteOperation>,
) -> Result<ApiJson<OperationView>, Problem> {
    let done = state
        .store
        .publish(
            &caller.tenant,
            path_key(&key)?,
            fence(body.fence)?,
            Publish::Complete(&body.result),
            body.paid,
            Timestamp::now(),
        )
        .await?;
    fenced(&state, &caller.tenant, &key, done)
}

/// Records the holder's failure.
#[utoipa::path(
    post, path = "/v1/operations/{key}/fail", tag = "operations",
    params(("key" = String, Path, description = "The idempotency key, percent-encoded", example = "charge-42")),
    request_body = FailOperation,
    responses(
        (status = 200, description = "Failed (retryable: a later begin takes it over)", body = OperationView),
        (status = 400, description = "A bad key or fence", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such operation for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Fenced out: nothing was recorded but the attempt (`fenced-out`, with the current `fence`)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "An unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn fail_operation(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<FailOperation>,
) -> Result<ApiJson<OperationView>, Problem> {
    let done = state
        .store
        .publish(
            &caller.tenant,
            path_key(&key)?,
            fence(body.fence)?,
            Publish::Fail {
                error: &body.error,
                retryable: body.retryable,
            },
            body.paid,
            Timestamp::now(),
        )
        .await?;
    fenced(&state, &caller.tenant, &key, done)
}
