//! The runs page: the tenant's runs with project, title, agent, model, first and last
//! activity, messages, tokens, cost and summary versions; filtered by project, agent, dates and
//! text, sorted, a page at a time. Every filter is in the URL.
//!
//! The store selects by project and start date and sorts (`Store::list_run_summaries`, the
//! listing `baton runs list` and `GET /v1/runs` show); the agent, end date and text filters
//! and the page cut are applied here, over that one read.

use std::sync::Arc;

use axum::extract::State;
use baton_core::Timestamp;
use baton_store::{RunQuery, RunSort, RunSummary};
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, given};
use crate::layout::{self, count, cut, dollars, encode, query, when};
use crate::{BASE, Failure, Ui, Viewer};

/// Rows a page shows unless `per` says.
const PER_PAGE: usize = 50;
/// The most rows a page shows.
const MAX_PER_PAGE: usize = 200;

/// The page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    /// Only this project (its path, or its last component).
    pub project: Option<String>,
    /// Only this agent (`claude-code`, `codex`, …; `native` for runs not imported).
    pub agent: Option<String>,
    /// Active on or after this day, `YYYY-MM-DD` (UTC).
    pub since: Option<String>,
    /// Active on or before this day.
    pub until: Option<String>,
    /// Words the id, title, project or model contains (case-insensitive).
    pub q: Option<String>,
    /// `created`, `last`, `first`, `messages`, `tokens` or `cost`.
    pub sort: Option<String>,
    /// `desc` (the sort's own order) or `asc` (reversed).
    pub order: Option<String>,
    /// The page, from 1.
    pub page: Option<usize>,
    /// Rows a page.
    pub per: Option<usize>,
}

fn day(text: &str, what: &str) -> Result<Timestamp, Failure> {
    Timestamp::from_day(text)
        .ok_or_else(|| Failure::bad(format!("{what} {text:?}: expected a day as YYYY-MM-DD")))
}

