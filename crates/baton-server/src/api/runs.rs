//! Runs: create, list (a page at a time), get, cancel, delete.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use baton_core::{RunId, Timestamp};
use baton_store::runs::{MAX_PAGE, parse_since};
use baton_store::{NewRun, RunQuery, RunSort};
use baton_view::{DeletedRunView, RunList, RunView};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, ApiQuery, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_run, list_runs))
        .routes(routes!(get_run, delete_run))
        .routes(routes!(cancel_run))
}

/// What a new run is made of.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRun {
    /// Its id (letters, digits, `-`, `_`, `.`, `:`; generated when absent).
    pub id: Option<String>,
    /// What the agent is trying to do.
    pub goal: Option<String>,
    /// Standing instructions placed first in every context.
    pub rules: Option<String>,
}

/// A run id from the path, checked.
pub fn run_id(id: &str) -> Result<RunId, Problem> {
    RunId::new(id).map_err(|e| Problem::bad_request(format!("run id: {e}")))
}

/// Creates a run.
#[utoipa::path(
    post, path = "/v1/runs", tag = "runs",
    request_body = CreateRun,
    responses(
        (status = 201, description = "Created", body = RunView),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The id is taken", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "An unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn create_run(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiJson(body): ApiJson<CreateRun>,
) -> Result<(StatusCode, ApiJson<RunView>), Problem> {
    let new = NewRun {
        id: body.id.as_deref().map(run_id).transpose()?,
        goal: body.goal,
        rules: body.rules,
    };
    let run = state.store.create_run(&caller.tenant, &new).await?;
    Ok((StatusCode::CREATED, ApiJson(run.into())))
}

/// Which runs `GET /v1/runs` returns, in what order, how many.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// Only runs of this project: its path, or the path's last component.
    pub project: Option<String>,
    /// Only runs active since: a UTC day (`2026-02-01`), an RFC 3339 time, or an age (`90m`,
    /// `12h`, `7d`, `2w`).
    pub since: Option<String>,
    /// The order: `created` (oldest first, the default), `last` or `first` (most recent
    /// activity or start first), `messages`, `tokens` or `cost` (most first).
    pub sort: Option<String>,
    /// The most runs to return (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// The `next_cursor` of the page before, to continue the same listing.
    pub cursor: Option<String>,
}

/// The runs a page holds when the request does not say.
pub const DEFAULT_RUNS: u64 = 100;

/// Lists the tenant's runs, a page at a time, with what people look for them by.
#[utoipa::path(
    get, path = "/v1/runs", tag = "runs",
    params(RunsQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunList),
        (status = 400, description = "A bad parameter or cursor", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_runs(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<RunsQuery>,
) -> Result<ApiJson<RunList>, Problem> {
    let sort = match params.sort.as_deref() {
        None => RunSort::Created,
        Some(name) => RunSort::parse(name).ok_or_else(|| {
            Problem::bad_request(format!(
                "sort {name:?}: expected one of {}",
                RunSort::names()
            ))
        })?,
    };
    let limit = match params.limit {
        None => DEFAULT_RUNS,
        Some(n) if (1..=MAX_PAGE).contains(&n) => n,
        Some(n) => {
            return Err(Problem::bad_request(format!(
                "limit {n}: expected 1 to {MAX_PAGE}"
            )));
        }
    };
    let since = params
        .since
        .as_deref()
        .map(|s| parse_since(s, Timestamp::now()))
        .transpose()
        .map_err(|e| Problem::bad_request(format!("since {e}")))?;
    let query = RunQuery {
        project: params.project,
        since,
        sort,
        limit: Some(limit),
        cursor: params.cursor,
        prices: None,
    };
    let page = state
        .store
        .list_run_summaries(&caller.tenant, &query)
        .await
        .map_err(|e| match e {
            baton_store::Error::InvalidQuery { detail } => Problem::bad_request(detail),
            other => other.into(),
        })?;
    Ok(ApiJson(RunList::from(&page)))
}

/// Deletes a run for good, from every table, with its subagent runs.
#[utoipa::path(
    delete, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "What was deleted", body = DeletedRunView),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn delete_run(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<DeletedRunView>, Problem> {
    let deleted = state
        .store
        .delete_run(&caller.tenant, &run_id(&id)?)
        .await?;
    Ok(ApiJson(DeletedRunView::from(&deleted)))
}

/// Gets a run.
#[utoipa::path(
    get, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_run(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<RunView>, Problem> {
    let run = state.store.run(&caller.tenant, &run_id(&id)?).await?;
    Ok(ApiJson(run.into()))
}

/// Cancels a run: it takes no more messages or summaries.
#[utoipa::path(
    post, path = "/v1/runs/{id}/cancel", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The cancelled run", body = RunView),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The run is not active", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn cancel_run(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<RunView>, Problem> {
    let run = state
        .store
        .cancel_run(&caller.tenant, &run_id(&id)?)
        .await?;
    Ok(ApiJson(run.into()))
}
