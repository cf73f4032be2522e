//! Runs: create, list, get, cancel.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use baton_core::RunId;
use baton_store::NewRun;
use baton_view::{RunList, RunView};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(create_run, list_runs))
        .routes(routes!(get_run))
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

/// Lists the tenant's runs.
#[utoipa::path(
    get, path = "/v1/runs", tag = "runs",
    responses(
        (status = 200, description = "The runs", body = RunList),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_runs(
    caller: Caller,
    State(state): State<Arc<AppState>>,
) -> Result<ApiJson<RunList>, Problem> {
    let runs = match state.store.list_runs(&caller.tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?,
    };
    Ok(ApiJson(RunList {
        runs: runs.into_iter().map(RunView::from).collect(),
    }))
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
