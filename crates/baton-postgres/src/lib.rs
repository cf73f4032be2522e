//! baton's store on PostgreSQL: the same [`Store`] contract as the embedded SQLite file, for
//! many workers on many machines.
//!
//! Roles:
//! - [`PgStore`]: the [`Store`] implementation over a `deadpool-postgres` pool of
//!   `tokio-postgres` connections, every table in one schema (`?schema=NAME` in the URL,
//!   default `baton`) so tests and several deployments can share a server.
//! - `migrations/`: the schema, one numbered SQL file per version, the same versions as
//!   `baton-sqlite`'s, applied at connect under an advisory lock. Version 2 adds recall
//!   search: `history_search`, the words `baton_store::search_rows` makes with a generated
//!   `tsvector` under a GIN index, and `search_progress`, how far each run is indexed.
//!   Indexing is lazy: `append` writes history only, and `search` first indexes the run's
//!   messages past its mark, in one transaction holding the run's progress row lock.
//!   Version 3 adds imported runs: `run_origins`, where each came from (found again by its
//!   source key, unique per tenant), and `source_compactions`, the compactions its source
//!   agent performed.
//!   Version 4 adds what compaction keeps beside summaries: `pins` (messages every strategy
//!   keeps, carried whole when a summary covers them), `summaries.meta` (what made a version,
//!   JSON as its installer gave it) and `runs.cleared_through` / `cleared_min_tokens` (which
//!   old tool results the context shows as a stub, moved forward by compare-and-swap).
//!   Version 6 adds the response cache (`cache_entries`, see `cache`): cached results with the
//!   SHA-256 of their bodies, `flights` (who is computing a key's result now, under a lease
//!   and a token) and `calls`, the call log.
//!   Version 7 adds the idempotency ledger (`operations`, `attempts`, see `ledger`): one
//!   operation per tenant and idempotency key, pinned to its request's hash, under a lease and
//!   a fence, and every worker's attempt at it.
//! - [`PgStore::doctor`]: what an operator checks first: server version, schema version, the
//!   settings that matter.
//!
//! Concurrency: every write that changes a run takes that run's row lock first
//! (`SELECT … FOR UPDATE`), so appends assign gap-free seqs in order across connections and an
//! install's validation and its compare-and-swap see one state of the run. Row locks rather
//! than `SERIALIZABLE`: the check-then-act always starts at the run row, so one lock orders
//! every conflicting writer without serialization failures to retry. An import first takes a
//! transaction-scoped advisory lock per source it names (see `import`), so importers of one
//! source on any number of connections take turns and find each other's run. A ledger call
//! takes the operation's row lock the same way (see `ledger`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), baton_store::Error> {
//! use baton_store::Store;
//! let store = baton_postgres::PgStore::connect("postgres://postgres@127.0.0.1:5432/test?schema=baton").await?;
//! let runs = store.list_runs(&baton_core::TenantId::default_tenant()).await;
//! # Ok(()) }
//! ```

mod compaction;
mod import;
mod migrate;

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
    NewImport, NewRun, Reimport, Rejection, RunReport, SearchQuery, SearchRow, SetCleared, Store,
};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::{IsolationLevel, NoTls, Row};

pub use migrate::SCHEMA_VERSION;

/// The schema used when the URL names none.
pub const DEFAULT_SCHEMA: &str = "baton";
/// Connections kept by one store, unless the URL says `pool_size=N`: enough for one process's
/// concurrent calls, few enough that a dozen processes fit PostgreSQL's default 100
/// connections.
const POOL_SIZE: usize = 8;

