//! What each subcommand does. Handlers write data to `out` and return errors; `main` prints the
//! errors and picks the exit code.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use baton_core::units::ProtocolMap;
use baton_core::{ContentBlock, Entry, Message, Run, RunId, Seq, Summary, SummaryId, TenantId};
use baton_postgres::PgStore;
use baton_sqlite::SqliteStore;
use baton_store::{
    Candidate, Install, NewEntry, NewRun, RunReport, SearchKind, SearchQuery, Store,
};
use baton_tokens::TokenizerChoice;
use serde_json::json;

use crate::args::{
    ActivateArgs, AppendArgs, Cli, Command, CreateRunArgs, DiffArgs, HistoryArgs, InstallArgs,
    PinArgs, RecallArgs, RecallKind, ReportCommand, RunsCommand, SummaryCommand, UnpinArgs,
};
use crate::exit::InvalidInput;

/// Everything a handler needs.
pub struct Env {
    /// The store `--db` names.
    pub store: Arc<dyn Store>,
    /// The tenant `--tenant` names.
    pub tenant: TenantId,
    /// Whether `--json` is on.
    pub json: bool,
    /// What `--tokenizer` names.
    pub tokenizer: TokenizerChoice,
}

/// The default database: `$XDG_DATA_HOME/baton/baton.db` (or the platform's equivalent).
pub fn default_db() -> anyhow::Result<PathBuf> {
    let base = directories::BaseDirs::new()
        .ok_or_else(|| anyhow!("no home directory: pass --db PATH or set BATON_DB"))?;
    Ok(base.data_dir().join("baton").join("baton.db"))
}

/// The store a `--db` value names, with its backend still known (for `migrate` and `doctor`).
pub enum Backend {
    /// An embedded SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL schema.
    Postgres(PgStore),
}

impl Backend {
    /// The backend as a store.
    pub fn into_store(self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(s) => Arc::new(s),
            Backend::Postgres(p) => Arc::new(p),
        }
    }
}

/// Opens the store a `--db` value names: `postgres://` or `postgresql://` URLs select
/// PostgreSQL, anything else is a SQLite file path (optionally `sqlite://PATH`). Opening
/// applies missing migrations on both.
pub async fn open_backend(db: Option<&str>) -> anyhow::Result<Backend> {
    let path = match db {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let store = PgStore::connect(url)
                .await
                .with_context(|| format!("opening {}", baton_postgres::redact(url)))?;
            return Ok(Backend::Postgres(store));
        }
        Some(url) => PathBuf::from(url.strip_prefix("sqlite://").unwrap_or(url)),
        None => default_db()?,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating the directory {}", parent.display()))?;
    }
    let store = SqliteStore::open(&path)
        .await
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Backend::Sqlite(store))
}

/// Opens the store a `--db` value names.
pub async fn open_store(db: Option<&str>) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_backend(db).await?.into_store())
}

async fn migrate(db: Option<&str>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let (where_, applied, version) = match open_backend(db).await? {
        Backend::Sqlite(s) => (
            s.path().display().to_string(),
            None,
            baton_sqlite::SCHEMA_VERSION,
        ),
        Backend::Postgres(p) => {
            let applied = p.migrate().await?;
            (
                format!("schema {}", p.schema()),
                Some(applied),
                baton_postgres::SCHEMA_VERSION,
            )
        }
    };
    if json {
        return print_json(out, &json!({ "store": where_, "schema_version": version }));
    }
    match applied {
        Some(applied) if !applied.is_empty() => {
            writeln!(out, "{where_}: migrated to schema version {version}")?
        }
        _ => writeln!(out, "{where_}: schema version {version}, up to date")?,
    }
    Ok(())
}

