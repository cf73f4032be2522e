//! `baton import`: agent session logs on disk become runs.
//!
//! Each file is read, its format told from its content (or taken from `--format`), parsed by
//! `baton-import` into transcripts, redacted, counted (each transcript with the counter
//! `--tokenizer` means for its model), and handed to the store as one import: one
//! transaction per file, so a file that fails stores nothing while the others go on. The store
//! finds a source imported before by its source key and reports it (or, with `--reimport`,
//! appends what it gained). A directory is walked recursively, in path order; in a walk, files
//! that are not transcripts are skipped and counted, while a file named on the command line
//! that is not one fails.
//!
//! A file changed in the last ten minutes may still be being written by its agent: it is
//! imported up to its last complete unit, so importing it again later extends the run instead
//! of finding its last message changed. Each transcript's usage records go with it; the store
//! keeps one per response.
//!
//! Files are prepared (read, parsed, redacted, tokenized) on one thread per core, up to 32
//! files or 32 MiB of them ahead of the store (`crate::ahead`), and stored one transaction each
//! in path order, so the report and the store see the same order as a sequential import.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use baton_core::RunId;
use baton_core::units::Problem;
use baton_import::{Format, Transcript};
use baton_store::{ImportRejection, Imported, NewImport, Reimport};
use baton_tokens::TokenizerChoice;
use baton_watch::Parsed;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;

use crate::ahead::{ReadAhead, Window};
use crate::args::{ImportArgs, ImportFormat};
use crate::env::{Env, print_json};
use crate::exit::{InvalidInput, NotFound, Reported};

/// Files prepared ahead of the store: enough to keep every core busy while the store writes
/// a large file (aider's history, a thousand runs, takes the store a third of the corpus's
/// import), within [`READ_AHEAD_BYTES`] of them, so memory stays bounded whatever the tree.
const READ_AHEAD: usize = 32;

/// The bytes of files prepared ahead of the store, at most (the next file is read whatever its
/// size). Prepared, a file takes a few times its size (its messages, their JSON and digests).
const READ_AHEAD_BYTES: u64 = 32 << 20;

/// More files than this get a progress bar (on a terminal, without `--quiet` or `--json`).
const PROGRESS_FROM: usize = 5;

/// One transcript's line in the report.
#[derive(Serialize)]
struct RunLine {
    id: RunId,
    source: String,
    format: &'static str,
    /// `created`, `up_to_date`, `grown`, `extended` or `deleted` (its run was deleted; nothing
    /// stored).
    status: &'static str,
    source_session_id: Option<String>,
    /// Messages in the transcript.
    messages: usize,
    /// Tool calls in the transcript.
    tool_calls: usize,
    /// Messages appended by this import (all of them for a new run).
    appended: u64,
    /// Tool calls in the messages appended.
    appended_tool_calls: u64,
    /// Messages the source gained that were not appended (without `--reimport`).
    not_appended: u64,
    compactions: usize,
    redactions: usize,
    /// Whether it is a subagent's transcript (its own file, or inline in its parent's).
    subagent: bool,
    /// User messages typed while the agent worked (queued), imported where delivered.
    queued_messages: usize,
    /// Messages of a file still being written left for a later import: the source's last
    /// response still streaming, a queued message not yet delivered.
    still_being_written: usize,
    problems: Vec<Problem>,
}

/// A file that failed or was passed over.
#[derive(Serialize)]
struct FileLine {
    path: String,
    #[serde(rename = "error")]
    reason: String,
}

#[derive(Default, Serialize)]
struct Totals {
    files: usize,
    created: usize,
    up_to_date: usize,
    grown: usize,
    extended: usize,
    /// Sources whose run was deleted: nothing stored.
    deleted: usize,
    messages: u64,
    tool_calls: u64,
    /// Runs created for subagents.
    subagents: usize,
    /// Queued user messages in the runs created or extended.
    queued_messages: usize,
    /// Messages of live files left for a later import (each run's `still_being_written`).
    still_being_written: usize,
    redactions: usize,
    skipped: usize,
    failed: usize,
}

/// A file to read, and whether the user named it (rather than a walk finding it).
struct Source {
    path: PathBuf,
    named: bool,
}

