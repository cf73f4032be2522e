//! baton's embedded store: one SQLite file, in WAL mode, with foreign keys on and versioned
//! migrations applied at open.
//!
//! Roles:
//! - [`SqliteStore`]: a [`Backend`], and so a `baton_store::Store`: every rule of the store is
//!   `baton-store`'s; this crate holds the SQL and the connections.
//! - The writer (`writer`): the one connection that writes. A write that can start at once
//!   (connection free, nothing queued, SQLite's write lock free) runs on the caller's thread;
//!   any other is queued to the writer thread and the caller awaits a reply, so no tokio worker
//!   waits on a lock; jobs queued together commit in one transaction, each in a savepoint of
//!   its own. Across processes every write transaction is `BEGIN IMMEDIATE`, and only the
//!   writer thread waits out the busy timeout.
//! - Readers: a pool of connections (up to 32 kept idle) that WAL lets read beside the writer,
//!   each read one deferred transaction (one snapshot), run where the caller is
//!   (`block_in_place`: a read is tens of microseconds, less than a thread hop) or on the
//!   blocking pool on a current-thread runtime. A row's lookup (`read_row`) runs on the worker
//!   itself when a connection is idle, without even `block_in_place`'s hand-off.
//! - [`SqliteTx`]: the row primitives as SQL (modules `rows`, `ledger`, `cache`).
//! - `migrations/`: the schema, one numbered SQL file per version, embedded in the binary and
//!   applied at open (`migrate`). Search indexes the words `baton_store::search_rows` makes in
//!   a contentless FTS5 table (`history_search_words`) beside `history_search` (which message,
//!   kind and part each row is).
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_store::Error> {
//! use baton_store::Store;
//! let store = baton_sqlite::SqliteStore::open("baton.db").await?;
//! let runs = store.list_runs(&baton_core::TenantId::default_tenant()).await;
//! # Ok(()) }
//! ```

#[cfg(feature = "bench")]
pub mod bench;
mod cache;
mod ledger;
mod migrate;
mod rows;
mod writer;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_store::Error;
use baton_store::backend::{Backend, BoxFuture, Row};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, Params};
use tokio::sync::oneshot;

pub use migrate::SCHEMA_VERSION;

/// How long a write waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
/// Reader connections kept open for reuse: as many as reads run at once under load (each
/// thread of the runtime's pool may hold one), so a read never pays for opening a connection
/// (reading the schema, preparing its statements again).
const MAX_IDLE_READERS: usize = 32;

/// Prepared statements kept per connection: more than the store has (about 120), so a server
/// whose writer runs imports, captures, the cache and the ledger side by side never evicts a
/// statement it will run again (64 before).
const STATEMENT_CACHE: usize = 256;

/// A store on one SQLite file. Clones share the file's writer thread and readers; the thread
/// ends when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    jobs: Sender<Box<dyn writer::Job>>,
    writer: Arc<writer::Writer>,
    readers: Mutex<Vec<SqliteTx>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// A connection as a job sees it: every row primitive of [`Backend`], as SQL.
