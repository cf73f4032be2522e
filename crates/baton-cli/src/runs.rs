//! `baton runs create|list|show|cancel|delete`.

use std::io::Write;

use anyhow::Context as _;
use baton_core::{Run, Timestamp};
use baton_store::runs::parse_since;
use baton_store::{NewRun, RunQuery, RunSort, RunSummary};
use baton_view::{DeletedRunView, RunList, RunReportView, RunView};

use crate::args::{CreateRunArgs, DeleteRunArgs, ListRunsArgs};
use crate::env::{Env, print_json, run_id};
use crate::exit::{InvalidInput, Usage};
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

/// `baton runs list`: a page of the tenant's runs as [`baton_store::Store::list_run_summaries`]
/// gives it, as a table for people (newest activity first by default) or as JSON.
pub async fn list_runs(env: &Env, args: ListRunsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let since = args
        .since
        .as_deref()
        .map(|s| parse_since(s, Timestamp::now()))
        .transpose()
        .map_err(|e| InvalidInput(format!("--since {e}")))?;
    let query = RunQuery {
        project: args.project.clone(),
        since,
        // clap checked the name against the same list.
        sort: RunSort::parse(&args.sort).unwrap_or(RunSort::Last),
        limit: (!args.all).then_some(args.limit),
        cursor: args.cursor.clone(),
        prices: None,
    };
    let page = env
        .store
        .list_run_summaries(&env.tenant, &query)
        .await
        .map_err(|e| match e {
            baton_store::Error::InvalidQuery { detail } => {
                anyhow::Error::new(InvalidInput(format!("--{detail}")))
            }
            other => other.into(),
        })?;
    if env.json || args.format == "json" {
        return print_json(out, &RunList::from(&page));
    }
    if page.runs.is_empty() {
        let filtered = args.project.is_some() || args.since.is_some() || args.cursor.is_some();
        match filtered {
            true => writeln!(out, "no runs match")?,
            false => writeln!(out, "no runs for tenant {}", env.tenant)?,
        }
        return Ok(());
    }
    print_table(out, &page.runs)?;
    let shown = page.runs.len() as u64;
    if let Some(cursor) = &page.next_cursor {
        writeln!(
            out,
            "{shown} of {} runs shown; more with --limit N, --all, or --cursor {cursor}",
            page.total
        )?;
    }
    Ok(())
}

/// The runs as a table: id, last activity (UTC), agent, model, project (its last path
/// component), messages, tokens, cost, and the title last, cut to what fits.
fn print_table(out: &mut dyn Write, runs: &[RunSummary]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<36}  {:<16}  {:<11}  {:<24}  {:<16}  {:>5}  {:>7}  {:>8}  title",
        "id", "last activity", "agent", "model", "project", "msgs", "tokens", "cost"
    )?;
    for r in runs {
        let project = r
            .project
            .as_deref()
            .map(|p| p.trim_end_matches(['/', '\\']))
            .map(|p| p.rsplit(['/', '\\']).next().unwrap_or(p));
        let cost = match r.cost {
            Some(c) if r.usage_estimated => format!("~${c:.2}"),
            Some(c) => format!("${c:.2}"),
            None => "-".to_owned(),
        };
        let title = match (&r.parent_run, r.title.as_deref()) {
            (Some(_), Some(t)) => format!("↳ {t}"),
            (Some(_), None) => "↳ (subagent)".to_owned(),
            (None, Some(t)) => t.to_owned(),
            (None, None) => "-".to_owned(),
        };
        writeln!(
            out,
            "{:<36}  {:<16}  {:<11}  {:<24}  {:<16}  {:>5}  {:>7}  {:>8}  {}",
            r.run.id,
            r.last_activity.map_or("-".to_owned(), minute),
            cut(r.agent.as_deref().unwrap_or("baton"), 11),
            cut(r.models.first().map_or("-", String::as_str), 24),
            cut(project.unwrap_or("-"), 16),
            r.messages,
            human(r.tokens),
            cost,
            cut(&title, 60)
        )?;
    }
    Ok(())
}

/// `2026-02-03 09:30`: a time to the minute, UTC.
fn minute(t: Timestamp) -> String {
    let text = t.to_string();
    text.get(..16)
        .map_or(text.clone(), |s| s.replacen('T', " ", 1))
}

/// At most `n` characters, the last one `…` when cut.
fn cut(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A count for people: `950`, `12.3k`, `4.1M`.
fn human(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// `baton runs delete`: without `--yes`, says what would go and deletes nothing (exit 2).
pub async fn delete_run(env: &Env, args: DeleteRunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let id = run_id(&args.run)?;
    if !args.yes {
        let report = env.store.run_report(&env.tenant, &id).await?;
        let all = RunQuery::default();
        let subagents = env
            .store
            .list_run_summaries(&env.tenant, &all)
            .await?
            .runs
            .iter()
            .find(|r| r.run.id == id)
            .map_or(0, |r| r.subagents);
        let with = match subagents {
            0 => String::new(),
            1 => " and its subagent run".to_owned(),
            n => format!(" and its {n} subagent runs"),
        };
        return Err(Usage(format!(
            "runs delete: this removes run {id} ({} messages){with} for good, from every table; \
             nothing was deleted (pass --yes to delete it: `baton runs delete {id} --yes`)",
            report.run.last_seq
        ))
        .into());
    }
    let deleted = env.store.delete_run(&env.tenant, &id).await?;
    if env.json {
        return print_json(out, &DeletedRunView::from(&deleted));
    }
    let total: u64 = deleted.messages;
    match deleted.subagents.as_slice() {
        [] => writeln!(out, "deleted run {} ({total} messages)", deleted.run)?,
        subagents => writeln!(
            out,
            "deleted run {} and its {} ({total} messages in all): {}",
            deleted.run,
            if subagents.len() == 1 {
                "subagent run".to_owned()
            } else {
                format!("{} subagent runs", subagents.len())
            },
            subagents
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )?,
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
    let prices = baton_core::prices::PriceTable::defaults();
    for u in &report.usage {
        let t = &u.usage;
        let cost = u
            .model
            .as_deref()
            .and_then(|m| prices.get(m))
            .map_or("no price".to_owned(), |p| {
                format!("${:.2}", p.usage_cost(t))
            });
        writeln!(
            out,
            "usage     {}{}: {} responses, {} input, {} output, {} cache writes ({} of them 1-hour), {} cache reads; {cost}",
            u.model.as_deref().unwrap_or("unknown model"),
            if u.estimated { " (estimated)" } else { "" },
            u.responses,
            t.input,
            t.output,
            t.cache_write(),
            t.cache_write_1h,
            t.cache_read,
        )?;
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