/// Runs `baton import`.
pub async fn run(env: &Env, args: ImportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run_id = args
        .run
        .as_deref()
        .map(RunId::new)
        .transpose()
        .map_err(|e| InvalidInput(format!("--run: {e}")))?;
    let reimport = if args.restore {
        Reimport::Restore
    } else if args.reimport {
        Reimport::AppendNew
    } else {
        Reimport::No
    };
    let mut failed = Vec::new();
    let sources = collect(&args.paths, &mut failed);
    if run_id.is_some() && (sources.len() != 1 || !failed.is_empty()) {
        return Err(InvalidInput(format!(
            "--run names one run: give exactly one transcript file ({} found)",
            sources.len()
        ))
        .into());
    }
    let quiet = args.quiet || env.json;
    let bar = progress_bar(sources.len(), quiet);
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut totals = Totals {
        files: sources.len(),
        ..Totals::default()
    };
    let sources = std::sync::Arc::new(sources);
    let mut ahead = {
        let (sources, format, run, tokenizer, as_new) = (
            sources.clone(),
            args.format,
            run_id.clone(),
            env.tokenizer,
            args.as_new,
        );
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let window = Window {
            jobs: READ_AHEAD.max(2 * cores),
            budget: READ_AHEAD_BYTES,
            bytes: sources
                .iter()
                .map(|s| std::fs::metadata(&s.path).map_or(0, |m| m.len()))
                .collect(),
        };
        ReadAhead::start(sources.len(), cores, window, move |i| {
            read(&sources[i], format, run.as_ref(), tokenizer, as_new)
        })
    };
    for source in sources.iter() {
        bar.set_message(file_name(&source.path));
        let shown = source.path.display().to_string();
        let Some(read) = ahead.next().await else {
            anyhow::bail!("import: the read-ahead ended before {shown}");
        };
        match read {
            Ok(Read::Skipped { reason, held }) => {
                totals.still_being_written += held;
                skipped.push(FileLine {
                    path: shown,
                    reason,
                });
            }
            Ok(Read::File {
                format,
                transcripts,
                imports,
                counts,
                held_without_run,
            }) => {
                match env.store.import(&env.tenant, imports, reimport).await {
                    Ok(outcomes) => {
                        totals.still_being_written += held_without_run;
                        let lines: Vec<RunLine> = transcripts
                            .iter()
                            .zip(&outcomes)
                            .zip(counts)
                            .map(|((t, o), (r, held))| run_line(&shown, format, t, o, r, held))
                            .collect();
                        if !quiet {
                            bar.suspend(|| print_file(out, &shown, format, &lines))?;
                        }
                        runs.extend(lines);
                    }
                    Err(err) => {
                        let edited = matches!(
                            &err,
                            baton_store::Error::Import(
                                ImportRejection::Diverged { .. }
                                    | ImportRejection::LastMessageChanged { .. }
                            )
                        );
                        // Where the first changed message starts, for the formats that say.
                        let line = match &err {
                            baton_store::Error::Import(ImportRejection::Diverged {
                                index,
                                first: Some(d),
                                ..
                            }) => (d.seq.0 as usize)
                                .checked_sub(1)
                                .and_then(|k| transcripts.get(*index)?.messages.get(k)?.line)
                                .map(|line| (d.seq, line)),
                            _ => None,
                        };
                        let mut reason = format!("{:#}", anyhow::Error::new(err));
                        if let Some((seq, line)) = line {
                            reason.push_str(&format!(
                                " (message {seq} is on line {line} of the file)"
                            ));
                        }
                        if edited {
                            reason.push_str(" (`baton import --as-new` imports it as a new run)");
                        }
                        failed.push(FileLine {
                            path: shown,
                            reason,
                        })
                    }
                }
            }
            Err(reason) => failed.push(FileLine {
                path: shown,
                reason,
            }),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    for line in &runs {
        totals.messages += line.appended;
        totals.redactions += line.redactions;
        totals.tool_calls += line.appended_tool_calls;
        if line.status == "created" && line.subagent {
            totals.subagents += 1;
        }
        if matches!(line.status, "created" | "extended") {
            totals.queued_messages += line.queued_messages;
        }
        // A deleted run's source stores nothing, now or later.
        if line.status != "deleted" {
            totals.still_being_written += line.still_being_written;
        }
        match line.status {
            "created" => totals.created += 1,
            "up_to_date" => totals.up_to_date += 1,
            "grown" => totals.grown += 1,
            "deleted" => totals.deleted += 1,
            _ => totals.extended += 1,
        }
    }
    totals.skipped = skipped.len();
    totals.failed = failed.len();
    let history = match &args.history {
        Some(path) => Some(history(env, path).await?),
        None => None,
    };
    if env.json {
        let mut report =
            json!({ "runs": runs, "failed": failed, "skipped": skipped, "totals": totals });
        if let Some(h) = &history {
            report["history"] = serde_json::to_value(h)?;
        }
        print_json(out, &report)?;
    } else {
        if let (Some(h), false) = (&history, args.quiet) {
            print_history(out, h)?;
        }
        let mut err = std::io::stderr().lock();
        for f in &failed {
            writeln!(err, "baton: import: {}: {}", f.path, f.reason)?;
        }
        let history_only = args.paths.is_empty() && history.is_some();
        if !args.quiet && !history_only {
            // A file skipped for now is named: the user may be waiting for it.
            let early: Vec<&FileLine> = skipped
                .iter()
                .filter(|f| f.reason == STILL_WRITTEN)
                .collect();
            for f in &early {
                writeln!(out, "{}: skipped: {}", f.path, f.reason)?;
            }
            print_totals(out, &totals, early.len())?;
        }
    }
    if !failed.is_empty() {
        // Reported: the files that failed are in the report already (its one object with --json).
        return Err(Reported(format!(
            "import: {} file(s) failed, and nothing of them was stored",
            failed.len()
        ))
        .into());
    }
    Ok(())
}

/// What `import --history` did with a prompt history.
#[derive(Default, Serialize)]
struct HistoryReport {
    path: String,
    /// Prompts read.
    prompts: usize,
    /// Sessions (session ids) they belong to.
    sessions: usize,
    /// Sessions imported from their own files already: their prompts are in those runs.
    imported: usize,
    /// Sessions whose file is still under the history's `projects/` but not imported yet (to
    /// import with `baton import`, which keeps the whole session, not just its prompts).
    on_disk: usize,
    /// Sessions whose file is gone, and the project groups of prompts without a session id:
    /// each a run of its prompts.
    recovered: usize,
    /// Of those, runs created, extended (the history gained prompts) and up to date.
    created: usize,
    extended: usize,
    up_to_date: usize,
    /// Recovered runs the user deleted since: not brought back (`--restore` does).
    deleted: usize,
    /// Prompts stored by this import.
    prompts_stored: u64,
    /// Prompts without a session id (older Claude Code), kept in one run per project.
    without_session: usize,
    /// The recovered runs.
    runs: Vec<RunId>,
}

/// `import --history FILE`: the prompts of each session whose file is gone become a run (see
/// `baton_import::formats::history`); a session imported from its own file is left alone, and
/// one whose file is still on disk is counted, to be imported whole. One transaction: a
/// history that fails stores nothing. Idempotent: the runs are found again by source key and
/// extended only by prompts added since.
async fn history(env: &Env, path: &Path) -> anyhow::Result<HistoryReport> {
    let shown = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(NotFound(format!("--history {shown}: no such file")).into());
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("--history {shown}"))),
    };
    let transcripts = baton_import::formats::history::parse(&bytes)
        .map_err(|e| InvalidInput(format!("--history {shown}: {e}")))?;
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let on_disk = session_files(&absolute);
    let mut report = HistoryReport {
        path: shown,
        ..HistoryReport::default()
    };
    let mut imports = Vec::new();
    let mut kept = Vec::new();
    let place = absolute.display().to_string();
    for mut t in transcripts {
        report.prompts += t.messages.len();
        match t.source_session_id.clone() {
            Some(id) => {
                report.sessions += 1;
                let key = format!("{}:{id}", Format::ClaudeCode.name());
                if env.store.source_run(&env.tenant, &key).await?.is_some() {
                    report.imported += 1;
                    continue;
                }
                if on_disk.contains(&id) {
                    report.on_disk += 1;
                    continue;
                }
            }
            None => report.without_session += t.messages.len(),
        }
        report.recovered += 1;
        let counter = baton_tokens::counter(env.tokenizer, None);
        let (import, _) = t.to_import(&place, None, &*counter);
        imports.push(import);
        kept.push(t);
    }
    if imports.is_empty() {
        return Ok(report);
    }
    let outcomes = env
        .store
        .import(&env.tenant, imports, Reimport::AppendNew)
        .await
        .with_context(|| format!("--history {}", report.path))?;
    for (outcome, t) in outcomes.iter().zip(&kept) {
        match outcome {
            Imported::Created(_) => {
                report.created += 1;
                report.prompts_stored += t.messages.len() as u64;
            }
            Imported::Extended { appended, .. } => {
                report.extended += 1;
                report.prompts_stored += appended;
            }
            Imported::UpToDate(_) | Imported::Grown { .. } => report.up_to_date += 1,
            Imported::Deleted { .. } => report.deleted += 1,
        }
        report.runs.push(outcome.id().clone());
    }
    Ok(report)
}

