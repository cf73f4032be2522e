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
use baton_core::{Claim, ClaimKind, RunId, Seq, Status, Summary, SummaryId};
use baton_store::{Candidate, Install, Rejection};
use serde::{Deserialize, Serialize};
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
        .routes(routes!(list_summaries, install_summary))
        .routes(routes!(get_summary))
        .routes(routes!(activate_summary))
}

/// What a claim is about (`baton_core::ClaimKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKindName {
    /// The current task: the plan's item in progress, else the newest instruction.
    Goal,
    /// A message the user typed, verbatim.
    Instruction,
    /// A constraint the user set, in their words.
    Constraint,
    /// An item of the agent's own plan (`status`: pending, in_progress, completed).
    Task,
    /// A failed check (`status`: unresolved, resolved; `subject`: the check).
    Problem,
    /// A file the run touched (`status`: created, modified, deleted, read; `subject`: its path).
    File,
    /// A shell command the agent ran, whole.
    Command,
    /// A fact a tool result itself shows.
    Verified,
    /// What the agent said it found or did, with no tool result to show it.
    Reported,
    /// Commits, pushes and their outcomes.
    Repo,
    /// Something believed but not yet shown.
    Hypothesis,
    /// Something tried that did not work.
    FailedApproach,
    /// A design the user rejected, with the correction that rejected it.
    Rejected,
    /// A lesson for the rest of the run.
    Lesson,
    /// An operation started and not known to be finished.
    Pending,
    /// A URL or other artifact worth coming back to.
    Artifact,
    /// What to do next.
    NextStep,
    /// Anything else.
    Note,
}

impl From<ClaimKind> for ClaimKindName {
    fn from(value: ClaimKind) -> Self {
        match value {
            ClaimKind::Goal => ClaimKindName::Goal,
            ClaimKind::Instruction => ClaimKindName::Instruction,
            ClaimKind::Constraint => ClaimKindName::Constraint,
            ClaimKind::Task => ClaimKindName::Task,
            ClaimKind::Problem => ClaimKindName::Problem,
            ClaimKind::File => ClaimKindName::File,
            ClaimKind::Command => ClaimKindName::Command,
            ClaimKind::Verified => ClaimKindName::Verified,
            ClaimKind::Reported => ClaimKindName::Reported,
            ClaimKind::Repo => ClaimKindName::Repo,
            ClaimKind::Hypothesis => ClaimKindName::Hypothesis,
            ClaimKind::FailedApproach => ClaimKindName::FailedApproach,
            ClaimKind::Rejected => ClaimKindName::Rejected,
            ClaimKind::Lesson => ClaimKindName::Lesson,
            ClaimKind::Pending => ClaimKindName::Pending,
            ClaimKind::Artifact => ClaimKindName::Artifact,
            ClaimKind::NextStep => ClaimKindName::NextStep,
            ClaimKind::Note => ClaimKindName::Note,
        }
    }
}

impl From<ClaimKindName> for ClaimKind {
    fn from(value: ClaimKindName) -> Self {
        match value {
            ClaimKindName::Goal => ClaimKind::Goal,
            ClaimKindName::Instruction => ClaimKind::Instruction,
            ClaimKindName::Constraint => ClaimKind::Constraint,
            ClaimKindName::Task => ClaimKind::Task,
            ClaimKindName::Problem => ClaimKind::Problem,
            ClaimKindName::File => ClaimKind::File,
            ClaimKindName::Command => ClaimKind::Command,
            ClaimKindName::Verified => ClaimKind::Verified,
            ClaimKindName::Reported => ClaimKind::Reported,
            ClaimKindName::Repo => ClaimKind::Repo,
            ClaimKindName::Hypothesis => ClaimKind::Hypothesis,
            ClaimKindName::FailedApproach => ClaimKind::FailedApproach,
            ClaimKindName::Rejected => ClaimKind::Rejected,
            ClaimKindName::Lesson => ClaimKind::Lesson,
            ClaimKindName::Pending => ClaimKind::Pending,
            ClaimKindName::Artifact => ClaimKind::Artifact,
            ClaimKindName::NextStep => ClaimKind::NextStep,
            ClaimKindName::Note => ClaimKind::Note,
        }
    }
}

/// Where a task, file or problem stands (`baton_core::Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusName {
    /// A task not started.
    Pending,
    /// The task being worked on.
    InProgress,
    /// A task done.
    Completed,
    /// A file the run created.
    Created,
    /// A file the run changed.
    Modified,
    /// A file the run deleted.
    Deleted,
    /// A file the run only read.
    Read,
    /// A problem still open.
    Unresolved,
    /// A problem a later success closed.
    Resolved,
}

impl From<Status> for StatusName {
    fn from(value: Status) -> Self {
        match value {
            Status::Pending => StatusName::Pending,
            Status::InProgress => StatusName::InProgress,
            Status::Completed => StatusName::Completed,
            Status::Created => StatusName::Created,
            Status::Modified => StatusName::Modified,
            Status::Deleted => StatusName::Deleted,
            Status::Read => StatusName::Read,
            Status::Unresolved => StatusName::Unresolved,
            Status::Resolved => StatusName::Resolved,
        }
    }
}

