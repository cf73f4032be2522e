//! baton's store on PostgreSQL: the same contract as the embedded SQLite file, for many
//! workers on many machines.
//!
//! Roles:
//! - [`PgStore`]: a [`Backend`], and so a `baton_store::Store`: every rule of the store is
//!   `baton-store`'s; this crate holds the SQL, the pool and the notifications. Connections
//!   come from a `deadpool-postgres` pool of `tokio-postgres` connections; every table lives in
//!   one schema (`?schema=NAME` in the URL, default `baton`), so tests and several deployments
//!   share a server.
//! - [`PgTx`]: the row primitives as SQL (modules `rows`, `ledger`, `cache`). A write job's
//!   transaction starts at its first primitive that locks a row (`SELECT … FOR UPDATE`),
//!   takes advisory locks, or writes several statements; a job of one statement stays one
//!   round trip in autocommit. Reads of several rows run in one `REPEATABLE READ READ ONLY`
//!   transaction, so they see one snapshot.
//! - `migrations/`: the schema, one numbered SQL file per version, the same versions as
//!   `baton-sqlite`'s, applied at connect under an advisory lock (`migrate`).
//! - [`PgStore::doctor`]: what an operator checks first: server version, schema version, the
//!   settings that matter.
//!
//! Concurrency: every write that changes a run locks that run's row first, so appends assign
//! gap-free seqs in order across connections and an install's checks and its compare-and-swap
//! see one state of the run. Row locks rather than `SERIALIZABLE`: the check-then-act always
//! starts at one row, so one lock orders every conflicting writer without serialization
//! failures to retry. Failures are reported with the server's severity, code, message and the
//! constraint and table it names, never with a statement's parameters or a row's values.
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_store::Error> {
//! use baton_store::Store;
//! let store = baton_postgres::PgStore::connect("postgres://postgres@127.0.0.1:5432/test?schema=baton").await?;
//! let runs = store.list_runs(&baton_core::TenantId::default_tenant()).await;
//! # Ok(()) }
//! ```

#[cfg(feature = "bench")]
pub mod bench;
mod cache;
mod ledger;
mod migrate;
mod rows;

use std::future::Future;
use std::time::Duration;

use baton_core::TenantId;
use baton_core::key::RequestKey;
use baton_store::Error;
use baton_store::backend::{Backend, BoxFuture, int};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::types::{ToSql, Type};

pub use migrate::SCHEMA_VERSION;

/// The schema used when the URL names none.
pub const DEFAULT_SCHEMA: &str = "baton";
/// Connections kept by one store, unless the URL says `pool_size=N`: enough for one process's
/// concurrent calls, few enough that a dozen processes fit PostgreSQL's default 100
/// connections.
const POOL_SIZE: usize = 8;

/// A store on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    schema: std::sync::Arc<str>,
    shown_url: String,
    /// Wakes flight waiters: one `LISTEN` connection outside the pool, shared by clones.
    flights: std::sync::Arc<cache::FlightListener>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &self.shown_url)
            .field("schema", &self.schema)
            .finish()
    }
}

/// What [`PgStore::doctor`] found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Doctor {
    /// The URL, password redacted.
    pub url: String,
    /// The schema baton's tables live in.
    pub schema: String,
    /// `SELECT version()`.
    pub server_version: String,
    /// The schema version found.
    pub schema_version: i64,
    /// The schema version this build writes.
    pub supported_version: i64,
    /// Settings that matter to baton, by name.
    pub settings: Vec<(String, String)>,
}

