//! Cache lookups: is the answer to a request already kept, and what is it.
//!
//! `POST /v1/cache/lookup` derives the request's key for the caller's tenant exactly as the
//! cache does (`baton_core::key::request_key`: operation, body minus the ignored fields,
//! versions, document hashes) and answers 200 either way: `{"hit": true, "key", "entry"}` or
//! `{"hit": false, "key"}`, so a miss still tells the caller the key. `GET /v1/cache/{key}`
//! reads an entry by its key and answers 404 when there is none: there, the key names a
//! resource. A key is never a permission: both read only the caller's tenant's entries.
//!
//! A lookup that finds an entry serves it, so its hit count grows by one (as the gateway's
//! would). An entry whose body fails its checksum is removed by the store and answered as a
//! miss.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use baton_core::key::{KeyInput, RequestKey, request_key};
use baton_store::{CacheEntry, Lookup};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(lookup))
        .routes(routes!(get_entry))
}

/// The inputs of a request's key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"operation": "openai.chat_completions", "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}, "versions": {"schema_version": "1"}, "documents": []}))]
pub struct CacheLookup {
    /// What kind of call: `openai.chat_completions`, `anthropic.messages`, …
    #[schema(min_length = 1)]
    pub operation: String,
    /// The whole request body, as the upstream receives it (a JSON object).
    #[schema(value_type = Object)]
    pub body: Value,
    /// Caller-declared versions (`schema_version`, `preprocess_version`, …).
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// Content hashes of documents the request refers to; order and repetitions do not matter.
    #[serde(default)]
    pub documents: Vec<String>,
}

/// A kept result.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct CacheEntryView {
    /// The request's key (64 hex digits).
    pub key: String,
    /// The operation it was stored for.
    pub operation: String,
    /// The result. A result the cache stored in its envelope is unwrapped (the model and
    /// tokens are given beside it); any other JSON body is given as it is; a body that is not
    /// JSON is given as text.
    pub result: Value,
    /// The model that answered, when the envelope names it.
    pub model: Option<String>,
    /// The answer's input tokens, when the envelope names them.
    pub input_tokens: Option<u64>,
    /// The answer's output tokens, when the envelope names them.
    pub output_tokens: Option<u64>,
    /// When it was stored (RFC 3339).
    pub created_at: String,
    /// When it stops being served (RFC 3339).
    pub expires_at: String,
    /// How many times it was served, this lookup included: lookups count at once, the
    /// gateway's and the cache's hits once their call log lines are written (in the
    /// background, within a second or so).
    pub hits: u64,
}

impl From<CacheEntry> for CacheEntryView {
    fn from(entry: CacheEntry) -> Self {
        let parsed = serde_json::from_slice::<Value>(&entry.body);
        let (result, model, input_tokens, output_tokens) = match parsed {
            Ok(Value::Object(mut map)) if map.contains_key("v") && map.contains_key("value") => {
                let model = map.get("model").and_then(Value::as_str).map(str::to_owned);
                let input = map.get("input_tokens").and_then(Value::as_u64);
                let output = map.get("output_tokens").and_then(Value::as_u64);
                let value = map.remove("value").unwrap_or(Value::Null);
                (value, model, input, output)
            }
            Ok(value) => (value, None, None, None),
            Err(_) => (
                Value::String(String::from_utf8_lossy(&entry.body).into_owned()),
                None,
                None,
                None,
            ),
        };
        CacheEntryView {
            key: entry.key.to_string(),
            operation: entry.operation,
            result,
            model,
            input_tokens,
            output_tokens,
            created_at: entry.created_at.to_string(),
            expires_at: entry.expires_at.to_string(),
            hits: entry.hits,
        }
    }
}

/// What a lookup found.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct CacheLookupResult {
    /// Whether a live entry was found.
    pub hit: bool,
    /// The request's key for the caller's tenant (64 hex digits).
    pub key: String,
    /// The entry, on a hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<CacheEntryView>,
}

/// Reads the tenant's live entry for `key`, counting the hit (and the metric).
async fn find(
    state: &AppState,
    caller: &Caller,
    key: &RequestKey,
) -> Result<Option<CacheEntryView>, Problem> {
    match state.store.cache_get(&caller.tenant, key).await? {
        Lookup::Hit(mut entry) => {
            // A lookup logs no call, so it counts its hit itself (the gateway's hits are
            // counted with their call log records, off the hit's path).
            state.store.count_hits(&caller.tenant, key, 1).await?;
            entry.hits += 1;
            state.metrics.cache("hit");
            Ok(Some(entry.into()))
        }
        Lookup::Miss => {
            state.metrics.cache("miss");
            Ok(None)
        }
        Lookup::Corrupt { detail } => {
            tracing::warn!(%detail, "a corrupt cache entry was removed");
            state.metrics.cache("miss");
            Ok(None)
        }
    }
}

/// Looks a request up in the tenant's cache.
#[utoipa::path(
    post, path = "/v1/cache/lookup", tag = "cache",
    request_body = CacheLookup,
    responses(
        (status = 200, description = "Hit (`hit: true`, with the entry) or miss (`hit: false`); the key either way", body = CacheLookupResult),
        (status = 400, description = "The key cannot be derived: an empty operation, a body that is not an object", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "An unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn lookup(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<CacheLookup>,
) -> Result<ApiJson<CacheLookupResult>, Problem> {
    let key = request_key(&KeyInput {
        tenant: &caller.tenant,
        operation: &request.operation,
        body: &request.body,
        versions: &request.versions,
        documents: &request.documents,
    })
    .map_err(|e| Problem::bad_request(e.to_string()))?;
    let entry = find(&state, &caller, &key).await?;
    Ok(ApiJson(CacheLookupResult {
        hit: entry.is_some(),
        key: key.to_string(),
        entry,
    }))
}

/// Reads a cache entry by its key.
#[utoipa::path(
    get, path = "/v1/cache/{key}", tag = "cache",
    params(("key" = String, Path, description = "The request's key, 64 hex digits", pattern = "^[0-9a-fA-F]{64}$")),
    responses(
        (status = 200, description = "The live entry", body = CacheEntryView),
        (status = 400, description = "Not a key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No live entry for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_entry(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(key): ApiPath<String>,
) -> Result<ApiJson<CacheEntryView>, Problem> {
    let parsed = key
        .parse::<RequestKey>()
        .map_err(|e| Problem::bad_request(format!("key: {e}")))?;
    match find(&state, &caller, &parsed).await? {
        Some(entry) => Ok(ApiJson(entry)),
        None => Err(Problem::not_found(format!(
            "no live cache entry {parsed} for this tenant"
        ))),
    }
}