async fn doctor(db: Option<&str>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let (backend, facts): (&str, Vec<(String, String)>) = match open_backend(db).await? {
        Backend::Sqlite(s) => {
            let mut facts = vec![("path".to_owned(), s.path().display().to_string())];
            facts.push((
                "supported_schema_version".to_owned(),
                baton_sqlite::SCHEMA_VERSION.to_string(),
            ));
            facts.extend(s.doctor().await?);
            ("sqlite", facts)
        }
        Backend::Postgres(p) => {
            let d = p.doctor().await?;
            let mut facts = vec![
                ("url".to_owned(), d.url),
                ("schema".to_owned(), d.schema),
                ("server".to_owned(), d.server_version),
                ("schema_version".to_owned(), d.schema_version.to_string()),
                (
                    "supported_schema_version".to_owned(),
                    d.supported_version.to_string(),
                ),
            ];
            facts.extend(d.settings);
            ("postgres", facts)
        }
    };
    if json {
        let map: serde_json::Map<_, _> = facts.into_iter().map(|(k, v)| (k, json!(v))).collect();
        return print_json(
            out,
            &json!({ "backend": backend, "ok": true, "facts": map }),
        );
    }
    writeln!(out, "ok: {backend} store reachable")?;
    for (key, value) in facts {
        writeln!(out, "  {key:<36} {value}")?;
    }
    Ok(())
}

/// Runs one parsed command line.
pub async fn execute(cli: Cli, out: &mut dyn Write) -> anyhow::Result<()> {
    match cli.command {
        // Boxed: the demo runs command lines through this same function.
        Command::Demo(args) if args.race => {
            return Box::pin(crate::demo::run(cli.db.as_deref(), &cli.tenant, out)).await;
        }
        Command::Migrate => return migrate(cli.db.as_deref(), cli.json, out).await,
        Command::Doctor => return doctor(cli.db.as_deref(), cli.json, out).await,
        Command::Completions(args) => return crate::settings::completions(args.shell, out),
        _ => {}
    }
    let tenant = TenantId::new(cli.tenant.as_str()).context("--tenant")?;
    let tokenizer =
        TokenizerChoice::parse(&cli.tokenizer).map_err(|e| InvalidInput(e.to_string()))?;
    let store = open_store(cli.db.as_deref()).await?;
    let env = Env {
        store,
        tenant,
        json: cli.json,
        tokenizer,
    };
    match cli.command {
        Command::Runs(RunsCommand::Create(args)) => create_run(&env, args, out).await,
        Command::Runs(RunsCommand::List) => list_runs(&env, out).await,
        Command::Runs(RunsCommand::Show(arg)) => show_run(&env, &arg.run, out).await,
        Command::Runs(RunsCommand::Cancel(arg)) => cancel_run(&env, &arg.run, out).await,
        Command::Append(args) => append(&env, args, out).await,
        Command::History(args) => history(&env, args, out).await,
        Command::Recall(args) => recall(&env, args, out).await,
        Command::Import(args) => crate::import::run(&env, args, out).await,
        Command::Summary(SummaryCommand::Install(args)) => install(&env, args, out).await,
        Command::Summary(SummaryCommand::List(arg)) => list_summaries(&env, &arg.run, out).await,
        Command::Summary(SummaryCommand::Show(arg)) => show_summary(&env, arg.id, out).await,
        Command::Summary(SummaryCommand::Diff(args)) => diff_summaries(&env, args, out).await,
        Command::Summary(SummaryCommand::Activate(args)) => activate(&env, args, out).await,
        Command::Chat(args) => crate::chat::run(&env, args, out).await,
        Command::Compact(args) => crate::compaction::compact(&env, args, out).await,
        Command::Replay(args) => crate::compaction::replay_run(&env, args, out).await,
        Command::Report(ReportCommand::Growth(args)) => {
            crate::compaction::growth(&env, args, out).await
        }
        Command::Report(ReportCommand::Duplicates(args)) => {
            crate::duplicates::run(&env, args, out).await
        }
        Command::Call(args) => crate::call::run(&env, args, out).await,
        Command::Ops(command) => crate::ops::run(&env, command, out).await,
        Command::Pin(args) => pin(&env, args, out).await,
        Command::Unpin(args) => unpin(&env, args, out).await,
        Command::Context(arg) => context(&env, &arg.run, out).await,
        Command::Demo(_) => Box::pin(crate::demo_session::run(&env, cli.db.as_deref(), out)).await,
        Command::Serve(args) => crate::serve::run(&env, args, out).await,
        Command::Keys(command) => crate::serve::keys(&env, command, out).await,
        Command::Migrate | Command::Doctor | Command::Completions(_) => Ok(()),
    }
}

fn run_id(s: &str) -> anyhow::Result<RunId> {
    Ok(RunId::new(s)?)
}

