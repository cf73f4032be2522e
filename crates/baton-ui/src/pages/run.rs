//! A run's page: what it is (origin, counts, usage), its summary versions as coverage bands
//! over the seq axis with the source agent's own compactions and the pins, the working state
//! (the active summary's claims, each linked to its source seq), the next call's context by
//! part, and the timeline, [`PER_PAGE`] messages a page so a 5,000-message run sends a page,
//! not the run.
//!
//! In the timeline, text is cut to 600 characters and tool calls and results are
//! collapsed (and cut to a few thousand characters); a page stops at 700 KB of timeline
//! whatever its messages hold, and "Later" starts where it stopped. "original" fetches the stored message exactly as recall returns it
//! (`/ui/runs/{id}/seq/{n}`, the JSON of `GET /v1/runs/{id}/messages/{n}`), into the page.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use baton_core::{ContentBlock, Entry, RunId, Seq, Summary};
use maud::{Markup, html};
use serde::Deserialize;

use super::{Params, run_id, seq_link};
use crate::layout::{self, count, cut, dollars, encode, when};
use crate::svg::{self, Band};
use crate::{BASE, Failure, Ui, Viewer};

/// Messages a timeline page shows.
pub const PER_PAGE: u64 = 200;
/// Characters of a text block shown before "more".
const PREVIEW: usize = 600;

/// The most bytes of timeline a page sends: a page stops before the message that would pass
/// it, and "Later" starts there (so no page passes 1 MB, whatever the messages hold).
const PAGE_BYTES: usize = 700 * 1024;
/// Characters of a tool call's input or result, or of a long text, shown in the page; the
/// "original" button fetches the rest.
const BLOCK_CHARS: usize = 4_000;

/// The page's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    /// The first seq the timeline shows (default 1).
    pub from: Option<u64>,
}

/// Each summary version's band: it covers seq 1 to its coverage, and adds what follows the
/// coverage of the version it was built on (all of it for a first version).
pub(crate) fn bands(run: &RunId, summaries: &[Summary], active: Option<u64>) -> Vec<Band> {
    let coverage: BTreeMap<u64, u64> = summaries.iter().map(|s| (s.id.0, s.coverage.0)).collect();
    summaries
        .iter()
        .map(|s| Band {
            id: s.id.0,
            new_from: s
                .previous_id
                .and_then(|p| coverage.get(&p.0))
                .map_or(1, |c| c + 1)
                .min(s.coverage.0.max(1)),
            through: s.coverage.0,
            active: active == Some(s.id.0),
            href: format!("{BASE}/runs/{}/summaries/{}", encode(run.as_str()), s.id.0),
        })
        .collect()
}

