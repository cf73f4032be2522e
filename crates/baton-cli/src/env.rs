//! What every handler shares: the environment a command runs in (the store `--db` names, the
//! tenant, `--json`, the tokenizer), how a `--db` value opens a store, and how `--json` output
//! is written. Handlers import this module; it imports no handler.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use baton_core::{RunId, TenantId};
use baton_postgres::PgStore;
use baton_sqlite::SqliteStore;
use baton_store::Store;
use baton_tokens::TokenizerChoice;

use crate::exit::NotFound;

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
/// applies missing migrations on both. Without `create`, a SQLite file that does not exist is
/// not made: the error names the path (a PostgreSQL schema is made on connect either way).
pub async fn open_backend(db: Option<&str>, create: bool) -> anyhow::Result<Backend> {
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
    if !create && !path.exists() {
        return Err(NotFound(format!(
            "no baton database at {}: nothing has been stored there yet (check --db; commands that store something, such as `runs create`, `import` or `chat`, create it)",
            path.display()
        ))
        .into());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating the directory {}", parent.display()))?;
    }
    let store = SqliteStore::open(&path)
        .await
        .with_context(|| format!("opening {}", path.display()))?;
    Ok(Backend::Sqlite(store))
}

/// A run id given on the command line, checked.
pub fn run_id(s: &str) -> anyhow::Result<RunId> {
    Ok(RunId::new(s)?)
}

/// Writes `value` as one line of JSON: the whole of a command's `--json` output (a
/// `baton-view` type wherever the HTTP API answers the same thing).
pub fn print_json(out: &mut dyn Write, value: &impl serde::Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