pub(crate) fn print_json(out: &mut dyn Write, value: &serde_json::Value) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

fn run_json(run: &Run) -> serde_json::Value {
    json!({
        "id": run.id,
        "tenant": run.tenant,
        "status": run.status,
        "goal": run.goal,
        "rules": run.rules,
        "active_summary_id": run.active_summary_id,
        "last_seq": run.last_seq,
        "created_at": run.created_at,
    })
}

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

async fn create_run(env: &Env, args: CreateRunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
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
        return print_json(out, &run_json(&run));
    }
    writeln!(out, "{}", run.id)?;
    Ok(())
}

async fn list_runs(env: &Env, out: &mut dyn Write) -> anyhow::Result<()> {
    let runs = match env.store.list_runs(&env.tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?,
    };
    if env.json {
        let runs: Vec<_> = runs.iter().map(run_json).collect();
        return print_json(out, &json!({ "runs": runs }));
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

/// `runs show --json`: the run's fields, then `origin` (null for a run not imported),
/// `counts`, the source's `compactions`, and when baton stored the first and last message.
fn report_json(report: &RunReport) -> serde_json::Value {
    let mut value = run_json(&report.run);
    let origin = report.origin.as_ref().map(|o| {
        json!({
            "path": o.path,
            "format": o.format,
            "source_session_id": o.source_session_id,
            "parent_run": o.parent_run,
            "models": o.models,
            "first_at": o.first_at,
            "last_at": o.last_at,
            "skipped_lines": o.skipped_lines,
            "side_branches": o.side_branches,
            "side_branch_messages": o.side_branch_messages,
            "imported_at": o.imported_at,
            "updated_at": o.updated_at,
        })
    });
    let c = &report.counts;
    let compactions: Vec<_> = report
        .compactions
        .iter()
        .map(|e| json!({ "after_seq": e.after, "summary": e.summary, "at": e.at }))
        .collect();
    if let Some(map) = value.as_object_mut() {
        map.insert("origin".into(), json!(origin));
        map.insert(
            "counts".into(),
            json!({
                "messages": c.messages,
                "tool_calls": c.tool_calls,
                "orphan_tool_results": c.orphan_tool_results,
                "dangling_tool_calls": c.dangling_tool_calls,
                "compaction_events": report.compactions.len(),
                "redactions": report.origin.as_ref().map_or(0, |o| o.redactions),
                "bytes": c.bytes,
                "tokens": c.tokens,
            }),
        );
        map.insert("compactions".into(), json!(compactions));
        map.insert("first_message_at".into(), json!(c.first_appended_at));
        map.insert("last_message_at".into(), json!(c.last_appended_at));
    }
    value
}

async fn show_run(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let report = env.store.run_report(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &report_json(&report));
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

async fn cancel_run(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = env.store.cancel_run(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &run_json(&run));
    }
    writeln!(out, "run {} is {}", run.id, run.status.as_str())?;
    Ok(())
}

/// Reads JSONL messages; any bad line rejects the whole batch, naming the line.
fn read_messages(reader: impl BufRead, source: &str) -> anyhow::Result<Vec<Message>> {
    let mut messages = Vec::new();
    for (index, line) in reader.lines().enumerate() {
        let number = index + 1;
        let line = match line {
            Ok(line) => line,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(
                    InvalidInput(format!("{source}: line {number}: not valid UTF-8")).into(),
                );
            }
            Err(e) => {
                return Err(
                    anyhow::Error::new(e).context(format!("{source}: reading line {number}"))
                );
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| InvalidInput(format!("{source}: line {number}: not valid JSON: {e}")))?;
        let message = baton_wire::parse_message(&value)
            .map_err(|e| InvalidInput(format!("{source}: line {number}: {e}")))?;
        messages.push(message);
    }
    Ok(messages)
}

async fn append(env: &Env, args: AppendArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let messages = match args.file.as_deref().filter(|p| *p != Path::new("-")) {
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("--file: opening {}", path.display()))?;
            read_messages(std::io::BufReader::new(file), &path.display().to_string())?
        }
        None => read_messages(std::io::stdin().lock(), "stdin")?,
    };
    let counter = baton_tokens::counter(env.tokenizer, None);
    let entries: Vec<_> = messages
        .into_iter()
        .map(|m| NewEntry::counted(m, &*counter))
        .collect();
    let seqs = env.store.append(&env.tenant, &run, &entries).await?;
    if env.json {
        return print_json(out, &json!({ "seqs": seqs }));
    }
    match (seqs.first(), seqs.last()) {
        (Some(first), Some(last)) if first == last => {
            writeln!(out, "appended 1 message: seq {first}")?
        }
        (Some(first), Some(last)) => writeln!(
            out,
            "appended {} messages: seqs {first}..{last}",
            seqs.len()
        )?,
        _ => writeln!(out, "appended nothing: the input had no messages")?,
    }
    Ok(())
}