/// The session ids of the Claude Code session files beside a history file
/// (`<dir>/projects/<project>/<session>.jsonl`).
fn session_files(history: &Path) -> std::collections::BTreeSet<String> {
    let Some(projects) = history.parent().map(|d| d.join("projects")) else {
        return Default::default();
    };
    walkdir::WalkDir::new(projects)
        .max_depth(2)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "jsonl").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect()
}

fn print_history(out: &mut dyn Write, h: &HistoryReport) -> std::io::Result<()> {
    let mut parts = vec![format!(
        "{}: {} of {}",
        h.path,
        plural(h.prompts, "prompt"),
        plural(h.sessions, "session")
    )];
    if h.imported > 0 {
        parts.push(format!("{} imported from their files already", h.imported));
    }
    if h.recovered > 0 {
        parts.push(format!(
            "{} recovered from the history ({} created, {} extended, {} up to date; {} stored)",
            plural(h.recovered, "run"),
            h.created,
            h.extended,
            h.up_to_date,
            plural(h.prompts_stored as usize, "prompt")
        ));
    }
    if h.without_session > 0 {
        parts.push(format!(
            "{} without a session id kept per project",
            plural(h.without_session, "prompt")
        ));
    }
    if h.on_disk > 0 {
        parts.push(format!(
            "{} still on disk and not imported (`baton import` its folder for the whole session)",
            plural(h.on_disk, "session")
        ));
    }
    writeln!(out, "{}", parts.join("; "))
}

