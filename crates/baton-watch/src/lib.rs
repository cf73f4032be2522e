//! `baton watch`: follows folders of agent session logs and imports every session as it is
//! written, so its history is kept before the agent deletes its files.
//!
//! Roles:
//! - [`watch`]: the loop. It scans the folders once, imports what is new or grown since the
//!   last run, then follows them (the `notify` crate: inotify, FSEvents, ReadDirectoryChangesW)
//!   and imports each file a burst of changes touched, once the burst is over.
//! - [`read_file`]: one file read into the store's imports, with the live-session rule
//!   ([`is_live`], [`LIVE_WITHIN`]); [`parse_bytes`], its reading of the bytes, is
//!   `baton import`'s too.
//! - [`Event`]: what the loop reports, one per import, deletion or failure; printing is the
//!   caller's.
//! - [`retention`]: Claude Code's `cleanupPeriodDays`, read from its `settings.json`.
//!
//! ```no_run
//! # async fn demo(store: &dyn baton_store::Store) -> Result<(), baton_watch::Error> {
//! let tenant = baton_core::TenantId::new("default").unwrap();
//! let config = baton_watch::Config::new(
//!     vec!["/home/me/.claude/projects".into()],
//!     "/home/me/.local/share/baton/watch.json".into(),
//! );
//! let stop = async { tokio::signal::ctrl_c().await.ok(); };
//! let stats = baton_watch::watch(store, &tenant, &config, stop, |event| {
//!     tracing::info!(?event, "watch");
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! # Design
//!
//! **Restarts do not re-read.** A state file (see `state`) keeps, per file, the size and
//! modification time it had when read. At start every file is stat'ed, and only those that
//! are new, changed, or had messages left for later are read; a restart on an unchanged tree
//! reads nothing ([`Stats::files_read`] stays 0). The state is a cache: the store finds every
//! source again by its source key, so a lost state file costs one read of each file and
//! duplicates nothing. It lives outside the store, so it needs no schema.
//!
//! **A file being written** is imported up to its last complete unit
//! ([`baton_import::Transcript::settle`]) and extended by later reads (`Reimport::AppendNew`).
//! What is left for later is read again when the file changes, or once it has been quiet for
//! [`Config::live_within`] (then whole, the agent having stopped).
//!
//! **Bursts.** Changes are collected until the folders have been quiet for
//! [`Config::quiet_for`], or [`Config::at_most`] after the first one, whichever comes first; each
//! file touched is then read once. Reading is checked against the state first, so an event
//! for a file that did not change (the watcher's own reads, a `touch` that kept the size and
//! time) costs a `stat`.
//!
//! **Deleted, truncated, rotated.** A deleted file is reported and forgotten; its runs stay
//! (baton never deletes history). A file that shrank is read again: if it is a prefix of what
//! was imported nothing changes, and if it now diverges the store refuses it, names the run,
//! and stores nothing. A rotated file (renamed, and a new one started at its path) is a
//! deletion and two files: Claude Code and Codex sessions are found by session id, so the
//! renamed file extends its old run and the new one makes a new run.

pub mod read;
mod state;

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_core::{RunId, TenantId};
use baton_store::{Imported, Reimport, Store};
use baton_tokens::TokenizerChoice;
use notify::{EventKind, RecursiveMode, Watcher as _};
use serde::Serialize;
use tokio::time::Instant;

pub use read::{FileRead, LIVE_WITHIN, Parsed, Read, is_live, parse_bytes, read_file, unfinished};
use state::{Seen, State};

/// What the watcher does, and where it keeps its state.
#[derive(Clone, Debug)]
pub struct Config {
    /// The folders to follow, recursively.
    pub roots: Vec<PathBuf>,
    /// The state file (see the crate's design notes).
    pub state: PathBuf,
    /// Paths never read: the store's own files and the state when they sit in a watched folder.
    pub ignore: Vec<PathBuf>,
    /// The token counter each run's messages are counted with.
    pub tokenizer: TokenizerChoice,
    /// A burst is over once nothing changed for this long.
    pub quiet_for: Duration,
    /// A burst is read at most this long after its first change, however long it goes on.
    pub at_most: Duration,
    /// A file changed less than this long ago may still be being written.
    pub live_within: Duration,
    /// Sessions older than this many days are counted at start as the ones the source's
    /// retention would delete (Claude Code's `cleanupPeriodDays`); `None` counts nothing.
    pub retention_days: Option<u64>,
}