/// One line describing a block, for people.
fn describe_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => first_line(text, 160),
        ContentBlock::Thinking { thinking, .. } => {
            format!("(thinking) {}", first_line(thinking, 120))
        }
        ContentBlock::RedactedThinking { .. } => "(redacted thinking)".to_owned(),
        ContentBlock::ToolUse { id, name, input } => {
            format!(
                "tool_use {name} [{id}] {}",
                first_line(&input.to_string(), 100)
            )
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let body: Vec<_> = content.iter().map(describe_block).collect();
            let error = if *is_error { " error" } else { "" };
            format!(
                "tool_result [{tool_use_id}]{error} {}",
                first_line(&body.join(" "), 100)
            )
        }
        ContentBlock::Image { .. } => "(image)".to_owned(),
        ContentBlock::Document { title, .. } => {
            format!(
                "(document{})",
                title
                    .as_deref()
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default()
            )
        }
    }
}

fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let more = line.len() < text.trim().len();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        return format!("{cut}…");
    }
    if more {
        return format!("{line} …");
    }
    line.to_owned()
}

fn print_entry(out: &mut dyn Write, entry: &Entry) -> anyhow::Result<()> {
    let role = entry.message.role.as_str();
    let mut blocks = entry.message.content.iter();
    match blocks.next() {
        None => writeln!(out, "{:>6} {:<9} (empty)", entry.seq, role)?,
        Some(first) => {
            writeln!(
                out,
                "{:>6} {:<9} {}",
                entry.seq,
                role,
                describe_block(first)
            )?;
            for block in blocks {
                writeln!(out, "{:>6} {:<9} {}", "", "", describe_block(block))?;
            }
        }
    }
    Ok(())
}

async fn history(env: &Env, args: HistoryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    if args.check {
        let window = env
            .store
            .protocol_window(&env.tenant, &run, Seq::ZERO)
            .await?;
        let map = ProtocolMap::analyze(Seq::ZERO, &window);
        let problems = map.problems();
        let entries = env
            .store
            .read_range(&env.tenant, &run, Seq(1), None)
            .await?;
        let between = crate::check::user_between(&entries);
        if env.json {
            let mut all = serde_json::to_value(problems)?;
            if let Some(list) = all.as_array_mut() {
                list.extend(between.iter().filter_map(|b| serde_json::to_value(b).ok()));
            }
            print_json(out, &json!({ "messages": window.len(), "problems": all }))?;
        } else if problems.is_empty() && between.is_empty() {
            writeln!(out, "ok: {} messages, every tool call paired", window.len())?;
        } else {
            for problem in problems {
                let line = match problem {
                    baton_core::units::Problem::OrphanResult { seq, tool_use_id } => {
                        format!(
                            "seq {seq}: tool_result for {tool_use_id} has no tool_use in this run"
                        )
                    }
                    baton_core::units::Problem::DanglingUse { seq, tool_use_id } => {
                        format!("seq {seq}: tool_use {tool_use_id} has no tool_result")
                    }
                    baton_core::units::Problem::ResultBeforeUse { seq, tool_use_id } => {
                        format!(
                            "seq {seq}: tool_result for {tool_use_id} comes before its tool_use"
                        )
                    }
                    baton_core::units::Problem::DuplicateUse { seq, tool_use_id } => {
                        format!("seq {seq}: tool_use id {tool_use_id} was already used")
                    }
                };
                writeln!(out, "{line}")?;
            }
            for b in &between {
                let (seq, id) = (b.seq, &b.tool_use_id);
                writeln!(
                    out,
                    "seq {seq}: a user message between tool_use {id} and its tool_result"
                )?;
            }
        }
        if !problems.is_empty() || !between.is_empty() {
            return Err(anyhow!(
                "history check: {} tool-pairing problem(s) in run {run}",
                problems.len() + between.len()
            ));
        }
        return Ok(());
    }
    let from = Seq(args.from.unwrap_or(1));
    let entries = env
        .store
        .read_range(&env.tenant, &run, from, args.to.map(Seq))
        .await?;
    if env.json {
        return print_json(out, &json!({ "messages": entries }));
    }
    for entry in &entries {
        print_entry(out, entry)?;
    }
    Ok(())
}

