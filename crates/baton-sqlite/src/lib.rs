//! baton's embedded store: one SQLite file, in WAL mode, with foreign keys on and versioned
//! migrations applied at open.
//!
//! Roles:
//! - [`SqliteStore`]: the [`Store`] implementation. Writes go through one writer connection per
//!   store (so writers in one process never contend for SQLite's lock); reads use a small pool
//!   of reader connections, which WAL lets run beside the writer. Across processes, every write
//!   transaction starts with `BEGIN IMMEDIATE` and waits on SQLite's busy timeout.
//! - `migrations/`: the schema, one numbered SQL file per version, embedded in the binary.
//!   Version 2 adds recall search: a contentless FTS5 table of the words
//!   `baton_store::search_rows` makes, and `search_progress`, how far each run is indexed.
//!   Indexing is lazy: `append` writes history only, and `search` first indexes the run's
//!   messages past its mark, 1,000 per `BEGIN IMMEDIATE` transaction on the writer
//!   connection, so a first search of a long run never holds SQLite's one write lock for long.
//!   Version 3 adds imported runs: `run_origins` (where each came from, found again by its
//!   source key) and `source_compactions` (the compactions its source agent performed).
//!
//! rusqlite is synchronous; every call runs under `block_in_place` on a multi-thread runtime
//! (or on the blocking pool otherwise), so the async API never stalls other tasks.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_store::Error> {
//! use baton_store::Store;
//! let store = baton_sqlite::SqliteStore::open("baton.db").await?;
//! let runs = store.list_runs(&baton_core::TenantId::default_tenant()).await;
//! # Ok(()) }
//! ```

mod agent;
mod cache;
mod compaction;
mod import;
mod keys;
mod ledger;
mod migrate;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::units::{ProtocolEvents, ProtocolMap};
use baton_core::{
    Cleared, Entry, InvalidCandidate, Message, Run, RunId, RunStatus, Seq, Summary, SummaryId,
    TenantId, Timestamp,
};
use baton_store::codec::{
    self, SummaryBody, ids_json, lookup_i64, parse_ids, parse_status, to_i64, to_u64,
};
use baton_store::{
    Candidate, Constraint, ContextMeta, ContextParts, Error, Imported, Install, NewEntry,
    NewImport, NewRun, Reimport, Rejection, RunReport, SearchQuery, SetCleared, Store,
};
use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};

pub use migrate::SCHEMA_VERSION;

/// How long a write waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Reader connections kept open for reuse.
const MAX_IDLE_READERS: usize = 8;

/// A [`Store`] on one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    ///
    /// Fails with [`Error::NotABatonDatabase`] for a file that is not SQLite or was not made by
    /// baton, and with [`Error::SchemaTooNew`] for one written by a newer baton; neither file
    /// is modified.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        blocking(move || {
            let writer = connect(&path)?;
            migrate::run(&writer, &path)?;
            Ok(SqliteStore {
                inner: Arc::new(Inner {
                    path,
                    writer: Mutex::new(writer),
                    readers: Mutex::new(Vec::new()),
                }),
            })
        })
        .await
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The file's schema version, the SQLite library version and the settings that matter.
    pub async fn doctor(&self) -> Result<Vec<(String, String)>, Error> {
        self.read(|conn| {
            let mut facts = vec![("sqlite_version".to_owned(), rusqlite::version().to_owned())];
            for pragma in [
                "user_version",
                "journal_mode",
                "synchronous",
                "foreign_keys",
                "busy_timeout",
                "page_size",
            ] {
                let value: rusqlite::types::Value = conn
                    .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
                    .map_err(sql)?;
                let text = match value {
                    rusqlite::types::Value::Integer(i) => i.to_string(),
                    rusqlite::types::Value::Text(t) => t,
                    other => format!("{other:?}"),
                };
                facts.push((pragma.to_owned(), text));
            }
            Ok(facts)
        })
        .await
    }

    /// Runs `f` on the writer connection, on the blocking pool.
    async fn write<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Error> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || {
            let mut conn = inner.writer.lock().map_err(|_| Error::Corrupt {
                what: "sqlite writer lock poisoned".into(),
            })?;
            f(&mut conn)
        })
        .await
    }

    /// Runs `f` on a reader connection, on the blocking pool.
    async fn read<T, F>(&self, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, Error> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || {
            let idle = inner.readers.lock().ok().and_then(|mut pool| pool.pop());
            let mut conn = match idle {
                Some(conn) => conn,
                None => connect(&inner.path)?,
            };
            let result = f(&mut conn);
            if let Ok(mut pool) = inner.readers.lock()
                && pool.len() < MAX_IDLE_READERS
            {
                pool.push(conn);
            }
            result
        })
        .await
    }
}

