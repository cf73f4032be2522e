//! The store: durable history, summary versions installed by compare-and-swap, and the reads
//! context assembly needs; the response cache's and the idempotency ledger's records; API keys.
//!
//! [`Store`] is the one seam between baton and its databases, named after domain operations.
//! Every rule behind it is written once, here, over the row primitives a database provides
//! ([`backend`]); `baton-sqlite` and `baton-postgres` implement only those, with SQL, and every
//! [`backend::Backend`] is a `Store`. A backend proves it keeps the contract by passing the
//! conformance suite (the `conformance` feature, for its tests). The API is async so a
//! networked backend fits without reshaping it.
//!
//! Roles:
//! - [`Store`]: runs, history, summaries, context, pins, constraints, search, imports; its
//!   supertraits are the narrower seams other crates take: [`CacheStore`] (module [`cache`]:
//!   the response cache's entries, in-flight records and call log, what `baton-cache` takes),
//!   [`LedgerStore`] (module [`ledger`]: the idempotency ledger's operations, leases, fences and
//!   attempts) and [`KeyStore`] (module [`keys`]: API keys, kept as hashes, that tell the HTTP
//!   service a caller's tenant).
//! - [`Install`] and [`Rejection`]: expected outcomes of an install, returned as values.
//! - [`Error`]: what went wrong otherwise, naming the offending value.
//! - [`import`]: imported runs: their origin, found again by source key, and extended by what
//!   the source gained since, never duplicated.
//! - [`usage`]: each model response's token usage, kept once per response across imports
//!   ([`UsageStore`], which every `Store` also is).
//! - [`runs`]: runs listed for people (filtered, sorted, priced, paged by cursor) and runs
//!   deleted whole.
//! - [`search`]: recall search's shared half: which text of a message is searchable, how it
//!   becomes words and index rows, and how a query (with `word*` prefixes) is checked.
//! - [`backend`]: how a database plugs in (for backend crates only).
//!
//! Every call is scoped by tenant: a run of tenant A does not exist for tenant B (not found, not
//! forbidden). History is append-only: no method updates a history row, and only
//! [`Store::delete_run`] removes any, with the whole run they belong to.
//!
//! ```no_run
//! # async fn demo(store: &dyn baton_store::Store) -> Result<(), baton_store::Error> {
//! use baton_core::{Message, Role, Seq, TenantId, RunId};
//! use baton_store::{Candidate, Install, NewEntry, NewRun};
//!
//! let tenant = TenantId::default_tenant();
//! let run = store.create_run(&tenant, &NewRun::default()).await?;
//! let seqs = store
//!     .append(&tenant, &run.id, &[NewEntry::estimated(Message::text(Role::User, "read-only, please"))])
//!     .await?;
//! let candidate = Candidate { base: None, cut: seqs[0], claims: vec![], meta: None };
//! match store.install_summary(&tenant, &run.id, &candidate).await? {
//!     Install::Installed(summary) => println!("installed {}", summary.id),
//!     Install::Rejected(why) => println!("rejected: {why}"),
//! }
//! # Ok(()) }
//! ```

pub mod backend;
pub mod cache;
#[cfg(feature = "conformance")]
pub mod conformance;
mod history;
pub mod import;
pub mod keys;
mod kind;
pub mod ledger;
pub mod runs;
pub mod search;
mod url;
pub mod usage;

use async_trait::async_trait;
use baton_core::units::ProtocolEvents;
use baton_core::{
    Claim, Cleared, Context, Entry, EntryMeta, InvalidCandidate, Message, Run, RunId, RunStatus,
    Seq, Summary, SummaryId, TenantId, tokens,
};

pub use cache::{CacheEntry, CacheStore, CallOutcome, CallRecord, Flight, Lookup, NewCacheEntry};
pub use import::{
    CompactionEvent, Difference, Digest, ImportRejection, Imported, NewImport, Origin, Reimport,
    RunCounts, RunOrigin, RunReport, RunUsage, SourceCompaction,
};
pub use keys::{ApiKey, KeyHash, KeyStore, NewApiKey, Revoke};
pub use kind::ErrorKind;
pub use ledger::{
    Attempt, AttemptOutcome, Begin, Fenced, LedgerStore, OpStatus, Operation, Publish,
};
pub use runs::{Deleted, RunPage, RunQuery, RunSort, RunSummary};
pub use search::{Found, SearchKind, SearchQuery, SearchRow, search_rows, search_texts};
pub use url::redact_url;
pub use usage::{ImportUsage, StoredUsage, UsageQuery, UsageStore};

