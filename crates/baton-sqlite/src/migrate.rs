//! Versioned migrations, applied at open.
//!
//! The schema version lives in `PRAGMA user_version`; `PRAGMA application_id` marks the file as
//! baton's, so a stranger's database is refused instead of being written into. Each migration
//! runs in one `BEGIN IMMEDIATE` transaction that re-reads the version first, so several
//! processes opening a new file at once apply each migration exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use baton_store::Error;
use rusqlite::{Connection, TransactionBehavior};

use crate::db_error;

/// `PRAGMA application_id` of a baton database: "batn" in ASCII.
pub const APPLICATION_ID: i32 = 0x6261_746e;

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_search.sql"),
    include_str!("../migrations/0003_import.sql"),
    include_str!("../migrations/0004_compaction.sql"),
    include_str!("../migrations/0005_agent.sql"),
    include_str!("../migrations/0006_cache.sql"),
    include_str!("../migrations/0007_ledger.sql"),
    include_str!("../migrations/0008_api_keys.sql"),
    include_str!("../migrations/0009_ledger_by_key.sql"),
    include_str!("../migrations/0010_usage.sql"),
    include_str!("../migrations/0011_runs.sql"),
    include_str!("../migrations/0012_deleted_sources.sql"),
    include_str!("../migrations/0013_live_attempt.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

struct Header {
    application_id: i32,
    user_version: i64,
    objects: i64,
}

/// Reads the three facts in one statement, so they come from one snapshot: read one by one,
/// another process's migration could commit in between and make a baton file look foreign.
fn header(conn: &Connection, path: &Path) -> Result<Header, Error> {
    conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id()),
                (SELECT user_version FROM pragma_user_version()),
                (SELECT COUNT(*) FROM sqlite_schema)",
        [],
        |r| {
            Ok(Header {
                application_id: r.get(0)?,
                user_version: r.get(1)?,
                objects: r.get(2)?,
            })
        },
    )
    .map_err(|e| db_error(path, e))
}

fn check(h: &Header, path: &Path) -> Result<(), Error> {
    let fresh = h.application_id == 0 && h.user_version == 0 && h.objects == 0;
    if !fresh && h.application_id != APPLICATION_ID {
        return Err(Error::NotABatonDatabase {
            path: path.display().to_string(),
            detail: format!(
                "application_id is {:#x}, not baton's {APPLICATION_ID:#x}",
                h.application_id
            ),
        });
    }
    if h.user_version > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            path: path.display().to_string(),
            found: h.user_version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Checks the file is baton's (or empty) and applies the missing migrations.
pub(crate) fn run(conn: &Connection, path: &Path) -> Result<(), Error> {
    // Several processes creating one file at once can see SQLITE_BUSY without the busy handler
    // being consulted (switching the journal mode, or reading the schema while another
    // connection rewrites it); the whole check-and-migrate step is safe to repeat.
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        match run_once(conn, path) {
            Err(Error::Backend(e)) if is_busy(&*e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// How long opening retries a busy database before giving up.
const RETRY_FOR: Duration = Duration::from_secs(30);

fn is_busy(err: &(dyn std::error::Error + 'static)) -> bool {
    err.downcast_ref::<rusqlite::Error>().is_some_and(|e| {
        matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    })
}

fn run_once(conn: &Connection, path: &Path) -> Result<(), Error> {
    let err = |e| db_error(path, e);
    let before = header(conn, path)?;
    check(&before, path)?;
    if before.user_version == SCHEMA_VERSION {
        return Ok(());
    }
    // WAL is a property of the file and cannot be set inside a transaction.
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(path = %path.display(), mode, "sqlite refused WAL mode");
    }
    loop {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
            .map_err(err)?;
        let now = header(&tx, path)?;
        check(&now, path)?;
        let version = now.user_version;
        let Some(sql) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Ok(()); // another process finished the migrations while we waited
        };
        tx.execute_batch(sql).map_err(err)?;
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {};",
            version + 1
        ))
        .map_err(err)?;
        tx.commit().map_err(err)?;
        tracing::info!(path = %path.display(), version = version + 1, "migrated");
    }
}
