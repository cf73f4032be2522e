//! `baton append`, `baton history` (and `--check`) and `baton recall`: history in, history out,
//! and how an entry is shown to people.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context as _;
use baton_core::units::ProtocolMap;
use baton_core::{ContentBlock, Entry, Message, Seq};
use baton_store::{NewEntry, SearchKind, SearchQuery};
use baton_view::{Appended, MessageList};
use serde_json::json;

use crate::args::{AppendArgs, HistoryArgs, RecallArgs, RecallKind};
use crate::env::{Env, print_json, run_id};
use crate::exit::{InvalidInput, Reported, Usage};

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

/// `baton append`.
pub async fn append(env: &Env, args: AppendArgs, out: &mut dyn Write) -> anyhow::Result<()> {
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
        return print_json(out, &Appended::of(&seqs, entries.iter().map(|e| e.tokens)));
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
        ContentBlock::ToolReference { tool_name } => format!("(tool {tool_name} made available)"),
        ContentBlock::Opaque { .. } => {
            format!("({} block)", block.opaque_type().unwrap_or("vendor"))
        }
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

/// The first non-blank line of `text`, cut to `max` characters (`…` when more follows).
pub fn first_line(text: &str, max: usize) -> String {
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

/// One entry on one line per block, for people.
pub fn print_entry(out: &mut dyn Write, entry: &Entry) -> anyhow::Result<()> {
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

/// `baton history` (and `--check`).
pub async fn history(env: &Env, args: HistoryArgs, out: &mut dyn Write) -> anyhow::Result<()> {
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
            return Err(Reported(format!(
                "history check: {} tool-pairing problem(s) in run {run}",
                problems.len() + between.len()
            ))
            .into());
        }
        return Ok(());
    }
    let from = Seq(args.from.unwrap_or(1));
    let entries = env
        .store
        .read_range(&env.tenant, &run, from, args.to.map(Seq))
        .await?;
    if env.json {
        return print_json(out, &MessageList::of(&entries));
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
/// What `recall --grep` says when nothing matched: when the words' prefix form would have
/// matched (the store says so, as `Found::prefix_form`), that form and how to ask for it.
fn no_match(
    run: &baton_core::RunId,
    pattern: &str,
    prefix_form: Option<&str>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let pattern = pattern.trim();
    match prefix_form {
        Some(form) => writeln!(
            out,
            "no whole-word match for {pattern:?} in run {run}; words starting with it match: try --grep '{form}'"
        )?,
        None => writeln!(out, "no message of run {run} matches {pattern:?}")?,
    }
    Ok(())
}

/// The most characters of a hit's line `recall --grep` prints.
const SNIPPET_CHARS: usize = 160;

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

/// `baton recall`.
pub async fn recall(env: &Env, args: RecallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.full && args.grep.is_none() {
        return Err(Usage(
            "recall: --full goes with --grep (a seq or a range prints whole messages)".into(),
        )
        .into());
    }
    let run = run_id(&args.run)?;
    let kind = args.kind.map(|k| match k {
        RecallKind::Text => SearchKind::Text,
        RecallKind::ToolUse => SearchKind::ToolUse,
        RecallKind::ToolResult => SearchKind::ToolResult,
    });
    let entries = match (&args.grep, &args.what) {
        (Some(pattern), _) => {
            let query = SearchQuery {
                pattern: pattern.clone(),
                kind,
                limit: args.limit,
            };
            let found = env.store.search(&env.tenant, &run, &query).await?;
            let entries = found.entries;
            if entries.is_empty() && !env.json {
                return no_match(&run, pattern, found.prefix_form.as_deref(), out);
            }
            if !args.full && !env.json {
                for entry in &entries {
                    let line =
                        baton_store::search::snippet(&entry.message, kind, pattern, SNIPPET_CHARS);
                    writeln!(
                        out,
                        "seq {} · {}: {line}",
                        entry.seq,
                        entry.message.role.as_str()
                    )?;
                }
                return Ok(());
            }
            entries
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
        return print_json(out, &MessageList::of(&entries));
    }
    if entries.is_empty() {
        writeln!(out, "no message of run {run} matches")?;
    }
    for entry in &entries {
        print_full_entry(out, entry)?;
    }
    Ok(())
}