/// The files the paths name: each file itself, each directory walked in path order.
fn collect(paths: &[PathBuf], failed: &mut Vec<FileLine>) -> Vec<Source> {
    let mut sources = Vec::new();
    for path in paths {
        if !path.is_dir() {
            if path.exists() {
                sources.push(Source {
                    path: path.clone(),
                    named: true,
                });
            } else {
                failed.push(FileLine {
                    path: path.display().to_string(),
                    reason: "no such file or directory".into(),
                });
            }
            continue;
        }
        for entry in walkdir::WalkDir::new(path).sort_by_file_name() {
            match entry {
                Ok(entry) if entry.file_type().is_file() => sources.push(Source {
                    path: entry.into_path(),
                    named: false,
                }),
                Ok(_) => {}
                Err(err) => failed.push(FileLine {
                    path: err.path().unwrap_or(path).display().to_string(),
                    reason: err.to_string(),
                }),
            }
        }
    }
    sources
}

enum Read {
    /// A file passed over, and why: a walked file that is not a transcript, or a live file with
    /// nothing complete in it yet (`held` messages read and left for a later import).
    Skipped { reason: String, held: usize },
    /// A file's transcripts and what to import of them.
    File {
        format: Format,
        transcripts: Vec<Transcript>,
        imports: Vec<NewImport>,
        /// Each transcript's redactions and messages left for a later import.
        counts: Vec<(usize, usize)>,
        /// Messages left for a later import in transcripts that make no run yet.
        held_without_run: usize,
    },
}