/// Splits `postgres://…?schema=NAME&pool_size=N&…` into a driver config, the schema name, the
/// URL as shown (redacted) and the pool size.
pub(crate) fn parse_url(
    url: &str,
) -> Result<(tokio_postgres::Config, String, String, usize), Error> {
    let invalid = |detail: String| Error::InvalidUrl {
        url: redact(url),
        detail,
    };
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut schema = DEFAULT_SCHEMA.to_owned();
    let mut pool_size = POOL_SIZE;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("schema", value)) => schema = value.to_owned(),
            Some(("pool_size", value)) => {
                pool_size = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        invalid(format!(
                            "pool_size {value:?}: expected a number from 1 to 1000"
                        ))
                    })?;
            }
            _ => kept.push(pair),
        }
    }
    let valid = schema.len() <= 63
        && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(invalid(format!(
            "schema {schema:?}: expected 1 to 63 lowercase letters, digits or '_', not starting with a digit"
        )));
    }
    let rebuilt = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: tokio_postgres::Config = rebuilt
        .parse()
        .map_err(|e: tokio_postgres::Error| invalid(e.to_string()))?;
    // Keep the caller's own `options=` (a statement timeout, say) beside baton's search_path.
    // A session left idle inside a transaction (its process paused, or stuck) would hold its
    // row locks, and every worker of the same run or operation would wait behind it: the
    // server ends such a session after 10 s, unless the caller's own options say otherwise.
    // baton's transactions send their statements back to back, so none of them idles that long.
    let idle = "-c idle_in_transaction_session_timeout=10s";
    let options = match config.get_options() {
        Some(theirs) if theirs.contains("idle_in_transaction_session_timeout") => {
            format!("{theirs} -c search_path={schema}")
        }
        Some(theirs) if !theirs.trim().is_empty() => {
            format!("{theirs} {idle} -c search_path={schema}")
        }
        _ => format!("{idle} -c search_path={schema}"),
    };
    config.options(options);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(std::time::Duration::from_secs(10));
    }
    config.application_name("baton");
    Ok((config, schema, redact(url), pool_size))
}

pub use baton_store::redact_url as redact;

impl PgStore {
    /// Connects, creates the schema if needed and applies the missing migrations.
    ///
    /// Fails with [`Error::NotABatonDatabase`] when the schema holds tables baton did not make,
    /// and [`Error::SchemaTooNew`] when a newer baton migrated it; neither is modified.
    pub async fn connect(url: &str) -> Result<Self, Error> {
        let store = Self::connect_without_migrating(url)?;
        store.migrate().await?;
        Ok(store)
    }

    /// Builds the pool without touching the server (connections open on first use).
    pub fn connect_without_migrating(url: &str) -> Result<Self, Error> {
        let (config, schema, shown_url, pool_size) = parse_url(url)?;
        let flights = cache::FlightListener::new(config.clone(), &schema, &shown_url);
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(std::time::Duration::from_secs(30)))
            .create_timeout(Some(std::time::Duration::from_secs(10)))
            .build()
            .map_err(|e| Error::InvalidUrl {
                url: shown_url.clone(),
                detail: e.to_string(),
            })?;
        Ok(PgStore {
            pool,
            schema: schema.into(),
            shown_url,
            flights: std::sync::Arc::new(flights),
        })
    }

    /// The schema baton's tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Applies the missing migrations; returns the versions applied (empty when up to date).
    pub async fn migrate(&self) -> Result<Vec<i64>, Error> {
        let mut client = self.client().await?;
        migrate::run(&mut client, &self.schema).await
    }

    /// Connectivity, versions and the settings that matter.
    pub async fn doctor(&self) -> Result<Doctor, Error> {
        let client = self.client().await?;
        let schema_version = migrate::current_version(&client, &self.schema).await?;
        let names = [
            "server_version",
            "max_connections",
            "default_transaction_isolation",
            "synchronous_commit",
            "fsync",
            "wal_level",
            "shared_buffers",
            "idle_in_transaction_session_timeout",
            "statement_timeout",
            "search_path",
            // Off, nothing analyzes baton's tables: plans made on them while they were small
            // are kept by pooled connections however much they grow. Run ANALYZE now and then.
            "autovacuum",
        ];
        let sql = "SELECT version(), n, current_setting(n) FROM unnest($1::text[]) AS n";
        let rows = client.query(sql, &[&&names[..]]).await.map_err(pg)?;
        let server_version = rows.first().map(|r| r.get(0)).unwrap_or_default();
        let settings = rows.iter().map(|r| (r.get(1), r.get(2))).collect();
        Ok(Doctor {
            url: self.shown_url.clone(),
            schema: self.schema.to_string(),
            server_version,
            schema_version,
            supported_version: SCHEMA_VERSION,
            settings,
        })
    }

    /// A pooled connection that is still open. A connection the server dropped (a restart, a
    /// `pg_terminate_backend`, a network cut) can sit in the pool until its next use; it is
    /// discarded here and replaced, so the operation after a fault reconnects.
    async fn client(&self) -> Result<deadpool_postgres::Object, Error> {
        for _ in 0..=POOL_SIZE {
            let client = self.pool.get().await.map_err(|e| Error::Unavailable {
                what: format!("{}: {e}", self.shown_url),
            })?;
            if !client.is_closed() {
                return Ok(client);
            }
            drop(deadpool_postgres::Object::take(client));
        }
        Err(Error::Unavailable {
            what: format!("{}: every pooled connection was closed", self.shown_url),
        })
    }
}

