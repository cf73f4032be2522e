//! A run's summary versions: the list (pick two to diff, or one to activate), one version's
//! claims, the diff of two (`baton_view::SummaryDiff`, the same view as
//! `GET /v1/runs/{id}/summaries/diff`), and activation.
//!
//! Activating is a compare-and-swap on the run's active pointer (`Store::activate_summary`):
//! the form carries the active version the page showed, so when someone else changed it in
//! between, nothing is written and the page says who is active now (409).

use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use baton_core::{RunId, Summary, SummaryId};
use baton_store::{Install, Rejection};
use baton_view::{ClaimView, SummaryDiff};
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, given, run_id, seq_link};
use crate::access::same_origin;
use crate::layout::{self, count, encode, when};
use crate::{BASE, Failure, Ui, Viewer};

/// The list's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The version just activated, to say so.
    pub activated: Option<u64>,
}

fn run_path(run: &RunId) -> String {
    format!("{BASE}/runs/{}", encode(run.as_str()))
}

/// The versions of a run, oldest first.
pub async fn list(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path(id): Path<String>,
    Params(q): Params<ListQuery>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let record = ui.store.run(&viewer.tenant, &run).await?;
    let summaries = ui.store.summaries(&viewer.tenant, &run).await?;
    let active = record.active_summary_id;
    let body = html! {
        p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " a href=(run_path(&run)) { (run.as_str()) } " / summaries" }
        h1 { "Summary versions" }
        @if let Some(id) = q.activated { p.notice { "Version " (id) " is now active." } }
        (versions_table(&run, &summaries, active))
    };
    let json = format!("/v1/runs/{}/summaries", encode(run.as_str()));
    Ok(layout::page(
        "Summary versions",
        Some(&viewer),
        Some(&json),
        body,
    ))
}

fn versions_table(run: &RunId, summaries: &[Summary], active: Option<SummaryId>) -> Markup {
    let bands = super::run::bands(run, summaries, active.map(|a| a.0));
    let base = active.map(|a| a.0.to_string()).unwrap_or_default();
    let (older, newer) = match summaries {
        [.., a, b] => (a.id.0, b.id.0),
        _ => (0, 0),
    };
    html! {
        @if summaries.is_empty() {
            p.muted { "This run has no summary yet (" code { "baton compact RUN" } " makes one)." }
        } @else {
            form method="get" action={ (run_path(run)) "/diff" } {
                table {
                    thead { tr { th { "Version" } th { "Covers" } th { "Built on" } th.num { "Claims" } th { "Strategy" } th { "Installed" } th { "Diff from" } th { "to" } th {} } }
                    tbody {
                        @for (s, band) in summaries.iter().zip(&bands) {
                            tr.active[active == Some(s.id)] {
                                td { a href=(band.href) { "v" (s.id.0) } @if active == Some(s.id) { " " b { "active" } } }
                                td { "seq 1–" (s.coverage.0) @if band.new_from > 1 { span.muted { " (" (band.new_from) "–" (s.coverage.0) " new)" } } }
                                td { @if let Some(p) = s.previous_id { "v" (p.0) } @else { span.muted { "—" } } }
                                td.num { (s.claims.len()) }
                                td { (s.meta.as_ref().and_then(|m| m.get("strategy")).and_then(|v| v.as_str()).unwrap_or("")) }
                                td { (when(s.created_at)) }
                                td { input type="radio" name="from" value=(s.id.0) checked[s.id.0 == older] aria-label={ "diff from v" (s.id.0) }; }
                                td { input type="radio" name="to" value=(s.id.0) checked[s.id.0 == newer] aria-label={ "diff to v" (s.id.0) }; }
                                td {
                                    @if active != Some(s.id) {
                                        button type="submit" form={ "activate-" (s.id.0) } { "Activate" }
                                    }
                                }
                            }
                        }
                    }
                }
                @if summaries.len() > 1 { p { button type="submit" { "Show the diff" } } }
            }
            // One form per version, outside the diff form (forms do not nest); each carries the
            // active version this page showed, for the compare-and-swap.
            @for s in summaries {
                form id={ "activate-" (s.id.0) } method="post" action={ (run_path(run)) "/summaries/" (s.id.0) "/activate" } {
                    input type="hidden" name="base" value=(base);
                }
            }
        }
    }
}

/// One version's claims.
pub async fn version(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path((id, sid)): Path<(String, u64)>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let summary = summary_of(&ui, &viewer, &run, sid).await?;
    let record = ui.store.run(&viewer.tenant, &run).await?;
    let is_active = record.active_summary_id == Some(summary.id);
    let base = record
        .active_summary_id
        .map(|a| a.0.to_string())
        .unwrap_or_default();
    let body = html! {
        p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " a href=(run_path(&run)) { (run.as_str()) } " / " a href={ (run_path(&run)) "/summaries" } { "summaries" } " / v" (sid) }
        h1 { "Summary v" (sid) @if is_active { " (active)" } }
        p {
            "Covers seq 1–" (summary.coverage.0)
            @if let Some(p) = summary.previous_id { ", built on " a href={ (run_path(&run)) "/summaries/" (p.0) } { "v" (p.0) } " (" a href={ (run_path(&run)) "/diff?from=" (p.0) "&to=" (sid) } { "diff" } ")" }
            ", " (summary.claims.len()) " claims, installed " (when(summary.created_at)) "."
        }
        @if !is_active {
            form method="post" action={ (run_path(&run)) "/summaries/" (sid) "/activate" } {
                input type="hidden" name="base" value=(base);
                button type="submit" { "Activate this version" }
            }
        }
        (claims_table(&run, summary.claims.iter().map(ClaimView::from).collect::<Vec<_>>().iter(), None))
    };
    let json = format!("/v1/summaries/{sid}");
    Ok(layout::page(
        &format!("Summary v{sid}"),
        Some(&viewer),
        Some(&json),
        body,
    ))
}

