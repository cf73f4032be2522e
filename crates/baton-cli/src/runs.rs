//! `baton runs create|list|show|cancel`.

use std::io::Write;

use anyhow::Context as _;
use baton_core::Run;
use baton_store::NewRun;
use baton_view::{RunList, RunReportView, RunView};

use crate::args::CreateRunArgs;
use crate::env::{Env, print_json, run_id};
use crate::history::first_line;

fn print_run(out: &mut dyn Write, run: &Run) -> anyhow::Result<()> {
    writeln!(out, "run       {}", run.id)?;
    writeln!(out, "tenant    {}", run.tenant)?;
    writeln!(out, "status    {}", run.status.as_str())?;
    writeln!(out, "created   {}", run.created_at)?;
    writeln!(out, "messages  {}", run.last_seq)?;
    match run.active_summary_id {
        Some(id) => writeln!(out, "summary   {id}")?,
        None => writeln!(out, "summary   none")?,
    }
    if let Some(goal) = &run.goal {
        writeln!(out, "goal      {goal}")?;
    }
    if let Some(rules) = &run.rules {
        writeln!(out, "rules     {}", first_line(rules, 100))?;
    }
    Ok(())
}

/// `baton runs create`.
pub async fn create_run(env: &Env, args: CreateRunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let rules = match &args.rules {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("--rules: reading {}", path.display()))?,
        ),
        None => None,
    };
    let new = NewRun {
        id: args.id.as_deref().map(run_id).transpose().context("--id")?,
        goal: args.goal,
        rules,
    };
    let run = env.store.create_run(&env.tenant, &new).await?;
    if env.json {
        return print_json(out, &RunView::from(&run));
    }
    writeln!(out, "{}", run.id)?;
    Ok(())
}

/// `baton runs list`.
pub async fn list_runs(env: &Env, out: &mut dyn Write) -> anyhow::Result<()> {
    let runs = match env.store.list_runs(&env.tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?,
    };
    if env.json {
        return print_json(out, &RunList::of(&runs));
    }
    if runs.is_empty() {
        writeln!(out, "no runs for tenant {}", env.tenant)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<38} {:<10} {:>8} {:>8}  created",
        "id", "status", "messages", "summary"
    )?;
    for run in &runs {
        let summary = run
            .active_summary_id
            .map_or("-".to_owned(), |id| id.to_string());
        writeln!(
            out,
            "{:<38} {:<10} {:>8} {:>8}  {}",
            run.id,
            run.status.as_str(),
            run.last_seq,
            summary,
            run.created_at
        )?;
    }
    Ok(())
}

/// `baton runs show`.
pub async fn show_run(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let report = env.store.run_report(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &RunReportView::from(&report));
    }
    print_run(out, &report.run)?;
    let c = &report.counts;
    writeln!(
        out,
        "tools     {} calls, {} orphan results, {} without a result",
        c.tool_calls, c.orphan_tool_results, c.dangling_tool_calls
    )?;
    writeln!(
        out,
        "size      {} bytes, {} tokens (estimated)",
        c.bytes, c.tokens
    )?;
    if let (Some(first), Some(last)) = (c.first_appended_at, c.last_appended_at) {
        writeln!(out, "stored    {first} .. {last}")?;
    }
    if let Some(o) = &report.origin {
        writeln!(out, "origin    {} ({})", o.path, o.format)?;
        if let Some(session) = &o.source_session_id {
            writeln!(out, "session   {session}")?;
        }
        if let Some(parent) = &o.parent_run {
            writeln!(out, "parent    run {parent}")?;
        }
        if !o.models.is_empty() {
            writeln!(out, "models    {}", o.models.join(", "))?;
        }
        match (&o.first_at, &o.last_at) {
            (Some(first), Some(last)) => writeln!(out, "source    {first} .. {last}")?,
            (Some(at), None) | (None, Some(at)) => writeln!(out, "source    {at}")?,
            (None, None) => {}
        }
        writeln!(
            out,
            "imported  {} (last {}); {} secrets redacted; {} non-message lines and {} side branches ({} messages) skipped",
            o.imported_at,
            o.updated_at,
            o.redactions,
            o.skipped_lines,
            o.side_branches,
            o.side_branch_messages
        )?;
    }
    for e in &report.compactions {
        let at =
            e.at.as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default();
        let summary = e
            .summary
            .as_deref()
            .map(|s| format!(": {}", first_line(s, 80)))
            .unwrap_or_default();
        writeln!(
            out,
            "compacted after seq {}{at} by the source agent{summary}",
            e.after
        )?;
    }
    Ok(())
}

/// `baton runs cancel`.
pub async fn cancel_run(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = env.store.cancel_run(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &RunView::from(&run));
    }
    writeln!(out, "run {} is {}", run.id, run.status.as_str())?;
    Ok(())
}