pub struct SqliteTx {
    conn: Connection,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, brings its schema up to date and
    /// starts its writer thread.
    ///
    /// Fails with [`Error::NotABatonDatabase`] for a file that is not SQLite or was not made by
    /// baton, and with [`Error::SchemaTooNew`] for one written by a newer baton; neither file
    /// is modified.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        let (jobs, queue) = std::sync::mpsc::channel();
        let (ready, opened) = oneshot::channel();
        let at = path.clone();
        std::thread::Builder::new()
            .name("baton-sqlite-writer".into())
            .spawn(move || {
                match connect(&at).and_then(|tx| migrate::run(&tx.conn, &at).map(|()| tx)) {
                    Ok(tx) => {
                        let shared = Arc::new(writer::Writer::new(tx, BUSY_TIMEOUT));
                        if ready.send(Ok(shared.clone())).is_ok() {
                            writer::run(&shared, queue);
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })
            .map_err(Error::backend)?;
        let writer = opened.await.map_err(|_| stopped())??;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                jobs,
                writer,
                readers: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Lets the write-ahead log grow to `pages` pages (4 KiB each) before this store's writer
    /// checkpoints it, instead of SQLite's 1,000. A checkpoint runs inside the commit that
    /// crosses the mark, on the writer, and ends with two `fsync`s, which on this machine's disk
    /// took from 0.2 to 50 ms each: a bulk import of the corpus (about 50 MB written) paid
    /// fifteen of them on its critical path. `baton import` sets 10,000 (40 MB): its median
    /// went from 0.355 to 0.317 s and its slowest of 12 rounds from 0.80 to 0.46 s (taking
    /// turns with the default, 2 cores). A server keeps the default, where a checkpoint's pause
    /// stays short. The rest is checkpointed when the store closes, as always.
    pub async fn checkpoint_every(&self, pages: u32) -> Result<(), Error> {
        self.write_row(
            move |tx: &mut SqliteTx| -> BoxFuture<'_, Result<(), Error>> {
                Box::pin(async move {
                    let sql = format!("PRAGMA wal_autocheckpoint = {pages}");
                    tx.conn.query_row(&sql, [], |_| Ok(())).map_err(fail)
                })
            },
        )
        .await
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The file's schema version, the SQLite library version and the settings that matter.
    pub async fn doctor(&self) -> Result<Vec<(String, String)>, Error> {
        const PRAGMAS: [&str; 6] = [
            "user_version",
            "journal_mode",
            "synchronous",
            "foreign_keys",
            "busy_timeout",
            "page_size",
        ];
        let sql = format!(
            "SELECT {}",
            PRAGMAS
                .map(|p| format!("CAST((SELECT * FROM pragma_{p}) AS TEXT)"))
                .join(", ")
        );
        let values = self.read_one(move |tx| {
            Box::pin(async move {
                let values = tx.one(&sql, [], |r| {
                    (0..PRAGMAS.len()).map(|i| r.text_at(i)).collect()
                })?;
                Ok(values.unwrap_or_default())
            })
        });
        let values: Vec<String> = values.await?;
        let facts = PRAGMAS.iter().map(|p| p.to_string()).zip(values);
        Ok(
            std::iter::once(("sqlite_version".into(), rusqlite::version().into()))
                .chain(facts)
                .collect(),
        )
    }

    /// Runs `job` on a reader connection, inside a read transaction when `snapshot`, off the
    /// executor ([`blocking`]).
    async fn on_reader<T, F>(&self, snapshot: bool, job: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || read_on(&inner, None, snapshot, job)).await
    }
}

/// Runs `job` on `conn`, else on an idle reader connection (a new one when none is idle),
/// inside a read transaction when `snapshot`, and gives the connection back to the pool.
fn read_on<T, F>(inner: &Inner, conn: Option<SqliteTx>, snapshot: bool, job: F) -> Result<T, Error>
where
    F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>>,
{
    let idle = conn.or_else(|| inner.readers.lock().ok().and_then(|mut pool| pool.pop()));
    let mut tx = idle.map_or_else(|| connect(&inner.path), Ok)?;
    let result = match snapshot {
        true => tx
            .exec("BEGIN", [])
            .and_then(|_| writer::poll_once(job(&mut tx))),
        false => writer::poll_once(job(&mut tx)),
    };
    let ended = match tx.conn.is_autocommit() {
        true => Ok(0),
        false => tx.exec("COMMIT", []),
    };
    if ended.is_ok()
        && let Ok(mut pool) = inner.readers.lock()
        && pool.len() < MAX_IDLE_READERS
    {
        pool.push(tx);
    }
    let value = result?;
    ended?;
    Ok(value)
}

impl Backend for SqliteStore {
    type Tx = SqliteTx;

    fn write<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.submit(job, true)
    }

    /// A row's write, when it runs inline, runs on the worker itself: it takes a few
    /// microseconds, less than `block_in_place`'s hand-off of the worker to another thread
    /// (which the ledger bench measures: 0.49 → 0.55 of the bare loop with one worker).
    fn write_row<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.submit(job, false)
    }

    fn read<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.on_reader(true, job)
    }

    fn read_one<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.on_reader(false, job)
    }

    /// A row's lookup runs on the worker itself when a reader connection is idle, as
    /// [`Backend::write_row`]'s write does when inline: one indexed statement takes a few
    /// microseconds, less than `block_in_place`'s hand-off of the worker to another thread
    /// (under `wrk`, that hand-off's thread wake-ups were most of a cache hit's CPU). With no
    /// idle connection (opening one reads the schema) it goes the way of any read. A WAL reader
    /// waits on no writer; it can wait only while another process recovers the WAL after a
    /// crash, which baton's own processes do when they open the file, not while they serve.
    fn read_row<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        let inner = self.inner.clone();
        async move {
            let idle = inner.readers.lock().ok().and_then(|mut pool| pool.pop());
            match idle {
                Some(tx) => read_on(&inner, Some(tx), false, job),
                None => self.on_reader(false, job).await,
            }
        }
    }
}

impl SqliteStore {
    /// Runs `job` inline when the writer is free (under `block_in_place` when `hand_off`),
    /// else queues it for the writer thread; the result once its transaction committed.
    fn submit<T, F>(&self, job: F, hand_off: bool) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        let inner = self.inner.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            let job: Box<dyn writer::Job> = Box::new(writer::Typed {
                job: Some(job),
                result: None,
                reply,
            });
            let inline = |job| writer::try_inline(&inner.writer, job);
            let tried = if hand_off {
                in_place(|| inline(job))
            } else {
                inline(job)
            };
            if let Err(job) = tried {
                inner.writer.queue_one();
                inner.jobs.send(job).map_err(|_| stopped())?;
            }
            answer.await.map_err(|_| stopped())?
        }
    }
}

fn stopped() -> Error {
    writer::failed("the store's writer thread stopped")
}

/// Runs blocking SQLite reads without stalling the executor.
///
/// On a multi-thread runtime this is `block_in_place`: the worker hands its other tasks to the
/// rest of the pool and runs `f` itself, with no thread hop (a read is a few tens of
/// microseconds; `spawn_blocking`'s round trip alone costs about as much). A current-thread
/// runtime cannot give its only worker away, so there the work goes to the blocking pool.
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