/// The run page.
pub async fn page(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path(id): Path<String>,
    Params(q): Params<RunQuery>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let tenant = &viewer.tenant;
    let report = ui.store.run_report(tenant, &run).await?;
    let last = report.run.last_seq.0;
    let from = q.from.unwrap_or(1).max(1);
    if from > last.max(1) {
        return Err(Failure::bad(format!(
            "from {from}: the run's last seq is {last}"
        )));
    }
    let through = from.saturating_add(PER_PAGE - 1).min(last);
    let summaries = ui.store.summaries(tenant, &run).await?;
    let pins = ui.store.pins(tenant, &run).await?;
    let meta = ui.store.context_meta(tenant, &run).await?;
    let entries = if last == 0 {
        Vec::new()
    } else {
        ui.store
            .read_range(tenant, &run, Seq(from), Some(Seq(through)))
            .await?
    };
    let active_id = report.run.active_summary_id.map(|s| s.0);
    let active = summaries.iter().find(|s| Some(s.id.0) == active_id);
    let covered = active.map_or(0, |s| s.coverage.0);
    let compactions: Vec<u64> = report.compactions.iter().map(|c| c.after.0).collect();
    let pin_seqs: Vec<u64> = pins.iter().map(|s| s.0).collect();
    let run_path = format!("{BASE}/runs/{}", encode(run.as_str()));

    // The next call's context, by part.
    let fixed = meta.fixed_tokens();
    let state_tokens = meta.summary.as_ref().map(|s| {
        s.state_tokens()
            .unwrap_or_else(|| baton_compact::executor::estimate_state(s.coverage, &s.claims))
    });
    let pinned_tokens: u64 = meta.pinned.iter().map(|e| u64::from(e.tokens)).sum();
    let tail_tokens: u64 = meta.tail.iter().map(|e| u64::from(e.tokens)).sum();

    let usage = &report.usage;
    let reported: Vec<_> = usage.iter().filter(|u| !u.estimated).collect();
    let cost: Option<f64> = {
        let priced: Vec<f64> = usage
            .iter()
            .filter_map(|u| {
                let model = u.model.as_deref()?;
                Some(ui.prices.get(model)?.usage_cost(&u.usage))
            })
            .collect();
        (!priced.is_empty()).then(|| priced.iter().sum())
    };
    let origin = report.origin.as_ref();
    let title = origin
        .and_then(|o| o.title.clone())
        .or_else(|| report.run.goal.clone())
        .unwrap_or_else(|| run.to_string());

    // The timeline, message by message, until the page's byte budget.
    let mut timeline = String::new();
    let mut shown_through = from.saturating_sub(1);
    for entry in &entries {
        let mut one = String::new();
        for c in report
            .compactions
            .iter()
            .filter(|c| c.after.0 + 1 == entry.seq.0)
        {
            one.push_str(&html! {
                div.marker {
                    "The source agent compacted its context here"
                    @if let Some(at) = &c.at { " (" (at) ")" }
                    @if let Some(s) = &c.summary { details { summary { "its summary" } pre { (cut(s, BLOCK_CHARS)) } } }
                }
            }.into_string());
        }
        let seq = entry.seq.0;
        one.push_str(
            &timeline_entry(&run_path, entry, seq <= covered, pin_seqs.contains(&seq))
                .into_string(),
        );
        if !timeline.is_empty() && timeline.len() + one.len() > PAGE_BYTES {
            break;
        }
        timeline.push_str(&one);
        shown_through = seq;
    }
    let timeline = maud::PreEscaped(timeline);

    let body = html! {
        p.muted { a href={ (BASE) "/runs" } { "Runs" } " / " (run.as_str()) }
        h1 { (cut(&title, 160)) }
        div.stats {
            div { "Messages" b { (count(report.counts.messages)) } }
            div { "Tool calls" b { (count(report.counts.tool_calls)) } }
            div { "Tokens stored" b { (count(report.counts.tokens)) } }
            @if !reported.is_empty() {
                div { "Input billed" b { (count(reported.iter().map(|u| u.usage.context()).sum())) } }
                div { "Cache reads" b { (count(reported.iter().map(|u| u.usage.cache_read).sum())) } }
                div { "Output" b { (count(reported.iter().map(|u| u.usage.output).sum())) } }
            }
            @if let Some(cost) = cost { div { "Cost" b { (dollars(cost)) } } }
            div { "Summary versions" b { (summaries.len()) } }
            div { "Source compactions" b { (compactions.len()) } }
            @if let Some(o) = origin {
                div { "Agent" b { (o.format) } }
                @if let Some(p) = &o.project { div { "Project" b { (p) } } }
                @if let Some(at) = &o.first_at { div { "Session start" b { (at) } } }
            }
            div { "Status" b { (report.run.status.as_str()) } }
        }
        p {
            a href={ (run_path) "/summaries" } { "Summary versions" } " · "
            a href={ (run_path) "/growth" } { "Token growth" } " · "
            a href={ "/v1/runs/" (encode(run.as_str())) "/messages?from=" (from) } { "Messages as JSON" }
        }
        @if last > 0 {
            h2 { "Coverage" }
            (svg::coverage(last, &bands(&run, &summaries, active_id), &compactions, &pin_seqs))
        }
        div.cols {
            section.timeline {
                h2 { "Timeline " span.muted { "seq " (from) "–" (shown_through) " of " (last) } }
                (pager(&run_path, from, shown_through, last))
                @if entries.is_empty() { p.muted { "No messages yet." } }
                (timeline)
                (pager(&run_path, from, shown_through, last))
            }
            aside {
                h2 { "Working state" }
                @match active {
                    None => p.muted { "No summary yet: the whole history is the context." },
                    Some(s) => {
                        p.muted { "Summary " a href={ (run_path) "/summaries/" (s.id.0) } { "v" (s.id.0) } ", covering seq 1–" (s.coverage.0) }
                        (claims_by_kind(&run, s))
                    }
                }
                h2 { "Next call's context" }
                table {
                    tbody {
                        tr { td { "rules, goal, summary and pinned" } td.num { (count(fixed)) } }
                        @if let Some(t) = state_tokens { tr { td.muted { "of which the summary" } td.num { (count(t)) } } }
                        @if pinned_tokens > 0 { tr { td.muted { "of which pinned messages" } td.num { (count(pinned_tokens)) } } }
                        tr { td { "messages after the summary (" (meta.tail.len()) ")" } td.num { (count(tail_tokens)) } }
                        tr { th { "total (estimated)" } th.num { (count(fixed + tail_tokens)) } }
                    }
                }
                p { a href={ "/v1/runs/" (encode(run.as_str())) "/context" } { "the context as JSON" } }
                h2 { "Pins" }
                @if pin_seqs.is_empty() { p.muted { "None." } }
                ul { @for seq in &pin_seqs { li { a href=(seq_link(&run, *seq)) { "seq " (seq) } } } }
            }
        }
    };
    let json = format!("/v1/runs/{}", encode(run.as_str()));
    Ok(layout::page(
        &cut(&title, 60),
        Some(&viewer),
        Some(&json),
        body,
    ))
}

