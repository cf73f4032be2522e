//! Reports: the duplicate-work report and a run's token-growth report, as JSON.
//!
//! `GET /v1/reports/duplicates` is `baton report duplicates --json`: per UTC day and
//! operation, the calls of the call log repeating an earlier identical request, with what they
//! cost and what the cache and coalescing saved (`tools=true`: the same over the stored runs'
//! tool calls). Days are `YYYY-MM-DD`, UTC, inclusive; `day` or `since`/`until`, not both.
//!
//! `GET /v1/runs/{id}/growth` is `baton report growth --json`: the run replayed offline under
//! a strategy (default `structured`), the input tokens of every model call with the whole
//! transcript against the compacted context. A run without model calls (assistant messages)
//! has an empty report. The replay runs on the blocking pool, since it is CPU work that grows
//! with the run, and stops at the next model call once the request is gone
//! ([`AppState::blocking`]); it skips the continuity probes and the retention audit, which the
//! report does not show, so its cost is linear in the run's length for the strategies whose
//! context stays bounded.
//!
//! `GET /v1/reports/usage/{report}` is `baton report usage REPORT --json`: `daily`, `weekly`,
//! `monthly`, `session` or `blocks` over the usage records imports stored, with ccusage's JSON
//! fields, at the built-in prices.

use std::sync::Arc;

use axum::extract::State;
use baton_reports::{DuplicatesOptions, GrowthJob, UsageKind, UsageOptions};
use baton_view::{DuplicatesReport, GrowthReport};
use serde::{Deserialize, Serialize};
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
        .routes(routes!(duplicates))
        .routes(routes!(growth))
        .routes(routes!(usage))
}

/// Which part of the log the duplicate-work report covers.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DuplicatesQuery {
    /// One UTC day, `YYYY-MM-DD` (not with `since` or `until`).
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", example = "2024-05-01")]
    pub day: Option<String>,
    /// From this UTC day on (inclusive), `YYYY-MM-DD`.
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    pub since: Option<String>,
    /// Up to this UTC day (inclusive), `YYYY-MM-DD`.
    #[param(pattern = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]
    pub until: Option<String>,
    /// Only this operation (with `tools`: this tool).
    pub operation: Option<String>,
    /// Report on the stored runs' tool calls instead of the call log: a repeat is a call with
    /// the same tool and canonical input as an earlier call of the same run.
    pub tools: Option<bool>,
}

/// How to replay a run for its growth report.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GrowthQuery {
    /// The strategy the compacted figures come from (default `structured`): `none`,
    /// `sliding`, `budget`, `clear-tool-results`, `summarize` or `structured`.
    #[param(example = "sliding")]
    pub strategy: Option<String>,
    /// The token budget: `budget`'s `max_tokens`, `summarize`'s and `structured`'s threshold.
    #[param(minimum = 1)]
    pub budget: Option<u64>,
}