impl Config {
    /// The defaults: bursts read after 50 ms of quiet (at most 300 ms after they start), files
    /// live for [`LIVE_WITHIN`], real token counts, retention not counted.
    pub fn new(roots: Vec<PathBuf>, state: PathBuf) -> Self {
        Config {
            roots,
            state,
            ignore: Vec::new(),
            tokenizer: TokenizerChoice::Auto,
            quiet_for: Duration::from_millis(50),
            at_most: Duration::from_millis(300),
            live_within: LIVE_WITHIN,
            retention_days: None,
        }
    }
}

/// Why the watcher could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A folder to watch does not exist.
    #[error("{}: no such directory", path.display())]
    NoSuchDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A path to watch is not a folder.
    #[error(
        "{}: not a directory (watch follows folders; `baton import FILE` imports one file)",
        path.display()
    )]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// The operating system refused to watch a folder.
    #[error("{}: cannot watch: {reason}", path.display())]
    Notify {
        /// The folder.
        path: PathBuf,
        /// What the OS said (`inotify` limits, permissions…).
        reason: String,
    },
    /// The state file could not be written.
    #[error("watch state {}: {reason}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The store failed (not an import it refused, which is reported as [`Event::Failed`]).
    #[error(transparent)]
    Store(#[from] baton_store::Error),
}

/// What the watcher reports as it goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The first scan is done: `files` files under the folders, `unchanged` of them known and
    /// not changed since they were read, `to_read` to read now.
    Started {
        /// The folders followed.
        roots: Vec<PathBuf>,
        /// Files found.
        files: usize,
        /// Files read before and not changed since.
        unchanged: usize,
        /// Files to read now.
        to_read: usize,
        /// What the source's retention would delete, when counted.
        retention: Option<Retention>,
    },
    /// A file was read and something was stored: a run made or extended.
    Imported {
        /// The file.
        path: PathBuf,
        /// Its format.
        format: &'static str,
        /// Each transcript that changed a run.
        runs: Vec<RunChange>,
    },
    /// A file could not be imported; nothing of it was stored.
    Failed {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        reason: String,
    },
    /// A file that was read is gone; its runs are kept.
    Gone {
        /// The file.
        path: PathBuf,
        /// The runs its transcripts are in.
        runs: Vec<RunId>,
    },
    /// A file is smaller than when it was read (truncated or replaced); it is read again.
    Shrank {
        /// The file.
        path: PathBuf,
        /// Its size when read.
        from: u64,
        /// Its size now.
        to: u64,
    },
}

/// The sessions a source's retention would delete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Retention {
    /// The retention in days.
    pub days: u64,
    /// Session files (`*.jsonl`) found under the folders.
    pub sessions: usize,
    /// Of those, the ones last changed more than `days` ago.
    pub older: usize,
}

/// One transcript's import.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunChange {
    /// The run.
    pub run: RunId,
    /// `created`, `extended` or `up_to_date`.
    pub status: &'static str,
    /// Messages appended now (all of them for a new run).
    pub appended: u64,
    /// Messages left for a later read, the file still being written.
    pub held: usize,
    /// Whether it is a subagent's transcript.
    pub subagent: bool,
}

/// What a watch did, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Files read (opened and parsed); a file checked and found unchanged is not counted.
    pub files_read: u64,
    /// Runs created.
    pub runs_created: u64,
    /// Runs extended.
    pub runs_extended: u64,
    /// Messages stored.
    pub messages: u64,
    /// Files that failed.
    pub failed: u64,
    /// Files found deleted.
    pub gone: u64,
}

/// Claude Code's retention: `cleanupPeriodDays` in the `settings.json` at `path`, or its
/// default of 30 days when the file or the key is absent. The error names the file and what
/// is wrong with it.
pub fn retention(path: &Path) -> Result<u64, String> {
    const DEFAULT: u64 = 30;
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DEFAULT),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    match value.get("cleanupPeriodDays") {
        None => Ok(DEFAULT),
        Some(days) => days.as_u64().ok_or_else(|| {
            format!(
                "{}: cleanupPeriodDays = {days}: expected a whole number of days",
                path.display()
            )
        }),
    }
}