/// A store of runs, history and summaries. Every [`backend::Backend`] is one; a backend keeps
/// the contract when it passes the conformance suite.
///
/// Contract, for every backend:
/// - `append` assigns seqs `last + 1, last + 2, …` in one transaction: all of the batch or none,
///   never a gap or a reuse, even with concurrent appenders on other connections or processes.
/// - `install_summary` is one transaction that validates the candidate against the run's
///   history and moves the run's pointer only if it still names `candidate.base`; on any
///   rejection nothing is written.
/// - `context` reads the run, the active summary and the tail after its coverage by index:
///   its cost grows with the tail, not with the history.
/// - Search indexing is lazy: `append` writes history only, and `search` first brings the run's
///   index up to date (the [`search_rows`] of every message past the run's indexed mark), so
///   `search` finds every message committed before it was called.
#[async_trait]
pub trait Store: CacheStore + LedgerStore + KeyStore + UsageStore + Send + Sync {
    /// Creates a run (and its tenant, on first use).
    async fn create_run(&self, tenant: &TenantId, new: &NewRun) -> Result<Run, Error>;

    /// Reads a run.
    async fn run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error>;

    /// Lists a tenant's runs, oldest first.
    async fn list_runs(&self, tenant: &TenantId) -> Result<Vec<Run>, Error>;

    /// A page of the tenant's runs as people look for them: each with its project, title,
    /// agent, models, first and last activity, messages, tokens, usage and cost, filtered,
    /// sorted and cut as `query` asks (see [`runs`]). A tenant without runs has an empty page.
    /// Fails with [`Error::InvalidQuery`] for a limit of 0 or a cursor this listing did not
    /// make (or made for another sort).
    async fn list_run_summaries(
        &self,
        tenant: &TenantId,
        query: &RunQuery,
    ) -> Result<RunPage, Error>;

    /// Deletes a run of the tenant whole, from every table, with its subagent runs (see
    /// [`runs`]), in one transaction. The only way history rows are ever removed.
    async fn delete_run(&self, tenant: &TenantId, run: &RunId) -> Result<Deleted, Error>;

    /// Marks an active run cancelled. Cancelling a cancelled run is a no-op; a completed run
    /// cannot be cancelled.
    async fn cancel_run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error>;

    /// Appends a batch of messages to an active run in one transaction; returns their seqs.
    async fn append(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entries: &[NewEntry],
    ) -> Result<Vec<Seq>, Error>;

    /// Reads the entries with `from ≤ seq ≤ to` (to the end when `to` is `None`), in order.
    async fn read_range(
        &self,
        tenant: &TenantId,
        run: &RunId,
        from: Seq,
        to: Option<Seq>,
    ) -> Result<Vec<Entry>, Error>;

    /// The tool-call ids of every message after `after`, in order, without reading bodies.
    async fn protocol_window(
        &self,
        tenant: &TenantId,
        run: &RunId,
        after: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error>;

    /// Validates and installs a candidate summary by compare-and-swap on the run's pointer.
    async fn install_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        candidate: &Candidate,
    ) -> Result<Install, Error>;

