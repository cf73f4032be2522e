//! `baton summary install|list|show|diff|activate`: summary versions, installed and activated
//! by compare-and-swap.

use std::io::Write;

use anyhow::Context as _;
use baton_core::{Seq, SummaryId};
use baton_store::{Candidate, Install};
use baton_view::{SummaryList, SummaryView};
use serde_json::json;

use crate::args::{ActivateArgs, DiffArgs, InstallArgs};
use crate::env::{Env, print_json, run_id};
use crate::exit::InvalidInput;

/// `baton summary install`.
pub async fn install(env: &Env, args: InstallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let base = match args.base.as_str() {
        "none" => None,
        id => Some(SummaryId(id.parse().map_err(|_| {
            InvalidInput(format!("--base {id:?}: expected a summary id or \"none\""))
        })?)),
    };
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("--file: reading {}", args.file.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| InvalidInput(format!("{}: not valid UTF-8", args.file.display())))?;
    let claims = baton_core::claim::parse_candidate(&text)
        .map_err(|e| InvalidInput(format!("{}: {e}", args.file.display())))?;
    let candidate = Candidate {
        base,
        cut: Seq(args.cut),
        claims,
        meta: None,
    };
    match env
        .store
        .install_summary(&env.tenant, &run, &candidate)
        .await?
    {
        Install::Installed(summary) => {
            if env.json {
                return print_json(out, &SummaryView::of(&summary, Some(summary.id)));
            }
            writeln!(out, "{}", summary.id)?;
            Ok(())
        }
        Install::Rejected(why) => {
            Err(anyhow::Error::new(why).context(format!("summary install on run {run}")))
        }
    }
}

/// `baton summary list`.
pub async fn list_summaries(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(run)?;
    let active = env.store.run(&env.tenant, &run).await?.active_summary_id;
    let summaries = env.store.summaries(&env.tenant, &run).await?;
    if env.json {
        return print_json(out, &SummaryList::of(&summaries, active));
    }
    if summaries.is_empty() {
        writeln!(out, "run {run} has no summaries")?;
        return Ok(());
    }
    writeln!(
        out,
        "  {:>6} {:>8} {:>8} {:>6}  created",
        "id", "coverage", "previous", "claims"
    )?;
    for s in &summaries {
        let mark = if Some(s.id) == active { "*" } else { " " };
        let previous = s.previous_id.map_or("-".to_owned(), |p| p.to_string());
        writeln!(
            out,
            "{mark} {:>6} {:>8} {:>8} {:>6}  {}",
            s.id,
            s.coverage,
            previous,
            s.claims.len(),
            s.created_at
        )?;
    }
    Ok(())
}

/// `baton summary show`.
pub async fn show_summary(env: &Env, id: u64, out: &mut dyn Write) -> anyhow::Result<()> {
    let summary = env.store.summary(&env.tenant, SummaryId(id)).await?;
    if env.json {
        let active = env
            .store
            .run(&env.tenant, &summary.run)
            .await?
            .active_summary_id;
        return print_json(out, &SummaryView::of(&summary, active));
    }
    writeln!(out, "summary   {}", summary.id)?;
    writeln!(out, "run       {}", summary.run)?;
    writeln!(out, "coverage  1..={}", summary.coverage)?;
    let previous = summary
        .previous_id
        .map_or("none".to_owned(), |p| p.to_string());
    writeln!(out, "previous  {previous}")?;
    writeln!(out, "created   {}", summary.created_at)?;
    if let Some(meta) = &summary.meta {
        writeln!(out, "made by   {meta}")?;
    }
    for claim in &summary.claims {
        writeln!(
            out,
            "  {:<15} [seq {}] {}",
            claim.kind.as_str(),
            claim.source_seq,
            claim.text
        )?;
    }
    Ok(())
}

fn base_arg(value: &str, flag: &str) -> anyhow::Result<Option<SummaryId>> {
    match value {
        "none" => Ok(None),
        id => Ok(Some(SummaryId(id.parse().map_err(|_| {
            InvalidInput(format!("{flag} {id:?}: expected a summary id or \"none\""))
        })?))),
    }
}

/// `baton summary diff`.
pub async fn diff_summaries(env: &Env, args: DiffArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let a = env.store.summary(&env.tenant, SummaryId(args.a)).await?;
    let b = env.store.summary(&env.tenant, SummaryId(args.b)).await?;
    if a.run != b.run {
        return Err(InvalidInput(format!(
            "summary diff: {} belongs to run {} and {} to run {}; compare versions of one run",
            a.id, a.run, b.id, b.run
        ))
        .into());
    }
    let d = baton_core::claim::diff(&a.claims, &b.claims);
    if env.json {
        let changed: Vec<_> = d
            .changed
            .iter()
            .map(|(from, to)| {
                json!({"kind": to.kind, "source_seq": to.source_seq, "from": from.text, "to": to.text})
            })
            .collect();
        return print_json(
            out,
            &json!({
                "run": a.run,
                "a": {"id": a.id, "coverage": a.coverage},
                "b": {"id": b.id, "coverage": b.coverage},
                "added": d.added,
                "dropped": d.dropped,
                "changed": changed,
            }),
        );
    }
    writeln!(
        out,
        "summary {} (through seq {}) → {} (through seq {}), run {}",
        a.id, a.coverage, b.id, b.coverage, a.run
    )?;
    if d.added.is_empty() && d.dropped.is_empty() && d.changed.is_empty() {
        writeln!(out, "  the same claims")?;
    }
    for c in &d.dropped {
        writeln!(
            out,
            "- {:<15} [seq {}] {}",
            c.kind.as_str(),
            c.source_seq,
            c.text
        )?;
    }
    for c in &d.added {
        writeln!(
            out,
            "+ {:<15} [seq {}] {}",
            c.kind.as_str(),
            c.source_seq,
            c.text
        )?;
    }
    for (from, to) in &d.changed {
        writeln!(
            out,
            "~ {:<15} [seq {}] {} → {}",
            to.kind.as_str(),
            to.source_seq,
            from.text,
            to.text
        )?;
    }
    Ok(())
}

/// `baton summary activate`.
pub async fn activate(env: &Env, args: ActivateArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let base = base_arg(&args.base, "--base")?;
    match env
        .store
        .activate_summary(&env.tenant, &run, SummaryId(args.id), base)
        .await?
    {
        Install::Installed(summary) => {
            if env.json {
                return print_json(out, &SummaryView::of(&summary, Some(summary.id)));
            }
            writeln!(
                out,
                "run {run}: summary {} is active (covers through seq {})",
                summary.id, summary.coverage
            )?;
            Ok(())
        }
        Install::Rejected(why) => {
            Err(anyhow::Error::new(why).context(format!("summary activate on run {run}")))
        }
    }
}