fn pg(err: tokio_postgres::Error) -> Error {
    Error::backend(PgError(err))
}

/// A PostgreSQL failure as baton reports (and so logs) it: the server's severity, SQLSTATE
/// code and message, and the constraint, table and column it names. Never the `DETAIL`,
/// which can quote a row's values, nor a statement's parameters; no `source()`, so an error
/// chain printed whole cannot reach them either.
struct PgError(tokio_postgres::Error);

impl std::fmt::Debug for PgError {
    /// As `Display`: the driver's own debug form would show the `DETAIL`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgError({self})")
    }
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(db) = self.0.as_db_error() else {
            write!(f, "{}", self.0)?;
            let mut causes =
                std::iter::successors(std::error::Error::source(&self.0), |e| e.source());
            return causes.try_for_each(|cause| write!(f, ": {cause}"));
        };
        write!(
            f,
            "{} {}: {}",
            db.severity(),
            db.code().code(),
            db.message()
        )?;
        let named = [
            ("constraint", db.constraint()),
            ("table", db.table()),
            ("column", db.column()),
        ];
        for (what, name) in named.into_iter().filter_map(|(w, n)| Some((w, n?))) {
            write!(f, "; {what} {name}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

/// Whether `err` means the connection it came from is no longer usable.
fn connection_broken(err: &Error) -> bool {
    let Error::Backend(inner) = err else {
        return false;
    };
    inner.downcast_ref::<PgError>().is_some_and(|PgError(pg)| {
        // No SQL error (`None`): an I/O or protocol failure.
        pg.is_closed()
            || pg.as_db_error().is_none_or(|db| {
                matches!(db.severity(), "FATAL" | "PANIC") || db.code().code().starts_with("57P")
            })
    })
}

impl PgStore {
    /// Runs `job` on a pooled connection: in a snapshot (`REPEATABLE READ READ ONLY`) when
    /// `snapshot`, else in autocommit until a primitive begins a transaction; commits what
    /// began when the job returns `Ok`, rolls it back otherwise. A connection that failed
    /// because it broke is taken out of the pool instead of going back, so the next operation
    /// reconnects even if the driver has not noticed the closed socket yet.
    async fn run<T, F>(&self, snapshot: bool, job: F) -> Result<T, Error>
    where
        F: for<'t> FnOnce(&'t mut PgTx) -> BoxFuture<'t, Result<T, Error>>,
    {
        let mut tx = PgTx {
            client: Some(self.client().await?),
            begun: false,
            schema: self.schema.clone(),
            channel: self.flights.channel.clone(),
        };
        let result = async {
            if snapshot {
                let sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
                tx.batch(sql, true).await?;
            }
            job(&mut tx).await
        }
        .await;
        let result = match result {
            Ok(value) if tx.begun => tx.batch("COMMIT", false).await.map(|()| value),
            Err(e) if tx.begun && !connection_broken(&e) => {
                let _ = tx.batch("ROLLBACK", false).await;
                Err(e)
            }
            result => result,
        };
        if result.as_ref().err().is_some_and(connection_broken)
            && let Some(client) = tx.client.take()
        {
            drop(Object::take(client));
        }
        result
    }
}

impl Backend for PgStore {
    type Tx = PgTx;

    fn write<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut PgTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.run(false, job)
    }

    fn read<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut PgTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.run(true, job)
    }

    fn read_one<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut PgTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.run(false, job)
    }

    fn wait_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        at_most: Duration,
    ) -> impl Future<Output = ()> + Send {
        self.flights.wait(tenant, key, at_most)
    }
}

/// A pooled connection as a job sees it: every row primitive of [`Backend`], as SQL.
pub struct PgTx {
    /// `None` only once discarded.
    client: Option<Object>,
    /// Whether a transaction is open on it.
    begun: bool,
    /// The store's schema, which advisory lock keys name.
    schema: std::sync::Arc<str>,
    /// The channel flight notifications go to.
    channel: std::sync::Arc<str>,
}