    /// Every summary version of a run, oldest first.
    async fn summaries(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Summary>, Error>;

    /// One summary version, if it belongs to one of the tenant's runs.
    async fn summary(&self, tenant: &TenantId, id: SummaryId) -> Result<Summary, Error>;

    /// The run's active summary (if any), the pinned entries it covers, and every entry after
    /// its coverage, from one snapshot.
    async fn context_parts(&self, tenant: &TenantId, run: &RunId) -> Result<ContextParts, Error>;

    /// What planning a compaction reads, from one snapshot: the run, its active summary, the
    /// pinned entries the summary covers, every pinned seq, and the tail after the coverage as
    /// [`EntryMeta`] (seq, stored tokens, tool-call ids) without message bodies, so its cost
    /// follows the tail and not the history.
    async fn context_meta(&self, tenant: &TenantId, run: &RunId) -> Result<ContextMeta, Error>;

    /// Pins the message at `seq`: every strategy keeps it (context assembly carries it whole
    /// when a summary covers it), and claims citing it are carried into every later version.
    /// Returns `false` when it was pinned already. Fails with [`Error::SeqNotFound`] for a seq
    /// the run does not have.
    async fn pin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error>;

    /// Unpins the message at `seq`; returns `false` when it was not pinned.
    async fn unpin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error>;

    /// The run's pinned seqs, in order.
    async fn pins(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Seq>, Error>;

    /// Sets a constraint on the run, in one transaction: appends `entry` (the message that
    /// states it, so the model sees it), pins it (so no compaction drops it), and records the
    /// constraint, which the executor reads to decide whether a tool may run. Returns the
    /// constraint with the seq of its message.
    async fn add_constraint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entry: &NewEntry,
        text: &str,
        read_only: bool,
    ) -> Result<Constraint, Error>;

    /// The run's constraints, oldest first.
    async fn constraints(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Constraint>, Error>;

    /// Records that the tool call `tool_use_id` (of a tool with side effects) is about to run.
    /// Returns `false` when it was recorded already: the call may have run before, and must not
    /// run again.
    async fn start_tool(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool_use_id: &str,
    ) -> Result<bool, Error>;

    /// The tool calls recorded as started, in any order.
    async fn started_tools(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<String>, Error>;

    /// Makes an earlier (or later) version of the run's summary the active one, by
    /// compare-and-swap on the same pointer an install moves: the pointer moves only if it
    /// still names `base`. History is untouched; the version's coverage may be lower than the
    /// current one's (a rollback), and the messages after it come back into the context.
    /// Rejected, writing nothing, when `base` is stale, when `id` is not a version of this run
    /// ([`InvalidCandidate::VersionNotInRun`]) or the run is not active.
    async fn activate_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        id: SummaryId,
        base: Option<SummaryId>,
    ) -> Result<Install, Error>;

    /// Sets which old tool results the run's context shows as a stub (the `clear-tool-results`
    /// strategy), by compare-and-swap: only if the run's current setting is `expected`, and only
    /// forward (`new.through` at least the current one's and a seq of the run, `new.min_tokens`
    /// at most the current one's, so nothing stubbed comes back). Rejected,
    /// writing nothing, with [`Rejection::StaleCleared`] or [`Rejection::InvalidClear`].
    async fn set_cleared(
        &self,
        tenant: &TenantId,
        run: &RunId,
        expected: Option<Cleared>,
        new: Cleared,
    ) -> Result<SetCleared, Error>;

    /// Recall: the run's original entries (full messages as stored, whether or not a summary
    /// covers them) whose text of `query.kind` (every kind when `None`) contains
    /// `query.pattern` as a phrase, in seq order, at most `query.limit`. When nothing matches
    /// the pattern's words whole but their prefix form would, [`Found::prefix_form`] says so.
    ///
    /// This is a phrase search on words, not a regex or a substring match: the pattern's words
    /// must appear in the same order, adjacent, as whole words. Matching folds case and
    /// diacritics and treats every non-alphanumeric character as a word separator (so
    /// `main.rs` matches `src/main.rs`, and `mai` does not); there is no stemming (`file` does
    /// not match `files`) and no stop words. A word followed by `*` is a prefix: `mai*` matches
    /// `main` (`src/mai*` matches `src/main.rs`). The words are cut by [`search`] in Rust and
    /// matched the same way by every backend. A phrase may run across the blocks of one kind in
    /// one message (they are joined by newlines), never across kinds or messages.
    ///
    /// Indexing happens here, not in `append`: each backend keeps how far each run's history
    /// is indexed, and a search first indexes the messages appended since (in write
    /// transactions that concurrent searchers of the run take in turn, so nothing is indexed
    /// twice; a backend whose writers share one lock commits them in batches so appends are
    /// not held up by a long first search), then queries. When nothing is new that costs one cheap read; the first search of
    /// a long run pays for indexing all of it, and later ones only for what was appended since.
    ///
    /// Fails with [`Error::InvalidQuery`] when `limit` is 0 or the pattern has no words (or
    /// more than [`search::MAX_PHRASE_WORDS`]), before looking the run up.
    async fn search(
        &self,
        tenant: &TenantId,
        run: &RunId,
        query: &SearchQuery,
    ) -> Result<Found, Error>;

    /// The tenant's runs with messages matching `query`, each with its matching seqs in order,
    /// for a search over many runs: one read when the index is up to date (runs it lags behind
    /// are indexed first, as [`Store::search`] does). Its cost is bounded by `cap`, not by the
    /// phrase's matches: `None` when the phrase matches more than `cap` index rows (a common
    /// phrase, which [`Store::search`] run by run answers sooner, its first runs filling any
    /// limit). `query.limit` is not used. Fails as [`Store::search`] does on a bad query.
    async fn search_across(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
        cap: u64,
    ) -> Result<Option<std::collections::BTreeMap<RunId, Vec<Seq>>>, Error>;

    /// Imports the transcripts of one file as runs, in one transaction: all of them or none.
    ///
    /// A transcript whose [`Origin::source_key`] names no run of the tenant becomes a new run
    /// (with its origin, its messages as seqs `1..=n`, and its source's compaction events). One
    /// that names a run already is never imported twice: it is [`Imported::UpToDate`], or
    /// [`Imported::Grown`] when the source has gained messages, which `reimport` appends
    /// ([`Imported::Extended`]). A source that no longer starts with what was imported from it,
    /// or whose run took other messages since, fails the whole file with
    /// [`Error::Import`] (`import::decide` holds these rules once for every backend).
    ///
    /// A subagent transcript ([`Origin::parent_key`]) is linked to its parent's run, whichever
    /// of the two is imported first. Concurrent imports of one source, from any number of
    /// connections or processes, make one run.
    async fn import(
        &self,
        tenant: &TenantId,
        imports: Vec<NewImport>,
        reimport: Reimport,
    ) -> Result<Vec<Imported>, Error>;

    /// The run an import of `source_key` went to ([`Origin::source_key`]), if the tenant has
    /// one: how a caller asks whether a source was imported without importing it.
    async fn source_run(&self, tenant: &TenantId, source_key: &str)
    -> Result<Option<RunId>, Error>;

    /// A run with its origin (for an imported run), its source's compaction events, and
    /// counts over its history, from one snapshot.
    async fn run_report(&self, tenant: &TenantId, run: &RunId) -> Result<RunReport, Error>;

    /// The assembled context of the run: rules, goal, active summary, pinned messages it
    /// covers, tail.
    async fn context(&self, tenant: &TenantId, run: &RunId) -> Result<Context, Error> {
        let parts = self.context_parts(tenant, run).await?;
        Ok(baton_core::context::assemble_pinned(
            &parts.run,
            parts.summary.as_ref(),
            parts.tail,
            parts.pinned,
            &parts.pins,
        ))
    }
}

/// What a new run starts with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NewRun {
    /// Its id; the store generates one when `None`.
    pub id: Option<RunId>,
    /// What the agent is trying to do.
    pub goal: Option<String>,
    /// Standing instructions placed first in every context.
    pub rules: Option<String>,
}

/// A message to append, with its token count computed by the caller's tokenizer.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEntry {
    /// The message.
    pub message: Message,
    /// Its token count.
    pub tokens: u32,
}