/// A [`Store`] on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    schema: String,
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
fn parse_url(url: &str) -> Result<(tokio_postgres::Config, String, String, usize), Error> {
    let invalid = |detail: String| Error::InvalidUrl {
        url: redact(url),
        detail,
    };
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
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

/// The URL with any password replaced by `***`: in the user info (everything before the first
/// `@`, as the driver reads it, so a password may hold `/`, `?` or `#`) and in a `password=`
/// parameter. When unsure it hides more, never less.
pub fn redact(url: &str) -> String {
    fn redact_params(rest: &str) -> String {
        match rest.split_once('?') {
            None => rest.to_owned(),
            Some((base, query)) => {
                let params: Vec<_> = query
                    .split('&')
                    .map(|p| {
                        if p.to_ascii_lowercase().starts_with("password=") {
                            "password=***"
                        } else {
                            p
                        }
                    })
                    .collect();
                format!("{base}?{}", params.join("&"))
            }
        }
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return redact_params(url);
    };
    match rest.split_once('@') {
        Some((userinfo, after)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let hidden = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{hidden}@{}", redact_params(after))
        }
        None => format!("{scheme}://{}", redact_params(rest)),
    }
}

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
            schema,
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
        let server_version: String = client
            .query_one("SELECT version()", &[])
            .await
            .map_err(pg)?
            .get(0);
        let schema_version = migrate::current_version(&client, &self.schema).await?;
        let mut settings = Vec::new();
        for name in [
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
        ] {
            let row = client
                .query_one("SELECT current_setting($1)", &[&name])
                .await
                .map_err(pg)?;
            settings.push((name.to_owned(), row.get::<_, String>(0)));
        }
        Ok(Doctor {
            url: self.shown_url.clone(),
            schema: self.schema.clone(),
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

/// A driver error as baton reports and logs it. tokio-postgres says only `db error` for
/// anything the server refused and keeps the server's report in its source, whose DETAIL can
/// quote a row's values. This says what the server said, its SQLSTATE code and the constraint,
/// table and column it names, and nothing else: never a parameter or a row's values. It has no
/// source, so no printer of the error chain reaches the DETAIL either.
#[derive(Debug)]
struct PgError(tokio_postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(db) = self.0.as_db_error() else {
            // A connection or protocol failure: the driver's words, and its cause's.
            write!(f, "{}", self.0)?;
            if let Some(cause) = std::error::Error::source(&self.0) {
                write!(f, ": {cause}")?;
            }
            return Ok(());
        };
        write!(
            f,
            "{}: {} (SQLSTATE {}",
            db.severity(),
            db.message(),
            db.code().code()
        )?;
        if let Some(constraint) = db.constraint() {
            write!(f, ", constraint {constraint}")?;
        }
        if let Some(table) = db.table() {
            match db.schema() {
                Some(schema) => write!(f, ", table {schema}.{table}")?,
                None => write!(f, ", table {table}")?,
            }
        }
        if let Some(column) = db.column() {
            write!(f, ", column {column}")?;
        }
        write!(f, ")")
    }
}

impl std::error::Error for PgError {}

struct RunRow {
    pk: i64,
    status: RunStatus,
    active_summary_id: Option<SummaryId>,
    last_seq: Seq,
}

/// Finds a run's key facts; with `lock`, takes its row lock until the transaction ends.
async fn find_run(
    c: &impl GenericClient,
    tenant: &TenantId,
    run: &RunId,
    lock: bool,
) -> Result<RunRow, Error> {
    let sql = if lock {
        "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
    } else {
        "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = $1 AND id = $2"
    };
    let stmt = c.prepare_cached(sql).await.map_err(pg)?;
    match c
        .query_opt(&stmt, &[&tenant.as_str(), &run.as_str()])
        .await
        .map_err(pg)?
    {
        Some(row) => Ok(RunRow {
            pk: row.get(0),
            status: parse_status(row.get(1))?,
            active_summary_id: row
                .get::<_, Option<i64>>(2)
                .map(|id| to_u64(id, "summary id").map(SummaryId))
                .transpose()?,
            last_seq: Seq(to_u64(row.get(3), "last_seq")?),
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

fn run_from_row(r: &Row) -> Result<Run, Error> {
    Ok(Run {
        id: RunId::new(r.get::<_, String>(0))?,
        tenant: TenantId::new(r.get::<_, String>(1))?,
        status: parse_status(r.get(2))?,
        goal: r.get(3),
        rules: r.get(4),
        active_summary_id: r
            .get::<_, Option<i64>>(5)
            .map(|id| to_u64(id, "summary id").map(SummaryId))
            .transpose()?,
        last_seq: Seq(to_u64(r.get(6), "last_seq")?),
        cleared: codec::cleared(r.get(8), r.get(9))?,
        created_at: Timestamp(r.get(7)),
    })
}

pub(crate) async fn load_run(
    c: &impl GenericClient,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, Run), Error> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS}, pk FROM runs WHERE tenant_id = $1 AND id = $2"
        ))
        .await
        .map_err(pg)?;
    match c
        .query_opt(&stmt, &[&tenant.as_str(), &run.as_str()])
        .await
        .map_err(pg)?
    {
        Some(row) => Ok((row.get(10), run_from_row(&row)?)),
        None => Err(missing_run(run)),
    }
}

pub(crate) fn entry_from_row(r: &Row) -> Result<Entry, Error> {
    let seq = Seq(to_u64(r.get(0), "seq")?);
    let message: Message = serde_json::from_str(r.get(3)).map_err(|e| Error::Corrupt {
        what: format!("message at seq {seq}: {e}"),
    })?;
    Ok(Entry {
        seq,
        tokens: u32::try_from(r.get::<_, i32>(1)).unwrap_or(0),
        created_at: Timestamp(r.get(2)),
        message,
    })
}

/// Messages serialized for `history`: the parallel arrays one `INSERT … SELECT FROM unnest(…)`
/// takes, made before a connection is taken.
struct Prepared {
    tokens: Vec<i32>,
    tool_uses: Vec<Option<String>>,
    tool_results: Vec<Option<String>>,
    messages: Vec<String>,
}

/// Serializes `entries` for [`insert_entries`].
fn prepare(entries: &[NewEntry]) -> Result<Prepared, Error> {
    let mut tokens = Vec::with_capacity(entries.len());
    let mut tool_uses = Vec::with_capacity(entries.len());
    let mut tool_results = Vec::with_capacity(entries.len());
    let mut messages = Vec::with_capacity(entries.len());
    for e in entries {
        tokens.push(i32::try_from(e.tokens).unwrap_or(i32::MAX));
        tool_uses.push(ids_json(e.message.tool_use_ids().collect()));
        tool_results.push(ids_json(e.message.tool_result_ids().collect()));
        messages.push(
            serde_json::to_string(&e.message).map_err(|err| Error::Corrupt {
                what: format!("message does not serialize: {err}"),
            })?,
        );
    }
    Ok(Prepared {
        tokens,
        tool_uses,
        tool_results,
        messages,
    })
}

/// Creates the tenant on first use and a new active run; returns the run's key. Fails with
/// [`Error::RunExists`] when the tenant has a run with this id.
async fn insert_run(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &TenantId,
    id: &RunId,
    goal: Option<&str>,
    rules: Option<&str>,
    now: Timestamp,
) -> Result<i64, Error> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO tenants (id, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&tenant.as_str(), &now.0])
        .await
        .map_err(pg)?;
    let stmt = tx
        .prepare_cached(
            "INSERT INTO runs (tenant_id, id, status, goal, rules, created_at)
             VALUES ($1, $2, 'active', $3, $4, $5) ON CONFLICT (tenant_id, id) DO NOTHING
             RETURNING pk",
        )
        .await
        .map_err(pg)?;
    match tx
        .query_opt(
            &stmt,
            &[&tenant.as_str(), &id.as_str(), &goal, &rules, &now.0],
        )
        .await
        .map_err(pg)?
    {
        Some(row) => Ok(row.get(0)),
        None => Err(Error::RunExists { run: id.clone() }),
    }
}