/// Runs blocking SQLite work without stalling the executor.
///
/// On a multi-thread runtime this is `block_in_place`: the worker hands its other tasks to the
/// rest of the pool and runs `f` itself, with no thread hop. `spawn_blocking`'s round trip
/// measured ~30 µs on a 2-core machine, three times a whole single-row transaction
/// (`baton-bench`, section 2). A current-thread runtime cannot give its only worker away, so
/// there the work goes to the blocking pool.
async fn blocking<T, F>(f: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
    match flavor {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => tokio::task::spawn_blocking(f)
            .await
            .map_err(Error::backend)?,
    }
}

/// Opens one connection with baton's settings. `synchronous = NORMAL` in WAL mode: a committed
/// transaction survives a crash of the process; a power loss may lose the last transactions but
/// never corrupts the file (ARCHITECTURE.md, "Durability").
fn connect(path: &Path) -> Result<Connection, Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| db_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| db_error(path, e))?;
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
        .map_err(|e| db_error(path, e))?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Maps a driver error, recognizing a file that is not a database at all.
pub(crate) fn db_error(path: &Path, err: rusqlite::Error) -> Error {
    if err.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
        return Error::NotABatonDatabase {
            path: path.display().to_string(),
            detail: "not an SQLite database file".into(),
        };
    }
    Error::backend(err)
}

fn sql(err: rusqlite::Error) -> Error {
    Error::backend(err)
}

/// The row of a run that writes check first.
struct RunRow {
    pk: i64,
    status: RunStatus,
    active_summary_id: Option<SummaryId>,
    last_seq: Seq,
}

/// Finds a run's key facts, or the reason it is not there for this tenant.
fn find_run(conn: &Connection, tenant: &TenantId, run: &RunId) -> Result<RunRow, Error> {
    let row = conn
        .prepare_cached(
            "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = ?1 AND id = ?2",
        )
        .map_err(sql)?
        .query_row(params![tenant.as_str(), run.as_str()], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<i64>>(2)?, r.get::<_, i64>(3)?))
        })
        .optional()
        .map_err(sql)?;
    match row {
        Some((pk, status, active, last)) => Ok(RunRow {
            pk,
            status: parse_status(&status)?,
            active_summary_id: active
                .map(|id| to_u64(id, "summary id"))
                .transpose()?
                .map(SummaryId),
            last_seq: Seq(to_u64(last, "last_seq")?),
        }),
        None => Err(missing_run(run)),
    }
}

/// The error for a run the tenant does not have. A tenant that never created a run has none,
/// so its missing run is not found either, never an "unknown tenant" (issue 20, item 15).
fn missing_run(run: &RunId) -> Error {
    Error::RunNotFound { run: run.clone() }
}

const RUN_COLUMNS: &str =
    "id, tenant_id, status, goal, rules, active_summary_id, last_seq, created_at,
     cleared_through, cleared_min_tokens";

fn run_from_row(r: &rusqlite::Row<'_>) -> Result<Run, Error> {
    let get = |e: rusqlite::Error| Error::backend(e);
    let status: String = r.get(2).map_err(get)?;
    Ok(Run {
        id: RunId::new(r.get::<_, String>(0).map_err(get)?)?,
        tenant: TenantId::new(r.get::<_, String>(1).map_err(get)?)?,
        status: parse_status(&status)?,
        goal: r.get(3).map_err(get)?,
        rules: r.get(4).map_err(get)?,
        active_summary_id: r
            .get::<_, Option<i64>>(5)
            .map_err(get)?
            .map(|id| to_u64(id, "summary id").map(SummaryId))
            .transpose()?,
        last_seq: Seq(to_u64(r.get(6).map_err(get)?, "last_seq")?),
        cleared: codec::cleared(r.get(8).map_err(get)?, r.get(9).map_err(get)?)?,
        created_at: Timestamp(r.get(7).map_err(get)?),
    })
}

fn load_run(conn: &Connection, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
    Ok(load_run_with_pk(conn, tenant, run)?.1)
}

/// A run and its internal key, in one read.
fn load_run_with_pk(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, Run), Error> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS}, pk FROM runs WHERE tenant_id = ?1 AND id = ?2"
        ))
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![tenant.as_str(), run.as_str()])
        .map_err(sql)?;
    match rows.next().map_err(sql)? {
        Some(row) => Ok((row.get(10).map_err(sql)?, run_from_row(row)?)),
        None => Err(missing_run(run)),
    }
}

