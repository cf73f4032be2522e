//! Duplicate work: per day and operation, the calls that repeated an earlier identical call,
//! what they cost, the calls that started while an identical one was in flight, and what the
//! cache and coalescing saved (the gateway's call log); or, with `tools=true`, the same over the
//! stored runs' tool calls, with the runs that repeated themselves most. The figures are
//! `baton_reports::duplicates`, the same as `baton report duplicates` and
//! `GET /v1/reports/duplicates`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use baton_reports::DuplicatesOptions;
use baton_view::DuplicatesRow;
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, given};
use crate::layout::{self, count, dollars, encode, query};
use crate::svg::{self, Bar};
use crate::{BASE, Failure, Ui, Viewer};

/// Runs the per-run table lists.
const TOP_RUNS: usize = 25;

/// The page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DuplicatesQuery {
    /// From this UTC day (inclusive), `YYYY-MM-DD`.
    pub since: Option<String>,
    /// Up to this UTC day (inclusive).
    pub until: Option<String>,
    /// Only this operation (or tool).
    pub operation: Option<String>,
    /// Over the stored runs' tool calls instead of the call log.
    pub tools: Option<bool>,
}

/// The duplicate-work page.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Params(q): Params<DuplicatesQuery>,
) -> Result<Markup, Failure> {
    let (since, until) = baton_reports::day_range(
        None,
        given(&q.since),
        given(&q.until),
        ["day", "since", "until"],
    )?;
    let tools = q.tools.unwrap_or(false);
    let options = DuplicatesOptions {
        tools,
        operation: given(&q.operation),
        since,
        until,
    };
    let report = baton_reports::duplicates(&*ui.store, &viewer.tenant, &options).await?;
    // Per run, the tool calls that repeat an earlier identical call of the same run: the
    // report's own rule, applied to each run's calls.
    let mut per_run: Vec<(String, u64, u64, f64)> = Vec::new();
    if tools {
        let mut by_run: BTreeMap<String, Vec<baton_cache::report::ToolCall>> = BTreeMap::new();
        for call in baton_reports::tool_calls(&*ui.store, &viewer.tenant).await? {
            by_run.entry(call.run.clone()).or_default().push(call);
        }
        for (run, calls) in by_run {
            let rows = baton_cache::report::tools(&calls, options.operation, since, until);
            let total = baton_cache::report::total(&rows);
            if total.repeats > 0 {
                per_run.push((run, total.calls, total.repeats, total.ratio));
            }
        }
        per_run.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        per_run.truncate(TOP_RUNS);
    }
    let mut days: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for r in &report.rows {
        let day = days.entry(r.day.as_str()).or_default();
        day.0 += r.calls - r.repeats;
        day.1 += r.repeats;
    }
    let bars: Vec<Bar> = days
        .iter()
        .map(|(day, (first, repeats))| Bar {
            label: (*day).to_owned(),
            parts: vec![
                (
                    "saved",
                    *first as f64,
                    format!("{} first calls", count(*first)),
                ),
                (
                    "repeat",
                    *repeats as f64,
                    format!("{} repeats", count(*repeats)),
                ),
            ],
        })
        .collect();
    let text = |v: &Option<String>| given(v).unwrap_or("").to_owned();
    let what = if tools { "tool" } else { "operation" };
    let body = html! {
        h1 { "Duplicate work" }
        form.filters method="get" action={ (BASE) "/duplicates" } {
            label { "Over"
                select name="tools" {
                    option value="false" selected[!tools] { "the gateway's call log" }
                    option value="true" selected[tools] { "the runs' tool calls" }
                }
            }
            label { "From" input type="date" name="since" value=(text(&q.since)); }
            label { "To" input type="date" name="until" value=(text(&q.until)); }
            label { (what) input name="operation" value=(text(&q.operation)) size="16"; }
            button type="submit" { "Show" }
        }
        @if report.rows.is_empty() {
            p.muted { "No " @if tools { "tool calls in the stored runs" } @else { "calls in the call log" } " in that range." }
        } @else {
            div.stats {
                div { "Calls" b { (count(report.total.calls)) } }
                div { "Repeats" b { (count(report.total.repeats)) " (" (format!("{:.0}%", report.total.ratio * 100.0)) ")" } }
                div { "Repeats cost" b { (dollars(report.total.repeat_cost)) } }
                @if !tools {
                    div { "Coincident" b { (count(report.total.coincident)) } }
                    div { "Saved by the cache" b { (dollars(report.total.saved_by_cache)) } }
                    div { "Saved by coalescing" b { (dollars(report.total.saved_by_coalescing)) } }
                }
            }
            (svg::bars(&bars, "calls", 160.0))
            div.legend { span { i.swatch.real {} "first calls" } span { i.swatch.full {} "repeats" } }
            table {
                thead { tr {
                    th { "Day" } th { (what) }
                    th.num { "Calls" } th.num { "Repeats" } th.num { "Ratio" } th.num { "Repeats cost" }
                    @if !tools { th.num { "Coincident" } th.num { "Saved by cache" } th.num { "Saved by coalescing" } }
                } }
                tbody { @for r in &report.rows { (row(r, tools)) } }
            }
            @if tools {
                h2 { "Runs that repeated their own tool calls most" }
                table {
                    thead { tr { th { "Run" } th.num { "Tool calls" } th.num { "Repeats" } th.num { "Ratio" } } }
                    tbody {
                        @for (run, calls, repeats, ratio) in &per_run {
                            tr {
                                td { a href={ (BASE) "/runs/" (encode(run)) } { (run) } }
                                td.num { (count(*calls)) }
                                td.num { (count(*repeats)) }
                                td.num { (format!("{:.0}%", ratio * 100.0)) }
                            }
                        }
                    }
                }
            }
        }
    };
    let json = format!(
        "/v1/reports/duplicates{}",
        query(&[
            ("since", &text(&q.since)),
            ("until", &text(&q.until)),
            ("operation", &text(&q.operation)),
            ("tools", if tools { "true" } else { "" }),
        ])
    );
    Ok(layout::page(
        "Duplicate work",
        Some(&viewer),
        Some(&json),
        body,
    ))
}

fn row(r: &DuplicatesRow, tools: bool) -> Markup {
    html! {
        tr {
            td { (r.day) } td { (r.operation) }
            td.num { (count(r.calls)) } td.num { (count(r.repeats)) }
            td.num { (format!("{:.0}%", r.ratio * 100.0)) } td.num { (dollars(r.repeat_cost)) }
            @if !tools {
                td.num { (count(r.coincident)) }
                td.num { (dollars(r.saved_by_cache)) }
                td.num { (dollars(r.saved_by_coalescing)) }
            }
        }
    }
}
