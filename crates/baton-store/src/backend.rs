//! How a database plugs into the store: transactions made of row primitives.
//!
//! Every rule of the store — checking a candidate and moving the active pointer by
//! compare-and-swap, the ledger's fences and leases, flights, imports, keys, search indexing —
//! is written once in this crate, over the traits below; `baton-sqlite` and `baton-postgres`
//! implement them with SQL and driver glue only. It is the split sqlx makes between `Migrator`
//! (the algorithm, once) and `Migrate` (what each driver does). Every [`Backend`] is a
//! [`Store`](crate::Store), a [`CacheStore`](crate::CacheStore), a
//! [`LedgerStore`](crate::LedgerStore), a [`KeyStore`](crate::KeyStore) and a
//! [`UsageStore`](crate::UsageStore), by blanket impls.
//!
//! Roles:
//! - [`Backend`]: runs a job — an async closure over the backend's transaction — in a write
//!   transaction (committed when the job returns `Ok`, rolled back on `Err`) or a read one.
//! - [`RunRows`], [`ImportRows`], [`LedgerRows`], [`CacheRows`], [`KeyRows`]: the row
//!   primitives a job is made of. Each is one statement, or the few one write needs; none
//!   decides anything. A primitive that names a run takes its key (`pk`), found first with
//!   [`RunRows::run_row`] or [`RunRows::lock_run`].
//! - [`Row`]: a result row read by column index; its provided methods decode the shapes every
//!   backend selects (a run, an entry, a summary, an operation…), so a value reads the same from
//!   either database. The column order each expects is in its docs.
//!
//! The contract a backend keeps:
//! - A write job sees one consistent state and its writes are atomic: on SQLite the job runs in
//!   a `BEGIN IMMEDIATE` transaction (or a savepoint of one, when several queued jobs commit
//!   together); on PostgreSQL the transaction starts at the first primitive that takes a lock
//!   ([`RunRows::lock_run`], [`LedgerRows::lock_operation`], [`ImportRows::lock_sources`],
//!   [`RunRows::lock_index`]) or writes more than one statement, so a job of one statement
//!   stays one round trip in autocommit.
//! - A job must not wait on anything but its primitives: on SQLite it runs to completion in
//!   one poll, on the thread that owns the connection.
//! - A read job ([`Backend::read`]) sees one snapshot.
//!
//! Consumers never need this module: they hold a `Store` and call its domain operations.
//!
//! # Design
//!
//! Appends and installs are single `BEGIN IMMEDIATE` transactions, run on SQLite over the store's one writing connection: on the caller's thread when it is free and nothing is queued, else by the writer thread (jobs queued together share one transaction, each in a savepoint), so no async worker waits on the write lock.
//! Seqs are assigned from `runs.last_seq` inside the transaction, so they are gap-free and never reused under concurrent appenders in any number of processes.
//! The install inserts the candidate, then moves the pointer with `UPDATE runs SET active_summary_id = new WHERE pk = run AND active_summary_id IS base`; if no row changed, the transaction is dropped and the insert rolls back with it.
//! The busy timeout (30 s) makes writers in other processes wait for SQLite's write lock instead of failing.
//! On PostgreSQL every write that changes a run first takes the run's row lock (`SELECT … FOR UPDATE`): appenders on different connections queue on it, so seqs stay gap-free and ordered, and an install's validation and its compare-and-swap see one state of the run.
//! Row locks rather than `SERIALIZABLE`, because every check-then-act starts at the run row, so one lock orders all conflicting writers and there are no serialization failures to retry.
//! Reads that assemble several rows (`context`, `read_range`, `summaries`) run in one `REPEATABLE READ READ ONLY` transaction, so the run, its summary and its tail come from one snapshot.
//! A connection that failed because the server dropped it is taken out of the pool, so the operation after a fault reconnects.
//! `synchronous = NORMAL` in WAL mode: a committed transaction survives the crash of the process; a power loss can lose the last transactions but never corrupts the file.
//! That is SQLite's recommended setting for WAL; `FULL` would add an fsync to every commit.

mod wakeups;

pub use wakeups::Wakeups;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::units::ProtocolEvents;
use baton_core::usage::{Usage, UsageRecord};
use baton_core::{
    Claim, Cleared, Entry, EntryMeta, Run, RunId, RunStatus, Seq, Summary, SummaryId, TenantId,
    Timestamp,
};

use crate::cache::{CacheEntry, CallOutcome, CallRecord};
use crate::import::{
    CompactionEvent, Digest, Origin, RunCounts, RunOrigin, RunUsage, SourceCompaction,
};
use crate::keys::{ApiKey, KeyHash, NewApiKey, Revoke};
use crate::ledger::{Attempt, AttemptOutcome, OpStatus, Operation};
use crate::runs::ListedRun;
use crate::search::{SearchKind, SearchRow};
use crate::usage::{ImportUsage, StoredUsage, UsageQuery};
use crate::{Constraint, Error};