/// An entry ready to insert: serialized outside the write lock.
struct Prepared {
    tokens: u32,
    tool_uses: Option<String>,
    tool_results: Option<String>,
    message: String,
}

fn prepare(entries: &[NewEntry]) -> Result<Vec<Prepared>, Error> {
    entries
        .iter()
        .map(|e| {
            Ok(Prepared {
                tokens: e.tokens,
                tool_uses: ids_json(e.message.tool_use_ids().collect()),
                tool_results: ids_json(e.message.tool_result_ids().collect()),
                message: serde_json::to_string(&e.message).map_err(|err| Error::Corrupt {
                    what: format!("message does not serialize: {err}"),
                })?,
            })
        })
        .collect()
}

/// Creates the tenant on first use and a new active run; returns the run's key. Fails with
/// [`Error::RunExists`] when the tenant has a run with this id.
fn insert_run(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    id: &RunId,
    goal: Option<&str>,
    rules: Option<&str>,
    now: Timestamp,
) -> Result<i64, Error> {
    tx.prepare_cached(
        "INSERT INTO tenants (id, created_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
    )
    .map_err(sql)?
    .execute(params![tenant.as_str(), now.0])
    .map_err(sql)?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO runs (tenant_id, id, status, goal, rules, created_at)
             VALUES (?1, ?2, 'active', ?3, ?4, ?5) ON CONFLICT (tenant_id, id) DO NOTHING",
        )
        .map_err(sql)?
        .execute(params![tenant.as_str(), id.as_str(), goal, rules, now.0])
        .map_err(sql)?;
    if inserted == 0 {
        return Err(Error::RunExists { run: id.clone() });
    }
    Ok(tx.last_insert_rowid())
}

/// Inserts `prepared` after `last_seq` and moves the run's `last_seq`; returns the seqs.
/// The caller holds the write lock (a `BEGIN IMMEDIATE` transaction) and checked the run.
fn insert_entries(
    tx: &Transaction<'_>,
    run_pk: i64,
    last_seq: Seq,
    prepared: &[Prepared],
    now: Timestamp,
) -> Result<Vec<Seq>, Error> {
    let mut seqs = Vec::with_capacity(prepared.len());
    let mut seq = last_seq;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(sql)?;
    for p in prepared {
        seq = seq.next();
        insert
            .execute(params![
                run_pk,
                to_i64(seq.0)?,
                p.tokens,
                p.tool_uses,
                p.tool_results,
                now.0,
                p.message
            ])
            .map_err(sql)?;
        seqs.push(seq);
    }
    if !seqs.is_empty() {
        tx.prepare_cached("UPDATE runs SET last_seq = ?1 WHERE pk = ?2")
            .map_err(sql)?
            .execute(params![to_i64(seq.0)?, run_pk])
            .map_err(sql)?;
    }
    Ok(seqs)
}

/// Messages indexed per write transaction while a search brings a run's index up to date.
const INDEX_BATCH: i64 = 1000;

/// How far the run's history is indexed for search: every message with a seq up to this has
/// its search rows. 0 before the run's first search.
fn indexed_through(conn: &Connection, run_pk: i64) -> Result<i64, Error> {
    Ok(conn
        .prepare_cached("SELECT indexed_through FROM search_progress WHERE run_pk = ?1")
        .map_err(sql)?
        .query_row([run_pk], |r| r.get(0))
        .optional()
        .map_err(sql)?
        .unwrap_or(0))
}

/// Indexes the next batch of the run's history for search: reads up to [`INDEX_BATCH`] rows
/// after its mark (and at most up to `upto`), in seq order, writes their search rows (made by
/// [`baton_store::search_rows`]) and advances the mark. Called inside a `BEGIN IMMEDIATE`
/// transaction, so no other writer indexes the same rows; returns the messages indexed and
/// whether the index now reaches `upto`.
fn index_batch(conn: &Connection, run_pk: i64, upto: i64) -> Result<(u64, bool), Error> {
    let after = indexed_through(conn, run_pk)?;
    if after >= upto {
        return Ok((0, true));
    }
    let mut read = conn
        .prepare_cached(
            "SELECT seq, message FROM history WHERE run_pk = ?1 AND seq > ?2 AND seq <= ?3
             ORDER BY seq LIMIT ?4",
        )
        .map_err(sql)?;
    let mut key = conn
        .prepare_cached(
            "INSERT INTO history_search (run_pk, seq, kind, part) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(sql)?;
    let mut words = conn
        .prepare_cached("INSERT INTO history_search_words (rowid, body) VALUES (?1, ?2)")
        .map_err(sql)?;
    let batch: Vec<(i64, String)> = read
        .query_map(params![run_pk, after, upto, INDEX_BATCH], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql)?
        .collect::<Result<_, _>>()
        .map_err(sql)?;
    let Some(&(last, _)) = batch.last() else {
        return Err(Error::Corrupt {
            what: format!("history of run {run_pk} has no rows after seq {after} up to seq {upto}"),
        });
    };
    for (seq, text) in &batch {
        let message: Message = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            what: format!("message at seq {seq}: {e}"),
        })?;
        for row in baton_store::search_rows(&message) {
            key.execute(params![run_pk, seq, row.kind.as_str(), row.part])
                .map_err(sql)?;
            words
                .execute(params![conn.last_insert_rowid(), row.body])
                .map_err(sql)?;
        }
    }
    conn.prepare_cached(
        "INSERT INTO search_progress (run_pk, indexed_through) VALUES (?1, ?2)
         ON CONFLICT (run_pk) DO UPDATE SET indexed_through = excluded.indexed_through",
    )
    .map_err(sql)?
    .execute(params![run_pk, last])
    .map_err(sql)?;
    Ok((batch.len() as u64, last >= upto))
}

