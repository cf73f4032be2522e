//! The assembled context of a run: what its next model call receives (rules + goal + active
//! summary + the pinned messages it covers + every message after its coverage), as the store's
//! `context` assembles it, with its tokens per part, and optionally rendered as one vendor's
//! request message list by `baton-wire`.

use std::sync::Arc;

use axum::extract::State;
use baton_core::Context;
use baton_core::tokens::estimate_message;
use baton_view::{ClaimView, EntryView};
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
    OpenApiRouter::new().routes(routes!(get_context))
}

/// A vendor's request shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VendorFormat {
    /// Anthropic Messages: a top-level `system` string and `messages` (tool results merged
    /// into user messages).
    Anthropic,
    /// OpenAI Chat Completions: `messages` with the preamble as a `system` message and one
    /// `tool` message per result.
    Openai,
}

/// How to show the context.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ContextQuery {
    /// Also render the context as this vendor's request message list (`rendered`).
    #[param(inline)]
    pub format: Option<VendorFormat>,
}

/// The summary part of a context.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContextSummaryView {
    /// The summary version.
    pub id: u64,
    /// The last seq it covers.
    pub coverage: u64,
    /// Its claims, grouped by kind.
    pub claims: Vec<ClaimView>,
}

/// A context's tokens, per part; the parts add up to `total`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContextTokens {
    /// Everything the next call receives.
    pub total: u64,
    /// The preamble's rules and goal.
    pub preamble: u64,
    /// The active summary's claims, as the preamble renders them.
    pub summary: u64,
    /// The pinned messages the summary covers, carried whole in the preamble.
    pub pinned: u64,
    /// The messages after the summary's coverage (stored counts; stubs for cleared results).
    pub messages: u64,
}

/// A context rendered as one vendor's request message list.
#[derive(Debug, Serialize, ToSchema)]
pub struct RenderedContext {
    /// The vendor.
    pub format: VendorFormat,
    /// Anthropic's top-level `system` text (`null` for OpenAI, whose preamble is the first
    /// message, and when there is no preamble).
    pub system: Option<String>,
    /// The request's `messages`, in the vendor's shape.
    #[schema(value_type = Vec<Object>)]
    pub messages: serde_json::Value,
}

/// The assembled context of a run.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContextView {
    /// The run.
    pub run: String,
    /// Its standing rules.
    pub rules: Option<String>,
    /// Its goal.
    pub goal: Option<String>,
    /// The active summary (`null` when the run has none).
    pub summary: Option<ContextSummaryView>,
    /// The preamble as the system message the next call starts with (`null` when there are no
    /// rules, goal, summary or pinned messages).
    pub preamble: Option<String>,
    /// Pinned messages the summary covers, in seq order.
    pub pinned: Vec<EntryView>,
    /// Every message after the summary's coverage, in seq order (old tool results shown as a
    /// stub where the run clears them).
    pub messages: Vec<EntryView>,
    /// The seqs whose tool results are shown as a stub.
    pub cleared: Vec<u64>,
    /// Tool-pairing problems in the messages (orphan results, dangling calls), each
    /// `{"kind": …, "seq": …, "tool_use_id": …}`.
    #[schema(value_type = Vec<Object>)]
    pub problems: serde_json::Value,
    /// Its tokens, per part.
    pub tokens: ContextTokens,
    /// The context as the vendor's request message list, when `format` was given.
    pub rendered: Option<RenderedContext>,
}

/// The tokens of `ctx`'s preamble without the parts `ctx` has been stripped of.
fn preamble_tokens(ctx: &Context) -> u64 {
    ctx.preamble()
        .map_or(0, |m| u64::from(estimate_message(&m)))
}

/// `ctx`'s tokens per part, measured the way context assembly measures the whole: each part is
/// what adding it to the preamble costs.
fn tokens(ctx: &Context) -> ContextTokens {
    let mut bare = ctx.clone();
    bare.messages = Vec::new();
    bare.pinned = Vec::new();
    bare.summary = None;
    let rules_goal = preamble_tokens(&bare);
    bare.summary = ctx.summary.clone();
    let with_summary = preamble_tokens(&bare);
    let whole = preamble_tokens(ctx);
    let messages = ctx
        .messages
        .iter()
        .map(|e| u64::from(e.tokens))
        .sum::<u64>();
    ContextTokens {
        total: ctx.tokens,
        preamble: rules_goal,
        summary: with_summary.saturating_sub(rules_goal),
        pinned: whole.saturating_sub(with_summary),
        messages,
    }
}

/// Assembles the run's context: rules, goal, active summary, the pinned messages it covers, and
/// every message after its coverage.
#[utoipa::path(
    get, path = "/v1/runs/{id}/context", tag = "context",
    params(("id" = String, Path, description = "The run's id"), ContextQuery),
    responses(
        (status = 200, description = "The context", body = ContextView),
        (status = 400, description = "A bad id or format", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn get_context(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ContextQuery>,
) -> Result<ApiJson<ContextView>, Problem> {
    let ctx = state.store.context(&caller.tenant, &run_id(&id)?).await?;
    let rendered = query.format.map(|format| {
        let messages = ctx.to_messages();
        let (system, list) = match format {
            VendorFormat::Anthropic => baton_wire::anthropic::render_request_messages(&messages),
            VendorFormat::Openai => (None, baton_wire::openai::render_request_messages(&messages)),
        };
        RenderedContext {
            format,
            system,
            messages: serde_json::Value::Array(list),
        }
    });
    Ok(ApiJson(ContextView {
        run: ctx.run.to_string(),
        rules: ctx.rules.clone(),
        goal: ctx.goal.clone(),
        summary: ctx.summary.as_ref().map(|s| ContextSummaryView {
            id: s.id.0,
            coverage: s.coverage.0,
            claims: s.claims.iter().map(ClaimView::from).collect(),
        }),
        preamble: ctx.preamble().map(|m| m.plain_text()),
        pinned: EntryView::all(&ctx.pinned),
        messages: EntryView::all(&ctx.messages),
        cleared: ctx.cleared.iter().map(|s| s.0).collect(),
        problems: serde_json::to_value(&ctx.problems).map_err(|e| Problem::internal(&e))?,
        tokens: tokens(&ctx),
        rendered,
    }))
}