impl NewEntry {
    /// A message counted with the byte-based estimate of [`baton_core::tokens`].
    pub fn estimated(message: Message) -> Self {
        NewEntry {
            tokens: tokens::estimate_message(&message),
            message,
        }
    }

    /// A message counted with `counter`: a real vocabulary (`baton-tokens`) or the byte-based
    /// [`tokens::ByteEstimate`]. The count is stored with the message, so make the counter the
    /// one the run's budget is meant in.
    pub fn counted(message: Message, counter: &dyn tokens::TokenCounter) -> Self {
        NewEntry {
            tokens: counter.count_message(&message),
            message,
        }
    }
}

/// A candidate summary: what it claims, the cut it covers through, and the version it extends.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The summary it was built from: the run's active summary when the builder started, or
    /// `None` when the run had none.
    pub base: Option<SummaryId>,
    /// The last seq it covers. Must extend the base's coverage, name an existing seq, and be a
    /// safe cut point.
    pub cut: Seq,
    /// Its claims; every `source_seq` must exist in the run at or before `cut`.
    pub claims: Vec<Claim>,
    /// What made it (the compaction's strategy, sizes, retention audit…), kept with the version
    /// as given and shown by `summary show`; the store does not interpret it.
    pub meta: Option<serde_json::Value>,
}

