//! The working state and pins of a run.
//!
//! The working state is not a record of its own: it is the typed claims of the run's active
//! summary version, grouped by kind, each citing the seq it rests on (so it is versioned and
//! rolled back with the summary). Pins are the messages every strategy keeps: a pinned message
//! a summary covers is carried whole in the context's preamble.

use std::sync::Arc;

use axum::extract::State;
use baton_core::{ClaimKind, Seq};
use baton_view::Pins;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::runs::run_id;
use crate::auth::Caller;
use crate::problem::{ApiJson, ApiPath, Problem, ProblemBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::new()
        .routes(routes!(working_state))
        .routes(routes!(list_pins))
        .routes(routes!(pin, unpin))
}

/// One item of the working state.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct StateItem {
    /// What it says.
    pub text: String,
    /// The seq of the message it rests on.
    pub source_seq: u64,
    /// Where a task, file or problem stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<baton_view::StatusName>,
    /// A file's canonical path, a problem's check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// A run's working state: its active summary's claims by kind.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct WorkingState {
    /// The run.
    pub run: String,
    /// The summary version the state is read from (`null`: the run has no summary yet, and
    /// every list is empty).
    pub summary_id: Option<u64>,
    /// The last seq that version covers.
    pub coverage: Option<u64>,
    /// Its tokens in the context, as its compaction measured them with the run's tokenizer.
    pub tokens: Option<u64>,
    /// The current task (`goal` claims).
    pub objective: Vec<StateItem>,
    /// Every message the user typed, verbatim, newest first.
    pub instructions: Vec<StateItem>,
    /// The agent's own plan, with each item's status.
    pub tasks: Vec<StateItem>,
    /// Failed checks, unresolved first.
    pub problems: Vec<StateItem>,
    /// Files by role, each with its canonical path.
    pub files: Vec<StateItem>,
    /// Shell commands run, whole, newest first.
    pub commands: Vec<StateItem>,
    /// What the agent said, with no tool result to show it.
    pub reported: Vec<StateItem>,
    /// Commits, pushes and their outcomes.
    pub repo: Vec<StateItem>,
    /// Designs the user rejected.
    pub rejected: Vec<StateItem>,
    /// Lessons for the rest of the run.
    pub lessons: Vec<StateItem>,
    /// Constraints the user set, in their words.
    pub constraints: Vec<StateItem>,
    /// Facts a tool result itself shows (`verified` claims).
    pub findings: Vec<StateItem>,
    /// What is believed but not yet shown.
    pub hypotheses: Vec<StateItem>,
    /// What was tried and did not work.
    pub failed_approaches: Vec<StateItem>,
    /// Operations started and not known to be finished.
    pub pending: Vec<StateItem>,
    /// Files, URLs and other artifacts worth coming back to.
    pub artifacts: Vec<StateItem>,
    /// What to do next.
    pub next_steps: Vec<StateItem>,
    /// Anything else.
    pub notes: Vec<StateItem>,
}

/// The run's working state: the typed claims of its active summary, grouped by kind.
#[utoipa::path(
    get, path = "/v1/runs/{id}/state", tag = "summaries",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The working state", body = WorkingState),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn working_state(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<WorkingState>, Problem> {
    let run = state.store.run(&caller.tenant, &run_id(&id)?).await?;
    let mut working = WorkingState {
        run: run.id.to_string(),
        ..WorkingState::default()
    };
    let Some(active) = run.active_summary_id else {
        return Ok(ApiJson(working));
    };
    let summary = state.store.summary(&caller.tenant, active).await?;
    working.summary_id = Some(summary.id.0);
    working.coverage = Some(summary.coverage.0);
    working.tokens = Some(summary.state_tokens().unwrap_or_else(|| {
        baton_compact::executor::estimate_state(summary.coverage, &summary.claims)
    }));
    for claim in &summary.claims {
        let list = match claim.kind {
            ClaimKind::Goal => &mut working.objective,
            ClaimKind::Instruction => &mut working.instructions,
            ClaimKind::Task => &mut working.tasks,
            ClaimKind::Problem => &mut working.problems,
            ClaimKind::File => &mut working.files,
            ClaimKind::Command => &mut working.commands,
            ClaimKind::Reported => &mut working.reported,
            ClaimKind::Repo => &mut working.repo,
            ClaimKind::Rejected => &mut working.rejected,
            ClaimKind::Lesson => &mut working.lessons,
            ClaimKind::Constraint => &mut working.constraints,
            ClaimKind::Verified => &mut working.findings,
            ClaimKind::Hypothesis => &mut working.hypotheses,
            ClaimKind::FailedApproach => &mut working.failed_approaches,
            ClaimKind::Pending => &mut working.pending,
            ClaimKind::Artifact => &mut working.artifacts,
            ClaimKind::NextStep => &mut working.next_steps,
            ClaimKind::Note => &mut working.notes,
        };
        list.push(StateItem {
            text: claim.text.clone(),
            source_seq: claim.source_seq.0,
            status: claim.status.map(Into::into),
            subject: claim.subject.clone(),
        });
    }
    Ok(ApiJson(working))
}

/// The run's pinned seqs.
#[utoipa::path(
    get, path = "/v1/runs/{id}/pins", tag = "summaries",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The pinned seqs", body = Pins),
        (status = 400, description = "A bad id", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn list_pins(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> Result<ApiJson<Pins>, Problem> {
    let pins = state.store.pins(&caller.tenant, &run_id(&id)?).await?;
    Ok(ApiJson(Pins {
        pins: pins.iter().map(|s| s.0).collect(),
        changed: false,
    }))
}

/// Pins a message: every strategy keeps it, and a summary covering it carries it whole.
#[utoipa::path(
    put, path = "/v1/runs/{id}/pins/{seq}", tag = "summaries",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("seq" = u64, Path, description = "The message's seq"),
    ),
    responses(
        (status = 200, description = "Pinned (`changed`: it was not pinned before)", body = Pins),
        (status = 400, description = "A bad id or seq", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant, or no message at that seq", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn pin(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath((id, seq)): ApiPath<(String, u64)>,
) -> Result<ApiJson<Pins>, Problem> {
    let run = run_id(&id)?;
    let changed = state.store.pin(&caller.tenant, &run, Seq(seq)).await?;
    let pins = state.store.pins(&caller.tenant, &run).await?;
    Ok(ApiJson(Pins {
        pins: pins.iter().map(|s| s.0).collect(),
        changed,
    }))
}

/// Unpins a message.
#[utoipa::path(
    delete, path = "/v1/runs/{id}/pins/{seq}", tag = "summaries",
    params(
        ("id" = String, Path, description = "The run's id"),
        ("seq" = u64, Path, description = "The message's seq"),
    ),
    responses(
        (status = 200, description = "Unpinned (`changed`: it was pinned before)", body = Pins),
        (status = 400, description = "A bad id or seq", body = ProblemBody, content_type = "application/problem+json"),
        (status = 401, description = "No valid key", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such run for this tenant", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
async fn unpin(
    caller: Caller,
    State(state): State<Arc<AppState>>,
    ApiPath((id, seq)): ApiPath<(String, u64)>,
) -> Result<ApiJson<Pins>, Problem> {
    let run = run_id(&id)?;
    let changed = state.store.unpin(&caller.tenant, &run, Seq(seq)).await?;
    let pins = state.store.pins(&caller.tenant, &run).await?;
    Ok(ApiJson(Pins {
        pins: pins.iter().map(|s| s.0).collect(),
        changed,
    }))
}
