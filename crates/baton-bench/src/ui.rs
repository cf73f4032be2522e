//! Section 16: the dashboard's pages (issue 21), server time and size.
//!
//! The store holds the shared corpus imported by the real binary (1,057 runs with their usage
//! records) topped up with generated runs to at least 1,000, plus one generated run of 5,000
//! messages (assistant turns calling a tool, and the results) with two summary versions. Each
//! page is rendered by the dashboard's router in process (`tower::ServiceExt::oneshot`, no
//! socket: the server's own time), several times; the section prints each page's median and
//! worst time and its size, against the bars: under 200 ms, no page over 1 MB.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, header};
use baton_core::{Claim, ClaimKind, Message, Role, RunId, Seq, SummaryId, TenantId};
use baton_store::{Candidate, NewEntry, NewRun, Store};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

use crate::import::CORPUS;
use crate::{Report, Target, Unit, median};

/// The pages measured: figure key, label, path (`{run}` is the long run, `{v1}`/`{v2}` its
/// versions, `{last}` where its last page starts).
const PAGES: [(&str, &str, &str); 10] = [
    ("ui_runs_ms", "runs, first page", "/ui/runs"),
    (
        "ui_runs_filtered_ms",
        "runs, text filter and cost sort",
        "/ui/runs?q=claude&sort=cost",
    ),
    (
        "ui_run_ms",
        "the 5,000-message run, first page",
        "/ui/runs/{run}",
    ),
    (
        "ui_run_end_ms",
        "the 5,000-message run, last page",
        "/ui/runs/{run}?from={last}",
    ),
    (
        "ui_summaries_ms",
        "its summary versions",
        "/ui/runs/{run}/summaries",
    ),
    (
        "ui_diff_ms",
        "the diff of its two versions",
        "/ui/runs/{run}/diff?from={v1}&to={v2}",
    ),
    (
        "ui_growth_ms",
        "its growth page (the chart comes after)",
        "/ui/runs/{run}/growth",
    ),
    ("ui_usage_ms", "usage, daily", "/ui/usage"),
    (
        "ui_blocks_ms",
        "usage, 5-hour blocks",
        "/ui/usage?report=blocks",
    ),
    (
        "ui_duplicates_ms",
        "duplicate work, call log",
        "/ui/duplicates",
    ),
];

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (long, reps) = if quick { (500, 2) } else { (5_000, 15) };
    writeln!(
        out,
        "\n[16] dashboard: each page rendered by the router in process ({reps} times), on a store of 1,000+ runs and a {long}-message run"
    )?;
    out.flush()?;
    let db = dir.join("ui.db");
    let corpus = Path::new(CORPUS);
    if let (Some(baton), true) = (crate::import_cli::binary(), corpus.is_dir()) {
        let imported = crate::import_cli::import(&baton, &db, corpus)?;
        writeln!(
            out,
            "  the corpus imported by {} in {:.1} s",
            baton.display(),
            imported.seconds
        )?;
    }
    let tenant = TenantId::default_tenant();
    let (store, run, v1, v2) = rt.block_on(async {
        let store: Arc<dyn Store> = Arc::new(baton_sqlite::SqliteStore::open(&db).await?);
        let existing = store.list_runs(&tenant).await.map(|r| r.len()).unwrap_or(0);
        for i in existing..1_000 {
            let id = RunId::new(format!("generated-{i:04}"))?;
            let new = NewRun {
                id: Some(id.clone()),
                ..NewRun::default()
            };
            store.create_run(&tenant, &new).await?;
            let messages = [
                NewEntry::estimated(Message::text(Role::User, format!("task {i}: make the tests pass"))),
                NewEntry::estimated(Message::text(Role::Assistant, format!("done with task {i}"))),
            ];
            store.append(&tenant, &id, &messages).await?;
        }
        let run = RunId::new("dashboard-long-run")?;
        let new = NewRun {
            id: Some(run.clone()),
            ..NewRun::default()
        };
        store.create_run(&tenant, &new).await?;
        let mut batch = vec![NewEntry::estimated(Message::text(
            Role::User,
            "find every needle and fix what it points at",
        ))];
        let mut i = 0;
        while batch.len() < long {
            i += 1;
            batch.push(NewEntry::estimated(serde_json::from_value(json!({"role": "assistant", "content": [
                {"type": "text", "text": format!("looking for needle {i}")},
                {"type": "tool_use", "id": format!("t{i}"), "name": "grep", "input": {"pattern": format!("needle{i}")}},
            ]}))?));
            batch.push(NewEntry::estimated(serde_json::from_value(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": [{"type": "text", "text": format!("src/lib.rs:{i}: needle{i} {}", "context ".repeat(40))}]},
            ]}))?));
        }
        for chunk in batch.chunks(1_000) {
            store.append(&tenant, &run, chunk).await?;
        }
        let claims = |n: u64, step: u64| -> Vec<Claim> {
            (1..=n)
                .map(|k| Claim::new(ClaimKind::Verified, format!("needle {k} fixed"), Seq(k * step)))
                .collect()
        };
        let half = (long as u64 / 2) | 1; // odd: after a tool result, a safe cut
        let first = install(&*store, &tenant, &run, None, half, claims(40, 2)).await?;
        let second = install(&*store, &tenant, &run, Some(first), long as u64 - 1, claims(60, 3)).await?;
        anyhow::Ok((store, run, first, second))
    })?;

    let router = baton_ui::router(baton_ui::Ui::new(
        store,
        Some(tenant),
        baton_core::prices::PriceTable::defaults(),
    ));
    let mut largest = 0usize;
    for (key, label, template) in PAGES {
        let path = template
            .replace("{run}", run.as_str())
            .replace("{v1}", &v1.0.to_string())
            .replace("{v2}", &v2.0.to_string())
            .replace("{last}", &(long - 199).to_string());
        let mut times = Vec::with_capacity(reps);
        let mut bytes = 0;
        for _ in 0..reps {
            let request = Request::get(path.trim_start_matches("/ui"))
                .header(header::HOST, "127.0.0.1")
                .body(Body::empty())?;
            let started = Instant::now();
            let (status, body) = rt.block_on(async {
                let response = router.clone().oneshot(request).await?;
                let status = response.status();
                let body = response.into_body().collect().await?.to_bytes();
                anyhow::Ok((status, body))
            })?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            anyhow::ensure!(status.is_success(), "{path}: status {status}");
            bytes = body.len();
        }
        largest = largest.max(bytes);
        let worst = times.iter().copied().fold(0.0, f64::max);
        writeln!(
            out,
            "  {label:<40} median {:>7.1} ms, worst {worst:>7.1} ms, {:>7} KB",
            median(&times),
            bytes / 1024
        )?;
        report.figure(
            key,
            format!("dashboard: {label}, median"),
            median(&times),
            Unit::Millis,
            Some(Target::AtMost(200.0)),
        );
    }
    // The growth chart: the first look replays the run (structured, and sliding beside it);
    // later looks at the same run come from the dashboard's memo.
    let chart = format!("/runs/{}/growth/chart", run.as_str());
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let request = Request::get(chart.as_str())
            .header(header::HOST, "127.0.0.1")
            .body(Body::empty())?;
        let started = Instant::now();
        let status = rt.block_on(async {
            let response = router.clone().oneshot(request).await?;
            let status = response.status();
            response.into_body().collect().await?;
            anyhow::Ok(status)
        })?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(status.is_success(), "{chart}: status {status}");
    }
    writeln!(
        out,
        "  {:<40} first {:>7.1} ms (two replays side by side), then median {:>7.1} ms",
        "its growth chart (fetched by the page)",
        times[0],
        median(&times[1..])
    )?;
    report.figure(
        "ui_growth_chart_first_ms",
        format!("dashboard: growth chart of the {long}-message run, first look"),
        times[0],
        Unit::Millis,
        Some(Target::AtMost(200.0)),
    );
    report.figure(
        "ui_growth_chart_again_ms",
        "dashboard: growth chart, later looks, median",
        median(&times[1..]),
        Unit::Millis,
        Some(Target::AtMost(200.0)),
    );
    report.figure(
        "ui_largest_page_bytes",
        "dashboard: the largest page",
        largest as f64,
        Unit::Count("bytes"),
        Some(Target::AtMost(1_000_000.0)),
    );
    Ok(())
}

async fn install(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
    base: Option<SummaryId>,
    cut: u64,
    claims: Vec<Claim>,
) -> anyhow::Result<SummaryId> {
    let candidate = Candidate {
        base,
        cut: Seq(cut),
        claims,
        meta: Some(json!({"strategy": "bench"})),
    };
    match store.install_summary(tenant, run, &candidate).await? {
        baton_store::Install::Installed(s) => Ok(s.id),
        baton_store::Install::Rejected(why) => anyhow::bail!("install at {cut}: {why}"),
    }
}
