//! History: append messages (Anthropic or OpenAI shape, read by `baton-wire` as `baton append`
//! reads them, counted by `baton-tokens`), read it back a page at a time, recall one original
//! in full, and search it (recall search).
//!
//! History is append-only: a batch is stored whole or not at all, and one bad message rejects
//! it, naming its index. What these routes return are the originals as stored, whether or not
//! a summary covers them.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use baton_core::{Message, Seq};
use baton_store::{NewEntry, SearchKind, SearchQuery};
use baton_tokens::TokenizerChoice;
use baton_view::{Appended, EntryView, HistoryPage, MessageList};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::runs::run_id;
use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, ApiQuery, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(append_messages, list_messages))
        .routes(routes!(get_message))
        .routes(routes!(search_messages))
}

/// The most entries one history page holds.
pub const MAX_PAGE: usize = 1000;
/// The entries a history page holds when the request does not say.
pub const DEFAULT_PAGE: usize = 100;
/// The entries a search returns when the request does not say.
pub const DEFAULT_SEARCH: usize = 20;

/// Which vendor shape the messages of a batch are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageFormat {
    /// Each message is told apart by its markers (`tool_calls`, role `tool`, … for OpenAI;
    /// `tool_use`, `tool_result`, … blocks for Anthropic); a plain text message reads the
    /// same in both.
    #[default]
    Auto,
    /// The Anthropic Messages shape.
    Anthropic,
    /// The OpenAI Chat Completions shape.
    Openai,
}

/// How the messages' tokens are counted (stored with each message; budgets are measured in it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
pub enum TokenizerName {
    /// The vocabulary of `model` (`o200k_base` when no model is given).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// The byte-based estimate: no vocabulary.
    #[serde(rename = "bytes")]
    Bytes,
    /// OpenAI's `o200k_base`.
    #[serde(rename = "o200k_base")]
    O200k,
    /// OpenAI's `cl100k_base` (also the proxy for Claude models).
    #[serde(rename = "cl100k_base")]
    Cl100k,
}

impl From<TokenizerName> for TokenizerChoice {
    fn from(name: TokenizerName) -> Self {
        match name {
            TokenizerName::Auto => TokenizerChoice::Auto,
            TokenizerName::Bytes => TokenizerChoice::Bytes,
            TokenizerName::O200k => TokenizerChoice::O200k,
            TokenizerName::Cl100k => TokenizerChoice::Cl100k,
        }
    }
}

/// A batch of messages to append.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendMessages {
    /// The messages, oldest first: Anthropic Messages or OpenAI Chat Completions message
    /// objects. Stored all or none.
    #[schema(value_type = Vec<Object>, min_items = 1)]
    pub messages: Vec<serde_json::Value>,
    /// Their shape (default `auto`).
    #[serde(default)]
    pub format: MessageFormat,
    /// How to count their tokens (default `auto`).
    #[serde(default)]
    pub tokenizer: TokenizerName,
    /// The model the run talks to, for `tokenizer: auto`.
    #[serde(default)]
    pub model: Option<String>,
}

/// Which part of the history to read.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// The first seq (default 1).
    #[param(minimum = 1)]
    pub from: Option<u64>,
    /// The last seq (default: the end of the history).
    pub to: Option<u64>,
    /// The most entries to return (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

/// Which kind of text a search looks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchKindName {
    /// Text and thinking blocks.
    Text,
    /// Tool calls: the tool's name and its input.
    ToolUse,
    /// The text of tool results.
    ToolResult,
}

/// A recall search.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// The phrase: its words, in order, adjacent, as whole words (case and accents folded;
    /// anything but letters and digits separates words).
    pub q: String,
    /// Only blocks of this kind (default: every kind).
    #[param(inline)]
    pub kind: Option<SearchKindName>,
    /// The most entries to return (default 20, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
}

/// Reads one vendor message in `format`.
fn parse(value: &serde_json::Value, format: MessageFormat) -> Result<Message, baton_wire::Error> {
    match format {
        MessageFormat::Auto => baton_wire::parse_message(value),
        MessageFormat::Anthropic => baton_wire::anthropic::parse_message(value),
        MessageFormat::Openai => baton_wire::openai::parse_message(value),
    }
}

/// Checks a page size: absent is `default`, 0 or more than [`MAX_PAGE`] is a 400.
fn page_size(limit: Option<usize>, default: usize) -> Result<usize, Problem> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(Problem::bad_request(format!(
            "limit {n}: expected 1 to {MAX_PAGE}"
        ))),
    }
}