/// Follows `config.roots` and imports into `store` for `tenant` until `stop` completes (or
/// the OS stops reporting changes), reporting each import, deletion and failure to `report`.
/// Fails before watching when a folder does not exist or is not one; once started, a file
/// that cannot be imported is reported and the watch goes on.
pub async fn watch(
    store: &dyn Store,
    tenant: &TenantId,
    config: &Config,
    stop: impl Future<Output = ()>,
    mut report: impl FnMut(&Event),
) -> Result<Stats, Error> {
    let mut roots = Vec::with_capacity(config.roots.len());
    for root in &config.roots {
        let meta =
            std::fs::metadata(root).map_err(|_| Error::NoSuchDirectory { path: root.clone() })?;
        if !meta.is_dir() {
            return Err(Error::NotADirectory { path: root.clone() });
        }
        roots.push(std::fs::canonicalize(root).unwrap_or_else(|_| root.clone()));
    }
    let mut ignore: BTreeSet<PathBuf> = config.ignore.iter().map(|p| absolute(p)).collect();
    let state_path = absolute(&config.state);
    ignore.insert(state::temp_path(&state_path));
    ignore.insert(state_path);

    // Watch first, then scan: a change made during the scan is seen by one or the other.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .map_err(|e| Error::Notify {
        path: PathBuf::new(),
        reason: e.to_string(),
    })?;
    for root in &roots {
        watcher
            .watch(root, RecursiveMode::Recursive)
            .map_err(|e| Error::Notify {
                path: root.clone(),
                reason: e.to_string(),
            })?;
    }

    let mut w = Watch {
        store,
        tenant,
        config,
        state: State::load(&config.state),
        ignore,
        stats: Stats::default(),
    };

    // The first scan.
    let mut found = BTreeSet::new();
    for root in &roots {
        found.extend(w.files_under(root));
    }
    let mut retention = config.retention_days.map(|days| Retention {
        days,
        sessions: 0,
        older: 0,
    });
    let mut to_read = Vec::new();
    let mut unchanged = 0;
    for file in &found {
        let Ok(meta) = std::fs::metadata(file) else {
            continue;
        };
        if let Some(r) = retention
            .as_mut()
            .filter(|_| file.extension().is_some_and(|e| e == "jsonl"))
        {
            r.sessions += 1;
            let age = meta.modified().ok().and_then(|t| t.elapsed().ok());
            if age.is_some_and(|a| a > Duration::from_secs(r.days * 86_400)) {
                r.older += 1;
            }
        }
        match w.check(file, &meta) {
            Check::Unchanged | Check::Held => unchanged += 1,
            Check::Read { .. } => to_read.push(file.clone()),
        }
    }
    // Files read before that are gone now (deleted while nobody watched).
    let known_gone: Vec<PathBuf> = w
        .state
        .files
        .keys()
        .filter(|p| roots.iter().any(|r| p.starts_with(r)) && !found.contains(*p))
        .cloned()
        .collect();
    report(&Event::Started {
        roots: roots.clone(),
        files: found.len(),
        unchanged,
        to_read: to_read.len(),
        retention,
    });
    for path in known_gone {
        w.gone(&path, &mut report);
    }
    tokio::pin!(stop);
    let mut stopped = false;
    for file in to_read {
        // Between files, a stop asked for during the first scan is honoured at once.
        tokio::select! {
            biased;
            () = &mut stop => {
                stopped = true;
                break;
            }
            () = std::future::ready(()) => {}
        }
        w.import(&file, &mut report).await?;
    }
    w.state.save()?;

    // Follow.
    let mut pending: BTreeSet<PathBuf> = BTreeSet::new();
    let mut burst: Option<(Instant, Instant)> = None; // (first change, last change)
    while !stopped {
        let wake = match burst {
            Some((first, last)) => Some((last + config.quiet_for).min(first + config.at_most)),
            None => w.next_held(),
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut stop => stopped = true,
            event = rx.recv() => match event {
                Some(Ok(event)) => {
                    if matches!(event.kind, EventKind::Access(_)) {
                        continue;
                    }
                    let now = Instant::now();
                    pending.extend(event.paths.into_iter().filter(|p| !w.ignore.contains(p)));
                    burst = Some(burst.map_or((now, now), |(first, _)| (first, now)));
                }
                Some(Err(err)) => {
                    // Events were lost (a queue overflow): look at every file again.
                    tracing::warn!(%err, "watch: the OS reported an error; rescanning");
                    pending.extend(roots.iter().cloned());
                    let now = Instant::now();
                    burst = Some(burst.map_or((now, now), |(first, _)| (first, now)));
                }
                None => stopped = true,
            },
            () = sleep => {
                if burst.take().is_some() {
                    let paths = std::mem::take(&mut pending);
                    for path in paths {
                        w.changed(&path, &mut report).await?;
                    }
                } else {
                    for file in w.due_held() {
                        w.import(&file, &mut report).await?;
                    }
                }
                w.state.save()?;
            }
        }
    }
    drop(watcher);
    w.state.save()?;
    Ok(w.stats)
}