/// The runs page.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Params(q): Params<RunsQuery>,
) -> Result<Markup, Failure> {
    let sort_name = given(&q.sort).unwrap_or("last");
    let sort = RunSort::parse(sort_name).ok_or_else(|| {
        Failure::bad(format!(
            "sort {sort_name:?}: expected one of {}",
            RunSort::names()
        ))
    })?;
    let ascending = match given(&q.order) {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(other) => {
            return Err(Failure::bad(format!(
                "order {other:?}: expected asc or desc"
            )));
        }
    };
    let per = q.per.unwrap_or(PER_PAGE);
    if !(1..=MAX_PER_PAGE).contains(&per) {
        return Err(Failure::bad(format!(
            "per {per}: expected 1 to {MAX_PER_PAGE}"
        )));
    }
    let page = q.page.unwrap_or(1).max(1);
    let since = given(&q.since).map(|d| day(d, "since")).transpose()?;
    let until = given(&q.until)
        .map(|d| day(d, "until").map(|t| Timestamp(t.0 + 86_400_000)))
        .transpose()?;
    let listed = ui
        .store
        .list_run_summaries(
            &viewer.tenant,
            &RunQuery {
                project: given(&q.project).map(str::to_owned),
                since,
                sort,
                limit: None,
                cursor: None,
                prices: Some(ui.prices.clone()),
            },
        )
        .await;
    let all = match listed {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?.runs,
    };
    let mut agents: Vec<&str> = all.iter().filter_map(|r| r.agent.as_deref()).collect();
    agents.sort_unstable();
    agents.dedup();
    let words: Vec<String> = given(&q.q)
        .map(|t| {
            t.to_lowercase()
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let agent = given(&q.agent);
    let mut rows: Vec<&RunSummary> = all
        .iter()
        .filter(|r| match agent {
            None => true,
            Some("native") => r.agent.is_none(),
            Some(a) => r.agent.as_deref() == Some(a),
        })
        .filter(|r| until.is_none_or(|u| r.first_activity.is_some_and(|f| f < u)))
        .filter(|r| words.iter().all(|w| matches(r, w)))
        .collect();
    if ascending {
        rows.reverse();
    }
    let total = rows.len();
    let pages = total.div_ceil(per).max(1);
    if page > pages {
        return Err(Failure::bad(format!(
            "page {page}: the filters select {total} runs, {pages} page(s) of {per}"
        )));
    }
    let shown = &rows[(page - 1) * per..(page * per).min(total)];
    let mut versions = Vec::with_capacity(shown.len());
    for r in shown {
        versions.push(ui.store.summaries(&viewer.tenant, &r.run.id).await?.len());
    }

    let text = |v: &Option<String>| given(v).unwrap_or("").to_owned();
    let state = [
        ("project", text(&q.project)),
        ("agent", text(&q.agent)),
        ("since", text(&q.since)),
        ("until", text(&q.until)),
        ("q", text(&q.q)),
        ("sort", sort_name.to_owned()),
        (
            "order",
            if ascending {
                "asc".into()
            } else {
                String::new()
            },
        ),
        ("per", q.per.map(|p| p.to_string()).unwrap_or_default()),
    ];
    let link = |changes: &[(&str, String)]| {
        let mut pairs: Vec<(&str, String)> = state.to_vec();
        for (k, v) in changes {
            if let Some(p) = pairs.iter_mut().find(|p| p.0 == *k) {
                p.1 = v.clone();
            } else {
                pairs.push((k, v.clone()));
            }
        }
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        format!("{BASE}/runs{}", query(&borrowed))
    };
    let sort_link = |name: &str| {
        let order = if name == sort_name && !ascending {
            "asc"
        } else {
            ""
        };
        link(&[
            ("sort", name.to_owned()),
            ("order", order.to_owned()),
            ("page", String::new()),
        ])
    };
    let json = format!(
        "/v1/runs{}",
        query(&[
            ("project", &text(&q.project)),
            ("sort", sort_name),
            ("limit", "100"),
        ])
    );
    let body = html! {
        h1 { "Runs" }
        form.filters method="get" action={ (BASE) "/runs" } {
            label { "Project" input name="project" value=(text(&q.project)) size="16"; }
            label { "Agent"
                select name="agent" {
                    option value="" { "any" }
                    option value="native" selected[agent == Some("native")] { "native (not imported)" }
                    @for a in &agents { option value=(a) selected[agent == Some(*a)] { (a) } }
                }
            }
            label { "Active from" input type="date" name="since" value=(text(&q.since)); }
            label { "to" input type="date" name="until" value=(text(&q.until)); }
            label { "Text" input type="search" name="q" value=(text(&q.q)) placeholder="title, id, model…"; }
            input type="hidden" name="sort" value=(sort_name);
            button type="submit" { "Filter" }
            a href={ (BASE) "/runs" } { "Clear" }
        }
        p.muted.count data-selected=(total) data-all=(all.len()) { (count(total as u64)) " runs" @if total != all.len() { " of " (count(all.len() as u64)) } }
        table.runs {
            thead { tr {
                th { "Run" }
                th { "Project" }
                th { "Agent" }
                th { "Model" }
                th { a href=(sort_link("first")) { "First" } }
                th { a href=(sort_link("last")) { "Last" } }
                th.num { a href=(sort_link("messages")) { "Messages" } }
                th.num { a href=(sort_link("tokens")) { "Tokens" } }
                th.num { a href=(sort_link("cost")) { "Cost" } }
                th.num { "Summaries" }
            } }
            tbody {
                @for (r, v) in shown.iter().zip(&versions) {
                    tr {
                        td {
                            a href={ (BASE) "/runs/" (encode(r.run.id.as_str())) } {
                                (r.title.as_deref().map_or_else(|| r.run.id.to_string(), |t| cut(t, 90)))
                            }
                            br; span.muted { (cut(r.run.id.as_str(), 60)) }
                        }
                        td { (r.project.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p)).unwrap_or("")) }
                        td { (r.agent.as_deref().unwrap_or("native")) }
                        td { (r.models.first().map(String::as_str).unwrap_or("")) @if r.models.len() > 1 { " +" (r.models.len() - 1) } }
                        td { (r.first_activity.map(when).unwrap_or_default()) }
                        td { (r.last_activity.map(when).unwrap_or_default()) }
                        td.num { (count(r.messages)) }
                        td.num { (count(r.tokens)) }
                        td.num { (r.cost.map(dollars).unwrap_or_default()) @if r.usage_estimated { "*" } }
                        td.num { (v) }
                    }
                }
            }
        }
        @if all.iter().any(|r| r.usage_estimated) { p.muted { "* partly baton's estimate: the source recorded no usage." } }
        nav.pager {
            @if page > 1 { a rel="prev" href=(link(&[("page", (page - 1).to_string())])) { "← Previous" } }
            span { "page " (page) " of " (pages) }
            @if page < pages { a rel="next" href=(link(&[("page", (page + 1).to_string())])) { "Next →" } }
        }
    };
    Ok(layout::page("Runs", Some(&viewer), Some(&json), body))
}

/// Whether run `r` contains the lower-case `word` in its id, title, project or models.
fn matches(r: &RunSummary, word: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(word);
    has(r.run.id.as_str())
        || r.title.as_deref().is_some_and(has)
        || r.project.as_deref().is_some_and(has)
        || r.models.iter().any(|m| has(m))
        || r.agent.as_deref().is_some_and(has)
}