async fn summary_of(ui: &Ui, viewer: &Viewer, run: &RunId, sid: u64) -> Result<Summary, Failure> {
    let summary = ui.store.summary(&viewer.tenant, SummaryId(sid)).await?;
    if summary.run != *run {
        return Err(Failure::not_found(format!(
            "run {run} has no summary {sid}"
        )));
    }
    Ok(summary)
}

fn claims_table<'a>(
    run: &RunId,
    claims: impl Iterator<Item = &'a ClaimView>,
    class: Option<&str>,
) -> Markup {
    html! {
        table.claims {
            thead { tr { th { "Kind" } th { "Status" } th { "Subject" } th { "Claim" } th { "Source" } } }
            tbody { @for c in claims { (claim_row(run, c, class)) } }
        }
    }
}

fn claim_row(run: &RunId, c: &ClaimView, class: Option<&str>) -> Markup {
    html! {
        tr class=[class] {
            td.kind { (serde_json::to_value(c.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
            td { (c.status.and_then(|s| serde_json::to_value(s).ok()).and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()) }
            td { (c.subject.as_deref().unwrap_or("")) }
            td { (c.text) }
            td { a href=(seq_link(run, c.source_seq)) { "seq " (c.source_seq) } }
        }
    }
}

/// The diff's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    /// The older version.
    pub from: Option<u64>,
    /// The newer version.
    pub to: Option<u64>,
}

/// The diff of two versions.
pub async fn diff(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path(id): Path<String>,
    Params(q): Params<DiffQuery>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let (Some(from), Some(to)) = (q.from, q.to) else {
        return Err(Failure::bad("give two versions: from=ID&to=ID"));
    };
    let older = summary_of(&ui, &viewer, &run, from).await?;
    let newer = summary_of(&ui, &viewer, &run, to).await?;
    let d = SummaryDiff::of(&older, &newer);
    let body = html! {
        p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " a href=(run_path(&run)) { (run.as_str()) } " / " a href={ (run_path(&run)) "/summaries" } { "summaries" } " / diff" }
        h1 { "v" (from) " → v" (to) }
        p.stats {
            span { b { (d.added.len()) } " added" } " · "
            span { b { (d.dropped.len()) } " dropped" } " · "
            span { b { (d.changed.len()) } " changed" } " · "
            span { b { (count(d.unchanged as u64)) } " unchanged" }
        }
        h2 { "Added" }
        @if d.added.is_empty() { p.muted { "None." } } @else { (claims_table(&run, d.added.iter(), Some("added"))) }
        h2 { "Dropped" }
        @if d.dropped.is_empty() { p.muted { "None." } } @else { (claims_table(&run, d.dropped.iter(), Some("dropped"))) }
        h2 { "Changed" }
        @if d.changed.is_empty() { p.muted { "None." } } @else {
            table.claims {
                thead { tr { th { "Kind" } th { "Status" } th { "Subject" } th { "Claim" } th { "Source" } } }
                tbody {
                    @for c in &d.changed {
                        (claim_row(&run, &c.before, Some("dropped")))
                        (claim_row(&run, &c.after, Some("added")))
                    }
                }
            }
        }
    };
    let json = format!(
        "/v1/runs/{}/summaries/diff?from={from}&to={to}",
        encode(run.as_str())
    );
    Ok(layout::page(
        "Summary diff",
        Some(&viewer),
        Some(&json),
        body,
    ))
}

/// The activate form's fields.
#[derive(Debug, Deserialize)]
pub struct Activate {
    /// The version the page showed as active (empty: none).
    base: Option<String>,
}

/// Activates a version if the active one is still the one the page showed.
pub async fn activate(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    headers: HeaderMap,
    Path((id, sid)): Path<(String, u64)>,
    Form(form): Form<Activate>,
) -> Result<Response, Failure> {
    same_origin(&headers)?;
    let run = run_id(&id)?;
    let base = given(&form.base)
        .map(|b| {
            b.parse::<u64>()
                .map(SummaryId)
                .map_err(|_| Failure::bad(format!("base {b:?}: expected a summary id")))
        })
        .transpose()?;
    summary_of(&ui, &viewer, &run, sid).await?;
    match ui
        .store
        .activate_summary(&viewer.tenant, &run, SummaryId(sid), base)
        .await?
    {
        Install::Installed(_) => Ok(Redirect::to(&format!(
            "{}/summaries?activated={sid}",
            run_path(&run)
        ))
        .into_response()),
        Install::Rejected(Rejection::StaleBase { expected, active }) => {
            let name =
                |s: Option<SummaryId>| s.map_or_else(|| "none".to_owned(), |s| format!("v{}", s.0));
            let summaries = ui.store.summaries(&viewer.tenant, &run).await?;
            let body = html! {
                p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " a href=(run_path(&run)) { (run.as_str()) } " / summaries" }
                h1 { "Not activated: the active version changed" }
                p.conflict {
                    "This page showed " b { (name(expected)) } " as the active version, but "
                    b { (name(active)) } " is active now: someone activated or installed a version since. "
                    "Nothing was changed. Here are the versions as they stand; activate v" (sid) " again if you still mean to."
                }
                (versions_table(&run, &summaries, active))
            };
            Ok((
                StatusCode::CONFLICT,
                layout::page("Conflict", Some(&viewer), None, body),
            )
                .into_response())
        }
        Install::Rejected(other) => Err(Failure {
            status: StatusCode::CONFLICT,
            message: other.to_string(),
        }),
    }
}
