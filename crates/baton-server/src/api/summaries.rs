//! Summary versions: list a run's versions, read one, install a candidate by compare-and-swap on
//! the run's pointer, and activate an earlier (or later) version the same way.
//!
//! An install or activation names the `base` it was built on (the run's active summary then, or
//! `null`); when another writer moved the pointer since, nothing is written and the answer is a
//! 409 `stale-base` naming the summary active now. A candidate the store finds invalid (a cut
//! that splits a tool call from its result, a claim citing a seq after the cut, a base of
//! another run…) is a 422 `invalid-candidate`, and nothing is written either.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use baton_core::{Claim, RunId, Seq, SummaryId};
use baton_store::{Candidate, Install, Rejection};
use baton_view::{ClaimView, SummaryDiff, SummaryList, SummaryView};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::runs::run_id;
use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, ApiQuery, Problem, ProblemBody, status};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(list_summaries, install_summary))
        .routes(routes!(get_summary))
        .routes(routes!(activate_summary))
        .routes(routes!(diff_summaries))
}

/// The two versions a diff compares.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DiffQuery {
    /// The older version's id.
    pub from: u64,
    /// The newer version's id.
    pub to: u64,
}

/// What changed between two summary versions of a run: claims added, dropped and changed (the
/// rule of `baton summary diff`: a changed claim has the kind and seq of one it replaces, with
/// another text). The dashboard's diff page shows this view.
#[utoipa::path(
    get, path = "/v1/runs/{id}/summaries/diff", tag = "summaries",
    params(("id" = String, Path, description = "The run's id"), DiffQuery),
    responses(
        (status = 200, description = "The diff", body = SummaryDiff),
        (status = 400, description = "A bad id, a missing version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run, or a version that is not the run's", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn diff_summaries(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<DiffQuery>,
) -> Result<ApiJson<SummaryDiff>, Problem> {
    let run = run_id(&id)?;
    let mut sides = Vec::with_capacity(2);
    for sid in [query.from, query.to] {
        let summary = state.store.summary(&caller.tenant, SummaryId(sid)).await?;
        if summary.run != run {
            return Err(Problem::not_found(format!(
                "summary {sid} is not a version of run {run}"
            )));
        }
        sides.push(summary);
    }
    Ok(ApiJson(SummaryDiff::of(&sides[0], &sides[1])))
}

/// A candidate summary to install.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallSummary {
    /// The summary it was built on: the run's active summary when the builder started, or
    /// `null` when the run had none. Required, so a compare-and-swap is never implicit.
    #[serde(deserialize_with = "Option::deserialize")]
    #[schema(required = true)]
    pub base: Option<u64>,
    /// The last seq it covers: beyond the base's coverage, a message of the run, and a safe cut
    /// (never between a tool call and its result).
    pub cut: u64,
    /// Its claims; each cites a seq of the run at or before `cut`.
    pub claims: Vec<ClaimView>,
    /// What made it, kept with the version as given.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Which version to make active, and the pointer's value the caller saw.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivateSummary {
    /// The run's active summary as the caller saw it (`null`: none). Required.
    #[serde(deserialize_with = "Option::deserialize")]
    #[schema(required = true)]
    pub base: Option<u64>,
}

/// The problem an install, activation or compaction rejected by the store answers with: its
/// status from the rejection's kind ([`status`]), its `type` naming the rejection.
pub fn rejected(why: Rejection) -> Problem {
    let status = status(why.kind());
    let detail = why.to_string();
    match why {
        Rejection::StaleBase { expected, active } => {
            Problem::new(status, "stale-base", "Stale base", detail)
                .with("base", expected.map(|s| s.0))
                .with("active_summary_id", active.map(|s| s.0))
        }
        Rejection::Invalid(invalid) => {
            Problem::new(status, "invalid-candidate", "Invalid candidate", detail)
                .with("rejection", invalid)
        }
        Rejection::RunNotActive { status: run } => {
            Problem::new(status, "run-not-active", "Run not active", detail)
                .with("run_status", run.as_str())
        }
        Rejection::StaleCleared { expected, active } => {
            Problem::new(status, "stale-setting", "Stale setting", detail)
                .with("expected", expected)
                .with("active", active)
        }
        Rejection::InvalidClear { .. } => {
            Problem::new(status, "invalid-setting", "Invalid setting", detail)
        }
        other => Problem::new(status, "rejected", "Rejected", other.to_string()),
    }
}

/// Lists a run's summary versions, marking the active one.
#[utoipa::path(
    get, path = "/v1/runs/{id}/summaries", tag = "summaries",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The run's versions", body = SummaryList),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_summaries(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<SummaryList>, Problem> {
    let run = run_id(&id)?;
    let active = state
        .store
        .run(&caller.tenant, &run)
        .await?
        .active_summary_id;
    let summaries = state.store.summaries(&caller.tenant, &run).await?;
    Ok(ApiJson(SummaryList::of(&summaries, active)))
}

