//! Runs: one run, a page of a tenant's runs, what `runs show` reports about one, and what a
//! deletion removed.

use baton_core::Run;
use baton_store::{Deleted, RunPage, RunReport, RunSummary};
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

/// A page of a tenant's runs, as `runs list` and `GET /v1/runs` give them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunList {
    /// The runs of the page, in the order asked for (oldest first by default on the API).
    pub runs: Vec<RunSummaryView>,
    /// Runs the filters select, over every page.
    pub total: u64,
    /// Pass it as `cursor` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

impl From<&RunPage> for RunList {
    fn from(page: &RunPage) -> Self {
        RunList {
            runs: page.runs.iter().map(RunSummaryView::from).collect(),
            total: page.total,
            next_cursor: page.next_cursor.clone(),
        }
    }
}

/// A run as a listing shows it: its own fields, and what people look for it by.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunSummaryView {
    /// The run's own fields.
    #[serde(flatten)]
    pub run: RunView,
    /// The agent that wrote an imported run (`claude-code`, `codex`, `aider`, …); `null` for a
    /// run made through baton.
    pub agent: Option<String>,
    /// The project the session worked in (the agent's working directory), when known.
    pub project: Option<String>,
    /// The first instruction the user gave, on one line and cut to 80 characters; a native
    /// run's goal.
    pub title: Option<String>,
    /// The models that wrote it, in order of first appearance.
    pub models: Vec<String>,
    /// The run this one is a subagent of.
    pub parent_run: Option<String>,
    /// Its subagent runs.
    pub subagents: u64,
    /// Its first activity (RFC 3339): an imported session's first timestamp (`null` when the
    /// source records none), or when baton stored a native run's first message (when it was
    /// created, while it has none).
    pub first_activity: Option<String>,
    /// Its last activity (RFC 3339), likewise.
    pub last_activity: Option<String>,
    /// Messages in its history.
    pub messages: u64,
    /// The stored messages' token counts, summed (the history's size).
    pub tokens: u64,
    /// The tokens its model responses used (input, output, cache writes and reads), as the
    /// provider reported them or, for a source that records none, as baton estimates them.
    pub usage_tokens: u64,
    /// Whether some of `usage_tokens` and `cost` is baton's estimate.
    pub usage_estimated: bool,
    /// The cost of its responses whose model has a price, in US dollars, at the built-in
    /// prices; `null` when none has.
    pub cost: Option<f64>,
}

impl From<&RunSummary> for RunSummaryView {
    fn from(s: &RunSummary) -> Self {
        RunSummaryView {
            run: RunView::from(&s.run),
            agent: s.agent.clone(),
            project: s.project.clone(),
            title: s.title.clone(),
            models: s.models.clone(),
            parent_run: s.parent_run.as_ref().map(ToString::to_string),
            subagents: s.subagents,
            first_activity: s.first_activity.map(|t| t.to_string()),
            last_activity: s.last_activity.map(|t| t.to_string()),
            messages: s.messages,
            tokens: s.tokens,
            usage_tokens: s.usage.total(),
            usage_estimated: s.usage_estimated,
            cost: s.cost,
        }
    }
}

/// What `runs delete` and `DELETE /v1/runs/{id}` removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeletedRunView {
    /// The run deleted.
    pub deleted: String,
    /// Its subagent runs, deleted with it (theirs too).
    pub subagents: Vec<String>,
    /// Messages removed, over every run deleted.
    pub messages: u64,
}

impl From<&Deleted> for DeletedRunView {
    fn from(d: &Deleted) -> Self {
        DeletedRunView {
            deleted: d.run.to_string(),
            subagents: d.subagents.iter().map(ToString::to_string).collect(),
            messages: d.messages,
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
    /// The usage of its model responses as the source recorded it (or, for a source that
    /// records none, baton's estimate), per model, with its cost at the built-in prices.
    pub usage: Vec<RunUsageView>,
}

/// The usage of a run's responses of one model.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunUsageView {
    /// The model (`null` when the source does not name it).
    pub model: Option<String>,
    /// Whether the counts are baton's estimates rather than the provider's report.
    pub estimated: bool,
    /// Responses counted.
    pub responses: u64,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Prompt-cache writes kept 5 minutes.
    pub cache_creation_5m_tokens: u64,
    /// Prompt-cache writes kept 1 hour.
    pub cache_creation_1h_tokens: u64,
    /// Prompt-cache reads.
    pub cache_read_tokens: u64,
    /// Cost in US dollars at the built-in price table (`null` for a model it has no price for).
    pub cost: Option<f64>,
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
            usage: {
                let prices = baton_core::prices::PriceTable::defaults();
                report
                    .usage
                    .iter()
                    .map(|u| RunUsageView {
                        model: u.model.clone(),
                        estimated: u.estimated,
                        responses: u.responses,
                        input_tokens: u.usage.input,
                        output_tokens: u.usage.output,
                        cache_creation_5m_tokens: u.usage.cache_write_5m,
                        cache_creation_1h_tokens: u.usage.cache_write_1h,
                        cache_read_tokens: u.usage.cache_read,
                        cost: u
                            .model
                            .as_deref()
                            .and_then(|m| prices.get(m))
                            .map(|p| p.usage_cost(&u.usage)),
                    })
                    .collect()
            },
        }
    }
}