impl Drop for PgTx {
    /// A job dropped inside its transaction (its caller gave up) leaves the transaction open:
    /// the connection is closed rather than handed to the next caller mid-transaction.
    fn drop(&mut self) {
        if self.begun
            && let Some(client) = self.client.take()
        {
            drop(Object::take(client));
        }
    }
}

/// A statement's parameters.
type Params<'a> = [&'a (dyn ToSql + Sync)];

/// `f` of every item, as `BIGINT`s (an array parameter).
fn ints<T>(items: &[T], f: impl Fn(&T) -> u64) -> Result<Vec<i64>, Error> {
    items.iter().map(|item| int(f(item))).collect()
}

impl PgTx {
    fn client(&self) -> Result<&Object, Error> {
        self.client.as_ref().ok_or_else(|| Error::Unavailable {
            what: "a discarded connection".into(),
        })
    }

    /// Runs `BEGIN …` (`open`) or `COMMIT`, `ROLLBACK` and notes whether a transaction is open.
    async fn batch(&mut self, sql: &str, open: bool) -> Result<(), Error> {
        self.client()?.batch_execute(sql).await.map_err(pg)?;
        self.begun = open;
        Ok(())
    }

    /// Opens the job's transaction, unless it is open.
    async fn begin(&mut self) -> Result<(), Error> {
        match self.begun {
            true => Ok(()),
            false => self.batch("BEGIN", true).await,
        }
    }

    /// Runs one statement.
    async fn exec(&mut self, sql: &str, params: &Params<'_>) -> Result<(), Error> {
        self.changed(sql, params).await.map(drop)
    }

    /// Runs one statement; the rows it changed.
    async fn changed(&mut self, sql: &str, params: &Params<'_>) -> Result<u64, Error> {
        let client = self.client()?;
        let stmt = client.prepare_cached(sql).await.map_err(pg)?;
        client.execute(&stmt, params).await.map_err(pg)
    }

    /// The first row of a query, decoded by `f`.
    async fn one<T>(
        &mut self,
        sql: &str,
        params: &Params<'_>,
        f: impl FnOnce(&R<'_>) -> Result<T, Error> + Send,
    ) -> Result<Option<T>, Error> {
        let client = self.client()?;
        let stmt = client.prepare_cached(sql).await.map_err(pg)?;
        match client.query_opt(&stmt, params).await.map_err(pg)? {
            Some(row) => f(&R(&row)).map(Some),
            None => Ok(None),
        }
    }

    /// Every row of a query, each decoded by `f`.
    async fn all<T>(
        &mut self,
        sql: &str,
        params: &Params<'_>,
        mut f: impl FnMut(&R<'_>) -> Result<T, Error> + Send,
    ) -> Result<Vec<T>, Error> {
        let client = self.client()?;
        let stmt = client.prepare_cached(sql).await.map_err(pg)?;
        let rows = client.query(&stmt, params).await.map_err(pg)?;
        rows.iter().map(|row| f(&R(row))).collect()
    }
}

/// A result row, read by [`baton_store::backend::Row`]'s decoders.
pub(crate) struct R<'a>(&'a tokio_postgres::Row);

impl baton_store::backend::Row for R<'_> {
    fn int(&self, i: usize) -> Result<Option<i64>, Error> {
        let row = self.0;
        match row.columns().get(i).map(|c| c.type_()) {
            Some(&Type::INT4) => row.try_get::<_, Option<i32>>(i).map(|v| v.map(i64::from)),
            Some(&Type::INT2) => row.try_get::<_, Option<i16>>(i).map(|v| v.map(i64::from)),
            _ => row.try_get(i),
        }
        .map_err(pg)
    }
    fn text(&self, i: usize) -> Result<Option<String>, Error> {
        self.0.try_get(i).map_err(pg)
    }
    fn blob(&self, i: usize) -> Result<Option<Vec<u8>>, Error> {
        self.0.try_get(i).map_err(pg)
    }
    fn real(&self, i: usize) -> Result<Option<f64>, Error> {
        self.0.try_get(i).map_err(pg)
    }
    fn flag(&self, i: usize) -> Result<bool, Error> {
        self.0.try_get(i).map_err(pg)
    }
}
