//! Summary versions and their claims.

use baton_core::{Claim, ClaimKind, Seq, Status, Summary, SummaryId};
use serde::{Deserialize, Serialize};

/// What a claim is about (`baton_core::ClaimKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SummaryList {
    /// The run's active summary (`null` when it has none).
    pub active_id: Option<u64>,
    /// Every version, oldest first.
    pub summaries: Vec<SummaryItem>,
}

impl SummaryList {
    /// The list of a run's `summaries`, given its active one.
    pub fn of(summaries: &[Summary], active: Option<SummaryId>) -> Self {
        SummaryList {
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
        }
    }
}

/// What changed between two summary versions of a run, claim by claim, by
/// `baton_core::claim::diff` (the rule `baton summary diff` prints): a claim is the same when
/// its kind, text and seq match; one of the same kind and seq with another text is `changed`;
/// the rest are `added` (only in `to`) or `dropped` (only in `from`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SummaryDiff {
    /// The older side's id.
    pub from: u64,
    /// The newer side's id.
    pub to: u64,
    /// Claims only in `to`.
    pub added: Vec<ClaimView>,
    /// Claims only in `from`.
    pub dropped: Vec<ClaimView>,
    /// Claims in both that differ: each as it was and as it is.
    pub changed: Vec<ClaimChange>,
    /// Claims of `to` that `from` has too.
    pub unchanged: usize,
}

/// A claim in both versions of a [`SummaryDiff`] that differs between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimChange {
    /// As `from` has it.
    pub before: ClaimView,
    /// As `to` has it.
    pub after: ClaimView,
}

impl SummaryDiff {
    /// The diff from `from` to `to`, in `to`'s claim order (dropped claims in `from`'s).
    pub fn of(from: &Summary, to: &Summary) -> Self {
        let d = baton_core::claim::diff(&from.claims, &to.claims);
        SummaryDiff {
            from: from.id.0,
            to: to.id.0,
            added: d.added.iter().map(ClaimView::from).collect(),
            dropped: d.dropped.iter().map(ClaimView::from).collect(),
            changed: d
                .changed
                .iter()
                .map(|(before, after)| ClaimChange {
                    before: before.into(),
                    after: after.into(),
                })
                .collect(),
            unchanged: to.claims.iter().filter(|c| from.claims.contains(c)).count(),
        }
    }
}