/// Inserts `prepared`'s messages from the `from`th on after `last_seq`, in one statement, and
/// moves the run's `last_seq`; returns their seqs. The caller holds the run's row lock (or made
/// the run in this transaction) and checked that it is active.
async fn insert_entries(
    tx: &deadpool_postgres::Transaction<'_>,
    run_pk: i64,
    last_seq: Seq,
    prepared: &Prepared,
    from: usize,
    now: Timestamp,
) -> Result<Vec<Seq>, Error> {
    let tokens = prepared.tokens.get(from..).unwrap_or_default();
    let uses = prepared.tool_uses.get(from..).unwrap_or_default();
    let results = prepared.tool_results.get(from..).unwrap_or_default();
    let messages = prepared.messages.get(from..).unwrap_or_default();
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let first = to_i64(last_seq.0)? + 1;
    let seqs: Vec<i64> = (first..first + to_i64(messages.len() as u64)?).collect();
    // One statement for the whole batch: arrays unnested in parallel.
    let stmt = tx
        .prepare_cached(
            "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
             SELECT $1, s, t, u, r, $7, m
             FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[]) AS x(s, t, u, r, m)",
        )
        .await
        .map_err(pg)?;
    tx.execute(
        &stmt,
        &[&run_pk, &seqs, &tokens, &uses, &results, &messages, &now.0],
    )
    .await
    .map_err(pg)?;
    let last = seqs.last().copied().unwrap_or(first);
    let stmt = tx
        .prepare_cached("UPDATE runs SET last_seq = $1 WHERE pk = $2")
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&last, &run_pk]).await.map_err(pg)?;
    seqs.into_iter()
        .map(|s| to_u64(s, "seq").map(Seq))
        .collect()
}

/// Messages read and indexed per statement while a search brings a run's index up to date.
const INDEX_BATCH: i64 = 1000;

/// Writes the search rows of the messages at `seqs` (made by [`baton_store::search_rows`]) in
/// one statement. Called by [`index_history`], under the run's progress row lock.
async fn insert_search_rows(
    c: &impl GenericClient,
    run_pk: i64,
    seqs: &[i64],
    rows: &[Vec<SearchRow>],
) -> Result<(), Error> {
    let (mut s, mut kinds, mut parts, mut bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (seq, rows) in seqs.iter().zip(rows) {
        for row in rows {
            s.push(*seq);
            kinds.push(row.kind.as_str());
            parts.push(i32::try_from(row.part).unwrap_or(i32::MAX));
            bodies.push(row.body.as_str());
        }
    }
    if s.is_empty() {
        return Ok(());
    }
    let stmt = c
        .prepare_cached(
            "INSERT INTO history_search (run_pk, seq, kind, part, body)
             SELECT $1, s, k, p, b FROM unnest($2::bigint[], $3::text[], $4::int[], $5::text[]) AS x(s, k, p, b)",
        )
        .await
        .map_err(pg)?;
    c.execute(&stmt, &[&run_pk, &s, &kinds, &parts, &bodies])
        .await
        .map_err(pg)?;
    Ok(())
}

/// The run's key, last seq and how far its history is indexed for search (0 before its first
/// search), in one read.
async fn search_state(
    c: &impl GenericClient,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, i64, i64), Error> {
    let stmt = c
        .prepare_cached(
            "SELECT r.pk, r.last_seq, COALESCE(p.indexed_through, 0)
             FROM runs r LEFT JOIN search_progress p ON p.run_pk = r.pk
             WHERE r.tenant_id = $1 AND r.id = $2",
        )
        .await
        .map_err(pg)?;
    match c
        .query_opt(&stmt, &[&tenant.as_str(), &run.as_str()])
        .await
        .map_err(pg)?
    {
        Some(row) => Ok((row.get(0), row.get(1), row.get(2))),
        None => Err(missing_run(run)),
    }
}

/// Creates the run's `search_progress` row, in its own autocommit statement. Inside the
/// indexing transaction its foreign-key check would hold a share lock on the run's row until
/// indexing commits, and every append (which locks that row) would wait for the whole index.
async fn ensure_progress_row(c: &impl GenericClient, run_pk: i64) -> Result<(), Error> {
    let stmt = c
        .prepare_cached(
            "INSERT INTO search_progress (run_pk, indexed_through) VALUES ($1, 0)
             ON CONFLICT (run_pk) DO NOTHING",
        )
        .await
        .map_err(pg)?;
    c.execute(&stmt, &[&run_pk]).await.map_err(pg)?;
    Ok(())
}

/// Brings the run's search index up to date inside `tx` (read committed): locks the run's
/// `search_progress` row (which [`ensure_progress_row`] created), so a concurrent searcher waits and then
/// finds the rows already indexed; reads the history after the mark up to the run's last seq,
/// [`INDEX_BATCH`] messages per statement, writes their search rows and advances the mark.
/// Appends are not blocked: they lock the run's row, not this one. Returns the messages
/// indexed.
async fn index_history(c: &impl GenericClient, run_pk: i64) -> Result<u64, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT p.indexed_through, r.last_seq FROM search_progress p JOIN runs r ON r.pk = p.run_pk
             WHERE p.run_pk = $1 FOR UPDATE OF p",
        )
        .await
        .map_err(pg)?;
    let row = c.query_one(&stmt, &[&run_pk]).await.map_err(pg)?;
    let (mut after, last_seq): (i64, i64) = (row.get(0), row.get(1));
    if after >= last_seq {
        return Ok(0);
    }
    let read = c
        .prepare_cached(
            "SELECT seq, message FROM history WHERE run_pk = $1 AND seq > $2 AND seq <= $3
             ORDER BY seq LIMIT $4",
        )
        .await
        .map_err(pg)?;
    let mut indexed = 0u64;
    while after < last_seq {
        let rows = c
            .query(&read, &[&run_pk, &after, &last_seq, &INDEX_BATCH])
            .await
            .map_err(pg)?;
        let Some(last) = rows.last().map(|r| r.get::<_, i64>(0)) else {
            return Err(Error::Corrupt {
                what: format!(
                    "history of run {run_pk} has no rows after seq {after} up to its last seq {last_seq}"
                ),
            });
        };
        let mut seqs = Vec::with_capacity(rows.len());
        let mut search = Vec::with_capacity(rows.len());
        for row in &rows {
            let seq: i64 = row.get(0);
            let message: Message =
                serde_json::from_str(row.get(1)).map_err(|e| Error::Corrupt {
                    what: format!("message at seq {seq}: {e}"),
                })?;
            seqs.push(seq);
            search.push(baton_store::search_rows(&message));
        }
        insert_search_rows(c, run_pk, &seqs, &search).await?;
        indexed += seqs.len() as u64;
        after = last;
    }
    let stmt = c
        .prepare_cached("UPDATE search_progress SET indexed_through = $1 WHERE run_pk = $2")
        .await
        .map_err(pg)?;
    c.execute(&stmt, &[&after, &run_pk]).await.map_err(pg)?;
    Ok(indexed)
}

