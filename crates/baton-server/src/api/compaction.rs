//! Compaction on demand: one strategy's plan, admitted by the trigger and carried out by
//! `baton-runtime`'s compactor with the offline summarizer, exactly as `baton compact` does.
//! History is never touched: a compaction installs a new summary version by compare-and-swap
//! (or moves which old tool results the context stubs), and a dry run installs nothing.

use std::sync::Arc;

use axum::extract::State;
use baton_compact::config::{CompactionConfig, Overrides};
use baton_compact::{Compaction, Offline};
use baton_core::prices::PriceTable;
use baton_core::{RunId, Seq, SummaryId, TenantId};
use baton_runtime::{Compactor, Outcome};
use baton_view::ClaimView;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::runs::run_id;
use crate::api::summaries::rejected;
use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new().routes(routes!(compact))
}

/// The largest `min_growth` accepted: a share beyond it could only mean "never again", and
/// would overflow the loop guard's arithmetic.
pub const MAX_MIN_GROWTH: f64 = 1000.0;

/// A compaction strategy (`baton_compact::strategies::REGISTRY`; a test holds this enum to it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub enum StrategyName {
    /// Never compacts (the baseline).
    #[serde(rename = "none")]
    None,
    /// Keeps the last `keep_last` messages, dropping the rest from the context.
    #[serde(rename = "sliding")]
    Sliding,
    /// Drops the oldest messages once the context is over `max_tokens`, down to
    /// `target_tokens`.
    #[serde(rename = "budget")]
    Budget,
    /// Shows old tool results (past the last `keep_recent` messages, of `min_tokens` or more)
    /// as a stub.
    #[serde(rename = "clear-tool-results")]
    ClearToolResults,
    /// Over `threshold` tokens, summarizes all but the last `keep_recent` messages.
    #[serde(rename = "summarize")]
    Summarize,
    /// Over `threshold` tokens, merges what the old messages establish into the working state.
    #[serde(rename = "structured")]
    Structured,
}

impl StrategyName {
    /// Every strategy, in the registry's order.
    #[cfg(test)]
    pub const ALL: [StrategyName; 6] = [
        StrategyName::None,
        StrategyName::Sliding,
        StrategyName::Budget,
        StrategyName::ClearToolResults,
        StrategyName::Summarize,
        StrategyName::Structured,
    ];

    /// The name the configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyName::None => "none",
            StrategyName::Sliding => "sliding",
            StrategyName::Budget => "budget",
            StrategyName::ClearToolResults => "clear-tool-results",
            StrategyName::Summarize => "summarize",
            StrategyName::Structured => "structured",
        }
    }
}

/// A compaction to run. Every option is optional and applies to the strategies that have it
/// (as `baton compact`'s flags do); the rest keep their defaults.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// Which strategy plans it.
    pub strategy: StrategyName,
    /// Plan, write and check, but install nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Skip the trigger's admission (threshold, loop guard, minimum reduction); the checks on
    /// the written summary still apply.
    #[serde(default)]
    pub force: bool,
    /// `sliding`: messages to keep.
    #[schema(minimum = 1)]
    pub keep_last: Option<usize>,
    /// `budget`: the most tokens the context may hold.
    #[schema(minimum = 1)]
    pub max_tokens: Option<u64>,
    /// `budget`: how far it cuts once over the maximum (at most `max_tokens`).
    pub target_tokens: Option<u64>,
    /// `clear-tool-results`, `summarize`, `structured`: messages at the end that stay whole.
    #[schema(minimum = 1)]
    pub keep_recent: Option<usize>,
    /// `clear-tool-results`: tool-result messages smaller than this stay whole.
    pub min_tokens: Option<u32>,
    /// `summarize`, `structured`: context tokens at which they compact.
    pub threshold: Option<u64>,
    /// `summarize`, `structured`: the most tokens the messages kept whole may hold.
    pub keep_tokens: Option<u64>,
    /// `summarize`: what the summary must keep.
    pub instructions: Option<String>,
    /// Trigger: below this many context tokens nothing is compacted.
    pub min_context_tokens: Option<u64>,
    /// Trigger: the least share of the context a compaction must save (0 up to 1).
    #[schema(minimum = 0.0, exclusive_maximum = 1.0)]
    pub min_reduction: Option<f64>,
    /// Trigger: the share by which the context must have grown since the last compaction.
    #[schema(minimum = 0.0, maximum = 1000.0)]
    pub min_growth: Option<f64>,
}

/// What a compaction did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeName {
    /// The strategy planned nothing (`reason` says why).
    Kept,
    /// The trigger or a check on the written summary refused the plan; nothing was written.
    Refused,
    /// A dry run: what would have been installed.
    Planned,
    /// Done.
    Compacted,
}