/// The entries of the run whose search rows match `phrase` (normalized words), in seq order.
fn search_entries(
    conn: &Connection,
    run_pk: i64,
    phrase: &str,
    query: &SearchQuery,
) -> Result<Vec<Entry>, Error> {
    // An FTS5 string: the words as one phrase, any `"` doubled (normalized words have none);
    // a `*` after it makes its last word a prefix.
    let mut fts = format!("\"{}\"", phrase.replace('"', "\"\""));
    if query.is_prefix() {
        fts.push_str(" *");
    }
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tokens, created_at, message FROM history
             WHERE run_pk = ?1 AND seq IN (
                 SELECT s.seq FROM history_search_words w JOIN history_search s ON s.id = w.rowid
                 WHERE history_search_words MATCH ?2 AND s.run_pk = ?1
                   AND (?3 IS NULL OR s.kind = ?3))
             ORDER BY seq LIMIT ?4",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![run_pk, fts, query.kind.map(|k| k.as_str()), limit])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        out.push(entry_from_row(row)?);
    }
    Ok(out)
}

fn entry_from_row(r: &rusqlite::Row<'_>) -> Result<Entry, Error> {
    let get = |e: rusqlite::Error| Error::backend(e);
    let seq = Seq(to_u64(r.get(0).map_err(get)?, "seq")?);
    let text: String = r.get(3).map_err(get)?;
    let message: Message = serde_json::from_str(&text).map_err(|e| Error::Corrupt {
        what: format!("message at seq {seq}: {e}"),
    })?;
    Ok(Entry {
        seq,
        tokens: u32::try_from(r.get::<_, i64>(1).map_err(get)?).unwrap_or(u32::MAX),
        created_at: Timestamp(r.get(2).map_err(get)?),
        message,
    })
}

fn read_entries(
    conn: &Connection,
    run_pk: i64,
    from: Seq,
    to: Option<Seq>,
) -> Result<Vec<Entry>, Error> {
    let to = to.map_or(i64::MAX, |s| lookup_i64(s.0));
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tokens, created_at, message FROM history
             WHERE run_pk = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![run_pk, lookup_i64(from.0), to])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        out.push(entry_from_row(row)?);
    }
    Ok(out)
}

fn read_window(conn: &Connection, run_pk: i64, after: Seq) -> Result<Vec<ProtocolEvents>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = ?1 AND seq > ?2 ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt.query(params![run_pk, to_i64(after.0)?]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let seq = Seq(to_u64(row.get(0).map_err(sql)?, "seq")?);
        out.push(ProtocolEvents {
            seq,
            uses: parse_ids(row.get(1).map_err(sql)?, seq)?,
            results: parse_ids(row.get(2).map_err(sql)?, seq)?,
        });
    }
    Ok(out)
}

/// The protocol events that decide whether `cut` is safe: every message after `after` that
/// opens or answers a tool call (found through the partial index `history_tool_rows`), plus
/// the cut's own row. Text-only messages add no span, so leaving them out changes no answer
/// about the cut, and an install on a long text-heavy run reads only its tool rows.
fn read_tool_window(
    conn: &Connection,
    run_pk: i64,
    after: Seq,
    cut: Seq,
) -> Result<Vec<ProtocolEvents>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = ?1 AND seq > ?2 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL)
             UNION
             SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = ?1 AND seq = ?3
             ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![run_pk, to_i64(after.0)?, to_i64(cut.0)?])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let seq = Seq(to_u64(row.get(0).map_err(sql)?, "seq")?);
        out.push(ProtocolEvents {
            seq,
            uses: parse_ids(row.get(1).map_err(sql)?, seq)?,
            results: parse_ids(row.get(2).map_err(sql)?, seq)?,
        });
    }
    Ok(out)
}