/// The entries of the run whose search rows match `phrase` (normalized words), in seq order.
async fn search_entries(
    c: &impl GenericClient,
    run_pk: i64,
    phrase: &str,
    query: &SearchQuery,
) -> Result<Vec<Entry>, Error> {
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    let kind = query.kind.map(|k| k.as_str());
    // A phrase as phraseto_tsquery builds it; with a prefix, the same by hand, since only
    // to_tsquery knows `:*`: each word quoted (normalized words are letters and digits, no
    // quote), adjacent by `<->`, the last one a prefix.
    let (tsquery, phrase) = match query.is_prefix() {
        false => ("phraseto_tsquery('simple', $2::text)", phrase.to_owned()),
        true => (
            "to_tsquery('simple', $2::text)",
            phrase
                .split(' ')
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(" <-> ")
                + ":*",
        ),
    };
    let sql = format!(
        "SELECT seq, tokens, created_at, message FROM history
         WHERE run_pk = $1 AND seq IN (
             SELECT seq FROM history_search
             WHERE run_pk = $1 AND tsv @@ {tsquery}
               AND ($3::text IS NULL OR kind = $3::text))
         ORDER BY seq LIMIT $4"
    );
    let stmt = c.prepare_cached(&sql).await.map_err(pg)?;
    c.query(&stmt, &[&run_pk, &phrase, &kind, &limit])
        .await
        .map_err(pg)?
        .iter()
        .map(entry_from_row)
        .collect()
}

async fn read_entries(
    c: &impl GenericClient,
    run_pk: i64,
    from: Seq,
    to: Option<Seq>,
) -> Result<Vec<Entry>, Error> {
    let to = to.map_or(i64::MAX, |s| lookup_i64(s.0));
    let stmt = c
        .prepare_cached(
            "SELECT seq, tokens, created_at, message FROM history
             WHERE run_pk = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
        )
        .await
        .map_err(pg)?;
    c.query(&stmt, &[&run_pk, &lookup_i64(from.0), &to])
        .await
        .map_err(pg)?
        .iter()
        .map(entry_from_row)
        .collect()
}

async fn read_window(
    c: &impl GenericClient,
    run_pk: i64,
    after: Seq,
) -> Result<Vec<ProtocolEvents>, Error> {
    let stmt = c
        .prepare_cached("SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = $1 AND seq > $2 ORDER BY seq")
        .await
        .map_err(pg)?;
    let rows = c
        .query(&stmt, &[&run_pk, &to_i64(after.0)?])
        .await
        .map_err(pg)?;
    events_from_rows(&rows)
}

/// Rows of `(seq, tool_uses, tool_results)` as protocol events.
fn events_from_rows(rows: &[Row]) -> Result<Vec<ProtocolEvents>, Error> {
    rows.iter()
        .map(|row| {
            let seq = Seq(to_u64(row.get(0), "seq")?);
            Ok(ProtocolEvents {
                seq,
                uses: parse_ids(row.get(1), seq)?,
                results: parse_ids(row.get(2), seq)?,
            })
        })
        .collect()
}

/// The protocol events that decide whether `cut` is safe: every message after `after` that
/// opens or answers a tool call (through the partial index `history_tool_rows`), plus the cut's
/// own row. Text-only messages add no span, so leaving them out changes no answer about the cut.
async fn read_tool_window(
    c: &impl GenericClient,
    run_pk: i64,
    after: Seq,
    cut: Seq,
) -> Result<Vec<ProtocolEvents>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = $1 AND seq > $2 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL)
             UNION
             SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = $1 AND seq = $3
             ORDER BY seq",
        )
        .await
        .map_err(pg)?;
    let rows = c
        .query(&stmt, &[&run_pk, &to_i64(after.0)?, &to_i64(cut.0)?])
        .await
        .map_err(pg)?;
    events_from_rows(&rows)
}

const SUMMARY_COLUMNS: &str = "s.id, r.id, s.coverage, s.previous_id, s.body, s.created_at, s.meta";