/// A range of seqs, both ends included.
#[derive(Debug, Serialize, ToSchema)]
pub struct SeqRange {
    /// The first seq.
    pub from: u64,
    /// The last seq.
    pub through: u64,
}

/// What a compaction did, or would do.
#[derive(Debug, Serialize, ToSchema)]
pub struct CompactionReport {
    /// What happened.
    pub outcome: OutcomeName,
    /// The strategy.
    pub strategy: String,
    /// The plan's kind: `drop`, `clear_tool_results`, `summarize`, `update_state` (`null`
    /// when kept).
    pub plan: Option<String>,
    /// Why nothing was done, for people (kept or refused).
    pub reason: Option<String>,
    /// Why nothing was done, as data: `{"reason": "under_threshold", "tokens": …, …}`.
    #[schema(value_type = Option<Object>)]
    pub why: Option<serde_json::Value>,
    /// Context tokens before.
    pub tokens_before: Option<u64>,
    /// Context tokens after (or that the plan would have left).
    pub tokens_after: Option<u64>,
    /// Messages in the context before.
    pub messages_before: Option<u64>,
    /// Messages in the context after.
    pub messages_after: Option<u64>,
    /// The cut: the new summary covers history through it.
    pub cut: Option<u64>,
    /// The messages the compaction took out of the context (now covered by the summary;
    /// still in history, recallable).
    pub dropped: Option<SeqRange>,
    /// The summary version installed.
    pub summary_id: Option<u64>,
    /// Tokens of the new summary's claims.
    pub summary_tokens: Option<u64>,
    /// What share of the dropped part's paths, commands, URLs and numbers stays reachable.
    #[schema(value_type = Option<Object>)]
    pub retention: Option<serde_json::Value>,
    /// A dry run's claims: what the new version would say.
    pub claims: Option<Vec<ClaimView>>,
    /// Whether it was a dry run.
    pub dry_run: bool,
}

impl CompactionReport {
    fn empty(outcome: OutcomeName, strategy: &str, dry_run: bool) -> Self {
        CompactionReport {
            outcome,
            strategy: strategy.to_owned(),
            plan: None,
            reason: None,
            why: None,
            tokens_before: None,
            tokens_after: None,
            messages_before: None,
            messages_after: None,
            cut: None,
            dropped: None,
            summary_id: None,
            summary_tokens: None,
            retention: None,
            claims: None,
            dry_run,
        }
    }

    fn of(outcome: OutcomeName, c: &Compaction, dry_run: bool) -> Result<Self, Problem> {
        let mut report = CompactionReport::empty(outcome, &c.strategy, dry_run);
        report.plan = Some(c.plan.to_owned());
        report.tokens_before = Some(c.tokens_before);
        report.tokens_after = Some(c.tokens_after);
        report.messages_before = Some(c.messages_before as u64);
        report.messages_after = Some(c.messages_after as u64);
        report.cut = c.cut.map(|s| s.0);
        report.summary_id = c.summary_id.map(|s| s.0);
        report.summary_tokens = Some(c.summary_tokens);
        report.retention = c
            .retention
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| Problem::internal(&e))?;
        Ok(report)
    }
}

/// The compaction configuration `body` describes, checked, mirroring `baton compact`'s flags.
fn configure(body: &CompactRequest) -> Result<CompactionConfig, Problem> {
    let mut config = CompactionConfig::named(body.strategy.as_str());
    config.apply(&Overrides {
        keep_last: body.keep_last,
        max_tokens: body.max_tokens,
        target_tokens: body.target_tokens,
        keep_recent: body.keep_recent,
        min_tokens: body.min_tokens,
        threshold: body.threshold,
        keep_tokens: body.keep_tokens,
        instructions: body.instructions.clone(),
    });
    if let Some(n) = body.min_context_tokens {
        config.settings.trigger.min_context_tokens = n;
    }
    if let Some(share) = body.min_reduction {
        config.settings.trigger.min_reduction = share;
    }
    if let Some(share) = body.min_growth {
        if share > MAX_MIN_GROWTH {
            return Err(invalid_options(format!(
                "min_growth {share}: expected a share from 0 to {MAX_MIN_GROWTH}"
            )));
        }
        config.settings.trigger.min_growth = share;
    }
    config
        .validate()
        .map_err(|e| invalid_options(e.to_string()))?;
    Ok(config)
}

fn invalid_options(detail: String) -> Problem {
    Problem::unprocessable("invalid-options", "Invalid compaction options", detail)
}

/// What a summary version covers (0 for none).
async fn coverage(
    state: &AppState,
    tenant: &TenantId,
    id: Option<SummaryId>,
) -> Result<Seq, Problem> {
    match id {
        None => Ok(Seq::ZERO),
        Some(id) => Ok(state.store.summary(tenant, id).await?.coverage),
    }
}

