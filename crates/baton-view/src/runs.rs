//! Runs: one run, a tenant's runs, and what `runs show` reports about one.

use baton_core::Run;
use baton_store::RunReport;
use serde::Serialize;

/// A run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunView {
    /// Its id, unique within the tenant.
    pub id: String,
    /// The tenant that owns it.
    pub tenant: String,
    /// `active`, `completed` or `cancelled`.
    pub status: String,
    /// What the agent is trying to do.
    pub goal: Option<String>,
    /// Standing instructions placed first in every context.
    pub rules: Option<String>,
    /// The summary version the context uses, if any.
    pub active_summary_id: Option<u64>,
    /// The last seq appended (0 when the history is empty).
    pub last_seq: u64,
    /// When it was created (RFC 3339).
    pub created_at: String,
}

impl From<Run> for RunView {
    fn from(run: Run) -> Self {
        RunView::from(&run)
    }
}

impl From<&Run> for RunView {
    fn from(run: &Run) -> Self {
        RunView {
            id: run.id.to_string(),
            tenant: run.tenant.to_string(),
            status: run.status.as_str().to_owned(),
            goal: run.goal.clone(),
            rules: run.rules.clone(),
            active_summary_id: run.active_summary_id.map(|s| s.0),
            last_seq: run.last_seq.0,
            created_at: run.created_at.to_string(),
        }
    }
}

/// A tenant's runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunList {
    /// The tenant's runs, oldest first.
    pub runs: Vec<RunView>,
}

impl RunList {
    /// The list of `runs`, in their order.
    pub fn of(runs: &[Run]) -> Self {
        RunList {
            runs: runs.iter().map(RunView::from).collect(),
        }
    }
}

/// A run, where it came from and what its history holds (`runs show`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunReportView {
    /// The run's own fields.
    #[serde(flatten)]
    pub run: RunView,
    /// Where an imported run came from (`null` for a run not imported).
    pub origin: Option<RunOriginView>,
    /// Counts over its history.
    pub counts: RunCountsView,
    /// The compactions its source agent performed, as events after a seq.
    pub compactions: Vec<SourceCompactionView>,
    /// When baton stored its first message (RFC 3339).
    pub first_message_at: Option<String>,
    /// When baton stored its last message (RFC 3339).
    pub last_message_at: Option<String>,
}

/// Where an imported run came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunOriginView {
    /// The file it was read from.
    pub path: String,
    /// The reader that read it.
    pub format: String,
    /// The source's own session id.
    pub source_session_id: Option<String>,
    /// The run of the transcript this one is a subagent of.
    pub parent_run: Option<String>,
    /// The models that wrote it.
    pub models: Vec<String>,
    /// The source's timestamp of its first message, as written.
    pub first_at: Option<String>,
    /// The source's timestamp of its last message, as written.
    pub last_at: Option<String>,
    /// Source lines or events that are not messages.
    pub skipped_lines: u64,
    /// Side branches not imported.
    pub side_branches: u64,
    /// Messages on those side branches.
    pub side_branch_messages: u64,
    /// When it was first imported (RFC 3339).
    pub imported_at: String,
    /// When it was last imported or extended (RFC 3339).
    pub updated_at: String,
}

/// Counts over a run's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunCountsView {
    /// Messages.
    pub messages: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Tool results whose call is not in the run.
    pub orphan_tool_results: u64,
    /// Tool calls without a result.
    pub dangling_tool_calls: u64,
    /// Compactions the source agent performed.
    pub compaction_events: u64,
    /// Secrets redacted at import.
    pub redactions: u64,
    /// The bytes of the stored messages.
    pub bytes: u64,
    /// The sum of the messages' stored token counts.
    pub tokens: u64,
}

/// A compaction the source agent performed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceCompactionView {
    /// The last seq before it.
    pub after_seq: u64,
    /// The summary text the source agent wrote.
    pub summary: Option<String>,
    /// When, as the source wrote it.
    pub at: Option<String>,
}

impl From<&RunReport> for RunReportView {
    fn from(report: &RunReport) -> Self {
        let c = &report.counts;
        RunReportView {
            run: RunView::from(&report.run),
            origin: report.origin.as_ref().map(|o| RunOriginView {
                path: o.path.clone(),
                format: o.format.clone(),
                source_session_id: o.source_session_id.clone(),
                parent_run: o.parent_run.as_ref().map(ToString::to_string),
                models: o.models.clone(),
                first_at: o.first_at.clone(),
                last_at: o.last_at.clone(),
                skipped_lines: o.skipped_lines,
                side_branches: o.side_branches,
                side_branch_messages: o.side_branch_messages,
                imported_at: o.imported_at.to_string(),
                updated_at: o.updated_at.to_string(),
            }),
            counts: RunCountsView {
                messages: c.messages,
                tool_calls: c.tool_calls,
                orphan_tool_results: c.orphan_tool_results,
                dangling_tool_calls: c.dangling_tool_calls,
                compaction_events: report.compactions.len() as u64,
                redactions: report.origin.as_ref().map_or(0, |o| o.redactions),
                bytes: c.bytes,
                tokens: c.tokens,
            },
            compactions: report
                .compactions
                .iter()
                .map(|e| SourceCompactionView {
                    after_seq: e.after.0,
                    summary: e.summary.clone(),
                    at: e.at.clone(),
                })
                .collect(),
            first_message_at: c.first_appended_at.map(|t| t.to_string()),
            last_message_at: c.last_appended_at.map(|t| t.to_string()),
        }
    }
}