/// Parses `12`, `10..20` or `10..` into an inclusive range.
fn parse_recall_range(what: &str) -> anyhow::Result<(Seq, Option<Seq>)> {
    let bad = || {
        InvalidInput(format!(
            "recall {what:?}: expected a seq (12) or a range (10..20, 10..)"
        ))
    };
    let number = |s: &str| s.trim().parse::<u64>().map_err(|_| bad());
    match what.split_once("..") {
        None => {
            let seq = number(what)?;
            Ok((Seq(seq), Some(Seq(seq))))
        }
        Some((from, "")) => Ok((Seq(number(from)?), None)),
        Some((from, to)) => {
            let (from, to) = (number(from)?, number(to)?);
            if to < from {
                return Err(InvalidInput(format!(
                    "recall {what:?}: the range ends before it starts"
                ))
                .into());
            }
            Ok((Seq(from), Some(Seq(to))))
        }
    }
}

/// One entry in full, for people: a header line, then every block whole.
fn print_full_entry(out: &mut dyn Write, entry: &Entry) -> anyhow::Result<()> {
    writeln!(
        out,
        "── seq {} · {} · {} · {} tokens",
        entry.seq,
        entry.message.role.as_str(),
        entry.created_at,
        entry.tokens
    )?;
    for block in &entry.message.content {
        match block {
            ContentBlock::Text { text } => writeln!(out, "{text}")?,
            ContentBlock::Thinking { thinking, .. } => writeln!(out, "(thinking) {thinking}")?,
            ContentBlock::ToolUse { id, name, input } => {
                writeln!(out, "tool_use {name} [{id}]")?;
                writeln!(out, "{}", serde_json::to_string_pretty(input)?)?;
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let error = if *is_error { " (error)" } else { "" };
                writeln!(out, "tool_result [{tool_use_id}]{error}")?;
                for inner in content {
                    match inner {
                        ContentBlock::Text { text } => writeln!(out, "{text}")?,
                        other => writeln!(out, "{}", describe_block(other))?,
                    }
                }
            }
            other => writeln!(out, "{}", describe_block(other))?,
        }
    }
    Ok(())
}

async fn recall(env: &Env, args: RecallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let entries = match (&args.grep, &args.what) {
        (Some(pattern), _) => {
            let kind = args.kind.map(|k| match k {
                RecallKind::Text => SearchKind::Text,
                RecallKind::ToolUse => SearchKind::ToolUse,
                RecallKind::ToolResult => SearchKind::ToolResult,
            });
            let query = SearchQuery {
                pattern: pattern.clone(),
                kind,
                limit: args.limit,
            };
            env.store.search(&env.tenant, &run, &query).await?
        }
        (None, Some(what)) => {
            let (from, to) = parse_recall_range(what)?;
            let entries = env.store.read_range(&env.tenant, &run, from, to).await?;
            if entries.is_empty() {
                let last = env.store.run(&env.tenant, &run).await?.last_seq;
                return Err(
                    InvalidInput(format!("recall {what}: run {run} has seqs 1..{last}")).into(),
                );
            }
            entries
        }
        (None, None) => {
            return Err(InvalidInput("recall: give a seq, a range or --grep".into()).into());
        }
    };
    if env.json {
        return print_json(out, &json!({ "messages": entries }));
    }
    if entries.is_empty() {
        writeln!(out, "no message of run {run} matches")?;
    }
    for entry in &entries {
        print_full_entry(out, entry)?;
    }
    Ok(())
}

