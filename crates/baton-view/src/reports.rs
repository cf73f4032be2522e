//! Reports: the duplicate-work report and a run's token growth.

use baton_cache::report::Row;
use baton_compact::growth::Growth;
use baton_core::RunId;
use serde::Serialize;

/// One day and operation of the duplicate-work report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DuplicatesRow {
    /// The UTC day, `YYYY-MM-DD` (`all` in the total).
    pub day: String,
    /// The operation, or the tool (`all` in the total).
    pub operation: String,
    /// Calls.
    pub calls: u64,
    /// Calls repeating an earlier identical one.
    pub repeats: u64,
    /// `repeats / calls`.
    pub ratio: f64,
    /// What the repeats cost (or would have, executed), in US dollars.
    pub repeat_cost: f64,
    /// Calls that started while an identical call was in flight.
    pub coincident: u64,
    /// The cost of the calls the cache answered.
    pub saved_by_cache: f64,
    /// The cost of the calls answered by an identical call in flight.
    pub saved_by_coalescing: f64,
}

impl From<&Row> for DuplicatesRow {
    fn from(r: &Row) -> Self {
        DuplicatesRow {
            day: r.day.clone(),
            operation: r.operation.clone(),
            calls: r.calls,
            repeats: r.repeats,
            ratio: r.ratio,
            repeat_cost: r.repeat_cost,
            coincident: r.coincident,
            saved_by_cache: r.saved_by_cache,
            saved_by_coalescing: r.saved_by_coalescing,
        }
    }
}

/// The duplicate-work report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DuplicatesReport {
    /// Whether it covers tool calls (`true`) or the call log (`false`).
    pub tools: bool,
    /// By day, then operation.
    pub rows: Vec<DuplicatesRow>,
    /// The rows' totals.
    pub total: DuplicatesRow,
}

impl DuplicatesReport {
    /// The report of `rows` and their `total`, over tool calls or the call log.
    pub fn of(tools: bool, rows: &[Row], total: &Row) -> Self {
        DuplicatesReport {
            tools,
            rows: rows.iter().map(DuplicatesRow::from).collect(),
            total: total.into(),
        }
    }
}

/// One model call of a replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrowthStep {
    /// The seq of the assistant message the call produced.
    pub seq: u64,
    /// Input tokens had the whole transcript been sent.
    pub full_tokens: u64,
    /// Input tokens of the compacted context.
    pub context_tokens: u64,
    /// Whether a compaction ran just before this call.
    pub compacted: bool,
}

/// The token-growth report of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrowthReport {
    /// The run.
    pub run: String,
    /// The strategy the compacted figures come from.
    pub strategy: String,
    /// Every model call, in order.
    pub steps: Vec<GrowthStep>,
    /// Input tokens over the run, whole transcript.
    pub full_total: u64,
    /// Input tokens over the run, compacted.
    pub context_total: u64,
    /// `full_total / context_total` (0 without model calls).
    pub ratio: f64,
}

impl GrowthReport {
    /// The report of `run`'s `growth`.
    pub fn of(run: &RunId, growth: &Growth) -> Self {
        GrowthReport {
            run: run.to_string(),
            strategy: growth.strategy.clone(),
            steps: growth
                .steps
                .iter()
                .map(|s| GrowthStep {
                    seq: s.seq.0,
                    full_tokens: s.full_tokens,
                    context_tokens: s.context_tokens,
                    compacted: s.compacted,
                })
                .collect(),
            full_total: growth.full_total,
            context_total: growth.context_total,
            ratio: if growth.steps.is_empty() {
                0.0
            } else {
                growth.ratio
            },
        }
    }
}
