//! Usage: tokens by kind and cost per day, week, month or session, or per 5-hour block with
//! the active block's burn rate and projection; by model on demand; cache efficiency. The
//! figures are `baton_reports::usage`, the same as `baton report usage` and
//! `GET /v1/reports/usage/{report}` (ccusage's fields and rules).

use std::sync::Arc;

use axum::extract::State;
use baton_reports::{Usage, UsageKind, UsageOptions};
use baton_usage::{Row, Totals};
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, given};
use crate::layout::{self, count, dollars, query, when};
use crate::svg::{self, Bar};
use crate::{BASE, Failure, Ui, Viewer};

/// The page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// `daily` (default), `weekly`, `monthly`, `session` or `blocks`.
    pub report: Option<String>,
    /// From this day (inclusive), `YYYY-MM-DD`.
    pub since: Option<String>,
    /// Up to this day (inclusive).
    pub until: Option<String>,
    /// Only this project.
    pub project: Option<String>,
}

fn percent(x: Option<f64>) -> String {
    x.map(|x| format!("{:.0}%", x * 100.0)).unwrap_or_default()
}

/// The usage page.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Params(q): Params<UsageQuery>,
) -> Result<Markup, Failure> {
    let name = given(&q.report).unwrap_or("daily");
    let kind = UsageKind::parse(name)
        .ok_or_else(|| Failure::bad(format!("report {name:?}: expected {}", UsageKind::NAMES)))?;
    let options = UsageOptions {
        since: given(&q.since),
        until: given(&q.until),
        project: given(&q.project),
        ..UsageOptions::default()
    };
    let report = baton_reports::usage(
        &*ui.store,
        &viewer.tenant,
        kind,
        &options,
        ui.prices.clone(),
    )
    .await?;
    let text = |v: &Option<String>| given(v).unwrap_or("").to_owned();
    let tabs = ["daily", "weekly", "monthly", "session", "blocks"];
    let body = html! {
        h1 { "Usage" }
        form.filters method="get" action={ (BASE) "/usage" } {
            label { "Report"
                select name="report" { @for t in tabs { option value=(t) selected[t == name] { (t) } } }
            }
            label { "From" input type="date" name="since" value=(text(&q.since)); }
            label { "To" input type="date" name="until" value=(text(&q.until)); }
            label { "Project" input name="project" value=(text(&q.project)) size="16"; }
            button type="submit" { "Show" }
        }
        @match &report {
            Usage::Period(r) => (rows_view(&r.rows, &r.totals, r.period.name())),
            Usage::Session(r) => (rows_view(&r.rows, &r.totals, "session")),
            Usage::Blocks(r) => (blocks_view(r)),
        }
    };
    let json = format!(
        "/v1/reports/usage/{name}{}",
        query(&[
            ("since", &text(&q.since)),
            ("until", &text(&q.until)),
            ("project", &text(&q.project)),
        ])
    );
    Ok(layout::page("Usage", Some(&viewer), Some(&json), body))
}