fn summary_from_row(r: &Row) -> Result<Summary, Error> {
    let id = SummaryId(to_u64(r.get(0), "summary id")?);
    let body: SummaryBody = serde_json::from_str(r.get(4)).map_err(|e| Error::Corrupt {
        what: format!("body of summary {id}: {e}"),
    })?;
    Ok(Summary {
        id,
        run: RunId::new(r.get::<_, String>(1))?,
        coverage: Seq(to_u64(r.get(2), "coverage")?),
        previous_id: r
            .get::<_, Option<i64>>(3)
            .map(|p| to_u64(p, "previous id").map(SummaryId))
            .transpose()?,
        claims: body.claims,
        meta: codec::parse_meta(r.get(6), id)?,
        created_at: Timestamp(r.get(5)),
    })
}

pub(crate) async fn load_summary(
    c: &impl GenericClient,
    run_pk: i64,
    id: SummaryId,
) -> Result<Option<Summary>, Error> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk WHERE s.id = $1 AND s.run_pk = $2"
        ))
        .await
        .map_err(pg)?;
    c.query_opt(&stmt, &[&lookup_i64(id.0), &run_pk])
        .await
        .map_err(pg)?
        .as_ref()
        .map(summary_from_row)
        .transpose()
}

/// Validates a candidate inside the install transaction, under the run's row lock.
async fn validate(
    c: &impl GenericClient,
    run: &RunRow,
    cand: &Candidate,
) -> Result<Result<(), InvalidCandidate>, Error> {
    let coverage = match cand.base {
        None => Seq::ZERO,
        Some(base) => {
            let stmt = c
                .prepare_cached("SELECT coverage FROM summaries WHERE id = $1 AND run_pk = $2")
                .await
                .map_err(pg)?;
            match c
                .query_opt(&stmt, &[&lookup_i64(base.0), &run.pk])
                .await
                .map_err(pg)?
            {
                Some(row) => Seq(to_u64(row.get(0), "coverage")?),
                None => return Ok(Err(InvalidCandidate::BaseNotInRun { base })),
            }
        }
    };
    let stmt = c
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM history WHERE run_pk = $1 AND seq = $2)")
        .await
        .map_err(pg)?;
    let cut_exists: bool = c
        .query_one(&stmt, &[&run.pk, &lookup_i64(cand.cut.0)])
        .await
        .map_err(pg)?
        .get(0);
    if let Err(why) = baton_store::check_candidate(cand, coverage, cut_exists, run.last_seq) {
        return Ok(Err(why));
    }
    let cited: Vec<i64> = baton_store::cited_seqs(cand)
        .into_iter()
        .map(|seq| to_i64(seq.0))
        .collect::<Result<_, _>>()?;
    if !cited.is_empty() {
        let stmt = c
            .prepare_cached("SELECT COUNT(*) FROM history WHERE run_pk = $1 AND seq = ANY($2)")
            .await
            .map_err(pg)?;
        let found: i64 = c
            .query_one(&stmt, &[&run.pk, &cited])
            .await
            .map_err(pg)?
            .get(0);
        if usize::try_from(found).ok() != Some(cited.len()) {
            return Err(Error::Corrupt {
                what: "history has gaps below the run's last seq".into(),
            });
        }
    }
    let window = read_tool_window(c, run.pk, coverage, cand.cut).await?;
    if ProtocolMap::analyze(coverage, &window).is_safe(cand.cut) {
        return Ok(Ok(()));
    }
    // The rare path: explain against the whole window, so the nearest safe cut named in the
    // message counts text-only messages too.
    let full = read_window(c, run.pk, coverage).await?;
    let detail = ProtocolMap::analyze(coverage, &full)
        .explain(cand.cut)
        .unwrap_or_else(|| "it splits a protocol unit".to_owned());
    Ok(Err(InvalidCandidate::UnsafeCut {
        cut: cand.cut,
        detail,
    }))
}

/// Runs `$body` with a pooled connection bound to `$client`. When the body fails because the
/// connection broke (the server closed it, or terminated the backend), the connection is taken
/// out of the pool instead of going back, so the next operation reconnects even if the driver
/// has not noticed the closed socket yet.
macro_rules! with_client {
    ($store:ident, |$client:ident| $body:block) => {{
        #[allow(unused_mut)]
        let mut $client = $store.client().await?;
        let result: Result<_, Error> = async { $body }.await;
        if result.as_ref().err().is_some_and(connection_broken) {
            drop(deadpool_postgres::Object::take($client));
        }
        result
    }};
}

// After `with_client!`, which they use.
mod cache;
mod keys;
mod ledger;

/// A `REPEATABLE READ READ ONLY` transaction: every read in it sees one snapshot, so a run, its
/// summary and its tail agree with each other.
async fn snapshot(
    client: &mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'_>, Error> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg)
}

/// Whether `err` means the connection it came from is no longer usable.
fn connection_broken(err: &Error) -> bool {
    let Error::Backend(inner) = err else {
        return false;
    };
    let Some(PgError(pg)) = inner.downcast_ref::<PgError>() else {
        return false;
    };
    if pg.is_closed() {
        return true;
    }
    match pg.as_db_error() {
        Some(db) => {
            matches!(db.severity(), "FATAL" | "PANIC") || db.code().code().starts_with("57P")
        }
        None => true, // an I/O or protocol failure, not an SQL error
    }
}