/// Appends messages to an active run, in one transaction: all of them or none.
#[utoipa::path(
    post, path = "/v1/runs/{id}/messages", tag = "history",
    params(("id" = String, Path, description = "The run's id")),
    request_body = AppendMessages,
    responses(
        (status = 201, description = "Appended", body = Appended),
        (status = 400, description = "A bad id, an empty batch, or a body that is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The run is not active; nothing was appended", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "`invalid-message`: a message is not of the shape (`index` names it); or an unknown or mistyped field. Nothing was appended", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn append_messages(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<AppendMessages>,
) -> Result<(StatusCode, ApiJson<Appended>), Problem> {
    let run = run_id(&id)?;
    if body.messages.is_empty() {
        return Err(Problem::bad_request(
            "messages: the batch is empty; send at least one message",
        ));
    }
    let mut messages = Vec::with_capacity(body.messages.len());
    for (index, value) in body.messages.iter().enumerate() {
        let message = parse(value, body.format).map_err(|e| {
            Problem::unprocessable(
                "invalid-message",
                "Invalid message",
                format!("messages[{index}]: {e}; nothing was appended"),
            )
            .with("index", index)
        })?;
        messages.push(message);
    }
    let counter = baton_tokens::counter(body.tokenizer.into(), body.model.as_deref());
    let entries: Vec<NewEntry> = messages
        .into_iter()
        .map(|m| NewEntry::counted(m, &*counter))
        .collect();
    let seqs = state.store.append(&caller.tenant, &run, &entries).await?;
    Ok((
        StatusCode::CREATED,
        ApiJson(Appended {
            seqs: seqs.iter().map(|s| s.0).collect(),
            tokens: entries.iter().map(|e| e.tokens).collect(),
        }),
    ))
}

/// Reads a page of the run's history: the originals with `from ≤ seq ≤ to`, at most `limit`.
#[utoipa::path(
    get, path = "/v1/runs/{id}/messages", tag = "history",
    params(("id" = String, Path, description = "The run's id"), HistoryQuery),
    responses(
        (status = 200, description = "A page of history", body = HistoryPage),
        (status = 400, description = "A bad id or parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_messages(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<ApiJson<HistoryPage>, Problem> {
    let run = run_id(&id)?;
    let limit = page_size(query.limit, DEFAULT_PAGE)?;
    let from = query.from.unwrap_or(1);
    if from == 0 {
        return Err(Problem::bad_request("from 0: seqs start at 1"));
    }
    // One entry past the page, to tell whether there is a next one. Seqs are gap-free, so the
    // range holds at most `limit + 1` entries.
    let past = from.saturating_add(limit as u64);
    let to = query.to.map_or(past, |to| to.min(past));
    let mut entries = state
        .store
        .read_range(&caller.tenant, &run, Seq(from), Some(Seq(to)))
        .await?;
    let next_from = if entries.len() > limit {
        entries.truncate(limit);
        Some(past)
    } else {
        None
    };
    Ok(ApiJson(HistoryPage {
        messages: EntryView::all(&entries),
        next_from,
    }))
}

/// Recalls one original message in full, whether or not a summary covers it.
#[utoipa::path(
    get, path = "/v1/runs/{id}/messages/{seq}", tag = "history",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("seq" = u64, Path, description = "The message's seq"),
    ),
    responses(
        (status = 200, description = "The message as stored", body = EntryView),
        (status = 400, description = "A bad id or seq", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant, or no message at that seq", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_message(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath((id, seq)): ApiPath<(String, u64)>,
) -> Result<ApiJson<EntryView>, Problem> {
    let run = run_id(&id)?;
    let entries = state
        .store
        .read_range(&caller.tenant, &run, Seq(seq), Some(Seq(seq)))
        .await?;
    match entries.first() {
        Some(entry) => Ok(ApiJson(EntryView::from(entry))),
        None => {
            let last = state.store.run(&caller.tenant, &run).await?.last_seq;
            Err(baton_store::Error::SeqNotFound {
                run,
                seq: Seq(seq),
                last,
            }
            .into())
        }
    }
}

/// Recall search: the run's originals whose text contains the phrase `q`, in seq order.
#[utoipa::path(
    get, path = "/v1/runs/{id}/search", tag = "history",
    params(("id" = String, Path, description = "The run's id"), SearchParams),
    responses(
        (status = 200, description = "The matching messages", body = MessageList),
        (status = 400, description = "A bad id, a bad limit or kind, no query", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "`invalid-request`: a query with no words (or more than a phrase may have)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn search_messages(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<ApiJson<MessageList>, Problem> {
    let run = run_id(&id)?;
    let query = SearchQuery {
        pattern: params.q,
        kind: params.kind.map(|k| match k {
            SearchKindName::Text => SearchKind::Text,
            SearchKindName::ToolUse => SearchKind::ToolUse,
            SearchKindName::ToolResult => SearchKind::ToolResult,
        }),
        limit: page_size(params.limit, DEFAULT_SEARCH)?,
    };
    let entries = state
        .store
        .search(&caller.tenant, &run, &query)
        .await?
        .entries;
    Ok(ApiJson(MessageList {
        messages: EntryView::all(&entries),
    }))
}