/// The messages from after `base`'s coverage through `cut`.
async fn dropped(
    state: &AppState,
    tenant: &TenantId,
    base: Option<SummaryId>,
    cut: Option<Seq>,
) -> Result<Option<SeqRange>, Problem> {
    let Some(cut) = cut else { return Ok(None) };
    let from = coverage(state, tenant, base).await?.next();
    Ok(Some(SeqRange {
        from: from.0,
        through: cut.0,
    }))
}

/// Runs one compaction of the run: the strategy plans on metadata, the trigger admits, the
/// offline summarizer writes the claims, and the new version is installed by compare-and-swap.
#[utoipa::path(
    post, path = "/v1/runs/{id}/compact", tag = "compaction",
    params(("id" = String, Path, description = "The run's id")),
    request_body = CompactRequest,
    responses(
        (status = 200, description = "What the compaction did: kept, refused, planned (a dry run) or compacted", body = CompactionReport),
        (status = 400, description = "A bad id, or a body that is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Another writer moved the run first (`stale-base`, `stale-setting`), or the run is not active; nothing was written", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body is over the limit", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not sent as JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "`invalid-options`: an option out of its range; or an unknown strategy, an unknown or mistyped field", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn compact(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<CompactRequest>,
) -> Result<ApiJson<CompactionReport>, Problem> {
    let run: RunId = run_id(&id)?;
    let config = configure(&body)?;
    let strategy = config.build().map_err(|e| invalid_options(e.to_string()))?;
    let prices = PriceTable::defaults();
    let clear = config.clear().map_err(|e| invalid_options(e.to_string()))?;
    let counter = baton_tokens::counter(baton_tokens::TokenizerChoice::Auto, None);
    let compactor = Compactor {
        strategy: &*strategy,
        summarizer: &Offline,
        settings: &config.settings,
        clear,
        prices: &prices,
        counter: &*counter,
        force: body.force,
        dry_run: body.dry_run,
    };
    let tenant = &caller.tenant;
    let outcome = baton_runtime::compact(&*state.store, tenant, &run, &compactor)
        .await
        .map_err(|e| match e {
            baton_runtime::Error::Store(e) => Problem::from(e),
            needs @ baton_runtime::Error::NeedsModel { .. } => Problem::unprocessable(
                "needs-model",
                "The strategy needs a model",
                needs.to_string(),
            ),
            other => Problem::internal(&other),
        })?;
    let name = strategy.name();
    state.metrics.compaction(outcome.name());
    let why = |value: Result<serde_json::Value, serde_json::Error>| {
        value.map(Some).map_err(|e| Problem::internal(&e))
    };
    let report = match outcome {
        Outcome::Kept(keep) => {
            let mut report = CompactionReport::empty(OutcomeName::Kept, name, body.dry_run);
            report.reason = Some(keep.to_string());
            report.why = why(serde_json::to_value(&keep))?;
            report
        }
        Outcome::Refused {
            plan,
            reason,
            tokens_before,
            tokens_after,
        } => {
            let mut report = CompactionReport::empty(OutcomeName::Refused, name, body.dry_run);
            report.plan = Some(plan.to_owned());
            report.reason = Some(reason.to_string());
            report.why = why(serde_json::to_value(&reason))?;
            report.tokens_before = Some(tokens_before);
            report.tokens_after = Some(tokens_after);
            report
        }
        Outcome::Planned { compaction, claims } => {
            let mut report = CompactionReport::of(OutcomeName::Planned, &compaction, true)?;
            let active = state.store.run(tenant, &run).await?.active_summary_id;
            report.dropped = dropped(&state, tenant, active, compaction.cut).await?;
            report.claims = Some(claims.iter().map(ClaimView::from).collect());
            report
        }
        Outcome::Compacted(compaction) => {
            state.metrics.tokens_saved(
                "compaction",
                compaction
                    .tokens_before
                    .saturating_sub(compaction.tokens_after),
            );
            let mut report = CompactionReport::of(OutcomeName::Compacted, &compaction, false)?;
            if let Some(id) = compaction.summary_id {
                let base = state.store.summary(tenant, id).await?.previous_id;
                report.dropped = dropped(&state, tenant, base, compaction.cut).await?;
            }
            report
        }
        Outcome::Conflict(why) => return Err(rejected(why)),
    };
    Ok(ApiJson(report))
}

#[cfg(test)]
mod tests {
    use super::StrategyName;

    /// Issue 15, item 5: the API's strategies are the registry's, in its order, each
    /// deserializing from its name (a strategy added to the registry fails this until the API
    /// knows it).
    #[test]
    fn the_api_enum_is_the_registry() {
        let registry = baton_compact::strategies::names();
        let ours: Vec<&str> = StrategyName::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(ours, registry);
        for (name, variant) in registry.iter().zip(StrategyName::ALL) {
            let parsed: StrategyName = serde_json::from_value(serde_json::json!(name)).unwrap();
            assert_eq!(parsed, variant);
        }
    }
}
