//! `baton watch`: follows folders of session logs and imports sessions as they are written
//! (`baton_watch::watch`), printing one line per import, deletion or failure, until SIGINT or
//! SIGTERM.
//!
//! At start it prints how many session files Claude Code's retention (`cleanupPeriodDays` in
//! `~/.claude/settings.json`, 30 days by default) would delete from the folders, and that baton
//! keeps them. The watcher's state (what it read, so a restart reads only what changed) lives
//! beside a SQLite database (`<db>.watch.json`), or for PostgreSQL in baton's data directory;
//! `--state` names another file.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use baton_watch::{Config, Event, Stats};
use serde_json::json;

use crate::args::{McpArgs, WatchArgs};
use crate::env::{Env, default_db, print_json};
use crate::exit::{InvalidInput, NotFound};

/// Runs `baton watch`.
pub async fn run(
    env: &Env,
    db: Option<&str>,
    args: WatchArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let (state, store_files) = state_path(db, env.tenant.as_str(), args.state)?;
    let settings = home(&args.claude_settings);
    let (retention_days, retention_note) = match baton_watch::retention(&settings) {
        Ok(days) if settings.exists() => (days, None),
        Ok(days) => (days, Some(format!("no {}", settings.display()))),
        Err(reason) => (30, Some(reason)),
    };
    let mut config = Config::new(args.paths, state);
    config.ignore = store_files;
    config.tokenizer = env.tokenizer;
    config.retention_days = Some(retention_days);
    let json = env.json;
    let mut failed_to_print = None;
    let report = |event: &Event| {
        let printed = if json {
            print_json(out, event).map_err(|e| std::io::Error::other(e.to_string()))
        } else {
            print_event(out, event, &settings, retention_note.as_deref())
        };
        if let Err(err) = printed.and_then(|()| out.flush()) {
            failed_to_print.get_or_insert(err);
        }
    };
    // The handlers are installed now, before the first scan: a signal that comes while it
    // reads stops the watch between two files instead of killing the process.
    let stop = stop_signal()?;
    let stats = baton_watch::watch(&*env.store, &env.tenant, &config, stop, report)
        .await
        .map_err(|err| match err {
            baton_watch::Error::NoSuchDirectory { .. } => {
                anyhow::Error::new(NotFound(err.to_string()))
            }
            baton_watch::Error::NotADirectory { .. } => {
                anyhow::Error::new(InvalidInput(err.to_string()))
            }
            err => anyhow::Error::new(err).context("watch"),
        })?;
    if let Some(err) = failed_to_print {
        return Err(err).context("writing the watch log");
    }
    if json {
        print_json(out, &json!({ "event": "stopped", "stats": stats }))?;
    } else {
        print_stopped(out, &stats)?;
    }
    Ok(())
}

/// Runs `baton mcp`: the MCP server on stdin and stdout until the client closes them, and with
/// `--watch` the watcher in the same process (one process, no child daemon), stopped when the
/// client goes. Its events are logged (stderr), since stdout carries protocol frames only.
pub async fn mcp(env: &Env, db: Option<&str>, args: McpArgs) -> anyhow::Result<()> {
    let service = baton_mcp::Baton::new(env.store.clone(), env.tenant.clone());
    if args.watch.is_empty() {
        baton_mcp::serve_stdio(service).await?;
        return Ok(());
    }
    // A folder that is not there is the user's mistake, said before the client connects.
    for dir in &args.watch {
        if !dir.exists() {
            return Err(NotFound(format!("--watch {}: no such directory", dir.display())).into());
        }
        if !dir.is_dir() {
            return Err(InvalidInput(format!("--watch {}: not a directory", dir.display())).into());
        }
    }
    let (state, store_files) = state_path(db, env.tenant.as_str(), args.state)?;
    let mut config = Config::new(args.watch, state);
    config.ignore = store_files;
    config.tokenizer = env.tokenizer;
    let (store, tenant) = (env.store.clone(), env.tenant.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watcher = tokio::spawn(async move {
        let report = |event: &Event| match serde_json::to_string(event) {
            Ok(line) => tracing::info!(target: "baton::watch", event = %line, "watch"),
            Err(e) => tracing::warn!(target: "baton::watch", error = %e, "watch: an event"),
        };
        let stopped = async {
            let _ = stopped.await;
        };
        let watched = baton_watch::watch(&*store, &tenant, &config, stopped, report).await;
        if let Err(e) = &watched {
            // The server goes on answering from what is stored; the log says why it stopped.
            tracing::error!(target: "baton::watch", error = %e, "the watcher stopped");
        }
        watched
    });
    let served = baton_mcp::serve_stdio(service).await;
    let _ = stop.send(());
    let watched = watcher.await.context("the watcher task")?;
    served?;
    watched.map_err(|err| match err {
        baton_watch::Error::NoSuchDirectory { .. } => anyhow::Error::new(NotFound(err.to_string())),
        baton_watch::Error::NotADirectory { .. } => {
            anyhow::Error::new(InvalidInput(err.to_string()))
        }
        err => anyhow::Error::new(err).context("watch"),
    })?;
    Ok(())
}

/// A future that resolves on SIGINT or SIGTERM, its handlers installed when it is made.
#[cfg(unix)]
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// A future that resolves on Ctrl-C.
#[cfg(not(unix))]
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// The state file, and the store's own files to leave alone if they sit in a watched folder.
fn state_path(
    db: Option<&str>,
    tenant: &str,
    given: Option<PathBuf>,
) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    let suffix = if tenant == "default" {
        "watch.json".to_owned()
    } else {
        format!("watch-{tenant}.json")
    };
    let (default, store_files) = match db {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let name: String = baton_postgres::redact(url)
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            let dir = default_db()?
                .parent()
                .map(PathBuf::from)
                .unwrap_or_default();
            (dir.join(format!("{name}.{suffix}")), Vec::new())
        }
        _ => {
            let file = match db {
                Some(url) => PathBuf::from(url.strip_prefix("sqlite://").unwrap_or(url)),
                None => default_db()?,
            };
            let with = |s: &str| {
                let mut name = file.as_os_str().to_owned();
                name.push(s);
                PathBuf::from(name)
            };
            let files = vec![file.clone(), with("-wal"), with("-shm"), with("-journal")];
            (with(&format!(".{suffix}")), files)
        }
    };
    Ok((given.unwrap_or(default), store_files))
}