/// A constraint the user set on a run.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Constraint {
    /// The seq of the (pinned) message that states it.
    pub seq: Seq,
    /// What the user said.
    pub text: String,
    /// Whether it forbids tools with side effects.
    pub read_only: bool,
    /// When it was set.
    pub created_at: baton_core::Timestamp,
}

/// What [`Store::context_parts`] reads.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextParts {
    /// The run.
    pub run: Run,
    /// Its active summary.
    pub summary: Option<Summary>,
    /// The pinned entries the summary covers, in order.
    pub pinned: Vec<Entry>,
    /// Every pinned seq of the run, in order.
    pub pins: Vec<Seq>,
    /// Every entry after the summary's coverage, in order.
    pub tail: Vec<Entry>,
}

/// What [`Store::context_meta`] reads.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextMeta {
    /// The run.
    pub run: Run,
    /// Its active summary.
    pub summary: Option<Summary>,
    /// The pinned entries the summary covers, in order.
    pub pinned: Vec<Entry>,
    /// Every pinned seq of the run, in order.
    pub pins: Vec<Seq>,
    /// The entries after the summary's coverage, without bodies, in order.
    pub tail: Vec<EntryMeta>,
}

impl ContextMeta {
    /// Tokens of the context besides the tail: rules, goal, the summary's claims and the pinned
    /// entries it covers, as context assembly renders them.
    pub fn fixed_tokens(&self) -> u64 {
        baton_core::context::assemble_pinned(
            &self.run,
            self.summary.as_ref(),
            Vec::new(),
            self.pinned.clone(),
            &self.pins,
        )
        .tokens
    }
}

/// The outcome of [`Store::set_cleared`].
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum SetCleared {
    /// The run now clears as asked.
    Set(Run),
    /// Nothing was written.
    Rejected(Rejection),
}

/// The outcome of an install.
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Install {
    /// The candidate is now the run's active summary.
    Installed(Summary),
    /// Nothing was written.
    Rejected(Rejection),
}

/// Why an install wrote nothing.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// The run's active summary is no longer the candidate's base: another install won.
    #[error("stale base: the candidate was built on {}, but the active summary is {}", fmt_base(*.expected), fmt_base(*.active))]
    StaleBase {
        /// The base the candidate named.
        expected: Option<SummaryId>,
        /// The run's active summary now.
        active: Option<SummaryId>,
    },
    /// The candidate or its cut is invalid.
    #[error("invalid candidate: {0}")]
    Invalid(InvalidCandidate),
    /// The run is cancelled or completed; an install never reactivates it.
    #[error("run is {}, not active: summaries are installed only on active runs", .status.as_str())]
    RunNotActive {
        /// The run's status.
        status: RunStatus,
    },
    /// The run's cleared-results setting is no longer the one the caller saw.
    #[error("stale setting: the caller saw {}, but the run clears {}", fmt_cleared(*.expected), fmt_cleared(*.active))]
    StaleCleared {
        /// What the caller saw.
        expected: Option<Cleared>,
        /// What the run has now.
        active: Option<Cleared>,
    },
    /// A cleared-results setting that goes backwards or names no message of the run.
    #[error("invalid setting: {detail}")]
    InvalidClear {
        /// What is wrong with it.
        detail: String,
    },
}

fn fmt_cleared(c: Option<Cleared>) -> String {
    match c {
        Some(c) => format!(
            "tool results through seq {} of {} tokens or more",
            c.through, c.min_tokens
        ),
        None => "nothing".to_owned(),
    }
}

fn fmt_base(id: Option<SummaryId>) -> String {
    match id {
        Some(id) => format!("summary {id}"),
        None => "none".to_owned(),
    }
}