/// A boxed future, as a job returns it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A database the store runs on. See the [module docs](self) for the contract.
pub trait Backend: Send + Sync + 'static {
    /// A transaction: every row primitive.
    type Tx: RunRows + ImportRows + LedgerRows + CacheRows + KeyRows;

    /// Runs `job` in a write transaction, committed when it returns `Ok` and rolled back when
    /// it returns `Err`. The caller gets the job's result only once it is committed.
    fn write<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut Self::Tx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static;

    /// [`Backend::write`] for a job of a statement or two on single rows (the ledger's, the
    /// cache's and the flights'): a backend may run it where the caller is, without the
    /// hand-off a longer write needs. By default, [`Backend::write`].
    fn write_row<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut Self::Tx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.write(job)
    }

    /// Runs `job` in a read-only transaction: every read in it sees one snapshot.
    fn read<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut Self::Tx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static;

    /// Runs `job`, a single read (or reads that need not agree), without opening a transaction
    /// where that saves round trips. By default, [`Backend::read`].
    fn read_one<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut Self::Tx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.read(job)
    }

    /// [`Backend::read_one`] for a lookup of one row by its key (a cache entry, an API key):
    /// a backend may run it where the caller is, as [`Backend::write_row`] runs a row's write.
    /// By default, [`Backend::read_one`].
    fn read_row<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send
    where
        T: Send + 'static,
        F: for<'t> FnOnce(&'t mut Self::Tx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
    {
        self.read_one(job)
    }

    /// [`CacheStore::wait_flight`](crate::CacheStore::wait_flight): by default sleeps
    /// `at_most` (polling); a backend with notifications wakes waiters sooner.
    fn wait_flight(
        &self,
        tenant: &TenantId,
        key: &RequestKey,
        at_most: Duration,
    ) -> impl Future<Output = ()> + Send {
        let _ = (tenant, key);
        tokio::time::sleep(at_most)
    }
}

/// Whether [`RunRows::summaries`] reads every version of a run, one of them, or one of a
/// tenant's by id.
#[derive(Clone, Copy, Debug)]
pub enum Versions<'a> {
    /// Every version of the run, oldest first.
    Run(i64),
    /// The version `id` if it belongs to the run.
    One {
        /// The run's key.
        run: i64,
        /// The version.
        id: SummaryId,
    },
    /// The version `id` if it belongs to one of the tenant's runs.
    OfTenant {
        /// The tenant.
        tenant: &'a TenantId,
        /// The version.
        id: SummaryId,
    },
}

/// A run's key facts, as a write checks them first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunRow {
    /// The run's key.
    pub pk: i64,
    /// Where it is in its life.
    pub status: RunStatus,
    /// Its active summary.
    pub active_summary_id: Option<SummaryId>,
    /// Its last seq.
    pub last_seq: Seq,
}

/// A message serialized for `history`, before any transaction starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// Its token count.
    pub tokens: u32,
    /// The ids of the tool calls it opens, as a JSON list (`None` when there are none).
    pub tool_uses: Option<String>,
    /// The ids of the tool calls it answers, likewise.
    pub tool_results: Option<String>,
    /// The message as JSON.
    pub message: String,
}

/// A summary version to insert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSummary {
    /// The last seq it covers.
    pub coverage: Seq,
    /// The version it extends.
    pub previous: Option<SummaryId>,
    /// Its claims as stored: `{"claims": […]}`.
    pub body: String,
    /// What made it, as JSON.
    pub meta: Option<String>,
    /// When it is installed.
    pub now: Timestamp,
}

/// What an imported run's origin row holds.
#[derive(Clone, Copy, Debug)]
pub struct NewOrigin<'a> {
    /// Where it came from.
    pub origin: &'a Origin,
    /// The key of the parent's run, when the parent is stored.
    pub parent: Option<i64>,
    /// The model names, as a JSON list.
    pub models: &'a str,
    /// Source messages the run holds.
    pub messages: u64,
    /// Their digest.
    pub digest: Digest,
    /// When it is written.
    pub now: Timestamp,
}

/// What a worker publishes, as [`LedgerRows::publish`] writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The operation's new status: completed or failed.
    pub status: OpStatus,
    /// The result, as JSON.
    pub result: Option<String>,
    /// The failure.
    pub error: Option<String>,
    /// Whether the failure may be retried.
    pub retryable: bool,
    /// Whether the attempt made a paid call.
    pub paid: bool,
}

/// A phrase to match against the search index: normalized words, each whole or a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phrase {
    /// The words, in order: `(word, prefix)`.
    pub words: Vec<(String, bool)>,
    /// Only rows of this kind; every kind when `None`.
    pub kind: Option<SearchKind>,
    /// The most entries to return.
    pub limit: u64,
}

impl Phrase {
    /// The phrase in a full-text query language: each word between `quote`s, followed by
    /// `prefix` when it is a prefix, joined by `join` (the adjacency operator). Normalized
    /// words are letters and digits only, so no quoting inside them is needed.
    pub fn render(&self, quote: &str, prefix: &str, join: &str) -> String {
        let words: Vec<String> = self
            .words
            .iter()
            .map(|(word, p)| format!("{quote}{word}{quote}{}", if *p { prefix } else { "" }))
            .collect();
        words.join(join)
    }
}

