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
use baton_cache::report::{self, ToolCall};
use baton_compact::config::CompactionConfig;
use baton_compact::growth::Growth;
use baton_compact::replay::{Replay, replay_unless};
use baton_core::key::canonical_json;
use baton_core::{ContentBlock, Seq, TenantId, Timestamp};
use baton_store::Store;
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

const DAY_MS: i64 = 86_400_000;

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
    let (since, until) = range(&query)?;
    let tools = query.tools.unwrap_or(false);
    let operation = query.operation.as_deref();
    let rows = if tools {
        let calls = tool_calls(&*state.store, &caller.tenant).await?;
        report::tools(&calls, operation, since, until)
    } else {
        // The gateway logs in the background: read the caller's own calls after they are
        // written, so a report asked for right after a call includes it.
        state.cache(&caller.tenant).flush_log().await;
        let records = match state.store.calls(&caller.tenant, since, until).await {
            Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
            other => other?,
        };
        report::calls(&records, operation)
    };
    let total = report::total(&rows);
    Ok(ApiJson(DuplicatesReport::of(tools, &rows, &total)))
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
    let name = query.strategy.as_deref().unwrap_or("structured");
    let mut config = CompactionConfig::named(name);
    if let Some(budget) = query.budget {
        config = config.with_budget(budget);
    }
    let bad = |e: baton_compact::config::Error| {
        Problem::bad_request(format!(
            "{e} (strategies: {}; budget: 1 or more tokens)",
            baton_compact::strategies::names().join(", ")
        ))
    };
    let mut how = Replay::new(run.clone(), &config).map_err(bad)?;
    let record = state.store.run(&caller.tenant, &run).await?;
    let entries = state
        .store
        .read_range(&caller.tenant, &run, Seq(1), None)
        .await?;
    how.rules = record.rules.clone();
    how.goal = record.goal.clone();
    how.probes = false;
    how.counter = baton_tokens::counter(baton_tokens::TokenizerChoice::Auto, None);
    let replayed = state
        .blocking(move |cancel| replay_unless(&entries, &how, cancel))
        .await
        .map_err(|e| Problem::internal(&e))?
        .ok_or_else(|| Problem::internal(&"the growth replay was cancelled"))?;
    let growth = Growth::of(&replayed.strategy, &replayed.steps);
    let stored = state.store.run_report(&caller.tenant, &run).await?;
    Ok(ApiJson(
        GrowthReport::of(&run, &growth).with_reported(&stored.usage),
    ))
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
    use baton_usage::{Entry, Options, Order, Period, TextOptions};
    let period = match report.as_str() {
        "daily" => Some(Period::Daily),
        "weekly" => Some(Period::Weekly),
        "monthly" => Some(Period::Monthly),
        "session" | "blocks" => None,
        other => {
            return Err(Problem::bad_request(format!(
                "unknown usage report {other:?}: expected daily, weekly, monthly, session or blocks"
            )));
        }
    };
    let order = match query.order.as_deref() {
        None | Some("asc") => Order::Asc,
        Some("desc") => Order::Desc,
        Some(other) => {
            return Err(Problem::bad_request(format!(
                "order: {other:?}: expected asc or desc"
            )));
        }
    };
    let text = TextOptions {
        since: query.since.as_deref(),
        until: query.until.as_deref(),
        timezone: query.timezone.as_deref(),
        project: query.project.as_deref(),
        order,
    };
    let options = Options::from_text(&text, baton_core::prices::PriceTable::defaults())
        .map_err(|e| Problem::bad_request(e.to_string()))?;
    let stored = state
        .store
        .usage(
            &caller.tenant,
            &baton_store::UsageQuery {
                estimated: query.estimated.unwrap_or(false),
                project: query.project.clone(),
            },
        )
        .await?;
    let entries: Vec<Entry> = stored
        .into_iter()
        .map(|u| Entry {
            record: u.record,
            session: u.session,
            project: u.project,
            agent: u.agent,
        })
        .collect();
    let value = match (period, report.as_str()) {
        (Some(period), _) => serde_json::to_value(baton_usage::report(&entries, period, &options)),
        (None, "session") => serde_json::to_value(baton_usage::sessions(&entries, &options)),
        (None, _) => {
            serde_json::to_value(baton_usage::blocks(&entries, &options, Timestamp::now()))
        }
    }
    .map_err(|e| Problem::internal(&e))?;
    Ok(ApiJson(UsageBody(value)))
}

/// `[since, until)` in milliseconds, from `day` or `since`/`until` (UTC days, inclusive).
fn range(query: &DuplicatesQuery) -> Result<(Timestamp, Timestamp), Problem> {
    if let Some(day) = &query.day {
        if query.since.is_some() || query.until.is_some() {
            return Err(Problem::bad_request(
                "give `day`, or `since` and `until`, not both",
            ));
        }
        let start = parse_day(day, "day")?;
        return Ok((start, Timestamp(start.0 + DAY_MS)));
    }
    let since = match &query.since {
        Some(d) => parse_day(d, "since")?,
        None => Timestamp(i64::MIN),
    };
    let until = match &query.until {
        Some(d) => Timestamp(parse_day(d, "until")?.0 + DAY_MS),
        None => Timestamp(i64::MAX),
    };
    if since >= until {
        return Err(Problem::bad_request(format!(
            "since {:?} is after until {:?}",
            query.since.as_deref().unwrap_or(""),
            query.until.as_deref().unwrap_or("")
        )));
    }
    Ok((since, until))
}

/// A UTC day `YYYY-MM-DD` (years 1970 to 9999) as the millisecond its midnight is.
fn parse_day(text: &str, what: &str) -> Result<Timestamp, Problem> {
    Timestamp::from_day(text)
        .filter(|t| t.0 >= 0)
        .ok_or_else(|| {
            Problem::bad_request(format!(
                "{what} {text:?}: expected a day as YYYY-MM-DD, from 1970-01-01 to 9999-12-31"
            ))
        })
}

/// Every tool call of the tenant's runs. An imported run's calls are dated by when its source
/// session started (the import's own time says nothing about the work); a native run's by
/// when each message was stored.
async fn tool_calls(store: &dyn Store, tenant: &TenantId) -> Result<Vec<ToolCall>, Problem> {
    let runs = match store.list_runs(tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?,
    };
    let mut calls = Vec::new();
    for run in runs {
        if run.last_seq == Seq(0) {
            continue;
        }
        let report = store.run_report(tenant, &run.id).await?;
        let source_day = report
            .origin
            .as_ref()
            .and_then(|o| o.first_at.as_deref())
            .and_then(|at| humantime::parse_rfc3339_weak(at).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
        for entry in store.read_range(tenant, &run.id, Seq(1), None).await? {
            for block in &entry.message.content {
                if let ContentBlock::ToolUse { id, name, input } = block {
                    calls.push(ToolCall {
                        run: run.id.to_string(),
                        at: source_day.unwrap_or(entry.created_at),
                        id: id.clone(),
                        tool: name.clone(),
                        canonical_input: canonical_json(input),
                    });
                }
            }
        }
    }
    Ok(calls)
}