/// Runs `f`, which does not wait on anything but may take a while (a large write), where the
/// caller is: on a multi-thread runtime under `block_in_place`, so the worker's other tasks
/// move to the rest of the pool meanwhile.
fn in_place<T>(f: impl FnOnce() -> T) -> T {
    let flavor = tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor());
    match flavor {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Opens one connection with baton's settings. `synchronous = NORMAL` in WAL mode: a committed
/// transaction survives a crash of the process; a power loss may lose the last transactions but
/// never corrupts the file.
fn connect(path: &Path) -> Result<SqliteTx, Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let err = |e| db_error(path, e);
    let conn = Connection::open_with_flags(path, flags).map_err(err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
        .map_err(err)?;
    // The query planner's stability guarantee: a statement's plan never depends on the values
    // bound to it. Without it SQLite marks a parameter for re-preparing whenever the planner
    // looked at its value (a join's or an ORDER BY's `col = ?N` filter is probed for 0 or 1 when
    // the planner weighs it), and rusqlite clears the bindings of a statement returned to its
    // cache, which then expires it: such statements were parsed and planned again on every
    // use (the import's lookup of a source, for each of a thousand runs). What the guarantee
    // gives up here is nothing the store uses: no LIKE or GLOB with a bound pattern, partial
    // indexes whose `IS [NOT] NULL` conditions the planner proves from the statement's text,
    // no ANALYZE statistics; only `LIMIT ?` costing, where the primary key gives the order.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(SqliteTx { conn })
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

pub(crate) fn fail(err: rusqlite::Error) -> Error {
    Error::backend(err)
}

/// A result row, read by [`baton_store::backend::Row`]'s decoders.
pub(crate) struct R<'a>(&'a rusqlite::Row<'a>);

impl baton_store::backend::Row for R<'_> {
    fn int(&self, i: usize) -> Result<Option<i64>, Error> {
        self.0.get(i).map_err(fail)
    }
    fn text(&self, i: usize) -> Result<Option<String>, Error> {
        self.0.get(i).map_err(fail)
    }
    fn blob(&self, i: usize) -> Result<Option<Vec<u8>>, Error> {
        self.0.get(i).map_err(fail)
    }
    fn real(&self, i: usize) -> Result<Option<f64>, Error> {
        self.0.get(i).map_err(fail)
    }
    fn flag(&self, i: usize) -> Result<bool, Error> {
        self.0.get(i).map_err(fail)
    }
}

impl SqliteTx {
    /// Runs one statement; the rows it changed.
    fn exec(&self, sql: &str, params: impl Params) -> Result<usize, Error> {
        self.conn
            .prepare_cached(sql)
            .map_err(fail)?
            .execute(params)
            .map_err(fail)
    }

    /// The first row of a query, decoded by `f`.
    fn one<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&R<'_>) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(fail)?;
        let mut rows = stmt.query(params).map_err(fail)?;
        match rows.next().map_err(fail)? {
            Some(row) => f(&R(row)).map(Some),
            None => Ok(None),
        }
    }

    /// Every row of a query, each decoded by `f`.
    fn all<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut f: impl FnMut(&R<'_>) -> Result<T, Error>,
    ) -> Result<Vec<T>, Error> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(fail)?;
        let mut rows = stmt.query(params).map_err(fail)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(fail)? {
            out.push(f(&R(row))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rusqlite::StatementStatus;

    use super::*;

    /// The checkpoint mark is the writer's own setting (a connection's), and it holds for the
    /// writes after it.
    #[tokio::test]
    async fn the_checkpoint_mark_is_set_on_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("baton.db"))
            .await
            .unwrap();
        let mark = || {
            store.write_row(|tx: &mut SqliteTx| -> BoxFuture<'_, Result<i64, Error>> {
                Box::pin(async move {
                    let sql = "PRAGMA wal_autocheckpoint";
                    tx.conn.query_row(sql, [], |r| r.get(0)).map_err(fail)
                })
            })
        };
        assert_eq!(mark().await.unwrap(), 1000);
        store.checkpoint_every(10_000).await.unwrap();
        assert_eq!(mark().await.unwrap(), 10_000);
    }

    /// A cached statement runs as prepared whatever values are bound to it: an import looks up
    /// its sources one after the other with this statement, which SQLite re-prepared on every
    /// new binding without the planner's stability guarantee (about 1,000 times an import of
    /// the corpus, a sixth of the store's time).
    #[tokio::test]
    async fn a_cached_statement_is_not_prepared_again_for_new_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open(&path).await.unwrap());
        let tx = connect(&path).unwrap();
        for n in 0..20 {
            let key = format!("claude-code:/a/session-{n}.jsonl");
            let mut stmt = tx.conn.prepare_cached(rows::SOURCE).unwrap();
            let found = stmt.query_row(["default", key.as_str()], |r| r.get::<_, i64>(0));
            assert!(matches!(found, Err(rusqlite::Error::QueryReturnedNoRows)));
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "binding #{n}"
            );
        }
    }
}