async fn install(env: &Env, args: InstallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
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
                return print_json(out, &json!({ "id": summary.id }));
            }
            writeln!(out, "{}", summary.id)?;
            Ok(())
        }
        Install::Rejected(why) => {
            Err(anyhow::Error::new(why).context(format!("summary install on run {run}")))
        }
    }
}

fn summary_meta(summary: &Summary, active: Option<SummaryId>) -> serde_json::Value {
    json!({
        "id": summary.id,
        "coverage": summary.coverage,
        "previous_id": summary.previous_id,
        "claims": summary.claims.len(),
        "active": Some(summary.id) == active,
        "created_at": summary.created_at,
    })
}

async fn list_summaries(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(run)?;
    let active = env.store.run(&env.tenant, &run).await?.active_summary_id;
    let summaries = env.store.summaries(&env.tenant, &run).await?;
    if env.json {
        let list: Vec<_> = summaries.iter().map(|s| summary_meta(s, active)).collect();
        return print_json(out, &json!({ "summaries": list }));
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

async fn show_summary(env: &Env, id: u64, out: &mut dyn Write) -> anyhow::Result<()> {
    let summary = env.store.summary(&env.tenant, SummaryId(id)).await?;
    if env.json {
        return print_json(out, &serde_json::to_value(&summary)?);
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

async fn context(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let ctx = env.store.context(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &serde_json::to_value(&ctx)?);
    }
    if let Some(preamble) = ctx.preamble() {
        writeln!(out, "{}", preamble.plain_text())?;
        writeln!(out)?;
    }
    let from = ctx.summary.as_ref().map_or(Seq(1), |s| s.coverage.next());
    let n = ctx.messages.len();
    let plural = if n == 1 { "" } else { "s" };
    writeln!(out, "# Messages from seq {from} ({n} message{plural})")?;
    for entry in &ctx.messages {
        print_entry(out, entry)?;
    }
    for problem in &ctx.problems {
        writeln!(out, "warning: {}", serde_json::to_string(problem)?)?;
    }
    writeln!(out)?;
    writeln!(out, "tokens: {} (estimated)", ctx.tokens)?;
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

async fn diff_summaries(env: &Env, args: DiffArgs, out: &mut dyn Write) -> anyhow::Result<()> {
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

async fn activate(env: &Env, args: ActivateArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let base = base_arg(&args.base, "--base")?;
    match env
        .store
        .activate_summary(&env.tenant, &run, SummaryId(args.id), base)
        .await?
    {
        Install::Installed(summary) => {
            if env.json {
                return print_json(
                    out,
                    &json!({"id": summary.id, "coverage": summary.coverage}),
                );
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

async fn pin(env: &Env, args: PinArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    // Every seq is checked before any is pinned, so a bad one pins nothing.
    let last = env.store.run(&env.tenant, &run).await?.last_seq;
    if let Some(bad) = args.seqs.iter().find(|s| **s == 0 || Seq(**s) > last) {
        return Err(baton_store::Error::SeqNotFound {
            run,
            seq: Seq(*bad),
            last,
        }
        .into());
    }
    for seq in &args.seqs {
        env.store.pin(&env.tenant, &run, Seq(*seq)).await?;
    }
    let pins = env.store.pins(&env.tenant, &run).await?;
    if env.json {
        return print_json(out, &json!({ "pins": pins }));
    }
    match pins.as_slice() {
        [] => writeln!(out, "run {run} has no pinned messages")?,
        _ => writeln!(
            out,
            "run {run}: pinned {}",
            pins.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )?,
    }
    Ok(())
}

async fn unpin(env: &Env, args: UnpinArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let mut not_pinned = Vec::new();
    for seq in &args.seqs {
        if !env.store.unpin(&env.tenant, &run, Seq(*seq)).await? {
            not_pinned.push(seq.to_string());
        }
    }
    let pins = env.store.pins(&env.tenant, &run).await?;
    if !not_pinned.is_empty() && !env.json {
        writeln!(out, "run {run}: {} was not pinned", not_pinned.join(", "))?;
    }
    if env.json {
        return print_json(out, &json!({ "pins": pins }));
    }
    writeln!(
        out,
        "run {run}: pinned {}",
        if pins.is_empty() {
            "nothing".to_owned()
        } else {
            pins.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    )?;
    Ok(())
}