const SUMMARY_COLUMNS: &str = "s.id, r.id, s.coverage, s.previous_id, s.body, s.created_at, s.meta";

fn summary_from_row(r: &rusqlite::Row<'_>) -> Result<Summary, Error> {
    let get = |e: rusqlite::Error| Error::backend(e);
    let id = SummaryId(to_u64(r.get(0).map_err(get)?, "summary id")?);
    let body: String = r.get(4).map_err(get)?;
    let body: SummaryBody = serde_json::from_str(&body).map_err(|e| Error::Corrupt {
        what: format!("body of summary {id}: {e}"),
    })?;
    Ok(Summary {
        id,
        run: RunId::new(r.get::<_, String>(1).map_err(get)?)?,
        coverage: Seq(to_u64(r.get(2).map_err(get)?, "coverage")?),
        previous_id: r
            .get::<_, Option<i64>>(3)
            .map_err(get)?
            .map(|p| to_u64(p, "previous id").map(SummaryId))
            .transpose()?,
        claims: body.claims,
        meta: codec::parse_meta(r.get(6).map_err(get)?, id)?,
        created_at: Timestamp(r.get(5).map_err(get)?),
    })
}

fn load_summary(conn: &Connection, run_pk: i64, id: SummaryId) -> Result<Option<Summary>, Error> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk
             WHERE s.id = ?1 AND s.run_pk = ?2"
        ))
        .map_err(sql)?;
    let mut rows = stmt.query(params![lookup_i64(id.0), run_pk]).map_err(sql)?;
    rows.next().map_err(sql)?.map(summary_from_row).transpose()
}