fn pager(run_path: &str, from: u64, through: u64, last: u64) -> Markup {
    html! {
        nav.pager {
            @if from > 1 {
                a href={ (run_path) "?from=1" } { "« First" }
                a rel="prev" href={ (run_path) "?from=" (from.saturating_sub(PER_PAGE).max(1)) } { "← Earlier" }
            }
            @if through < last {
                a rel="next" href={ (run_path) "?from=" (through + 1) } { "Later →" }
                a href={ (run_path) "?from=" (last.saturating_sub(PER_PAGE - 1).max(1)) } { "Last »" }
            }
        }
    }
}

/// The active summary's claims, grouped by kind, each linked to its source seq.
pub(crate) fn claims_by_kind(run: &RunId, summary: &Summary) -> Markup {
    let mut by_kind: BTreeMap<&str, Vec<&baton_core::Claim>> = BTreeMap::new();
    for claim in &summary.claims {
        by_kind.entry(claim.kind.as_str()).or_default().push(claim);
    }
    html! {
        @for (kind, claims) in &by_kind {
            details.kind-group open[claims.len() <= 12] {
            summary.kind { (kind) " (" (claims.len()) ")" }
            ul.claims {
                @for c in claims {
                    li {
                        @if let Some(status) = c.status { span.muted { "[" (status.as_str()) "] " } }
                        (c.text) " "
                        a.source href=(seq_link(run, c.source_seq.0)) title="the message it rests on" { "seq " (c.source_seq.0) }
                    }
                }
            }
            }
        }
    }
}

