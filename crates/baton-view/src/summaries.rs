//! Summary versions and their claims.

use baton_core::{Claim, ClaimKind, Seq, Summary, SummaryId};
use serde::{Deserialize, Serialize};

/// What a claim is about (`baton_core::ClaimKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ClaimKindName {
    /// The current objective.
    Goal,
    /// A constraint the user set, in their words.
    Constraint,
    /// A fact backed by an observation.
    Verified,
    /// Something believed but not yet shown.
    Hypothesis,
    /// Something tried that did not work.
    FailedApproach,
    /// An operation started and not known to be finished.
    Pending,
    /// A file, URL or other artifact worth coming back to.
    Artifact,
    /// What to do next.
    NextStep,
    /// Anything else.
    Note,
}

impl From<ClaimKind> for ClaimKindName {
    fn from(kind: ClaimKind) -> Self {
        match kind {
            ClaimKind::Goal => ClaimKindName::Goal,
            ClaimKind::Constraint => ClaimKindName::Constraint,
            ClaimKind::Verified => ClaimKindName::Verified,
            ClaimKind::Hypothesis => ClaimKindName::Hypothesis,
            ClaimKind::FailedApproach => ClaimKindName::FailedApproach,
            ClaimKind::Pending => ClaimKindName::Pending,
            ClaimKind::Artifact => ClaimKindName::Artifact,
            ClaimKind::NextStep => ClaimKindName::NextStep,
            ClaimKind::Note => ClaimKindName::Note,
        }
    }
}

impl From<ClaimKindName> for ClaimKind {
    fn from(kind: ClaimKindName) -> Self {
        match kind {
            ClaimKindName::Goal => ClaimKind::Goal,
            ClaimKindName::Constraint => ClaimKind::Constraint,
            ClaimKindName::Verified => ClaimKind::Verified,
            ClaimKindName::Hypothesis => ClaimKind::Hypothesis,
            ClaimKindName::FailedApproach => ClaimKind::FailedApproach,
            ClaimKindName::Pending => ClaimKind::Pending,
            ClaimKindName::Artifact => ClaimKind::Artifact,
            ClaimKindName::NextStep => ClaimKind::NextStep,
            ClaimKindName::Note => ClaimKind::Note,
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
}

impl From<&Claim> for ClaimView {
    fn from(claim: &Claim) -> Self {
        ClaimView {
            kind: claim.kind.into(),
            text: claim.text.clone(),
            source_seq: claim.source_seq.0,
        }
    }
}

impl From<ClaimView> for Claim {
    fn from(claim: ClaimView) -> Self {
        Claim {
            kind: claim.kind.into(),
            text: claim.text,
            source_seq: Seq(claim.source_seq),
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