/// Validates a candidate inside the install transaction. `Ok(Err(..))` is a rejection.
fn validate(
    conn: &Connection,
    run: &RunRow,
    c: &Candidate,
) -> Result<Result<(), InvalidCandidate>, Error> {
    let coverage = match c.base {
        None => Seq::ZERO,
        Some(base) => {
            let coverage: Option<i64> = conn
                .prepare_cached("SELECT coverage FROM summaries WHERE id = ?1 AND run_pk = ?2")
                .map_err(sql)?
                .query_row(params![lookup_i64(base.0), run.pk], |r| r.get(0))
                .optional()
                .map_err(sql)?;
            match coverage {
                Some(coverage) => Seq(to_u64(coverage, "coverage")?),
                None => return Ok(Err(InvalidCandidate::BaseNotInRun { base })),
            }
        }
    };
    let cut_exists: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM history WHERE run_pk = ?1 AND seq = ?2)")
        .map_err(sql)?
        .query_row(params![run.pk, lookup_i64(c.cut.0)], |r| r.get(0))
        .map_err(sql)?;
    if let Err(why) = baton_store::check_candidate(c, coverage, cut_exists, run.last_seq) {
        return Ok(Err(why));
    }
    // Belt and braces over the gap-free invariant: every cited seq is a row of this run.
    let cited: Vec<i64> = baton_store::cited_seqs(c)
        .into_iter()
        .map(|seq| to_i64(seq.0))
        .collect::<Result<_, _>>()?;
    if !cited.is_empty() {
        let json = serde_json::to_string(&cited).map_err(|e| Error::Corrupt {
            what: e.to_string(),
        })?;
        let found: i64 = conn
            .prepare_cached(
                "SELECT COUNT(*) FROM history WHERE run_pk = ?1 AND seq IN (SELECT value FROM json_each(?2))",
            )
            .map_err(sql)?
            .query_row(params![run.pk, json], |r| r.get(0))
            .map_err(sql)?;
        if usize::try_from(found).ok() != Some(cited.len()) {
            return Err(Error::Corrupt {
                what: "history has gaps below the run's last seq".into(),
            });
        }
    }
    let window = read_tool_window(conn, run.pk, coverage, c.cut)?;
    if ProtocolMap::analyze(coverage, &window).is_safe(c.cut) {
        return Ok(Ok(()));
    }
    // The rare path: explain against the whole window, so the nearest safe cut named in the
    // message counts text-only messages too.
    let full = read_window(conn, run.pk, coverage)?;
    let detail = ProtocolMap::analyze(coverage, &full)
        .explain(c.cut)
        .unwrap_or_else(|| "it splits a protocol unit".to_owned());
    Ok(Err(InvalidCandidate::UnsafeCut { cut: c.cut, detail }))
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_run(&self, tenant: &TenantId, new: &NewRun) -> Result<Run, Error> {
        baton_store::check_new_run(new)?;
        let tenant = tenant.clone();
        let id = match &new.id {
            Some(id) => id.clone(),
            None => baton_store::generate_run_id()?,
        };
        let new = new.clone();
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            insert_run(
                &tx,
                &tenant,
                &id,
                new.goal.as_deref(),
                new.rules.as_deref(),
                Timestamp::now(),
            )?;
            let run = load_run(&tx, &tenant, &id)?;
            tx.commit().map_err(sql)?;
            Ok(run)
        })
        .await
    }

    async fn run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| load_run(conn, &tenant, &run)).await
    }

    async fn list_runs(&self, tenant: &TenantId) -> Result<Vec<Run>, Error> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let known: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM tenants WHERE id = ?1)",
                    [tenant.as_str()],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            if !known {
                return Err(Error::UnknownTenant { tenant });
            }
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE tenant_id = ?1 ORDER BY pk"
                ))
                .map_err(sql)?;
            let mut rows = stmt.query([tenant.as_str()]).map_err(sql)?;
            let mut runs = Vec::new();
            while let Some(row) = rows.next().map_err(sql)? {
                runs.push(run_from_row(row)?);
            }
            Ok(runs)
        })
        .await
    }

    async fn cancel_run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            match row.status {
                RunStatus::Active => {
                    tx.execute(
                        "UPDATE runs SET status = 'cancelled' WHERE pk = ?1",
                        [row.pk],
                    )
                    .map_err(sql)?;
                }
                RunStatus::Cancelled => {}
                RunStatus::Completed => {
                    return Err(Error::RunNotActive {
                        run,
                        status: row.status,
                    });
                }
            }
            let updated = load_run(&tx, &tenant, &run)?;
            tx.commit().map_err(sql)?;
            Ok(updated)
        })
        .await
    }

    async fn append(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entries: &[NewEntry],
    ) -> Result<Vec<Seq>, Error> {
        let prepared = prepare(entries)?;
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            if row.status != RunStatus::Active {
                return Err(Error::RunNotActive {
                    run,
                    status: row.status,
                });
            }
            let seqs = insert_entries(&tx, row.pk, row.last_seq, &prepared, Timestamp::now())?;
            tx.commit().map_err(sql)?;
            Ok(seqs)
        })
        .await
    }

    async fn read_range(
        &self,
        tenant: &TenantId,
        run: &RunId,
        from: Seq,
        to: Option<Seq>,
    ) -> Result<Vec<Entry>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            read_entries(&tx, row.pk, from, to)
        })
        .await
    }

    async fn protocol_window(
        &self,
        tenant: &TenantId,
        run: &RunId,
        after: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            read_window(&tx, row.pk, after)
        })
        .await
    }

    async fn search(
        &self,
        tenant: &TenantId,
        run: &RunId,
        query: &SearchQuery,
    ) -> Result<Vec<Entry>, Error> {
        let phrase = baton_store::search_phrase(query)?;
        let (tenant, run, query) = (tenant.clone(), run.clone(), query.clone());
        // The common case: the index is up to date, and the search is one read.
        let upto = {
            let (tenant, run, phrase, query) =
                (tenant.clone(), run.clone(), phrase.clone(), query.clone());
            self.read(move |conn| {
                let tx = conn.transaction().map_err(sql)?;
                let row = find_run(&tx, &tenant, &run)?;
                let last = to_i64(row.last_seq.0)?;
                if indexed_through(&tx, row.pk)? < last {
                    return Ok(Err(last));
                }
                search_entries(&tx, row.pk, &phrase, &query).map(Ok)
            })
            .await?
        };
        let upto = match upto {
            Ok(entries) => return Ok(entries),
            Err(upto) => upto,
        };
        // History the index has not seen, through the last seq at the call: index it one batch
        // per write transaction, so appenders and installs (in this process or another) get
        // the write lock between batches instead of waiting for the whole run; concurrent
        // searchers take batches in turn and never index a message twice.
        let mut indexed = 0;
        loop {
            let (tenant, run) = (tenant.clone(), run.clone());
            let (n, caught_up) = self
                .write(move |conn| {
                    let tx = conn
                        .transaction_with_behavior(TransactionBehavior::Immediate)
                        .map_err(sql)?;
                    let row = find_run(&tx, &tenant, &run)?;
                    let done = index_batch(&tx, row.pk, upto)?;
                    tx.commit().map_err(sql)?;
                    Ok(done)
                })
                .await?;
            indexed += n;
            if caught_up {
                break;
            }
        }
        if indexed > 0 {
            tracing::debug!(run = %run, messages = indexed, "indexed history for search");
        }
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            search_entries(&tx, row.pk, &phrase, &query)
        })
        .await
    }

    async fn install_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        candidate: &Candidate,
    ) -> Result<Install, Error> {
        let body = serde_json::to_string(&SummaryBody {
            claims: candidate.claims.clone(),
        })
        .map_err(|e| Error::Corrupt {
            what: format!("summary does not serialize: {e}"),
        })?;
        let meta = codec::meta_json(candidate.meta.as_ref())?;
        let (tenant, run, candidate) = (tenant.clone(), run.clone(), candidate.clone());
        self.write(move |conn| {
            // Dropping `tx` without commit rolls back: every early return below writes nothing.
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive { status: row.status }));
            }
            if let Err(why) = validate(&tx, &row, &candidate)? {
                return Ok(Install::Rejected(Rejection::Invalid(why)));
            }
            let base = candidate.base.map(|b| to_i64(b.0)).transpose()?;
            tx.prepare_cached(
                "INSERT INTO summaries (run_pk, coverage, previous_id, body, created_at, meta) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .map_err(sql)?
            .execute(params![row.pk, to_i64(candidate.cut.0)?, base, body, Timestamp::now().0, meta])
            .map_err(sql)?;
            let new_id = tx.last_insert_rowid();
            // The compare-and-swap: move the pointer only if it still names the base.
            let swapped = tx
                .prepare_cached("UPDATE runs SET active_summary_id = ?1 WHERE pk = ?2 AND active_summary_id IS ?3")
                .map_err(sql)?
                .execute(params![new_id, row.pk, base])
                .map_err(sql)?;
            if swapped != 1 {
                drop(tx); // rolls back the inserted candidate too
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: candidate.base,
                    active: row.active_summary_id,
                }));
            }
            let summary = load_summary(&tx, row.pk, SummaryId(to_u64(new_id, "summary id")?))?
                .ok_or_else(|| Error::Corrupt { what: format!("summary {new_id} vanished inside its transaction") })?;
            tx.commit().map_err(sql)?;
            Ok(Install::Installed(summary))
        })
        .await
    }

    async fn summaries(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Summary>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            let mut stmt = tx
                .prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk
                     WHERE s.run_pk = ?1 ORDER BY s.id"
                ))
                .map_err(sql)?;
            let mut rows = stmt.query([row.pk]).map_err(sql)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(sql)? {
                out.push(summary_from_row(r)?);
            }
            Ok(out)
        })
        .await
    }

    async fn summary(&self, tenant: &TenantId, id: SummaryId) -> Result<Summary, Error> {
        let tenant = tenant.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk
                     WHERE s.id = ?1 AND r.tenant_id = ?2"
                ))
                .map_err(sql)?;
            let mut rows = stmt
                .query(params![lookup_i64(id.0), tenant.as_str()])
                .map_err(sql)?;
            match rows.next().map_err(sql)? {
                Some(r) => summary_from_row(r),
                None => Err(Error::SummaryNotFound { id }),
            }
        })
        .await
    }

    async fn import(
        &self,
        tenant: &TenantId,
        imports: Vec<NewImport>,
        reimport: Reimport,
    ) -> Result<Vec<Imported>, Error> {
        let file = import::ready(imports)?;
        let tenant = tenant.clone();
        self.write(move |conn| {
            // One transaction for the file: any error drops it, and nothing of the file stays.
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let outcomes = import::import(&tx, &tenant, &file, reimport)?;
            tx.commit().map_err(sql)?;
            Ok(outcomes)
        })
        .await
    }

    async fn run_report(&self, tenant: &TenantId, run: &RunId) -> Result<RunReport, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            import::report(&tx, &tenant, &run)
        })
        .await
    }

    async fn context_parts(&self, tenant: &TenantId, run: &RunId) -> Result<ContextParts, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            // One read transaction: run, summary, pins and tail come from the same snapshot.
            let tx = conn.transaction().map_err(sql)?;
            let (pk, run, summary) = compaction::run_and_summary(&tx, &tenant, &run)?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            let pinned = compaction::pinned_entries(&tx, pk, coverage)?;
            let pins = compaction::pins(&tx, pk)?;
            let tail = read_entries(&tx, pk, coverage.next(), None)?;
            Ok(ContextParts {
                run,
                summary,
                pinned,
                pins,
                tail,
            })
        })
        .await
    }

    async fn context_meta(&self, tenant: &TenantId, run: &RunId) -> Result<ContextMeta, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let (pk, run, summary) = compaction::run_and_summary(&tx, &tenant, &run)?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            Ok(ContextMeta {
                pinned: compaction::pinned_entries(&tx, pk, coverage)?,
                pins: compaction::pins(&tx, pk)?,
                tail: compaction::tail_meta(&tx, pk, coverage)?,
                run,
                summary,
            })
        })
        .await
    }

    async fn pin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            if seq.0 == 0 || seq > row.last_seq {
                return Err(Error::SeqNotFound {
                    run,
                    seq,
                    last: row.last_seq,
                });
            }
            let added = tx
                .prepare_cached(
                    "INSERT INTO pins (run_pk, seq, created_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (run_pk, seq) DO NOTHING",
                )
                .map_err(sql)?
                .execute(params![row.pk, to_i64(seq.0)?, Timestamp::now().0])
                .map_err(sql)?;
            tx.commit().map_err(sql)?;
            Ok(added == 1)
        })
        .await
    }

    async fn unpin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            let removed = tx
                .prepare_cached("DELETE FROM pins WHERE run_pk = ?1 AND seq = ?2")
                .map_err(sql)?
                .execute(params![row.pk, lookup_i64(seq.0)])
                .map_err(sql)?;
            tx.commit().map_err(sql)?;
            Ok(removed == 1)
        })
        .await
    }

    async fn pins(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Seq>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            compaction::pins(&tx, row.pk)
        })
        .await
    }

    async fn add_constraint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entry: &NewEntry,
        text: &str,
        read_only: bool,
    ) -> Result<Constraint, Error> {
        let (tenant, run, entry, text) =
            (tenant.clone(), run.clone(), entry.clone(), text.to_owned());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let constraint = agent::add_constraint(&tx, &tenant, &run, &entry, &text, read_only)?;
            tx.commit().map_err(sql)?;
            Ok(constraint)
        })
        .await
    }

    async fn constraints(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Constraint>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            agent::constraints(&tx, row.pk)
        })
        .await
    }

    async fn start_tool(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool_use_id: &str,
    ) -> Result<bool, Error> {
        let (tenant, run, id) = (tenant.clone(), run.clone(), tool_use_id.to_owned());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let started = agent::start_tool(&tx, &tenant, &run, &id)?;
            tx.commit().map_err(sql)?;
            Ok(started)
        })
        .await
    }

    async fn started_tools(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<String>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(move |conn| {
            let tx = conn.transaction().map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            agent::started_tools(&tx, row.pk)
        })
        .await
    }

    async fn activate_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        id: SummaryId,
        base: Option<SummaryId>,
    ) -> Result<Install, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let row = find_run(&tx, &tenant, &run)?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive { status: row.status }));
            }
            let Some(summary) = load_summary(&tx, row.pk, id)? else {
                return Ok(Install::Rejected(Rejection::Invalid(
                    InvalidCandidate::VersionNotInRun { id },
                )));
            };
            let base_i64 = base.map(|b| to_i64(b.0)).transpose()?;
            let swapped = tx
                .prepare_cached(
                    "UPDATE runs SET active_summary_id = ?1 WHERE pk = ?2 AND active_summary_id IS ?3",
                )
                .map_err(sql)?
                .execute(params![to_i64(id.0)?, row.pk, base_i64])
                .map_err(sql)?;
            if swapped != 1 {
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: base,
                    active: row.active_summary_id,
                }));
            }
            tx.commit().map_err(sql)?;
            Ok(Install::Installed(summary))
        })
        .await
    }

    async fn set_cleared(
        &self,
        tenant: &TenantId,
        run: &RunId,
        expected: Option<Cleared>,
        new: Cleared,
    ) -> Result<SetCleared, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(sql)?;
            let (pk, current) = load_run_with_pk(&tx, &tenant, &run)?;
            if current.status != RunStatus::Active {
                return Ok(SetCleared::Rejected(Rejection::RunNotActive {
                    status: current.status,
                }));
            }
            if current.cleared != expected {
                return Ok(SetCleared::Rejected(Rejection::StaleCleared {
                    expected,
                    active: current.cleared,
                }));
            }
            if let Some(detail) = codec::check_cleared(current.cleared, new, current.last_seq) {
                return Ok(SetCleared::Rejected(Rejection::InvalidClear { detail }));
            }
            tx.prepare_cached(
                "UPDATE runs SET cleared_through = ?1, cleared_min_tokens = ?2 WHERE pk = ?3",
            )
            .map_err(sql)?
            .execute(params![to_i64(new.through.0)?, new.min_tokens, pk])
            .map_err(sql)?;
            let updated = load_run(&tx, &tenant, &run)?;
            tx.commit().map_err(sql)?;
            Ok(SetCleared::Set(updated))
        })
        .await
    }
}
