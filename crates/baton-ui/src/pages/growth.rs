//! A run's token growth: per model call, the input tokens had the whole transcript been sent
//! (the quadratic curve) against the compacted context under a strategy (the flat one), with one
//! more strategy side by side (up to two, as the query says), and the input the provider billed per response where
//! the source recorded usage (fresh input, cache writes and cache reads), with the cache reads
//! on their own line.
//!
//! The replay is `baton_reports::GrowthJob`, the same as `GET /v1/runs/{id}/growth` and
//! `baton report growth`; it runs on the blocking pool and stops when the request goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::{Path, State};
use baton_reports::GrowthJob;
use baton_view::GrowthReport;
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, given, run_id};
use crate::layout::{self, count, encode};
use crate::svg::{self, Series};
use crate::{BASE, Failure, Ui, Viewer};

/// The strategies a page may compare, besides its main one.
const MAX_COMPARED: usize = 2;

/// The page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrowthQuery {
    /// The strategy (default `structured`).
    pub strategy: Option<String>,
    /// Its token budget.
    pub budget: Option<u64>,
    /// Strategies to draw beside it, comma-separated (at most two; `sliding` when absent).
    pub compare: Option<String>,
}

/// Sets its flag when dropped: when the request's future goes away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Replays `jobs` side by side, one blocking thread each; the reports in the jobs' order.
async fn replay(jobs: Vec<GrowthJob>) -> Result<Vec<GrowthReport>, Failure> {
    let cancel = Arc::new(AtomicBool::new(false));
    let _guard = CancelOnDrop(cancel.clone());
    let running: Vec<_> = jobs
        .into_iter()
        .map(|job| {
            let cancel = cancel.clone();
            tokio::task::spawn_blocking(move || job.run(&cancel))
        })
        .collect();
    let mut reports = Vec::with_capacity(running.len());
    for done in running {
        let done = done
            .await
            .map_err(|e| Failure::bad(format!("the replay failed: {e}")))?;
        match done {
            Some(report) => reports.push(report?),
            None => return Err(Failure::bad("the replay was cancelled")),
        }
    }
    Ok(reports)
}

/// The strategies a query asks for: the main one first, then those to compare.
fn strategies(q: &GrowthQuery) -> Result<Vec<String>, Failure> {
    let strategy = given(&q.strategy).unwrap_or("structured").to_owned();
    // Unless the query says (an empty `compare` for none), one other strategy is drawn beside
    // the main one: sliding, the simplest bound, or structured beside it.
    let default = if strategy == "sliding" {
        "structured"
    } else {
        "sliding"
    };
    let mut all = vec![strategy.clone()];
    all.extend(
        q.compare
            .as_deref()
            .unwrap_or(default)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != strategy)
            .map(str::to_owned),
    );
    if all.len() > MAX_COMPARED + 1 {
        return Err(Failure::bad(format!(
            "compare: at most {MAX_COMPARED} strategies besides the main one"
        )));
    }
    for name in &all {
        if !baton_compact::strategies::names().contains(&name.as_str()) {
            return Err(Failure::bad(format!(
                "strategy {name:?}: expected one of {}",
                baton_compact::strategies::names().join(", ")
            )));
        }
    }
    Ok(all)
}

/// The growth page: the form at once, and the chart loaded into it (`chart`), since a long
/// run's replay takes longer than a page should.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path(id): Path<String>,
    Params(q): Params<GrowthQuery>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let all = strategies(&q)?;
    // Another tenant's run, or none, is a 404 here, not in the chart.
    ui.store.run(&viewer.tenant, &run).await?;
    let run_path = format!("{BASE}/runs/{}", encode(run.as_str()));
    let names = baton_compact::strategies::names();
    let query = layout::query(&[
        ("strategy", &all[0]),
        (
            "budget",
            &q.budget.map(|b| b.to_string()).unwrap_or_default(),
        ),
        ("compare", &all[1..].join(",")),
    ]);
    let query = if q.compare.is_none() || !all[1..].is_empty() {
        query
    } else {
        format!("{query}&compare=")
    };
    let body = html! {
        p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " a href=(run_path) { (run.as_str()) } " / growth" }
        h1 { "Token growth" }
        form.filters method="get" action={ (run_path) "/growth" } {
            label { "Strategy"
                select name="strategy" {
                    @for n in &names { option value=(n) selected[*n == all[0]] { (n) } }
                }
            }
            label { "Budget (tokens)" input type="number" min="1" name="budget" value=[q.budget]; }
            label { "Compare with (comma-separated)" input name="compare" value=(all[1..].join(",")) placeholder="sliding,none"; }
            button type="submit" { "Replay" }
        }
        div #growth-chart hx-get={ (run_path) "/growth/chart" (query) } hx-trigger="load" hx-swap="innerHTML" {
            p.muted { "Replaying the run under " (all.join(", ")) "…" }
            noscript { p { a href={ (run_path) "/growth/chart" (query) } { "The chart" } " (scripts are off)." } }
        }
    };
    let json = format!(
        "/v1/runs/{}/growth{}",
        encode(run.as_str()),
        layout::query(&[
            ("strategy", &all[0]),
            (
                "budget",
                &q.budget.map(|b| b.to_string()).unwrap_or_default()
            ),
        ])
    );
    Ok(layout::page(
        "Token growth",
        Some(&viewer),
        Some(&json),
        body,
    ))
}