impl Read {
    fn skipped(reason: impl Into<String>) -> Read {
        Read::Skipped {
            reason: reason.into(),
            held: 0,
        }
    }
}

/// Reads, detects, parses, redacts and counts one file (each transcript with the counter
/// `tokenizer` means for its first model); the error is the reason it failed.
fn read(
    source: &Source,
    format: ImportFormat,
    run: Option<&RunId>,
    tokenizer: TokenizerChoice,
    as_new: bool,
) -> Result<Read, String> {
    let live = is_live(&source.path);
    let bytes = std::fs::read(&source.path).map_err(|e| format!("reading: {e}"))?;
    // Of a live file, only what can no longer change; the rest comes with a later import.
    let (format, mut transcripts, held, held_without_run) =
        match baton_watch::parse_bytes(&bytes, format_of(format), live)? {
            Parsed::Transcripts {
                format,
                transcripts,
                held,
                held_without_run,
            } => (format, transcripts, held, held_without_run),
            Parsed::NothingYet { held } => {
                return Ok(Read::Skipped {
                    reason: STILL_WRITTEN.into(),
                    held,
                });
            }
            Parsed::Unrecognized if source.named => {
                return Err(format!(
                    "not a recognized transcript format (tried {}); name one with --format",
                    Format::ALL.map(Format::name).join(", ")
                ));
            }
            Parsed::Unrecognized => {
                return Ok(Read::skipped("not a recognized transcript format"));
            }
            Parsed::Empty(format) => {
                let reason = format!("no {} transcript in it (nothing to import)", format.name());
                if source.named {
                    return Err(reason);
                }
                return Ok(Read::skipped(reason));
            }
        };
    if run.is_some() && transcripts.len() != 1 {
        return Err(format!(
            "--run names one run, but the file holds {} transcripts",
            transcripts.len()
        ));
    }
    // The absolute path: the same file gives the same source key from any directory.
    let path = std::fs::canonicalize(&source.path)
        .unwrap_or_else(|_| source.path.clone())
        .display()
        .to_string();
    let prepare = |t: &mut Transcript| -> Result<(NewImport, usize), String> {
        let counter = baton_tokens::counter(tokenizer, t.models.first().map(String::as_str));
        let (mut import, redacted) = t.to_import(&path, run.cloned(), &*counter);
        if as_new {
            // A source key of its own: a new run, whatever was imported from the source before.
            let id = match run {
                Some(id) => id.clone(),
                None => baton_store::generate_run_id().map_err(|e| e.to_string())?,
            };
            import.origin.source_key = format!("{}@{id}", import.origin.source_key);
            import.id = Some(id);
        }
        Ok((import, redacted))
    };
    // A file of many transcripts (aider's history: a thousand conversations in one file) is
    // the longest job of an import; its transcripts are prepared on every core, in order.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let prepared: Vec<Result<(NewImport, usize), String>> = if transcripts.len() < 2 * cores {
        transcripts.iter_mut().map(prepare).collect()
    } else {
        let chunk = transcripts.len().div_ceil(cores);
        std::thread::scope(|scope| {
            let jobs: Vec<_> = transcripts
                .chunks_mut(chunk)
                .map(|part| scope.spawn(|| part.iter_mut().map(prepare).collect::<Vec<_>>()))
                .collect();
            jobs.into_iter()
                .flat_map(|job| job.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    };
    let (imports, counts): (Vec<NewImport>, Vec<usize>) = prepared
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .unzip();
    let counts = counts.into_iter().zip(held).collect();
    Ok(Read::File {
        format,
        transcripts,
        imports,
        counts,
        held_without_run,
    })
}

/// Why a file being written is skipped for now.
const STILL_WRITTEN: &str =
    "nothing complete in it yet (still being written); the next import brings it";

/// Whether `path` may still be being written: `baton_watch::is_live`, the rule `baton watch`
/// follows too (changed less than `LIVE_WITHIN`, ten minutes, ago; or its time unknown).
fn is_live(path: &Path) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_or(true, |t| baton_watch::is_live(t, baton_watch::LIVE_WITHIN))
}

fn format_of(format: ImportFormat) -> Option<Format> {
    match format {
        ImportFormat::Auto => None,
        ImportFormat::ClaudeCode => Some(Format::ClaudeCode),
        ImportFormat::Codex => Some(Format::Codex),
        ImportFormat::Openhands => Some(Format::OpenHands),
        ImportFormat::SweAgent => Some(Format::SweAgent),
        ImportFormat::Openai => Some(Format::OpenAi),
        ImportFormat::Anthropic => Some(Format::Anthropic),
        ImportFormat::Aider => Some(Format::Aider),
    }
}

fn run_line(
    source: &str,
    format: Format,
    t: &Transcript,
    outcome: &Imported,
    redactions: usize,
    still_being_written: usize,
) -> RunLine {
    let (status, appended, not_appended) = match outcome {
        Imported::Created(_) => ("created", t.messages.len() as u64, 0),
        Imported::UpToDate(_) => ("up_to_date", 0, 0),
        Imported::Grown { new, .. } => ("grown", 0, *new),
        Imported::Extended { appended, .. } => ("extended", *appended, 0),
        Imported::Deleted { .. } => ("deleted", 0, 0),
    };
    let first_appended = t.messages.len().saturating_sub(appended as usize);
    let appended_tool_calls = t.messages[first_appended..]
        .iter()
        .map(|m| m.message.tool_use_ids().count() as u64)
        .sum();
    RunLine {
        id: outcome.id().clone(),
        source: source.to_owned(),
        format: format.name(),
        status,
        source_session_id: t.source_session_id.clone(),
        messages: t.messages.len(),
        tool_calls: t.tool_calls(),
        appended,
        appended_tool_calls,
        not_appended,
        compactions: t.compactions.len(),
        redactions,
        subagent: t.parent_session_id.is_some() || t.parent_tool_use_id.is_some(),
        queued_messages: t.queued,
        still_being_written,
        problems: t.problems(),
    }
}

/// One line per file, then what needs a word: sources imported before, sources whose tool
/// pairing is off. A file of many transcripts (aider's history) is summed up, not listed.
fn print_file(
    out: &mut dyn Write,
    path: &str,
    format: Format,
    lines: &[RunLine],
) -> std::io::Result<()> {
    let created: Vec<&RunLine> = lines.iter().filter(|l| l.status == "created").collect();
    if let [only] = created.as_slice() {
        writeln!(
            out,
            "{path} ({}): run {}, {}, {}",
            format.name(),
            only.id,
            plural(only.messages, "message"),
            plural(only.tool_calls, "tool call")
        )?;
    } else if !created.is_empty() {
        let messages: usize = created.iter().map(|l| l.messages).sum();
        let calls: usize = created.iter().map(|l| l.tool_calls).sum();
        writeln!(
            out,
            "{path} ({}): {}, {}, {}",
            format.name(),
            plural(created.len(), "run"),
            plural(messages, "message"),
            plural(calls, "tool call")
        )?;
    }
    let many = lines.len() > 3;
    if many {
        let found = lines
            .iter()
            .filter(|l| matches!(l.status, "up_to_date" | "grown"))
            .count();
        if found > 0 {
            writeln!(
                out,
                "{path}: {} already imported",
                plural(found, "transcript")
            )?;
        }
    }
    for l in lines {
        match l.status {
            "up_to_date" if !many => writeln!(out, "{path}: already imported as run {}", l.id)?,
            "grown" => writeln!(
                out,
                "{path}: already imported as run {}; the source has {} (--reimport appends them)",
                l.id,
                plural(l.not_appended as usize, "new message")
            )?,
            "extended" => writeln!(
                out,
                "{path}: run {} extended by {}",
                l.id,
                plural(l.appended as usize, "message")
            )?,
            "deleted" => writeln!(
                out,
                "{path}: its run {} was deleted; nothing stored (`baton import --restore` imports it again)",
                l.id
            )?,
            _ => {}
        }
    }
    for l in lines.iter().filter(|l| l.still_being_written > 0) {
        writeln!(
            out,
            "{path}: run {}: {} still being written, left for the next import (`--reimport`)",
            l.id,
            plural(l.still_being_written, "message")
        )?;
    }
    let noted: Vec<&RunLine> = lines
        .iter()
        .filter(|l| !l.problems.is_empty() && l.status != "up_to_date")
        .collect();
    if noted.len() > 3 {
        writeln!(
            out,
            "{path}: note: {} have tool-pairing problems in the source itself; kept as the source has them (`baton history RUN --check`)",
            plural(noted.len(), "run")
        )?;
        return Ok(());
    }
    for l in noted {
        writeln!(
            out,
            "{path}: note: run {}: {}; kept as the source has it (`baton history {} --check`)",
            l.id,
            describe(&l.problems, l.messages),
            l.id
        )?;
    }
    Ok(())
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// What is wrong with a transcript's tool pairing, in words. A call left open by the last
/// message is how a source that stopped while a tool ran ends, and is said so.
fn describe(problems: &[Problem], messages: usize) -> String {
    let last = baton_core::Seq(messages as u64);
    let (mut orphans, mut open_at_end, mut dangling, mut early, mut reused) = (0, 0, 0, 0, 0);
    for p in problems {
        match p {
            Problem::OrphanResult { .. } => orphans += 1,
            Problem::DanglingUse { seq, .. } if *seq == last => open_at_end += 1,
            Problem::DanglingUse { .. } => dangling += 1,
            Problem::ResultBeforeUse { .. } => early += 1,
            Problem::DuplicateUse { .. } => reused += 1,
        }
    }
    let mut parts = Vec::new();
    if open_at_end > 0 {
        parts.push(format!(
            "ends with {} (the source stopped before its result)",
            plural(open_at_end, "open tool call")
        ));
    }
    for (n, what) in [
        (dangling, "tool call without a result"),
        (orphans, "tool result without its call"),
        (early, "tool result before its call"),
        (reused, "reused call id"),
    ] {
        if n > 0 {
            parts.push(plural(n, what));
        }
    }
    parts.join(", ")
}

/// The summary line; `early` of the skipped files were skipped as still being written.
fn print_totals(out: &mut dyn Write, t: &Totals, early: usize) -> std::io::Result<()> {
    let mut parts = vec![format!(
        "imported {} ({}, {}) from {}",
        plural(t.created, "run"),
        plural(t.messages as usize, "message"),
        plural(t.tool_calls as usize, "tool call"),
        plural(t.files, "file")
    )];
    if t.subagents > 0 {
        parts.push(format!("{} of them subagents'", t.subagents));
    }
    if t.queued_messages > 0 {
        parts.push(format!(
            "{} typed while the agent worked",
            plural(t.queued_messages, "queued message")
        ));
    }
    if t.still_being_written > 0 {
        parts.push(format!(
            "{} still being written left for the next import",
            plural(t.still_being_written, "message")
        ));
    }
    if t.extended > 0 {
        parts.push(format!("{} extended", t.extended));
    }
    if t.up_to_date + t.grown > 0 {
        parts.push(format!("{} already imported", t.up_to_date + t.grown));
    }
    if t.deleted > 0 {
        parts.push(format!(
            "{} whose run was deleted (not stored; --restore)",
            plural(t.deleted, "source")
        ));
    }
    if t.skipped > early {
        parts.push(format!("{} skipped (not transcripts)", t.skipped - early));
    }
    if early > 0 {
        parts.push(format!(
            "{} skipped (nothing complete yet)",
            plural(early, "file")
        ));
    }
    if t.failed > 0 {
        parts.push(format!("{} failed", t.failed));
    }
    parts.push(format!("{} redacted", plural(t.redactions, "secret")));
    writeln!(out, "{}", parts.join("; "))
}

fn progress_bar(files: usize, quiet: bool) -> ProgressBar {
    let shown = files > PROGRESS_FROM
        && !quiet
        && std::io::stdout().is_terminal()
        && std::io::stderr().is_terminal();
    if !shown {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(files as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} files  {elapsed}  {wide_msg}")
    {
        bar.set_style(style);
    }
    bar
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