impl From<StatusName> for Status {
    fn from(value: StatusName) -> Self {
        match value {
            StatusName::Pending => Status::Pending,
            StatusName::InProgress => Status::InProgress,
            StatusName::Completed => Status::Completed,
            StatusName::Created => Status::Created,
            StatusName::Modified => Status::Modified,
            StatusName::Deleted => Status::Deleted,
            StatusName::Read => Status::Read,
            StatusName::Unresolved => Status::Unresolved,
            StatusName::Resolved => Status::Resolved,
        }
    }
}

/// One statement of a summary, with the history seq it rests on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimView {
    /// What the claim is about.
    pub kind: ClaimKindName,
    /// The statement (non-empty).
    pub text: String,
    /// The seq of the message it rests on (recall it for the original).
    pub source_seq: u64,
    /// Where a task, file or problem stands (required for those kinds, refused for others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusName>,
    /// What the claim is keyed by: a file's canonical path, a problem's check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl From<&Claim> for ClaimView {
    fn from(claim: &Claim) -> Self {
        ClaimView {
            kind: claim.kind.into(),
            text: claim.text.clone(),
            source_seq: claim.source_seq.0,
            status: claim.status.map(Into::into),
            subject: claim.subject.clone(),
        }
    }
}

impl From<ClaimView> for Claim {
    fn from(claim: ClaimView) -> Self {
        Claim {
            kind: claim.kind.into(),
            text: claim.text,
            source_seq: Seq(claim.source_seq),
            status: claim.status.map(Into::into),
            subject: claim.subject,
        }
    }
}

/// A summary version in full.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SummaryView {
    /// Its id (unique across runs).
    pub id: u64,
    /// The run it summarizes.
    pub run: String,
    /// The last seq it covers: the context sends it in place of messages `1..=coverage`.
    pub coverage: u64,
    /// The version it was built from (`null` for a run's first summary).
    pub previous_id: Option<u64>,
    /// Whether it is the run's active summary.
    pub active: bool,
    /// What it says.
    pub claims: Vec<ClaimView>,
    /// What made it (strategy, sizes, retention audit), as its installer gave it.
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Value>,
    /// When it was installed (RFC 3339).
    pub created_at: String,
}

impl SummaryView {
    /// The view of `summary`, given the run's active summary.
    pub fn of(summary: &Summary, active: Option<SummaryId>) -> Self {
        SummaryView {
            id: summary.id.0,
            run: summary.run.to_string(),
            coverage: summary.coverage.0,
            previous_id: summary.previous_id.map(|p| p.0),
            active: active == Some(summary.id),
            claims: summary.claims.iter().map(ClaimView::from).collect(),
            meta: summary.meta.clone(),
            created_at: summary.created_at.to_string(),
        }
    }
}

/// A summary version in a list: without its claims.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SummaryItem {
    /// Its id.
    pub id: u64,
    /// The last seq it covers.
    pub coverage: u64,
    /// The version it was built from.
    pub previous_id: Option<u64>,
    /// How many claims it has.
    pub claims: usize,
    /// Whether it is the run's active summary.
    pub active: bool,
    /// When it was installed (RFC 3339).
    pub created_at: String,
}

/// A run's summary versions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SummaryList {
    /// The run's active summary (`null` when it has none).
    pub active_id: Option<u64>,
    /// Every version, oldest first.
    pub summaries: Vec<SummaryItem>,
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

/// The problem an install, activation or compaction rejected by the store answers with.
pub fn rejected(why: Rejection) -> Problem {
    let detail = why.to_string();
    match why {
        Rejection::StaleBase { expected, active } => {
            Problem::conflict("stale-base", "Stale base", detail)
                .with("base", expected.map(|s| s.0))
                .with("active_summary_id", active.map(|s| s.0))
        }
        Rejection::Invalid(invalid) => {
            Problem::unprocessable("invalid-candidate", "Invalid candidate", detail)
                .with("rejection", invalid)
        }
        Rejection::RunNotActive { status } => {
            Problem::conflict("run-not-active", "Run not active", detail)
                .with("run_status", status.as_str())
        }
        Rejection::StaleCleared { expected, active } => {
            Problem::conflict("stale-setting", "Stale setting", detail)
                .with("expected", expected)
                .with("active", active)
        }
        Rejection::InvalidClear { .. } => {
            Problem::unprocessable("invalid-setting", "Invalid setting", detail)
        }
        other => Problem::internal(&other),
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
    Ok(ApiJson(SummaryList {
        active_id: active.map(|s| s.0),
        summaries: summaries
            .iter()
            .map(|s| SummaryItem {
                id: s.id.0,
                coverage: s.coverage.0,
                previous_id: s.previous_id.map(|p| p.0),
                claims: s.claims.len(),
                active: active == Some(s.id),
                created_at: s.created_at.to_string(),
            })
            .collect(),
    }))
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