/// The chart and the table of the growth page, as a fragment: each strategy's replay comes
/// from the memo when the run has not grown since (`Ui::growth`), else is replayed.
pub async fn chart(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path(id): Path<String>,
    Params(q): Params<GrowthQuery>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let all = strategies(&q)?;
    let last = ui.store.run(&viewer.tenant, &run).await?.last_seq;
    let key = |strategy: &str| crate::GrowthKey {
        tenant: viewer.tenant.clone(),
        run: run.clone(),
        last,
        strategy: strategy.to_owned(),
        budget: q.budget,
    };
    let mut reports: Vec<Option<GrowthReport>> =
        all.iter().map(|name| ui.growth_memo(&key(name))).collect();
    // What the memo lacks: the run is read once and its strategies replayed side by side.
    let missing: Vec<usize> = (0..all.len()).filter(|&i| reports[i].is_none()).collect();
    if let Some(&first) = missing.first() {
        let read =
            GrowthJob::prepare(&*ui.store, &viewer.tenant, &run, &all[first], q.budget).await?;
        let mut jobs = Vec::with_capacity(missing.len());
        for &i in &missing[1..] {
            jobs.push(read.also(&all[i], q.budget)?);
        }
        jobs.insert(0, read);
        for (i, report) in missing.into_iter().zip(replay(jobs).await?) {
            ui.remember_growth(key(&all[i]), report.clone());
            reports[i] = Some(report);
        }
    }
    let reports: Vec<GrowthReport> = reports.into_iter().flatten().collect();
    let main = &reports[0];

    // The provider's figures, per response of this run, in time order.
    let mut billed: Vec<(baton_core::Timestamp, baton_core::usage::Usage)> = ui
        .store
        .usage(
            &viewer.tenant,
            &baton_store::UsageQuery {
                estimated: false,
                project: None,
            },
        )
        .await?
        .into_iter()
        .filter(|u| u.run == run && !u.record.estimated)
        .map(|u| {
            (
                u.record.at.unwrap_or(baton_core::Timestamp(0)),
                u.record.usage,
            )
        })
        .collect();
    billed.sort_by_key(|(at, _)| *at);

    let point = |i: usize, v: u64| ((i + 1) as f64, v as f64);
    let mut series = vec![Series {
        name: "whole transcript".into(),
        class: "full",
        points: main
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| point(i, s.full_tokens))
            .collect(),
    }];
    for (r, class) in reports.iter().zip(["compact", "alt1", "alt2"]) {
        series.push(Series {
            name: format!("compacted: {}", r.strategy),
            class,
            points: r
                .steps
                .iter()
                .enumerate()
                .map(|(i, s)| point(i, s.context_tokens))
                .collect(),
        });
    }
    if !billed.is_empty() {
        series.push(Series {
            name: "billed input per response".into(),
            class: "real",
            points: billed
                .iter()
                .enumerate()
                .map(|(i, (_, u))| point(i, u.context()))
                .collect(),
        });
        series.push(Series {
            name: "of which cache reads".into(),
            class: "cache",
            points: billed
                .iter()
                .enumerate()
                .map(|(i, (_, u))| point(i, u.cache_read))
                .collect(),
        });
    }
    Ok(html! {
        @if main.steps.is_empty() {
            p.muted { "This run has no model calls (assistant messages) to replay." }
        } @else {
            (svg::lines(&series, "model call", "input tokens", 280.0))
            table {
                thead { tr { th { "Strategy" } th.num { "Input, whole transcript" } th.num { "Input, compacted" } th.num { "Ratio" } th.num { "Compactions" } } }
                tbody {
                    @for r in &reports {
                        tr {
                            td { (r.strategy) }
                            td.num { (count(r.full_total)) }
                            td.num { (count(r.context_total)) }
                            td.num { (format!("{:.1}×", r.ratio)) }
                            td.num { (r.steps.iter().filter(|s| s.compacted).count()) }
                        }
                    }
                }
            }
            @if let Some(reported) = main.reported_input_total {
                p { "The provider billed " b { (count(reported)) } " input tokens over " (billed.len()) " responses (fresh input, cache writes and cache reads), of which "
                    b { (count(billed.iter().map(|(_, u)| u.cache_read).sum())) } " were cache reads; the whole-transcript line estimates that figure." }
            }
        }
    })
}