/// `~/…` against the home directory.
fn home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), directories::BaseDirs::new()) {
        (Some(rest), Some(base)) => base.home_dir().join(rest),
        _ => PathBuf::from(path),
    }
}

fn print_event(
    out: &mut dyn Write,
    event: &Event,
    settings: &std::path::Path,
    settings_note: Option<&str>,
) -> std::io::Result<()> {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    match event {
        Event::Started {
            roots,
            files,
            unchanged,
            to_read,
            retention,
        } => {
            let folders: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            writeln!(
                out,
                "{now} watching {}: {}, {unchanged} unchanged since read, {to_read} to read",
                folders.join(", "),
                plural(*files, "file")
            )?;
            if let Some(r) = retention {
                let whence = match settings_note {
                    Some(note) => format!("the default; {note}"),
                    None => format!("cleanupPeriodDays, {}", settings.display()),
                };
                writeln!(
                    out,
                    "{now} retention: Claude Code deletes session files older than {} days ({whence}): it would delete {} of the {} here; baton keeps them",
                    r.days,
                    r.older,
                    plural(r.sessions, "session file")
                )?;
            }
        }
        Event::Imported { path, format, runs } => {
            let parts: Vec<String> = runs
                .iter()
                .filter(|r| r.status != "up_to_date")
                .map(|r| {
                    let mut part = match r.status {
                        "created" => format!(
                            "run {} created with {}",
                            r.run,
                            plural(r.appended as usize, "message")
                        ),
                        _ => format!(
                            "run {} extended by {}",
                            r.run,
                            plural(r.appended as usize, "message")
                        ),
                    };
                    if r.subagent {
                        part.push_str(" (subagent)");
                    }
                    if r.held > 0 {
                        part.push_str(&format!(
                            " ({} still being written)",
                            plural(r.held, "message")
                        ));
                    }
                    part
                })
                .collect();
            let shown = if parts.len() > 3 {
                format!("{} changed", plural(parts.len(), "run"))
            } else {
                parts.join("; ")
            };
            writeln!(out, "{now} {} ({format}): {shown}", path.display())?;
        }
        Event::Failed { path, reason } => {
            writeln!(out, "{now} {}: failed: {reason}", path.display())?;
        }
        Event::Gone { path, runs } => {
            let ids: Vec<String> = runs.iter().map(ToString::to_string).collect();
            writeln!(
                out,
                "{now} {}: deleted; baton keeps its {} ({})",
                path.display(),
                if runs.len() == 1 { "run" } else { "runs" },
                ids.join(", ")
            )?;
        }
        Event::Shrank { path, from, to } => {
            writeln!(
                out,
                "{now} {}: shrank from {from} to {to} bytes (truncated or replaced); reading it again, the stored runs are kept",
                path.display()
            )?;
        }
    }
    Ok(())
}

fn print_stopped(out: &mut dyn Write, s: &Stats) -> std::io::Result<()> {
    writeln!(
        out,
        "stopped: read {}; {} created, {} extended, {} stored; {} failed, {} deleted",
        plural(s.files_read as usize, "file"),
        plural(s.runs_created as usize, "run"),
        s.runs_extended,
        plural(s.messages as usize, "message"),
        s.failed,
        s.gone
    )
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