/// Runs, their history, summary versions, pins, constraints, started tools and the search
/// index.
#[async_trait]
pub trait RunRows: Send {
    /// Whether the tenant has ever created a run.
    async fn tenant_exists(&mut self, tenant: &TenantId) -> Result<bool, Error>;
    /// Creates the tenant on first use, then the run (active, empty); `None` when the tenant
    /// has a run with this id.
    async fn insert_run(
        &mut self,
        tenant: &TenantId,
        id: &RunId,
        goal: Option<&str>,
        rules: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<i64>, Error>;
    /// The run's key facts.
    async fn run_row(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<RunRow>, Error>;
    /// The run's key facts, locking it against every other writer of the run until the
    /// transaction ends. By default [`RunRows::run_row`]: enough where the write transaction
    /// is exclusive anyway.
    async fn lock_run(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<RunRow>, Error> {
        self.run_row(tenant, id).await
    }
    /// The run, with its key.
    async fn run(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<(i64, Run)>, Error>;
    /// The tenant's runs, oldest first.
    async fn runs(&mut self, tenant: &TenantId) -> Result<Vec<Run>, Error>;
    /// Sets the run's status.
    async fn set_status(&mut self, run: i64, status: RunStatus) -> Result<(), Error>;
    /// Inserts `entries` as seqs `after + 1, after + 2, …` and moves the run's last seq.
    async fn insert_entries(
        &mut self,
        run: i64,
        after: Seq,
        entries: &[Prepared],
        now: Timestamp,
    ) -> Result<(), Error>;
    /// The entries with `from ≤ seq ≤ to`, in order, at most `limit`.
    async fn entries(
        &mut self,
        run: i64,
        from: Seq,
        to: Option<Seq>,
        limit: Option<u64>,
    ) -> Result<Vec<Entry>, Error>;
    /// The protocol events of every entry after `after`.
    async fn events(&mut self, run: i64, after: Seq) -> Result<Vec<ProtocolEvents>, Error>;
    /// The protocol events of the entries after `after` that open or answer a tool call
    /// (through the partial index `history_tool_rows`), and of the entry at `cut`.
    async fn tool_events(
        &mut self,
        run: i64,
        after: Seq,
        cut: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error>;
    /// The entries after `after` without their bodies.
    async fn tail_meta(&mut self, run: i64, after: Seq) -> Result<Vec<EntryMeta>, Error>;
    /// How many of `seqs` (distinct) are rows of the run.
    async fn count_seqs(&mut self, run: i64, seqs: &[Seq]) -> Result<u64, Error>;
    /// Counts over the run's history (messages, tokens, bytes, first and last append).
    async fn history_counts(&mut self, run: i64) -> Result<RunCounts, Error>;
    /// The coverage of version `id`, if it is one of the run's.
    async fn summary_coverage(&mut self, run: i64, id: SummaryId) -> Result<Option<Seq>, Error>;
    /// Inserts a version; returns its id.
    async fn insert_summary(&mut self, run: i64, new: &NewSummary) -> Result<SummaryId, Error>;
    /// Points the run at `id` if it points at `expected` now; whether it did.
    async fn set_active(
        &mut self,
        run: i64,
        id: SummaryId,
        expected: Option<SummaryId>,
    ) -> Result<bool, Error>;
    /// Summary versions.
    async fn summaries(&mut self, which: Versions<'_>) -> Result<Vec<Summary>, Error>;
    /// Sets which tool results the run's context stubs.
    async fn set_cleared(&mut self, run: i64, cleared: Cleared) -> Result<(), Error>;
    /// Pins `seq`; `false` when it was pinned.
    async fn pin(&mut self, run: i64, seq: Seq, now: Timestamp) -> Result<bool, Error>;
    /// Unpins `seq`; `false` when it was not pinned.
    async fn unpin(&mut self, run: i64, seq: Seq) -> Result<bool, Error>;
    /// The run's pinned seqs, in order.
    async fn pins(&mut self, run: i64) -> Result<Vec<Seq>, Error>;
    /// The pinned entries at or below `through`, in order.
    async fn pinned_entries(&mut self, run: i64, through: Seq) -> Result<Vec<Entry>, Error>;
    /// Records a constraint.
    async fn insert_constraint(&mut self, run: i64, constraint: &Constraint) -> Result<(), Error>;
    /// The run's constraints, oldest first.
    async fn constraints(&mut self, run: i64) -> Result<Vec<Constraint>, Error>;
    /// Records a started tool call; `false` when it was recorded.
    async fn start_tool(&mut self, run: i64, id: &str, now: Timestamp) -> Result<bool, Error>;
    /// The run's started tool calls.
    async fn started_tools(&mut self, run: i64) -> Result<Vec<String>, Error>;
    /// How far the run's history is indexed for search (0 before its first search).
    async fn indexed_through(&mut self, run: i64) -> Result<Seq, Error>;
    /// [`RunRows::indexed_through`], locking the run's index mark until the transaction ends,
    /// so concurrent indexers of the run take turns. By default the plain read: enough where
    /// the write transaction is exclusive anyway.
    async fn lock_index(&mut self, run: i64) -> Result<Seq, Error> {
        self.indexed_through(run).await
    }
    /// Writes the search rows of messages, and moves the run's index mark to `through`.
    async fn index(
        &mut self,
        run: i64,
        rows: &[(Seq, SearchRow)],
        through: Seq,
    ) -> Result<(), Error>;
    /// The entries of the run whose search rows match `phrase`, in seq order.
    async fn search(&mut self, run: i64, phrase: &Phrase) -> Result<Vec<Entry>, Error>;
    /// The `(run, seq)` of the tenant's search rows matching `phrase` (a message can come more
    /// than once, one per matching row), in no order, at most `cap` of them: the statement
    /// stops at `cap`, so a common phrase costs `cap` rows, not its every match.
    async fn search_tenant(
        &mut self,
        tenant: &TenantId,
        phrase: &Phrase,
        cap: u64,
    ) -> Result<Vec<(RunId, Seq)>, Error>;
    /// The tenant's runs whose history is not all in the search index yet.
    async fn unindexed(&mut self, tenant: &TenantId) -> Result<Vec<RunId>, Error>;
    /// Every run of the tenant with what a listing shows of it: rows of [`Row::listed_run`],
    /// in key order.
    async fn listing(&mut self, tenant: &TenantId) -> Result<Vec<ListedRun>, Error>;
    /// The runs whose origin names `run` as their parent's, with their keys.
    async fn children(&mut self, run: i64) -> Result<Vec<(i64, RunId)>, Error>;
    /// Removes every row of the run, in every table (its search index, pins, constraints,
    /// started tools, summaries, source compactions, usage records, origin, history, and the
    /// run), through the one path the append-only triggers allow (the run's key in
    /// `run_deletions` while its rows go); returns how many messages it held. The caller
    /// holds the run's lock and has removed the runs that name it as their parent.
    async fn delete_run(&mut self, run: i64) -> Result<u64, Error>;
}

/// Imported runs: their origins and their source's compaction events.
#[async_trait]
pub trait ImportRows: Send {
    /// Takes a lock per source key, held until the transaction ends, so importers of one
    /// source take turns. By default a no-op: enough where the write transaction is exclusive
    /// anyway.
    async fn lock_sources(&mut self, _tenant: &TenantId, _keys: &[&str]) -> Result<(), Error> {
        Ok(())
    }
    /// The run holding `source_key`.
    async fn source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(i64, RunId)>, Error>;
    /// Records the source key of the imported run `run` as deleted, with the run's id and
    /// `at` (nothing for a run that was not imported). Called before the run's rows go.
    async fn keep_deleted(&mut self, run: i64, at: Timestamp) -> Result<(), Error>;
    /// The id of the deleted run that held `source_key`, and when it was deleted.
    async fn deleted_source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(RunId, Timestamp)>, Error>;
    /// Forgets that `source_key`'s run was deleted (an import with `Reimport::Restore`).
    async fn restore_source(&mut self, tenant: &TenantId, source_key: &str) -> Result<(), Error>;
    /// What the run holds of its source: its messages, their digest, its compaction events.
    async fn stored_source(&mut self, run: i64) -> Result<(u64, Digest, u64), Error>;
    /// Records the run's origin, and links the subagent runs imported before it.
    async fn insert_origin(
        &mut self,
        run: i64,
        tenant: &TenantId,
        new: &NewOrigin<'_>,
    ) -> Result<(), Error>;
    /// Rewrites the run's origin after an extension.
    async fn update_origin(&mut self, run: i64, new: &NewOrigin<'_>) -> Result<(), Error>;
    /// Records `compactions[from..]`, numbered by their place in the transcript.
    async fn insert_compactions(
        &mut self,
        run: i64,
        compactions: &[SourceCompaction],
        from: usize,
    ) -> Result<(), Error>;
    /// The run's origin.
    async fn origin(&mut self, run: i64) -> Result<Option<RunOrigin>, Error>;
    /// The run's source compaction events, in order.
    async fn compactions(&mut self, run: i64) -> Result<Vec<CompactionEvent>, Error>;
    /// Keeps `usage.kept(kept)` for the run: one row per tenant and record id, replaced only
    /// by a copy with more tokens in all (the larger copy wins, whatever the order).
    async fn insert_usage(
        &mut self,
        tenant: &TenantId,
        run: i64,
        usage: &ImportUsage,
        kept: u64,
    ) -> Result<(), Error>;
    /// The run's usage records summed per model and kind: rows of [`Row::run_usage`], ordered
    /// by model (no model first), then reported before estimated.
    async fn run_usage(&mut self, run: i64) -> Result<Vec<RunUsage>, Error>;
    /// The usage records of every run of the tenant summed per run, model and kind: rows of
    /// [`Row::run_usage`] followed by the run's key.
    async fn usage_by_run(&mut self, tenant: &TenantId) -> Result<Vec<(i64, RunUsage)>, Error>;
    /// The tenant's usage records `query` selects: rows of [`Row::stored_usage`], ordered by
    /// timestamp (none first), then record id.
    async fn usage(
        &mut self,
        tenant: &TenantId,
        query: &UsageQuery,
    ) -> Result<Vec<StoredUsage>, Error>;
}

/// The idempotency ledger's operations and attempts.
#[async_trait]
pub trait LedgerRows: Send {
    /// Inserts `op` with its live attempt (in the operation's row), unless the key has an
    /// operation; returns the fence it got (one above the key's pruned operations').
    async fn insert_operation(
        &mut self,
        tenant: &TenantId,
        op: &Operation,
    ) -> Result<Option<u64>, Error>;
    /// The operation.
    async fn operation(&mut self, tenant: &TenantId, key: &str)
    -> Result<Option<Operation>, Error>;
    /// The operation, locked until the transaction ends. By default [`LedgerRows::operation`]:
    /// enough where the write transaction is exclusive anyway.
    async fn lock_operation(
        &mut self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<Operation>, Error> {
        self.operation(tenant, key).await
    }
    /// Gives the operation to a new holder (`op` as it becomes): moves the live attempt into
    /// the attempts log (one still open ends `lease_lost` at `op.updated_at`) and starts the
    /// new one in the row.
    async fn take_over(&mut self, tenant: &TenantId, op: &Operation) -> Result<(), Error>;
    /// Closes the superseded attempt of `fence` as `fenced_out` if it lost its lease, keeping
    /// what it tried to publish (`outcome`'s result, error and payment).
    async fn fence_out(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: &Outcome,
        now: Timestamp,
    ) -> Result<(), Error>;
    /// Extends the lease of the running operation held with `fence`; the record, if it did.
    async fn extend_lease(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Operation>, Error>;
    /// Publishes `outcome` if the operation is running with `fence`, and ends its live
    /// attempt (one `UPDATE` of the row); the record, if it did.
    async fn publish(
        &mut self,
        tenant: &TenantId,
        key: &str,
        fence: u64,
        outcome: &Outcome,
        now: Timestamp,
    ) -> Result<Option<Operation>, Error>;
    /// The operation's attempts by fence: the superseded ones and the live one.
    async fn attempts(&mut self, tenant: &TenantId, key: &str) -> Result<Vec<Attempt>, Error>;
    /// The tenant's operations, optionally of one status, by key.
    async fn operations(
        &mut self,
        tenant: &TenantId,
        status: Option<OpStatus>,
    ) -> Result<Vec<Operation>, Error>;
    /// Removes the operations (and attempts) whose retention ended by `now` and that no live
    /// lease holds, remembering each one's fence; returns how many.
    async fn prune_operations(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error>;
}

/// The response cache's entries, flights and call log.
#[async_trait]
pub trait CacheRows: Send {
    /// Reads the live entry, with its stored SHA-256.
    async fn cache_read(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        now: Timestamp,
    ) -> Result<Option<(CacheEntry, Vec<u8>)>, Error>;
    /// Adds `n` to the entry's hit count (nothing when it is gone).
    async fn cache_count_hits(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        n: u64,
    ) -> Result<(), Error>;
    /// Removes the entry if it is still the one read (same digest and creation time).
    async fn cache_drop(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        digest: &[u8],
        created_at: Timestamp,
    ) -> Result<(), Error>;
    /// Stores or replaces an entry with its body's SHA-256 (and wakes the key's flight
    /// waiters, where a backend can).
    async fn cache_put(
        &mut self,
        tenant: &TenantId,
        entry: &CacheEntry,
        digest: &[u8],
    ) -> Result<(), Error>;
    /// Removes the tenant's entries expired by `now`; how many.
    async fn cache_prune(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error>;
    /// Inserts the key's flight with token 1 unless it has one; the token, if it did.
    async fn insert_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<u64>, Error>;
    /// Takes the flight over with the next token if its lease ended by `now`: the token, and
    /// whether the lease had expired (rather than been released).
    async fn take_over_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<(u64, bool)>, Error>;
    /// The flight's holder and lease.
    async fn flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
    ) -> Result<Option<(String, Timestamp)>, Error>;
    /// Extends the flight held with `token` to `until`; whether it did.
    async fn renew_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        until: Timestamp,
    ) -> Result<bool, Error>;
    /// Ends the flight held with `token` (lease 0), waking its waiters where a backend can;
    /// whether it did.
    async fn release_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error>;
    /// Appends call records.
    async fn insert_calls(
        &mut self,
        tenant: &TenantId,
        records: &[CallRecord],
    ) -> Result<(), Error>;
    /// The tenant's calls in `since..until`, oldest first.
    async fn calls(
        &mut self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error>;
}

/// API keys.
#[async_trait]
pub trait KeyRows: Send {
    /// Stores a key; `false` when its id (or hash) is taken.
    async fn insert_key(&mut self, new: &NewApiKey<'_>) -> Result<bool, Error>;
    /// The live key with this hash.
    async fn key(&mut self, hash: &KeyHash) -> Result<Option<ApiKey>, Error>;
    /// The keys of a tenant (of every tenant when `None`), oldest first.
    async fn keys(&mut self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error>;
    /// Revokes live keys; how many.
    async fn revoke_keys(&mut self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error>;
}

/// A result row, read by column index. Backends implement the five reads; the provided
/// methods decode the row shapes the primitives select, each from column 0 in the order its
/// docs give.
pub trait Row {
    /// An integer column (`NULL` is `None`).
    fn int(&self, i: usize) -> Result<Option<i64>, Error>;
    /// A text column.
    fn text(&self, i: usize) -> Result<Option<String>, Error>;
    /// A binary column.
    fn blob(&self, i: usize) -> Result<Option<Vec<u8>>, Error>;
    /// A floating-point column.
    fn real(&self, i: usize) -> Result<Option<f64>, Error>;
    /// A boolean column.
    fn flag(&self, i: usize) -> Result<bool, Error>;

    /// An integer column that is never `NULL`.
    fn int_at(&self, i: usize) -> Result<i64, Error> {
        self.int(i)?
            .ok_or_else(|| corrupt(format!("column {i} is NULL")))
    }
    /// A text column that is never `NULL`.
    fn text_at(&self, i: usize) -> Result<String, Error> {
        self.text(i)?
            .ok_or_else(|| corrupt(format!("column {i} is NULL")))
    }
    /// A count that is never negative; `what` names it in the error.
    fn count(&self, i: usize, what: &str) -> Result<u64, Error> {
        uint(self.int_at(i)?, what)
    }
    /// A seq.
    fn seq(&self, i: usize) -> Result<Seq, Error> {
        Ok(Seq(self.count(i, "seq")?))
    }
    /// A time.
    fn time(&self, i: usize) -> Result<Timestamp, Error> {
        Ok(Timestamp(self.int_at(i)?))
    }
    /// A run: `id, tenant_id, status, goal, rules, active_summary_id, last_seq, created_at,
    /// cleared_through, cleared_min_tokens`.
    fn run(&self) -> Result<Run, Error> {
        Ok(Run {
            id: RunId::new(self.text_at(0)?)?,
            tenant: TenantId::new(self.text_at(1)?)?,
            status: status(&self.text_at(2)?)?,
            goal: self.text(3)?,
            rules: self.text(4)?,
            active_summary_id: summary_id(self.int(5)?)?,
            last_seq: Seq(self.count(6, "last_seq")?),
            created_at: self.time(7)?,
            cleared: cleared(self.int(8)?, self.int(9)?)?,
        })
    }
    /// A run's key facts: `pk, status, active_summary_id, last_seq`.
    fn run_row(&self) -> Result<RunRow, Error> {
        Ok(RunRow {
            pk: self.int_at(0)?,
            status: status(&self.text_at(1)?)?,
            active_summary_id: summary_id(self.int(2)?)?,
            last_seq: Seq(self.count(3, "last_seq")?),
        })
    }
    /// An entry: `seq, tokens, created_at, message`.
    fn entry(&self) -> Result<Entry, Error> {
        let seq = self.seq(0)?;
        Ok(Entry {
            message: serde_json::from_str(&self.text_at(3)?)
                .map_err(|e| corrupt(format!("message at seq {seq}: {e}")))?,
            seq,
            tokens: tokens(self.int_at(1)?),
            created_at: self.time(2)?,
        })
    }
    /// Protocol events: `seq, tool_uses, tool_results`.
    fn events(&self) -> Result<ProtocolEvents, Error> {
        let seq = self.seq(0)?;
        Ok(ProtocolEvents {
            seq,
            uses: ids(self.text(1)?, seq)?,
            results: ids(self.text(2)?, seq)?,
        })
    }
    /// An entry without its body: `seq, tokens, tool_uses, tool_results`.
    fn entry_meta(&self) -> Result<EntryMeta, Error> {
        let seq = self.seq(0)?;
        Ok(EntryMeta {
            events: ProtocolEvents {
                seq,
                uses: ids(self.text(2)?, seq)?,
                results: ids(self.text(3)?, seq)?,
            },
            tokens: tokens(self.int_at(1)?),
        })
    }
    /// A summary version: `id, run id, coverage, previous_id, body, created_at, meta`.
    fn summary(&self) -> Result<Summary, Error> {
        let id = SummaryId(self.count(0, "summary id")?);
        let body: SummaryBody = serde_json::from_str(&self.text_at(4)?)
            .map_err(|e| corrupt(format!("body of summary {id}: {e}")))?;
        Ok(Summary {
            id,
            run: RunId::new(self.text_at(1)?)?,
            coverage: Seq(self.count(2, "coverage")?),
            previous_id: summary_id(self.int(3)?)?,
            claims: body.claims,
            meta: json(self.text(6)?, &format!("meta of summary {id}"))?,
            created_at: self.time(5)?,
        })
    }
    /// An operation: `id, key, request_hash, status, fence, lease_owner, lease_expires_at,
    /// result, error, retryable, created_at, updated_at, expires_at`.
    fn operation(&self) -> Result<Operation, Error> {
        let key = self.text_at(1)?;
        let status = self.text_at(3)?;
        Ok(Operation {
            id: self.text_at(0)?,
            request_hash: hash(self.blob(2)?, &format!("operation {key}"))?,
            status: OpStatus::parse(&status)
                .ok_or_else(|| corrupt(format!("operation status {status:?}")))?,
            fence: self.count(4, "an operation's fence")?,
            lease_owner: self.text(5)?,
            lease_expires_at: self.int(6)?.map(Timestamp),
            result: json(self.text(7)?, "an operation's result")?,
            error: self.text(8)?,
            retryable: self.flag(9)?,
            created_at: self.time(10)?,
            updated_at: self.time(11)?,
            expires_at: self.time(12)?,
            key,
        })
    }
    /// An attempt: `owner, fence, started_at, ended_at, outcome, paid, result, error`.
    fn attempt(&self) -> Result<Attempt, Error> {
        let outcome = self.text(4)?;
        Ok(Attempt {
            owner: self.text_at(0)?,
            fence: self.count(1, "an attempt's fence")?,
            started_at: self.time(2)?,
            ended_at: self.int(3)?.map(Timestamp),
            outcome: outcome
                .map(|o| {
                    AttemptOutcome::parse(&o)
                        .ok_or_else(|| corrupt(format!("attempt outcome {o:?}")))
                })
                .transpose()?,
            paid: self.flag(5)?,
            result: json(self.text(6)?, "an attempt's result")?,
            error: self.text(7)?,
        })
    }
    /// A cache entry of `key` and its stored digest: `operation, body, body_sha256,
    /// created_at, expires_at, hits`.
    fn cache_entry(&self, key: RequestKey) -> Result<(CacheEntry, Vec<u8>), Error> {
        let entry = CacheEntry {
            key,
            operation: self.text_at(0)?,
            body: self.blob(1)?.unwrap_or_default(),
            created_at: self.time(3)?,
            expires_at: self.time(4)?,
            hits: self.count(5, "a cache entry's hit count")?,
        };
        Ok((entry, self.blob(2)?.unwrap_or_default()))
    }
    /// A call record: `at, operation, request_hash, model, input_tokens, output_tokens,
    /// cost_usd, outcome, latency_ms, overlapped`.
    fn call(&self) -> Result<CallRecord, Error> {
        let outcome = self.text_at(7)?;
        Ok(CallRecord {
            at: self.time(0)?,
            operation: self.text_at(1)?,
            request_hash: hash(self.blob(2)?, "a call")?,
            model: self.text_at(3)?,
            input_tokens: self.count(4, "a call's input tokens")?,
            output_tokens: self.count(5, "a call's output tokens")?,
            cost_usd: self.real(6)?,
            outcome: CallOutcome::parse(&outcome).ok_or_else(|| {
                corrupt(format!(
                    "a call's outcome \"{outcome}\" is not one baton writes"
                ))
            })?,
            latency_ms: self.count(8, "a call's latency")?,
            overlapped: self.flag(9)?,
        })
    }
    /// An API key: `id, tenant_id, label, created_at, revoked_at`.
    fn api_key(&self) -> Result<ApiKey, Error> {
        Ok(ApiKey {
            id: self.text_at(0)?,
            tenant: TenantId::new(self.text_at(1)?)?,
            label: self.text(2)?,
            created_at: self.time(3)?,
            revoked_at: self.int(4)?.map(Timestamp),
        })
    }
    /// A constraint: `seq, text, read_only, created_at`.
    fn constraint(&self) -> Result<Constraint, Error> {
        Ok(Constraint {
            seq: self.seq(0)?,
            text: self.text_at(1)?,
            read_only: self.flag(2)?,
            created_at: self.time(3)?,
        })
    }
    /// A source compaction event: `after_seq, summary, at`.
    fn compaction(&self) -> Result<CompactionEvent, Error> {
        Ok(CompactionEvent {
            after: Seq(self.count(0, "after_seq")?),
            summary: self.text(1)?,
            at: self.text(2)?,
        })
    }
    /// An origin: `source_key, path, format, source_session_id, parent run id, models,
    /// first_at, last_at, redactions, skipped_lines, side_branches, side_branch_messages,
    /// source_messages, imported_at, updated_at, project, title`.
    fn origin(&self) -> Result<RunOrigin, Error> {
        let models = self.text_at(5)?;
        Ok(RunOrigin {
            source_key: self.text_at(0)?,
            path: self.text_at(1)?,
            format: self.text_at(2)?,
            source_session_id: self.text(3)?,
            parent_run: self.text(4)?.map(RunId::new).transpose()?,
            models: serde_json::from_str(&models)
                .map_err(|e| corrupt(format!("model names {models:?}: {e}")))?,
            first_at: self.text(6)?,
            last_at: self.text(7)?,
            redactions: self.count(8, "redactions")?,
            skipped_lines: self.count(9, "skipped_lines")?,
            side_branches: self.count(10, "side_branches")?,
            side_branch_messages: self.count(11, "side_branch_messages")?,
            source_messages: self.count(12, "source_messages")?,
            imported_at: self.time(13)?,
            updated_at: self.time(14)?,
            project: self.text(15)?,
            title: self.text(16)?,
        })
    }
    /// Counts over a history: `COUNT(*), SUM(tokens), SUM(bytes), MIN(created_at),
    /// MAX(created_at)`.
    fn history_counts(&self) -> Result<RunCounts, Error> {
        Ok(RunCounts {
            messages: self.count(0, "message count")?,
            tokens: self.count(1, "token sum")?,
            bytes: self.count(2, "byte sum")?,
            first_appended_at: self.int(3)?.map(Timestamp),
            last_appended_at: self.int(4)?.map(Timestamp),
            ..RunCounts::default()
        })
    }
    /// Token counts from column `i`: `input, output, cache_write_5m, cache_write_1h,
    /// cache_read`.
    fn usage_at(&self, i: usize) -> Result<Usage, Error> {
        Ok(Usage {
            input: self.count(i, "input tokens")?,
            output: self.count(i + 1, "output tokens")?,
            cache_write_5m: self.count(i + 2, "cache_write_5m tokens")?,
            cache_write_1h: self.count(i + 3, "cache_write_1h tokens")?,
            cache_read: self.count(i + 4, "cache_read tokens")?,
        })
    }
    /// A run's usage of one model and kind: `model, estimated, COUNT(*), SUM(input),
    /// SUM(output), SUM(cache_write_5m), SUM(cache_write_1h), SUM(cache_read)`.
    fn run_usage(&self) -> Result<RunUsage, Error> {
        Ok(RunUsage {
            model: self.text(0)?,
            estimated: self.flag(1)?,
            responses: self.count(2, "response count")?,
            usage: self.usage_at(3)?,
        })
    }
    /// A run as a listing reads it: the columns of [`Row::run`], then `pk, format, project,
    /// title, models, parent run id, first_at, last_at, SUM(tokens), MIN(created_at),
    /// MAX(created_at)` (the origin's columns NULL for a run not imported, the history's for
    /// an empty run).
    fn listed_run(&self) -> Result<ListedRun, Error> {
        let models = match self.text(14)? {
            Some(models) => serde_json::from_str(&models)
                .map_err(|e| corrupt(format!("model names {models:?}: {e}")))?,
            None => Vec::new(),
        };
        Ok(ListedRun {
            run: self.run()?,
            pk: self.int_at(10)?,
            format: self.text(11)?,
            project: self.text(12)?,
            title: self.text(13)?,
            models,
            parent_run: self.text(15)?.map(RunId::new).transpose()?,
            first_at: self.text(16)?,
            last_at: self.text(17)?,
            tokens: uint(self.int(18)?.unwrap_or(0), "token sum")?,
            first_stored: self.int(19)?.map(Timestamp),
            last_stored: self.int(20)?.map(Timestamp),
        })
    }
    /// A stored usage record: `run id, session, project, agent, id, model, response_id,
    /// request_id, at, input, output, cache_write_5m, cache_write_1h, cache_read, estimated`.
    fn stored_usage(&self) -> Result<StoredUsage, Error> {
        Ok(StoredUsage {
            run: RunId::new(self.text_at(0)?)?,
            session: self.text_at(1)?,
            project: self.text(2)?,
            agent: self.text_at(3)?,
            record: UsageRecord {
                id: self.text_at(4)?,
                model: self.text(5)?,
                response_id: self.text(6)?,
                request_id: self.text(7)?,
                at: self.int(8)?.map(Timestamp),
                usage: self.usage_at(9)?,
                estimated: self.flag(14)?,
            },
        })
    }
    /// What a run holds of its source: `source_messages, source_digest, compaction count`.
    fn stored_source(&self) -> Result<(u64, Digest, u64), Error> {
        Ok((
            self.count(0, "source_messages")?,
            digest(&self.text_at(1)?)?,
            self.count(2, "compaction count")?,
        ))
    }
}

/// A count, seq or id as the databases' signed 64-bit integer. Past that range it came from a
/// caller (nothing stored can be), so it is invalid input, not a corrupt store (issue 20 item
/// 4): `baton_core::Error::OutOfRange`, kind invalid, code `out_of_range`.
pub fn int(value: u64) -> Result<i64, Error> {
    i64::try_from(value).map_err(|_| {
        Error::InvalidId(baton_core::Error::OutOfRange {
            what: "number",
            value,
        })
    })
}

/// A seq or id a caller names, for a lookup: past the databases' range it becomes `i64::MAX`,
/// which no row has, so the lookup answers "not found" instead of failing.
pub fn lookup(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored integer that must not be negative; `what` names it in the error.
fn uint(value: i64, what: &str) -> Result<u64, Error> {
    u64::try_from(value).map_err(|_| corrupt(format!("{what} is negative: {value}")))
}

/// A token count as stored (never negative; saturating).
fn tokens(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(if value < 0 { 0 } else { u32::MAX })
}

pub(crate) fn corrupt(what: String) -> Error {
    Error::Corrupt { what }
}

fn status(s: &str) -> Result<RunStatus, Error> {
    RunStatus::parse(s).ok_or_else(|| corrupt(format!("run status {s:?}")))
}

fn summary_id(id: Option<i64>) -> Result<Option<SummaryId>, Error> {
    id.map(|id| uint(id, "summary id").map(SummaryId))
        .transpose()
}

fn hash(bytes: Option<Vec<u8>>, what: &str) -> Result<RequestKey, Error> {
    bytes
        .unwrap_or_default()
        .try_into()
        .map(RequestKey)
        .map_err(|_| corrupt(format!("{what}: request hash is not 32 bytes")))
}

fn json(text: Option<String>, what: &str) -> Result<Option<serde_json::Value>, Error> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(format!("{what}: {e}"))))
        .transpose()
}

fn ids(json: Option<String>, seq: Seq) -> Result<Vec<String>, Error> {
    match json {
        None => Ok(Vec::new()),
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| corrupt(format!("tool ids of seq {seq}: {e}")))
        }
    }
}

fn cleared(through: Option<i64>, min_tokens: Option<i64>) -> Result<Option<Cleared>, Error> {
    match (through, min_tokens) {
        (None, None) => Ok(None),
        (Some(through), Some(min)) => Ok(Some(Cleared {
            through: Seq(uint(through, "cleared_through")?),
            min_tokens: u32::try_from(min)
                .map_err(|_| corrupt(format!("cleared_min_tokens {min}")))?,
        })),
        _ => Err(corrupt(
            "a run's cleared_through and cleared_min_tokens are not both set".into(),
        )),
    }
}

fn digest(hex: &str) -> Result<Digest, Error> {
    let bad = || corrupt(format!("import digest {hex:?}"));
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(Digest(out))
}

/// A summary's stored body: `{"claims": [...]}`, an object so later fields fit beside them.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct SummaryBody {
    pub(crate) claims: Vec<Claim>,
}

impl Prepared {
    /// Serializes `entries` for [`RunRows::insert_entries`].
    pub(crate) fn all(entries: &[crate::NewEntry]) -> Result<Vec<Prepared>, Error> {
        entries
            .iter()
            .map(|e| Prepared::of(e).map_err(corrupt))
            .collect()
    }

    /// Serializes one entry; the error says why its message does not serialize.
    pub(crate) fn of(entry: &crate::NewEntry) -> Result<Prepared, String> {
        let list = |ids: Vec<&str>| {
            (!ids.is_empty())
                .then(|| serde_json::to_string(&ids).ok())
                .flatten()
        };
        Ok(Prepared {
            tokens: entry.tokens,
            tool_uses: list(entry.message.tool_use_ids().collect()),
            tool_results: list(entry.message.tool_result_ids().collect()),
            message: serde_json::to_string(&entry.message)
                .map_err(|err| format!("message does not serialize: {err}"))?,
        })
    }
}