#[async_trait]
impl Store for PgStore {
    async fn create_run(&self, tenant: &TenantId, new: &NewRun) -> Result<Run, Error> {
        baton_store::check_new_run(new)?;
        let id = match &new.id {
            Some(id) => id.clone(),
            None => baton_store::generate_run_id()?,
        };
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let now = Timestamp::now();
            insert_run(
                &tx,
                tenant,
                &id,
                new.goal.as_deref(),
                new.rules.as_deref(),
                now,
            )
            .await?;
            tx.commit().await.map_err(pg)?;
            // What the insert wrote: a run starts active, empty and without a summary.
            Ok(Run {
                id,
                tenant: tenant.clone(),
                status: RunStatus::Active,
                goal: new.goal.clone(),
                rules: new.rules.clone(),
                active_summary_id: None,
                last_seq: Seq::ZERO,
                cleared: None,
                created_at: now,
            })
        })
    }

    async fn run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        with_client!(self, |client| {
            Ok(load_run(&client, tenant, run).await?.1)
        })
    }

    async fn list_runs(&self, tenant: &TenantId) -> Result<Vec<Run>, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)")
                .await
                .map_err(pg)?;
            let known: bool = client
                .query_one(&stmt, &[&tenant.as_str()])
                .await
                .map_err(pg)?
                .get(0);
            if !known {
                return Err(Error::UnknownTenant {
                    tenant: tenant.clone(),
                });
            }
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {RUN_COLUMNS} FROM runs WHERE tenant_id = $1 ORDER BY pk"
                ))
                .await
                .map_err(pg)?;
            client
                .query(&stmt, &[&tenant.as_str()])
                .await
                .map_err(pg)?
                .iter()
                .map(run_from_row)
                .collect()
        })
    }

    async fn cancel_run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let row = find_run(&tx, tenant, run, true).await?;
            match row.status {
                RunStatus::Active => {
                    tx.execute(
                        "UPDATE runs SET status = 'cancelled' WHERE pk = $1",
                        &[&row.pk],
                    )
                    .await
                    .map_err(pg)?;
                }
                RunStatus::Cancelled => {}
                RunStatus::Completed => {
                    return Err(Error::RunNotActive {
                        run: run.clone(),
                        status: row.status,
                    });
                }
            }
            let (_, updated) = load_run(&tx, tenant, run).await?;
            tx.commit().await.map_err(pg)?;
            Ok(updated)
        })
    }

    async fn append(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entries: &[NewEntry],
    ) -> Result<Vec<Seq>, Error> {
        let prepared = prepare(entries)?;
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let row = find_run(&tx, tenant, run, true).await?;
            if row.status != RunStatus::Active {
                return Err(Error::RunNotActive {
                    run: run.clone(),
                    status: row.status,
                });
            }
            if entries.is_empty() {
                return Ok(Vec::new());
            }
            let seqs =
                insert_entries(&tx, row.pk, row.last_seq, &prepared, 0, Timestamp::now()).await?;
            tx.commit().await.map_err(pg)?;
            Ok(seqs)
        })
    }

    async fn read_range(
        &self,
        tenant: &TenantId,
        run: &RunId,
        from: Seq,
        to: Option<Seq>,
    ) -> Result<Vec<Entry>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let row = find_run(&tx, tenant, run, false).await?;
            let entries = read_entries(&tx, row.pk, from, to).await?;
            tx.commit().await.map_err(pg)?;
            Ok(entries)
        })
    }

    async fn protocol_window(
        &self,
        tenant: &TenantId,
        run: &RunId,
        after: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let row = find_run(&tx, tenant, run, false).await?;
            let window = read_window(&tx, row.pk, after).await?;
            tx.commit().await.map_err(pg)?;
            Ok(window)
        })
    }

    async fn search(
        &self,
        tenant: &TenantId,
        run: &RunId,
        query: &SearchQuery,
    ) -> Result<Vec<Entry>, Error> {
        let phrase = baton_store::search_phrase(query)?;
        with_client!(self, |client| {
            // The common case: the index is up to date, and the search is one read.
            let tx = snapshot(&mut client).await?;
            let (pk, last_seq, indexed_through) = search_state(&tx, tenant, run).await?;
            if indexed_through >= last_seq {
                let entries = search_entries(&tx, pk, &phrase, query).await?;
                tx.commit().await.map_err(pg)?;
                return Ok(entries);
            }
            tx.rollback().await.map_err(pg)?;
            // History the index has not seen: index it, then search, in one write transaction.
            ensure_progress_row(&client, pk).await?;
            let tx = client.transaction().await.map_err(pg)?;
            let indexed = index_history(&tx, pk).await?;
            let entries = search_entries(&tx, pk, &phrase, query).await?;
            tx.commit().await.map_err(pg)?;
            if indexed > 0 {
                tracing::debug!(run = %run, messages = indexed, "indexed history for search");
            }
            Ok(entries)
        })
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
        with_client!(self, |client| {
            // Dropping `tx` without commit rolls back: every early return below writes nothing.
            let tx = client.transaction().await.map_err(pg)?;
            let row = find_run(&tx, tenant, run, true).await?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive {
                    status: row.status,
                }));
            }
            if let Err(why) = validate(&tx, &row, candidate).await? {
                return Ok(Install::Rejected(Rejection::Invalid(why)));
            }
            let base = candidate.base.map(|b| to_i64(b.0)).transpose()?;
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO summaries (run_pk, coverage, previous_id, body, created_at, meta) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                )
                .await
                .map_err(pg)?;
            let new_id: i64 = tx
                .query_one(
                    &stmt,
                    &[
                        &row.pk,
                        &to_i64(candidate.cut.0)?,
                        &base,
                        &body,
                        &Timestamp::now().0,
                        &meta,
                    ],
                )
                .await
                .map_err(pg)?
                .get(0);
            // The compare-and-swap: move the pointer only if it still names the base.
            let stmt = tx
                .prepare_cached("UPDATE runs SET active_summary_id = $1 WHERE pk = $2 AND active_summary_id IS NOT DISTINCT FROM $3")
                .await
                .map_err(pg)?;
            let swapped = tx
                .execute(&stmt, &[&new_id, &row.pk, &base])
                .await
                .map_err(pg)?;
            if swapped != 1 {
                tx.rollback().await.map_err(pg)?; // the inserted candidate goes with it
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: candidate.base,
                    active: row.active_summary_id,
                }));
            }
            let summary = load_summary(&tx, row.pk, SummaryId(to_u64(new_id, "summary id")?))
                .await?
                .ok_or_else(|| Error::Corrupt {
                    what: format!("summary {new_id} vanished inside its transaction"),
                })?;
            tx.commit().await.map_err(pg)?;
            Ok(Install::Installed(summary))
        })
    }

    async fn summaries(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Summary>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let row = find_run(&tx, tenant, run, false).await?;
            let stmt = tx
                .prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk WHERE s.run_pk = $1 ORDER BY s.id"
                ))
                .await
                .map_err(pg)?;
            let summaries = tx
                .query(&stmt, &[&row.pk])
                .await
                .map_err(pg)?
                .iter()
                .map(summary_from_row)
                .collect();
            tx.commit().await.map_err(pg)?;
            summaries
        })
    }

    async fn summary(&self, tenant: &TenantId, id: SummaryId) -> Result<Summary, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {SUMMARY_COLUMNS} FROM summaries s JOIN runs r ON r.pk = s.run_pk WHERE s.id = $1 AND r.tenant_id = $2"
                ))
                .await
                .map_err(pg)?;
            match client
                .query_opt(&stmt, &[&lookup_i64(id.0), &tenant.as_str()])
                .await
                .map_err(pg)?
            {
                Some(row) => summary_from_row(&row),
                None => Err(Error::SummaryNotFound { id }),
            }
        })
    }

    async fn import(
        &self,
        tenant: &TenantId,
        imports: Vec<NewImport>,
        reimport: Reimport,
    ) -> Result<Vec<Imported>, Error> {
        let file = import::ready(imports)?;
        with_client!(self, |client| {
            // One transaction for the file: any error drops it, and nothing of the file stays.
            let tx = client.transaction().await.map_err(pg)?;
            let outcomes = import::import(&tx, &self.schema, tenant, &file, reimport).await?;
            tx.commit().await.map_err(pg)?;
            Ok(outcomes)
        })
    }

    async fn run_report(&self, tenant: &TenantId, run: &RunId) -> Result<RunReport, Error> {
        with_client!(self, |client| {
            // One snapshot: the run, its origin and its counts agree with each other.
            let tx = snapshot(&mut client).await?;
            let report = import::report(&tx, tenant, run).await?;
            tx.commit().await.map_err(pg)?;
            Ok(report)
        })
    }

    async fn context_parts(&self, tenant: &TenantId, run: &RunId) -> Result<ContextParts, Error> {
        with_client!(self, |client| {
            // One snapshot: run, summary, pins and tail agree with each other.
            let tx = snapshot(&mut client).await?;
            let (pk, run, summary) = compaction::run_and_summary(&tx, tenant, run).await?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            let pinned = compaction::pinned_entries(&tx, pk, coverage).await?;
            let pins = compaction::pins(&tx, pk).await?;
            let tail = read_entries(&tx, pk, coverage.next(), None).await?;
            tx.commit().await.map_err(pg)?;
            Ok(ContextParts {
                run,
                summary,
                pinned,
                pins,
                tail,
            })
        })
    }

    async fn context_meta(&self, tenant: &TenantId, run: &RunId) -> Result<ContextMeta, Error> {
        with_client!(self, |client| {
            // One snapshot, and the tail without its `message` column.
            let tx = snapshot(&mut client).await?;
            let (pk, run, summary) = compaction::run_and_summary(&tx, tenant, run).await?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            let meta = ContextMeta {
                pinned: compaction::pinned_entries(&tx, pk, coverage).await?,
                pins: compaction::pins(&tx, pk).await?,
                tail: compaction::tail_meta(&tx, pk, coverage).await?,
                run,
                summary,
            };
            tx.commit().await.map_err(pg)?;
            Ok(meta)
        })
    }

    async fn add_constraint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entry: &NewEntry,
        text: &str,
        read_only: bool,
    ) -> Result<Constraint, Error> {
        let prepared = prepare(std::slice::from_ref(entry))?;
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            // The run's row lock orders this append with every other writer of the run.
            let row = find_run(&tx, tenant, run, true).await?;
            if row.status != RunStatus::Active {
                return Err(Error::RunNotActive {
                    run: run.clone(),
                    status: row.status,
                });
            }
            let now = Timestamp::now();
            let seqs = insert_entries(&tx, row.pk, row.last_seq, &prepared, 0, now).await?;
            let seq = seqs.first().copied().ok_or_else(|| Error::Corrupt {
                what: "a constraint's message got no seq".into(),
            })?;
            let stmt = tx
                .prepare_cached("INSERT INTO pins (run_pk, seq, created_at) VALUES ($1, $2, $3)")
                .await
                .map_err(pg)?;
            tx.execute(&stmt, &[&row.pk, &to_i64(seq.0)?, &now.0])
                .await
                .map_err(pg)?;
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO run_constraints (run_pk, seq, read_only, text, created_at)
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .await
                .map_err(pg)?;
            tx.execute(
                &stmt,
                &[&row.pk, &to_i64(seq.0)?, &read_only, &text, &now.0],
            )
            .await
            .map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            Ok(Constraint {
                seq,
                text: text.to_owned(),
                read_only,
                created_at: now,
            })
        })
    }

    async fn constraints(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Constraint>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let row = find_run(&tx, tenant, run, false).await?;
            let stmt = tx
                .prepare_cached(
                    "SELECT seq, text, read_only, created_at FROM run_constraints
                     WHERE run_pk = $1 ORDER BY seq",
                )
                .await
                .map_err(pg)?;
            let rows = tx.query(&stmt, &[&row.pk]).await.map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            rows.iter()
                .map(|r| {
                    Ok(Constraint {
                        seq: Seq(to_u64(r.get(0), "seq")?),
                        text: r.get(1),
                        read_only: r.get(2),
                        created_at: Timestamp(r.get(3)),
                    })
                })
                .collect()
        })
    }

    async fn start_tool(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool_use_id: &str,
    ) -> Result<bool, Error> {
        with_client!(self, |client| {
            let row = find_run(&client, tenant, run, false).await?;
            let stmt = client
                .prepare_cached(
                    "INSERT INTO tool_runs (run_pk, tool_use_id, started_at) VALUES ($1, $2, $3)
                     ON CONFLICT (run_pk, tool_use_id) DO NOTHING",
                )
                .await
                .map_err(pg)?;
            let added = client
                .execute(&stmt, &[&row.pk, &tool_use_id, &Timestamp::now().0])
                .await
                .map_err(pg)?;
            Ok(added == 1)
        })
    }

    async fn started_tools(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<String>, Error> {
        with_client!(self, |client| {
            let row = find_run(&client, tenant, run, false).await?;
            let stmt = client
                .prepare_cached(
                    "SELECT tool_use_id FROM tool_runs WHERE run_pk = $1 ORDER BY started_at",
                )
                .await
                .map_err(pg)?;
            Ok(client
                .query(&stmt, &[&row.pk])
                .await
                .map_err(pg)?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
    }

    async fn pin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            // Under the run's row lock, `last_seq` cannot move before the insert.
            let row = find_run(&tx, tenant, run, true).await?;
            if seq.0 == 0 || seq > row.last_seq {
                return Err(Error::SeqNotFound {
                    run: run.clone(),
                    seq,
                    last: row.last_seq,
                });
            }
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO pins (run_pk, seq, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (run_pk, seq) DO NOTHING",
                )
                .await
                .map_err(pg)?;
            let added = tx
                .execute(&stmt, &[&row.pk, &to_i64(seq.0)?, &Timestamp::now().0])
                .await
                .map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            Ok(added == 1)
        })
    }

    async fn unpin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        with_client!(self, |client| {
            let tx = client.transaction().await.map_err(pg)?;
            let row = find_run(&tx, tenant, run, true).await?;
            let stmt = tx
                .prepare_cached("DELETE FROM pins WHERE run_pk = $1 AND seq = $2")
                .await
                .map_err(pg)?;
            let removed = tx
                .execute(&stmt, &[&row.pk, &lookup_i64(seq.0)])
                .await
                .map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            Ok(removed == 1)
        })
    }

    async fn pins(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Seq>, Error> {
        with_client!(self, |client| {
            let tx = snapshot(&mut client).await?;
            let row = find_run(&tx, tenant, run, false).await?;
            let pins = compaction::pins(&tx, row.pk).await?;
            tx.commit().await.map_err(pg)?;
            Ok(pins)
        })
    }

    async fn activate_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        id: SummaryId,
        base: Option<SummaryId>,
    ) -> Result<Install, Error> {
        with_client!(self, |client| {
            // Dropping `tx` without commit rolls back: every early return below writes nothing.
            let tx = client.transaction().await.map_err(pg)?;
            let row = find_run(&tx, tenant, run, true).await?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive {
                    status: row.status,
                }));
            }
            let Some(summary) = load_summary(&tx, row.pk, id).await? else {
                return Ok(Install::Rejected(Rejection::Invalid(
                    InvalidCandidate::VersionNotInRun { id },
                )));
            };
            let expected = base.map(|b| to_i64(b.0)).transpose()?;
            // The compare-and-swap an install makes: move the pointer only if it still names
            // the base.
            let stmt = tx
                .prepare_cached("UPDATE runs SET active_summary_id = $1 WHERE pk = $2 AND active_summary_id IS NOT DISTINCT FROM $3")
                .await
                .map_err(pg)?;
            let swapped = tx
                .execute(&stmt, &[&to_i64(id.0)?, &row.pk, &expected])
                .await
                .map_err(pg)?;
            if swapped != 1 {
                tx.rollback().await.map_err(pg)?;
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: base,
                    active: row.active_summary_id,
                }));
            }
            tx.commit().await.map_err(pg)?;
            Ok(Install::Installed(summary))
        })
    }

    async fn set_cleared(
        &self,
        tenant: &TenantId,
        run: &RunId,
        expected: Option<Cleared>,
        new: Cleared,
    ) -> Result<SetCleared, Error> {
        with_client!(self, |client| {
            // Dropping `tx` without commit rolls back: every early return below writes nothing.
            let tx = client.transaction().await.map_err(pg)?;
            find_run(&tx, tenant, run, true).await?;
            let (pk, current) = load_run(&tx, tenant, run).await?;
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
            let (seen_through, seen_min) = match expected {
                Some(c) => (Some(to_i64(c.through.0)?), Some(i64::from(c.min_tokens))),
                None => (None, None),
            };
            // The compare-and-swap on the pair; under the row lock it always matches.
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE runs SET cleared_through = $1, cleared_min_tokens = $2
                     WHERE pk = $3 AND cleared_through IS NOT DISTINCT FROM $4
                       AND cleared_min_tokens IS NOT DISTINCT FROM $5
                     RETURNING {RUN_COLUMNS}"
                ))
                .await
                .map_err(pg)?;
            let updated = tx
                .query_opt(
                    &stmt,
                    &[
                        &to_i64(new.through.0)?,
                        &i64::from(new.min_tokens),
                        &pk,
                        &seen_through,
                        &seen_min,
                    ],
                )
                .await
                .map_err(pg)?;
            let Some(updated) = updated else {
                tx.rollback().await.map_err(pg)?;
                return Ok(SetCleared::Rejected(Rejection::StaleCleared {
                    expected,
                    active: current.cleared,
                }));
            };
            let updated = run_from_row(&updated)?;
            tx.commit().await.map_err(pg)?;
            Ok(SetCleared::Set(updated))
        })
    }
}