/// Reads one summary version, with its claims.
#[utoipa::path(
    get, path = "/v1/summaries/{sid}", tag = "summaries",
    params(("sid" = u64, Path, description = "The summary's id")),
    responses(
        (status = 200, description = "The version", body = SummaryView),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such summary among this tenant's runs", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_summary(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(sid): ApiPath<u64>,
) -> Result<ApiJson<SummaryView>, Problem> {
    let summary = state.store.summary(&caller.tenant, SummaryId(sid)).await?;
    let active = state
        .store
        .run(&caller.tenant, &summary.run)
        .await?
        .active_summary_id;
    Ok(ApiJson(SummaryView::of(&summary, active)))
}

/// Installs a candidate summary by compare-and-swap on the run's pointer: it becomes the
/// active summary only if the pointer still names `base`.
#[utoipa::path(
    post, path = "/v1/runs/{id}/summaries", tag = "summaries",
    params(("id" = String, Path, description = "The run's id")),
    request_body = InstallSummary,
    responses(
        (status = 201, description = "Installed: now the run's active summary", body = SummaryView),
        (status = 400, description = "A bad id, or a body that is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "`stale-base`: another summary is active now (`active_summary_id`); or the run is not active. Nothing was written", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "`invalid-candidate`: an unsafe cut, a claim citing a seq after the cut or not in the run, a base of another run (`rejection` says which); or an unknown or mistyped field. Nothing was written", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn install_summary(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<InstallSummary>,
) -> Result<(StatusCode, ApiJson<SummaryView>), Problem> {
    let run: RunId = run_id(&id)?;
    let candidate = Candidate {
        base: body.base.map(SummaryId),
        cut: Seq(body.cut),
        claims: body.claims.into_iter().map(Claim::from).collect(),
        meta: body.meta.map(serde_json::Value::Object),
    };
    match state
        .store
        .install_summary(&caller.tenant, &run, &candidate)
        .await?
    {
        Install::Installed(summary) => Ok((
            StatusCode::CREATED,
            ApiJson(SummaryView::of(&summary, Some(summary.id))),
        )),
        Install::Rejected(why) => Err(rejected(why)),
    }
}

/// Makes a version of the run's summary the active one, by compare-and-swap on the same
/// pointer an install moves; history is untouched (a rollback brings the messages after the
/// version's coverage back into the context).
#[utoipa::path(
    post, path = "/v1/runs/{id}/summaries/{sid}/activate", tag = "summaries",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("sid" = u64, Path, description = "The version to activate"),
    ),
    request_body = ActivateSummary,
    responses(
        (status = 200, description = "Activated", body = SummaryView),
        (status = 400, description = "A bad id, or a body that is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "`stale-base`: another summary is active now (`active_summary_id`); or the run is not active. Nothing was written", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "`invalid-candidate`: the summary is not a version of this run; or an unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn activate_summary(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath((id, sid)): ApiPath<(String, u64)>,
    ApiJson(body): ApiJson<ActivateSummary>,
) -> Result<ApiJson<SummaryView>, Problem> {
    let run = run_id(&id)?;
    match state
        .store
        .activate_summary(
            &caller.tenant,
            &run,
            SummaryId(sid),
            body.base.map(SummaryId),
        )
        .await?
    {
        Install::Installed(summary) => Ok(ApiJson(SummaryView::of(&summary, Some(summary.id)))),
        Install::Rejected(why) => Err(rejected(why)),
    }
}