/// What to do with a file.
enum Check {
    /// Read before, and not changed since.
    Unchanged,
    /// Read before, not changed, with messages left for later while the file is live: read
    /// again once it is not (see `Watch::next_held`).
    Held,
    /// New, changed, or due: read it. `shrank_from` is its size when read, if larger now.
    Read { shrank_from: Option<u64> },
}

struct Watch<'a> {
    store: &'a dyn Store,
    tenant: &'a TenantId,
    config: &'a Config,
    state: State,
    ignore: BTreeSet<PathBuf>,
    stats: Stats,
}

impl Watch<'_> {
    /// The files under `dir`, less the ignored ones.
    fn files_under(&self, dir: &Path) -> Vec<PathBuf> {
        walkdir::WalkDir::new(dir)
            .sort_by_file_name()
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(walkdir::DirEntry::into_path)
            .filter(|p| !self.ignore.contains(p))
            .collect()
    }

    fn check(&self, file: &Path, meta: &std::fs::Metadata) -> Check {
        let now = Seen::of(meta);
        let Some(seen) = self.state.files.get(file) else {
            return Check::Read { shrank_from: None };
        };
        if !seen.same_file(&now) {
            let shrank_from = (now.len < seen.len).then_some(seen.len);
            return Check::Read { shrank_from };
        }
        if !seen.held {
            return Check::Unchanged;
        }
        if is_live(seen.modified(), self.config.live_within) {
            Check::Held
        } else {
            Check::Read { shrank_from: None }
        }
    }

    /// When the next file with messages left for later is due to be read whole.
    fn next_held(&self) -> Option<Instant> {
        let due = self
            .state
            .files
            .values()
            .filter(|s| s.held)
            .map(|s| s.modified() + self.config.live_within)
            .min()?;
        let wait = due
            .duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO);
        Some(Instant::now() + wait + Duration::from_millis(10))
    }

    /// The files with messages left for later whose agent has stopped writing them.
    fn due_held(&self) -> Vec<PathBuf> {
        self.state
            .files
            .iter()
            .filter(|(_, s)| s.held && !is_live(s.modified(), self.config.live_within))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The runs `file` went to when it was last read.
    fn known_runs(&self, file: &Path) -> Vec<RunId> {
        self.state
            .files
            .get(file)
            .map(|s| s.runs.clone())
            .unwrap_or_default()
    }

    /// A path a change was reported for: a file to check, a folder to walk, or a deletion.
    async fn changed(&mut self, path: &Path, report: &mut impl FnMut(&Event)) -> Result<(), Error> {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let files = self.files_under(path);
                let present: BTreeSet<&PathBuf> = files.iter().collect();
                // Files known under the folder that are not there any more (a rescan after
                // lost events, a folder moved in and out).
                let known: Vec<PathBuf> = self
                    .state
                    .files
                    .range(path.to_path_buf()..)
                    .take_while(|(p, _)| p.starts_with(path))
                    .map(|(p, _)| p.clone())
                    .filter(|p| !present.contains(p))
                    .collect();
                for file in known {
                    self.gone(&file, report);
                }
                for file in files {
                    if let Ok(meta) = std::fs::metadata(&file)
                        && !matches!(self.check(&file, &meta), Check::Unchanged | Check::Held)
                    {
                        self.import(&file, report).await?;
                    }
                }
            }
            Ok(meta) => {
                if !matches!(self.check(path, &meta), Check::Unchanged | Check::Held) {
                    self.import(path, report).await?;
                }
            }
            Err(_) => self.gone(path, report),
        }
        Ok(())
    }

    fn gone(&mut self, path: &Path, report: &mut impl FnMut(&Event)) {
        for (file, seen) in self.state.forget(path) {
            self.stats.gone += 1;
            if !seen.runs.is_empty() {
                report(&Event::Gone {
                    path: file,
                    runs: seen.runs,
                });
            }
        }
    }

    /// Reads `file` and imports what it holds, recording what was read. An import the store
    /// refuses, or a file that does not parse, is reported and recorded (it is not read again
    /// until it changes); a store that fails otherwise stops the watch.
    async fn import(&mut self, file: &Path, report: &mut impl FnMut(&Event)) -> Result<(), Error> {
        // The metadata before reading: if the file grows while it is read, the next check
        // sees a change and reads it again.
        let Ok(meta) = std::fs::metadata(file) else {
            self.gone(file, report);
            return Ok(());
        };
        if let Check::Read {
            shrank_from: Some(from),
        } = self.check(file, &meta)
        {
            report(&Event::Shrank {
                path: file.to_path_buf(),
                from,
                to: meta.len(),
            });
        }
        let mut seen = Seen::of(&meta);
        let live = meta
            .modified()
            .map_or(true, |t| is_live(t, self.config.live_within));
        self.stats.files_read += 1;
        let read = read_file(file, None, live, self.config.tokenizer);
        let read = match read {
            Ok(Read::File(read)) => read,
            Ok(Read::NothingYet) => {
                // Read again when it changes, or whole once its agent has stopped.
                seen.held = true;
                seen.runs = self.known_runs(file);
                self.state.record(file.to_path_buf(), seen);
                return Ok(());
            }
            Ok(Read::NotTranscript(reason)) => {
                tracing::debug!(path = %file.display(), reason, "watch: not a transcript");
                // (A file cut to nothing mid-write keeps the runs it went to.)
                seen.runs = self.known_runs(file);
                self.state.record(file.to_path_buf(), seen);
                return Ok(());
            }
            Err(_) if !file.exists() => {
                // Deleted or renamed between the stat and the read.
                self.gone(file, report);
                return Ok(());
            }
            Err(reason) => {
                self.stats.failed += 1;
                seen.runs = self.known_runs(file);
                report(&Event::Failed {
                    path: file.to_path_buf(),
                    reason,
                });
                self.state.record(file.to_path_buf(), seen);
                return Ok(());
            }
        };
        let outcomes = match self
            .store
            .import(self.tenant, read.imports, Reimport::AppendNew)
            .await
        {
            Ok(outcomes) => outcomes,
            Err(err @ baton_store::Error::Import(_)) => {
                self.stats.failed += 1;
                seen.runs = self.known_runs(file);
                report(&Event::Failed {
                    path: file.to_path_buf(),
                    reason: format!(
                        "{err} (the stored runs are unchanged; `baton import --as-new` imports it as a new run)"
                    ),
                });
                self.state.record(file.to_path_buf(), seen);
                return Ok(());
            }
            Err(err) => return Err(err.into()),
        };
        let mut runs = Vec::with_capacity(outcomes.len());
        for ((outcome, t), held) in outcomes.iter().zip(&read.transcripts).zip(&read.held) {
            let (status, appended) = match outcome {
                Imported::Created(_) => ("created", t.messages.len() as u64),
                Imported::Extended { appended, .. } => ("extended", *appended),
                Imported::UpToDate(_) | Imported::Grown { .. } => ("up_to_date", 0),
                // The user deleted the run: its file growing brings nothing back, and says so
                // only in the import report (`baton import`), not on every write here.
                Imported::Deleted { .. } => ("deleted", 0),
            };
            match status {
                "created" => self.stats.runs_created += 1,
                "extended" => self.stats.runs_extended += 1,
                _ => {}
            }
            self.stats.messages += appended;
            seen.held |= *held > 0;
            seen.runs.push(outcome.id().clone());
            runs.push(RunChange {
                run: outcome.id().clone(),
                status,
                appended,
                held: *held,
                subagent: t.parent_session_id.is_some() || t.parent_tool_use_id.is_some(),
            });
        }
        self.state.record(file.to_path_buf(), seen);
        if runs
            .iter()
            .any(|r| !matches!(r.status, "up_to_date" | "deleted"))
        {
            report(&Event::Imported {
                path: file.to_path_buf(),
                format: read.format.name(),
                runs,
            });
        }
        Ok(())
    }
}

/// `path` made absolute against the working directory, and canonical when it exists.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()))
}