/// What went wrong, other than an expected rejection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The tenant has never created a run.
    #[error("unknown tenant \"{tenant}\"")]
    UnknownTenant {
        /// The tenant named.
        tenant: TenantId,
    },
    /// No such run for this tenant.
    #[error("run \"{run}\" not found")]
    RunNotFound {
        /// The run named.
        run: RunId,
    },
    /// No such summary among this tenant's runs.
    #[error("summary {id} not found")]
    SummaryNotFound {
        /// The summary named.
        id: SummaryId,
    },
    /// The run has no message at this seq.
    #[error("run \"{run}\" has no message {seq} (its messages are 1..={last})")]
    SeqNotFound {
        /// The run.
        run: RunId,
        /// The seq named.
        seq: Seq,
        /// The run's last seq.
        last: Seq,
    },
    /// A run with this id already exists for the tenant.
    #[error("run \"{run}\" already exists")]
    RunExists {
        /// The run named.
        run: RunId,
    },
    /// The run no longer takes writes.
    #[error("run \"{run}\" is {}: it takes no more writes", .status.as_str())]
    RunNotActive {
        /// The run named.
        run: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// The database was not created by baton.
    #[error("{path}: not a baton database ({detail})")]
    NotABatonDatabase {
        /// Where it is.
        path: String,
        /// What gave it away.
        detail: String,
    },
    /// The database was written by a newer baton.
    #[error(
        "{path}: schema version {found} is newer than this baton supports ({supported}); upgrade baton"
    )]
    SchemaTooNew {
        /// Where it is.
        path: String,
        /// The database's schema version.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A database URL that cannot be used.
    #[error("database url {url}: {detail}")]
    InvalidUrl {
        /// The URL, with any password redacted.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The database server cannot be reached.
    #[error("database unavailable: {what}")]
    Unavailable {
        /// Which server, and the driver's reason.
        what: String,
    },
    /// A stored value could not be read back.
    #[error("corrupt store: {what}")]
    Corrupt {
        /// What and where.
        what: String,
    },
    /// A search that cannot be run: no words in its pattern (or more than a phrase may have),
    /// or a limit of 0.
    #[error("search: {detail}")]
    InvalidQuery {
        /// What is wrong with it.
        detail: String,
    },
    /// A cache entry or flight that cannot be stored as asked (a zero TTL or lease).
    #[error("cache: {detail}")]
    InvalidCache {
        /// What is wrong with it.
        detail: String,
    },
    /// A ledger call that cannot be made as asked (a bad idempotency key, a zero lease).
    #[error("ledger: {detail}")]
    InvalidLedger {
        /// What is wrong with it.
        detail: String,
    },
    /// An API key that cannot be made or stored as asked.
    #[error("api key: {detail}")]
    InvalidKey {
        /// What is wrong with it.
        detail: String,
    },
    /// Text the store keeps as text (a goal, rules, a constraint, an error, a label…) holds a
    /// NUL character, which PostgreSQL cannot store: refused on every backend alike, before
    /// anything is written. (Messages are stored as JSON, where NUL is escaped, and keep it.)
    #[error("{field}: a NUL character (\\u0000) at byte {at}: stored text cannot hold one")]
    InvalidText {
        /// Which text.
        field: String,
        /// Where the first NUL is, in bytes.
        at: usize,
    },
    /// An import that would mix two histories; nothing of its file was written.
    #[error(transparent)]
    Import(#[from] ImportRejection),
    /// An id read or built by the store is not a valid id.
    #[error(transparent)]
    InvalidId(#[from] baton_core::Error),
    /// The database driver failed.
    #[error("database: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Wraps a driver error.
    pub fn backend(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Backend(Box::new(err))
    }
}

/// Refuses text with a NUL character, which PostgreSQL cannot store (see
/// [`Error::InvalidText`]); `field` names it.
pub(crate) fn check_text(field: &str, text: Option<&str>) -> Result<(), Error> {
    match text.and_then(|t| t.find('\0')) {
        Some(at) => Err(Error::InvalidText {
            field: field.to_owned(),
            at,
        }),
        None => Ok(()),
    }
}

/// A new run id: a time-ordered UUID (v7), so generated ids sort by creation time.
pub fn generate_run_id() -> Result<RunId, Error> {
    Ok(RunId::new(uuid::Uuid::now_v7().to_string())?)
}