/// The duplicate-work report.
#[utoipa::path(
    get, path = "/v1/reports/duplicates", tag = "reports",
    params(DuplicatesQuery),
    responses(
        (status = 200, description = "The report", body = DuplicatesReport),
        (status = 400, description = "A bad day, `since` after `until`, `day` with `since` or `until`, an unknown parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn duplicates(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<DuplicatesQuery>,
) -> Result<ApiJson<DuplicatesReport>, Problem> {
    let (since, until) = baton_reports::day_range(
        query.day.as_deref(),
        query.since.as_deref(),
        query.until.as_deref(),
        ["day", "since", "until"],
    )
    .map_err(bad)?;
    let tools = query.tools.unwrap_or(false);
    if !tools {
        // The gateway logs in the background: read the caller's own calls after they are
        // written, so a report asked for right after a call includes it.
        state.cache(&caller.tenant).flush_log().await;
    }
    let options = DuplicatesOptions {
        tools,
        operation: query.operation.as_deref(),
        since,
        until,
    };
    let report = baton_reports::duplicates(&*state.store, &caller.tenant, &options)
        .await
        .map_err(bad)?;
    Ok(ApiJson(report))
}

/// A report's error as a problem: a bad option is a 400, a store failure as the store says.
fn bad(e: baton_reports::Error) -> Problem {
    match e {
        baton_reports::Error::Invalid(detail) => Problem::bad_request(detail),
        baton_reports::Error::Store(e) => e.into(),
    }
}

/// A run's token-growth report.
#[utoipa::path(
    get, path = "/v1/runs/{id}/growth", tag = "reports",
    params(("id" = String, Path, description = "The run's id"), GrowthQuery),
    responses(
        (status = 200, description = "The report", body = GrowthReport),
        (status = 400, description = "A bad id, an unknown strategy, a budget of 0, an unknown parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn growth(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<GrowthQuery>,
) -> Result<ApiJson<GrowthReport>, Problem> {
    let run = run_id(&id)?;
    let strategy = query.strategy.as_deref().unwrap_or("structured");
    let job = GrowthJob::prepare(&*state.store, &caller.tenant, &run, strategy, query.budget)
        .await
        .map_err(bad)?;
    let report = state
        .blocking(move |cancel| job.run(cancel))
        .await
        .map_err(|e| Problem::internal(&e))?
        .ok_or_else(|| Problem::internal(&"the growth replay was cancelled"))?
        .map_err(bad)?;
    Ok(ApiJson(report))
}

/// What the usage reports cover.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// From this day on (inclusive), `YYYY-MM-DD` or `YYYYMMDD`, in `timezone`.
    #[param(example = "2026-02-01")]
    pub since: Option<String>,
    /// Up to this day (inclusive).
    pub until: Option<String>,
    /// Only this project.
    pub project: Option<String>,
    /// `asc` (oldest first, the default) or `desc`.
    pub order: Option<String>,
    /// The zone days are told in: `UTC` (the default) or an offset such as `+02:00`.
    pub timezone: Option<String>,
    /// Also count baton's estimates for sources that record no usage.
    pub estimated: Option<bool>,
}

/// A usage report, with ccusage's JSON fields: `{"daily": [...], "totals": {...}}` (or
/// `weekly`, `monthly`), `{"session": [...], "totals": {...}}`, `{"blocks": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = Object)]
pub struct UsageBody(serde_json::Value);

/// A token usage and cost report.
#[utoipa::path(
    get, path = "/v1/reports/usage/{report}", tag = "reports",
    params(("report" = String, Path, description = "`daily`, `weekly`, `monthly`, `session` or `blocks`"), UsageQuery),
    responses(
        (status = 200, description = "The report", body = UsageBody),
        (status = 400, description = "An unknown report, a bad day, order or time zone, `until` before `since`, an unknown parameter", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn usage(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(report): ApiPath<String>,
    ApiQuery(query): ApiQuery<UsageQuery>,
) -> Result<ApiJson<UsageBody>, Problem> {
    let kind = UsageKind::parse(&report).ok_or_else(|| {
        Problem::bad_request(format!(
            "unknown usage report {report:?}: expected {}",
            UsageKind::NAMES
        ))
    })?;
    let descending = match query.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => {
            return Err(Problem::bad_request(format!(
                "order: {other:?}: expected asc or desc"
            )));
        }
    };
    let options = UsageOptions {
        since: query.since.as_deref(),
        until: query.until.as_deref(),
        project: query.project.as_deref(),
        timezone: query.timezone.as_deref(),
        descending,
        estimated: query.estimated.unwrap_or(false),
    };
    let report = baton_reports::usage(
        &*state.store,
        &caller.tenant,
        kind,
        &options,
        baton_core::prices::PriceTable::defaults(),
    )
    .await
    .map_err(bad)?;
    let value = serde_json::to_value(report).map_err(|e| Problem::internal(&e))?;
    Ok(ApiJson(UsageBody(value)))
}