fn timeline_entry(run_path: &str, entry: &Entry, covered: bool, pinned: bool) -> Markup {
    let seq = entry.seq.0;
    html! {
        article.entry.covered[covered].pinned[pinned] id={ "seq-" (seq) } {
            header {
                span.role { (entry.message.role.as_str()) }
                span { "seq " (seq) }
                span { (count(u64::from(entry.tokens))) " tokens" }
                span { (when(entry.created_at)) }
                @if covered { span { "summarized" } }
                button.original type="button"
                    hx-get={ (run_path) "/seq/" (seq) }
                    hx-target={ "#original-" (seq) }
                    hx-swap="innerHTML" { "original" }
            }
            @for block in &entry.message.content { (block_view(block)) }
            div.original id={ "original-" (seq) } {}
        }
    }
}

fn block_view(block: &ContentBlock) -> Markup {
    match block {
        ContentBlock::Text { text } if text.trim().is_empty() => html! {},
        ContentBlock::Text { text } => html! {
            @if text.chars().count() > PREVIEW {
                p { (cut(text, PREVIEW)) }
                details.block { summary { "more (" (count(text.len() as u64)) " bytes in all)" } p { (cut(text, BLOCK_CHARS)) } }
            } @else {
                p { (text) }
            }
        },
        ContentBlock::Thinking { thinking, .. } => html! {
            details.block { summary { "thinking (" (count(thinking.len() as u64)) " bytes)" } p { (cut(thinking, BLOCK_CHARS)) } }
        },
        ContentBlock::RedactedThinking { .. } => html! { p.muted { "(redacted thinking)" } },
        ContentBlock::ToolUse { id, name, input } => {
            let input = serde_json::to_string_pretty(input).unwrap_or_default();
            html! {
                details.block.tool-call data-tool-use=(id) {
                    summary { "tool call " b { (name) } " " span.muted { (cut(&input.replace('\n', " "), 120)) } }
                    pre { (cut(&input, BLOCK_CHARS)) }
                }
            }
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let text: String = content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text }
                    | ContentBlock::ToolReference { tool_name: text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            html! {
                details.block.tool-result data-tool-use=(tool_use_id) {
                    summary { @if *is_error { "tool error " } @else { "tool result " } span.muted { (cut(&text.replace('\n', " "), 120)) } }
                    pre { (cut(&text, BLOCK_CHARS)) }
                }
            }
        }
        ContentBlock::Image { .. } => html! { p.muted { "(an image)" } },
        ContentBlock::ToolReference { tool_name } => {
            html! { p.muted { "(tool " b { (tool_name) } " made available)" } }
        }
        ContentBlock::Opaque { block } => {
            let json = serde_json::to_string_pretty(block).unwrap_or_default();
            html! {
                details.block {
                    summary { "(" (block.get("type").and_then(|t| t.as_str()).unwrap_or("vendor")) " block)" }
                    pre { (cut(&json, BLOCK_CHARS)) }
                }
            }
        }
        ContentBlock::Document { title, .. } => {
            html! { p.muted { "(a document" @if let Some(t) = title { ": " (t) } ")" } }
        }
    }
}

/// One stored message, exactly as recall returns it: the JSON of
/// `GET /v1/runs/{id}/messages/{seq}`, for the timeline's "original".
pub async fn original(
    State(ui): State<Arc<Ui>>,
    viewer: Viewer,
    Path((id, seq)): Path<(String, u64)>,
) -> Result<Markup, Failure> {
    let run = run_id(&id)?;
    let entries = ui
        .store
        .read_range(&viewer.tenant, &run, Seq(seq), Some(Seq(seq)))
        .await?;
    let Some(entry) = entries.first() else {
        return Err(Failure::not_found(format!("run {run} has no seq {seq}")));
    };
    let json = serde_json::to_string_pretty(&baton_view::EntryView::from(entry))
        .map_err(|e| Failure::bad(e.to_string()))?;
    Ok(html! {
        pre.recalled data-seq=(seq) { (json) }
        p.muted { a href={ "/v1/runs/" (encode(run.as_str())) "/messages/" (seq) } { "as JSON from the API" } }
    })
}