fn rows_view(rows: &[Row], totals: &Totals, period: &str) -> Markup {
    let bars: Vec<Bar> = rows
        .iter()
        .map(|r| Bar {
            label: r.period.clone(),
            parts: vec![
                (
                    "input",
                    r.input_tokens as f64,
                    format!("{} input", count(r.input_tokens)),
                ),
                (
                    "output",
                    r.output_tokens as f64,
                    format!("{} output", count(r.output_tokens)),
                ),
                (
                    "cache-write",
                    r.cache_creation_tokens as f64,
                    format!("{} cache writes", count(r.cache_creation_tokens)),
                ),
                (
                    "cache-read",
                    r.cache_read_tokens as f64,
                    format!("{} cache reads", count(r.cache_read_tokens)),
                ),
            ],
        })
        .collect();
    html! {
        @if rows.is_empty() {
            p.muted { "No usage recorded in that range (imports keep the usage their sources record)." }
        } @else {
            (svg::bars(&bars, "tokens", 200.0))
            div.legend {
                span { i.swatch.full {} "input" } span { i.swatch.compact {} "output" }
                span { i.swatch style="background:#f59e0b" {} "cache writes" } span { i.swatch.cache {} "cache reads" }
            }
            table.usage {
                thead { tr {
                    th { (period) } th { "Models" }
                    th.num { "Input" } th.num { "Output" } th.num { "Cache writes" } th.num { "Cache reads" }
                    th.num { "Total" } th.num { "Cost" } th.num { "Cache efficiency" }
                } }
                tbody {
                    @for r in rows {
                        tr {
                            td {
                                (r.period)
                                @if let Some(p) = &r.project { br; span.muted { (p) } }
                                @if let Some(at) = r.last_activity { br; span.muted { "last " (when(at)) } }
                            }
                            td {
                                details {
                                    summary { (r.models_used.join(", ")) }
                                    table {
                                        @for m in &r.model_breakdowns {
                                            tr {
                                                td { (m.model_name) @if m.estimated { "*" } }
                                                td.num { (count(m.input_tokens + m.output_tokens + m.cache_creation_tokens + m.cache_read_tokens)) }
                                                td.num { (dollars(m.cost)) }
                                            }
                                        }
                                    }
                                }
                                @if !r.unpriced_models.is_empty() { span.muted { "no price for " (r.unpriced_models.join(", ")) } }
                            }
                            td.num { (count(r.input_tokens)) }
                            td.num { (count(r.output_tokens)) }
                            td.num { (count(r.cache_creation_tokens)) }
                            td.num { (count(r.cache_read_tokens)) }
                            td.num { (count(r.total_tokens)) }
                            td.num { (dollars(r.total_cost)) }
                            td.num { (percent(r.cache_efficiency)) }
                        }
                    }
                }
                tfoot { tr {
                    th { "Total" } th {}
                    th.num { (count(totals.input_tokens)) }
                    th.num { (count(totals.output_tokens)) }
                    th.num { (count(totals.cache_creation_tokens)) }
                    th.num { (count(totals.cache_read_tokens)) }
                    th.num { (count(totals.total_tokens)) }
                    th.num { (dollars(totals.total_cost)) }
                    th.num { (percent(totals.cache_efficiency)) }
                } }
            }
        }
    }
}

fn blocks_view(report: &baton_usage::BlocksReport) -> Markup {
    let real: Vec<&baton_usage::Block> = report.blocks.iter().filter(|b| !b.is_gap).collect();
    let active = real.iter().find(|b| b.is_active);
    html! {
        @if let Some(b) = active {
            section.active-block {
                h2 { "Active block, since " (when(b.start_time)) }
                div.stats {
                    div { "Tokens" b { (count(b.total_tokens)) } }
                    div { "Cost" b { (dollars(b.cost_usd)) } }
                    @if let Some(rate) = &b.burn_rate {
                        div { "Burn rate" b { (count(rate.tokens_per_minute as u64)) " tokens/min" } }
                        div { "Cost rate" b { (dollars(rate.cost_per_hour)) "/h" } }
                    }
                    @if let Some(p) = &b.projection {
                        div { "Projected" b { (count(p.total_tokens)) " tokens, " (dollars(p.total_cost)) } }
                        div { "Remaining" b { (p.remaining_minutes) " min" } }
                    }
                }
            }
        }
        @if real.is_empty() {
            p.muted { "No usage recorded in that range." }
        } @else {
            table {
                thead { tr { th { "Block start" } th { "Last activity" } th { "Models" } th.num { "Responses" } th.num { "Tokens" } th.num { "Cost" } th.num { "Cache efficiency" } } }
                tbody {
                    @for b in &real {
                        tr {
                            td { (when(b.start_time)) @if b.is_active { " " b { "active" } } }
                            td { (b.actual_end_time.map(when).unwrap_or_default()) }
                            td { (b.models.join(", ")) }
                            td.num { (count(b.entries)) }
                            td.num { (count(b.total_tokens)) }
                            td.num { (dollars(b.cost_usd)) }
                            td.num { (percent(b.cache_efficiency)) }
                        }
                    }
                }
            }
        }
    }
}
