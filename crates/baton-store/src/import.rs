//! Imported runs: where a run came from, how it is found again, and how a source that grew is
//! extended without duplicating what was imported before.
//!
//! An import names its source by a *source key* (the caller chooses it: a session id where the
//! source format has a globally unique one, else the file's path and the transcript's place in
//! it). A tenant has at most one run per source key, so importing the same source twice finds
//! the run instead of making a second one.
//!
//! Growth is checked without reading history back: the store keeps, beside each imported run,
//! how many source messages it holds and a rolling SHA-256 *digest* of them
//! (`d₀ = SHA-256("")`, `dᵢ = SHA-256(dᵢ₋₁ ‖ JSON(messageᵢ))`). A new import of the same source
//! carries the digest after each of its messages ([`NewImport::new`] computes them), so the
//! store can tell in one comparison whether the source still starts with what it imported, and
//! appends only the messages after that prefix.
//!
//! One file's transcripts are stored in one write job: a file that fails stores nothing. The job
//! first locks every source key the file names (its transcripts' and their parents'), sorted,
//! where the backend's write transaction is not exclusive anyway (PostgreSQL: advisory locks),
//! so importers of one source take turns and the later ones find the first one's run, and a
//! subagent and its parent imported at once are still linked. Extending a run then locks the
//! run, like every write that changes one, and `decide` compares what is read under both.
//!
//! # Design
//!
//! `Store::import` takes one file's transcripts and stores them in one transaction: a file that fails stores nothing, and the CLI goes on with the next file.
//! A tenant has at most one run per source key (`UNIQUE (tenant_id, source_key)` on `run_origins`), so the same session imported twice is found, not duplicated; a session that grew since is reported, and `--reimport` appends only what is new, after checking the stored digest against the new transcript's digest at the same length.
//! On SQLite the file's `BEGIN IMMEDIATE` transaction serializes importers; on PostgreSQL an import first takes transaction-scoped advisory locks on every source key (and parent key) the file names, sorted, so concurrent importers of one source take turns and the later ones find the run, and a subagent and its parent imported at once still get linked.
//! Secrets are redacted before anything is stored (`baton_import::redact`), and the count is kept with the run's origin.
//! The compactions a source agent performed are events in `source_compactions`, placed after a seq; they are neither messages nor baton summaries.

use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_core::{Message, Run, RunId, RunStatus, Seq, TenantId, Timestamp};
use sha2::{Digest as _, Sha256};

use crate::backend::{Backend, ImportRows, NewOrigin, Prepared, RunRows};
use crate::history::{job, load, lock};
use crate::usage::ImportUsage;
use crate::{Error, NewEntry, check_text, generate_run_id};

/// Where a transcript came from, as the importer read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Origin {
    /// The source's identity: unique per tenant, the same every time the source is imported.
    pub source_key: String,
    /// The file it was read from.
    pub path: String,
    /// The reader that read it (`claude-code`, `codex`, …).
    pub format: String,
    /// The source's own session id, when it has one.
    pub source_session_id: Option<String>,
    /// The source key of the transcript this one is a subagent of, when it is one. The run is
    /// linked to its parent's run when that is imported, before or after this one.
    pub parent_key: Option<String>,
    /// The models that wrote it, in order of first appearance.
    pub models: Vec<String>,
    /// The source's timestamp of its first message, as the source wrote it.
    pub first_at: Option<String>,
    /// The source's timestamp of its last message, as the source wrote it.
    pub last_at: Option<String>,
    /// How many secrets were redacted from its messages before they were stored.
    pub redactions: u64,
    /// Lines or events of the source that are not messages, passed over.
    pub skipped_lines: u64,
    /// Side branches of a threaded session that are not on its main branch.
    pub side_branches: u64,
    /// Messages on those side branches.
    pub side_branch_messages: u64,
    /// The project the session worked in (the agent's working directory), when the source
    /// says.
    pub project: Option<String>,
    /// The first instruction the user gave, on one line and cut short (what `runs list` shows).
    pub title: Option<String>,
    /// The source key of a stand-in this transcript replaces: the run made of a session's
    /// prompts recovered from a prompt history (`claude-code-history:<session id>`) before the
    /// session's own file was imported. When that run is still as recovered (no summary, no
    /// pin, no message but the source's), the import deletes it in its own transaction: one
    /// session, one run, and the file's run holds every prompt the stand-in did.
    pub replaces: Option<String>,
}

/// A compaction the source agent performed, recorded as an event beside the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceCompaction {
    /// How many of the transcript's messages came before it: it sits after seq `after`.
    pub after: u64,
    /// The summary text the agent wrote, when the source has it.
    pub summary: Option<String>,
    /// When it happened, as the source wrote it.
    pub at: Option<String>,
}

/// A rolling digest over a transcript's messages (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// The digest of no messages: SHA-256 of the empty string.
    pub fn empty() -> Self {
        Digest(Sha256::digest([]).into())
    }

    /// The digest after one more message.
    pub fn then(self, message: &Message) -> Self {
        // A message always serializes (its JSON is what history stores).
        self.then_json(&serde_json::to_vec(message).unwrap_or_default())
    }

    /// The digest after one more message, given as the JSON history stores.
    fn then_json(self, json: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(self.0);
        h.update(json);
        Digest(h.finalize().into())
    }

    /// Lowercase hex, as stored.
    pub fn to_hex(self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// One transcript to import as a run.
#[derive(Clone, Debug, PartialEq)]
pub struct NewImport {
    /// The new run's id; the store generates one when `None`. Ignored when the source was
    /// imported before (its run is found by [`Origin::source_key`]).
    pub id: Option<RunId>,
    /// Where it came from.
    pub origin: Origin,
    /// Source messages before `entries`, known only by their digest `prefix` (see
    /// [`NewImport::after`]); 0 for a whole transcript.
    skipped: u64,
    /// The digest after the `skipped` messages.
    prefix: Digest,
    /// Its messages, in order, already redacted.
    entries: Vec<NewEntry>,
    /// `digests[i]` is the digest after the prefix and `entries[..=i]`.
    digests: Vec<Digest>,
    /// The entries serialized for `history`: the JSON the digests hash, made once, where the
    /// import is built (an import's worker thread), not in the store's write; or why one does
    /// not serialize.
    prepared: Result<Vec<Prepared>, String>,
    /// The compactions the source agent performed, in order.
    pub compactions: Vec<SourceCompaction>,
    /// Each model response's usage (none unless the caller sets it; see [`crate::usage`]).
    pub usage: ImportUsage,
}

impl NewImport {
    /// An import of `entries`, computing their rolling digests.
    pub fn new(
        id: Option<RunId>,
        origin: Origin,
        entries: Vec<NewEntry>,
        compactions: Vec<SourceCompaction>,
    ) -> Self {
        Self::after(id, origin, (0, Digest::empty()), entries, compactions)
    }

    /// An import of a transcript's messages after its first `skipped`, which are known only by
    /// their digest `prefix`: a caller that imported the transcript before and remembers where
    /// it stopped (the gateway's capture) hands over only what came since, so neither side
    /// reads, parses or hashes the messages again. The store appends `entries` when the run
    /// holds exactly the prefix, or the prefix and some of `entries`, with the same digest.
    /// Such an import never creates a run, never tells an older copy from an edit and never
    /// names the first difference (it lacks the messages to): those cases are refused
    /// ([`ImportRejection::PrefixNotHeld`], [`ImportRejection::Diverged`] with no difference
    /// named), and the caller imports the whole transcript instead.
    pub fn after(
        id: Option<RunId>,
        origin: Origin,
        (skipped, prefix): (u64, Digest),
        entries: Vec<NewEntry>,
        compactions: Vec<SourceCompaction>,
    ) -> Self {
        let mut digest = prefix;
        let mut digests = Vec::with_capacity(entries.len());
        let mut prepared = Ok(Vec::with_capacity(entries.len()));
        for entry in &entries {
            // A message always serializes; were one not to, it would hash as no bytes (as
            // `Digest::then` has it) and the store would refuse the import.
            match (Prepared::of(entry), &mut prepared) {
                (Ok(p), Ok(all)) => {
                    digest = digest.then_json(p.message.as_bytes());
                    all.push(p);
                }
                (Ok(p), Err(_)) => digest = digest.then_json(p.message.as_bytes()),
                (Err(err), _) => {
                    digest = digest.then_json(&[]);
                    if prepared.is_ok() {
                        prepared = Err(err);
                    }
                }
            }
            digests.push(digest);
        }
        NewImport {
            id,
            origin,
            skipped,
            prefix,
            entries,
            digests,
            prepared,
            compactions,
            usage: ImportUsage::default(),
        }
    }

    /// The messages to import (after the skipped prefix, if any).
    pub fn entries(&self) -> &[NewEntry] {
        &self.entries
    }

    /// How many source messages the transcript holds: the skipped prefix and the entries.
    pub fn len(&self) -> u64 {
        self.skipped + self.entries.len() as u64
    }

    /// Whether the transcript holds no message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many source messages come before [`NewImport::entries`], known by digest only.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The digest after the first `n` messages (`None` past the end, and inside a skipped
    /// prefix).
    pub fn digest_after(&self, n: u64) -> Option<Digest> {
        match n.checked_sub(self.skipped) {
            None => None,
            Some(0) => Some(self.prefix),
            Some(n) => usize::try_from(n - 1)
                .ok()
                .and_then(|i| self.digests.get(i).copied()),
        }
    }

    /// The digest after every message.
    pub fn digest(&self) -> Digest {
        self.digests.last().copied().unwrap_or(self.prefix)
    }
}

/// Whether an import of a source that is already stored appends what is new.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reimport {
    /// Report the run; append nothing.
    #[default]
    No,
    /// Append the messages the source gained since it was imported.
    AppendNew,
    /// As `AppendNew`, and a source whose run was deleted is imported again, as a new run (by
    /// default such a source is reported [`Imported::Deleted`] and nothing is stored).
    Restore,
}

/// What an import did with one transcript.
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Imported {
    /// A new run holds the transcript.
    Created(Run),
    /// The source was imported before, and holds nothing new.
    UpToDate(Run),
    /// The source was imported before and has grown by `new` messages since; nothing was
    /// appended (the import did not ask to).
    Grown {
        /// The run that holds the earlier import.
        run: Run,
        /// Messages the source has beyond what the run holds.
        new: u64,
    },
    /// The source was imported before; the messages it gained since were appended.
    Extended {
        /// The run, after the append.
        run: Run,
        /// The first seq appended.
        from: Seq,
        /// How many messages were appended.
        appended: u64,
    },
    /// The source's run was deleted (`Store::delete_run`), so nothing was stored: a deleted
    /// run does not come back because its file grew or was imported again, unless the import
    /// asks for it with [`Reimport::Restore`].
    Deleted {
        /// The id the deleted run had.
        run: RunId,
        /// When it was deleted.
        at: Timestamp,
    },
}

impl Imported {
    /// The run the transcript is in; `None` for a source whose run was deleted.
    pub fn run(&self) -> Option<&Run> {
        match self {
            Imported::Created(run)
            | Imported::UpToDate(run)
            | Imported::Grown { run, .. }
            | Imported::Extended { run, .. } => Some(run),
            Imported::Deleted { .. } => None,
        }
    }

    /// The id of the run the transcript is in (of the deleted run, for [`Imported::Deleted`]).
    pub fn id(&self) -> &RunId {
        match self {
            Imported::Deleted { run, .. } => run,
            Imported::Created(run)
            | Imported::UpToDate(run)
            | Imported::Grown { run, .. }
            | Imported::Extended { run, .. } => &run.id,
        }
    }
}

/// Why an import of a file wrote nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImportRejection {
    /// The source no longer starts with the messages imported from it before: it was edited or
    /// replaced, so appending to it would mix two histories.
    #[error(
        "transcript {index}: the source no longer starts with the {stored} messages imported from it as run \"{run}\" (edited or replaced since){}; nothing was appended",
        .first.as_ref().map(|d| format!(": {d}")).unwrap_or_default()
    )]
    Diverged {
        /// The transcript's place in the file.
        index: usize,
        /// The run holding the earlier import.
        run: RunId,
        /// Source messages the run holds.
        stored: u64,
        /// The first message that differs, once the store has compared them.
        first: Option<Difference>,
    },
    /// The source still starts with what was imported, except its last imported message, which
    /// has changed since: it was still being written when it was imported (a streamed response
    /// read mid-way). History keeps what was imported, so the source cannot be extended.
    #[error(
        "transcript {index}: the last of the {stored} messages imported as run \"{run}\" was still being written when it was imported and has changed since (a response read mid-stream); history keeps what was imported, so nothing was appended"
    )]
    LastMessageChanged {
        /// The transcript's place in the file.
        index: usize,
        /// The run holding the earlier import.
        run: RunId,
        /// Source messages the run holds.
        stored: u64,
    },
    /// An import that continues after a prefix known by its digest ([`NewImport::after`])
    /// found fewer source messages stored than the prefix (or no run at all): it cannot be
    /// checked without the prefix's messages.
    #[error(
        "transcript {index}: the import continues after {skipped} source messages, but the store holds {stored} from that source; nothing was appended"
    )]
    PrefixNotHeld {
        /// The transcript's place in the file.
        index: usize,
        /// Source messages the import skipped.
        skipped: u64,
        /// Source messages stored (0 when the source has no run).
        stored: u64,
    },
    /// Messages were appended to the imported run by other means, so the source's new
    /// messages would no longer follow its old ones.
    #[error(
        "transcript {index}: run \"{run}\" holds {last_seq} messages but only {stored} came from the source; new source messages would not follow their predecessors, so nothing was appended"
    )]
    RunMovedOn {
        /// The transcript's place in the file.
        index: usize,
        /// The run.
        run: RunId,
        /// The run's last seq.
        last_seq: u64,
        /// Source messages the run holds.
        stored: u64,
    },
}

/// The first message where a source and the run imported from it differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Its seq in the run, which is its place among the source's messages (from 1).
    pub seq: Seq,
    /// A short excerpt of the stored message, around where the two first differ.
    pub stored: String,
    /// The same excerpt of the source's message.
    pub incoming: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "message {} differs (stored: {:?}; source now: {:?})",
            self.seq, self.stored, self.incoming
        )
    }
}

/// How many characters of each side [`Difference`] shows.
const EXCERPT_CHARS: usize = 60;

/// The first of `import`'s messages that is not the same as the stored message at its place
/// (`stored` holds the run's messages from seq `from`), with excerpts of both; `None` when
/// every message both have is the same.
pub fn first_difference<'a>(
    import: &NewImport,
    from: Seq,
    stored: impl IntoIterator<Item = &'a Message>,
) -> Option<Difference> {
    let skip = usize::try_from(from.0.saturating_sub(1)).unwrap_or(usize::MAX);
    let incoming = import.entries.iter().skip(skip).map(|e| &e.message);
    for (i, (old, new)) in stored.into_iter().zip(incoming).enumerate() {
        let json = |m: &Message| serde_json::to_string(m).unwrap_or_default();
        let (old_json, new_json) = (json(old), json(new));
        if old_json == new_json {
            continue;
        }
        // The words when they differ (what a person reads), else the JSON (a tool call's
        // input, a block's kind…).
        let (old_text, new_text) = (old.plain_text(), new.plain_text());
        let (a, b) = if old_text != new_text {
            (old_text, new_text)
        } else {
            (old_json, new_json)
        };
        let (stored, incoming) = excerpts(&a, &b);
        return Some(Difference {
            seq: Seq(from.0 + i as u64),
            stored,
            incoming,
        });
    }
    None
}

/// Excerpts of `a` and `b` from a little before the first character where they differ.
fn excerpts(a: &str, b: &str) -> (String, String) {
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let start = at.saturating_sub(EXCERPT_CHARS / 3);
    let cut = |s: &str| {
        let mut out: String = s.chars().skip(start).take(EXCERPT_CHARS).collect();
        if start > 0 {
            out.insert(0, '…');
        }
        if s.chars().count() > start + EXCERPT_CHARS {
            out.push('…');
        }
        out
    };
    (cut(a), cut(b))
}

/// What the store keeps of an imported source, as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOrigin {
    /// The source's identity.
    pub source_key: String,
    /// The file it was read from.
    pub path: String,
    /// The reader that read it.
    pub format: String,
    /// The source's own session id.
    pub source_session_id: Option<String>,
    /// The run of the transcript this one is a subagent of, when that is imported.
    pub parent_run: Option<RunId>,
    /// The models that wrote it.
    pub models: Vec<String>,
    /// The source's timestamp of its first message, as written.
    pub first_at: Option<String>,
    /// The source's timestamp of its last message, as written.
    pub last_at: Option<String>,
    /// Secrets redacted from it.
    pub redactions: u64,
    /// Source lines or events that are not messages.
    pub skipped_lines: u64,
    /// Side branches not imported.
    pub side_branches: u64,
    /// Messages on those side branches.
    pub side_branch_messages: u64,
    /// The project the session worked in, when known.
    pub project: Option<String>,
    /// The first instruction the user gave, cut short.
    pub title: Option<String>,
    /// Source messages the run holds.
    pub source_messages: u64,
    /// When it was first imported.
    pub imported_at: Timestamp,
    /// When it was last imported or extended.
    pub updated_at: Timestamp,
}

/// A compaction event as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionEvent {
    /// The last seq before it.
    pub after: Seq,
    /// The summary text the source agent wrote.
    pub summary: Option<String>,
    /// When, as the source wrote it.
    pub at: Option<String>,
}

/// What `runs show` reports: a run, where it came from, and what its history holds.
#[derive(Clone, Debug, PartialEq)]
pub struct RunReport {
    /// The run.
    pub run: Run,
    /// Where it came from, for an imported run.
    pub origin: Option<RunOrigin>,
    /// The compactions its source agent performed.
    pub compactions: Vec<CompactionEvent>,
    /// Counts over its history.
    pub counts: RunCounts,
    /// The model responses' usage the run's imports kept, per model and kind (reported by
    /// the provider, or estimated), in order of model name.
    pub usage: Vec<RunUsage>,
}

/// The usage of a run's responses of one model, reported or estimated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunUsage {
    /// The model (`None` when the source does not name it).
    pub model: Option<String>,
    /// Whether the counts are baton's estimates.
    pub estimated: bool,
    /// Responses counted.
    pub responses: u64,
    /// Their tokens.
    pub usage: baton_core::usage::Usage,
}

/// Counts over a run's history, computed by the store in one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Messages.
    pub messages: u64,
    /// Tool calls (tool_use blocks).
    pub tool_calls: u64,
    /// Tool results whose call is not in the run.
    pub orphan_tool_results: u64,
    /// Tool calls without a result.
    pub dangling_tool_calls: u64,
    /// The history's size: the bytes of its stored messages (baton's JSON form).
    pub bytes: u64,
    /// The sum of its messages' stored token counts.
    pub tokens: u64,
    /// When baton stored its first message.
    pub first_appended_at: Option<Timestamp>,
    /// When baton stored its last message.
    pub last_appended_at: Option<Timestamp>,
}

impl RunCounts {
    /// Counts the tool calls, orphan results and dangling calls of a run's protocol events
    /// (its rows that open or answer tool calls, in seq order; rows without any add nothing).
    pub fn count_tools(&mut self, window: &[ProtocolEvents]) {
        self.tool_calls = window.iter().map(|e| e.uses.len() as u64).sum();
        let map = ProtocolMap::analyze(Seq::ZERO, window);
        for problem in map.problems() {
            match problem {
                Problem::OrphanResult { .. } => self.orphan_tool_results += 1,
                Problem::DanglingUse { .. } => self.dangling_tool_calls += 1,
                Problem::ResultBeforeUse { .. } | Problem::DuplicateUse { .. } => {}
            }
        }
    }
}

/// What is stored of an import's source, read inside the import transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// Source messages the run holds.
    pub(crate) source_messages: u64,
    /// Their digest.
    pub(crate) digest: Digest,
    /// The run's last seq.
    pub(crate) last_seq: Seq,
    /// Compaction events stored for the run.
    pub(crate) compactions: u64,
}

/// What an import does with a transcript whose source key the tenant holds already.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing is new.
    UpToDate,
    /// The source grew by `new` messages, and the import did not ask to append them.
    Grown {
        /// Messages beyond the stored ones.
        new: u64,
    },
    /// Append `entries()[from..]` and `compactions[compactions_from..]`.
    Append {
        /// The first transcript message to append (0-based).
        from: usize,
        /// The first compaction event to record.
        compactions_from: usize,
    },
}

/// Refines a [`ImportRejection::Diverged`] once the backend has read the last message the run
/// holds from the source: when the source still matches up to that message, only the message
/// changed (it was still being written), and the rejection says so.
pub(crate) fn refine_divergence(
    rejection: ImportRejection,
    import: &NewImport,
    stored: Stored,
    last_stored: &Message,
) -> ImportRejection {
    let ImportRejection::Diverged {
        index,
        run,
        stored: n,
        first,
    } = rejection
    else {
        return rejection;
    };
    let before_last = n.checked_sub(1).and_then(|k| import.digest_after(k));
    match before_last {
        Some(d) if d.then(last_stored) == stored.digest && import.len() >= n => {
            ImportRejection::LastMessageChanged {
                index,
                run,
                stored: n,
            }
        }
        _ => ImportRejection::Diverged {
            index,
            run,
            stored: n,
            first,
        },
    }
}

/// Whether `import`, which has fewer messages than the run holds from its source, is an older
/// copy of it: `stored_prefix`, the run's first `import.entries().len()` messages, are its
/// messages. Such a copy (a snapshot taken earlier, the first file of a session another file
/// extended) holds nothing new: it is up to date, not an edit.
pub fn is_older_copy<'a>(
    import: &NewImport,
    stored_prefix: impl IntoIterator<Item = &'a Message>,
) -> bool {
    let (mut digest, mut n) = (Digest::empty(), 0);
    for message in stored_prefix {
        digest = digest.then(message);
        n += 1;
    }
    import.skipped == 0 && n == import.entries.len() && digest == import.digest()
}

/// Decides what to do with `import` (transcript `index` of its file) when its source key names
/// a run already.
pub(crate) fn decide(
    import: &NewImport,
    index: usize,
    run: &RunId,
    stored: Stored,
    reimport: Reimport,
) -> Result<Decision, ImportRejection> {
    let total = import.len();
    if stored.source_messages < import.skipped {
        return Err(ImportRejection::PrefixNotHeld {
            index,
            skipped: import.skipped,
            stored: stored.source_messages,
        });
    }
    if import.digest_after(stored.source_messages) != Some(stored.digest) {
        return Err(ImportRejection::Diverged {
            index,
            run: run.clone(),
            stored: stored.source_messages,
            first: None,
        });
    }
    let new = total - stored.source_messages;
    let compactions_from = usize::try_from(stored.compactions)
        .unwrap_or(usize::MAX)
        .min(import.compactions.len());
    if new == 0 {
        // A source can gain a compaction event after its last message (the agent compacted,
        // then the file was read): record it, with nothing to append.
        if reimport != Reimport::No && compactions_from < import.compactions.len() {
            return Ok(Decision::Append {
                from: usize::try_from(total).unwrap_or(usize::MAX),
                compactions_from,
            });
        }
        return Ok(Decision::UpToDate);
    }
    if reimport == Reimport::No {
        return Ok(Decision::Grown { new });
    }
    if stored.last_seq.0 != stored.source_messages {
        return Err(ImportRejection::RunMovedOn {
            index,
            run: run.clone(),
            last_seq: stored.last_seq.0,
            stored: stored.source_messages,
        });
    }
    Ok(Decision::Append {
        from: usize::try_from(stored.source_messages).unwrap_or(usize::MAX),
        compactions_from,
    })
}

/// A [`ImportRejection::Diverged`] naming the first message that differs: the run's history
/// is read from its start in chunks, up to that message.
async fn name_difference(
    tx: &mut impl RunRows,
    pk: i64,
    import: &NewImport,
    why: ImportRejection,
) -> Result<ImportRejection, Error> {
    let ImportRejection::Diverged {
        index,
        run,
        stored,
        first: None,
    } = why
    else {
        return Ok(why);
    };
    if import.skipped > 0 {
        return Ok(ImportRejection::Diverged {
            index,
            run,
            stored,
            first: None,
        });
    }
    const CHUNK: u64 = 256;
    let mut from = Seq(1);
    let mut first = None;
    while from.0 <= stored.min(import.entries().len() as u64) {
        let to = Seq((from.0 + CHUNK - 1).min(stored));
        let chunk = tx.entries(pk, from, Some(to), None).await?;
        if chunk.is_empty() {
            break;
        }
        first = first_difference(import, from, chunk.iter().map(|e| &e.message));
        if first.is_some() {
            break;
        }
        from = Seq(to.0 + 1);
    }
    Ok(ImportRejection::Diverged {
        index,
        run,
        stored,
        first,
    })
}

/// Stores one file's transcripts in one write job (see the module docs).
pub(crate) async fn store<B: Backend>(
    backend: &B,
    tenant: &TenantId,
    imports: Vec<NewImport>,
    reimport: Reimport,
) -> Result<Vec<Imported>, Error> {
    let mut file = Vec::with_capacity(imports.len());
    for import in imports {
        let o = &import.origin;
        for (field, text) in [
            ("source key", Some(&o.source_key)),
            ("path", Some(&o.path)),
            ("format", Some(&o.format)),
            ("source session id", o.source_session_id.as_ref()),
            ("parent key", o.parent_key.as_ref()),
            ("first_at", o.first_at.as_ref()),
            ("last_at", o.last_at.as_ref()),
            ("project", o.project.as_ref()),
            ("title", o.title.as_ref()),
        ]
        .into_iter()
        .chain(o.models.iter().map(|m| ("model", Some(m))))
        .chain(import.compactions.iter().flat_map(|c| {
            [
                ("compaction summary", c.summary.as_ref()),
                ("compaction time", c.at.as_ref()),
            ]
        }))
        .chain(usage_texts(&import.usage))
        {
            check_text(field, text.map(String::as_str))?;
        }
        if let Err(err) = &import.prepared {
            return Err(crate::backend::corrupt(err.clone()));
        }
        file.push(import);
    }
    let tenant = tenant.clone();
    backend
        .write(job!(|tx| {
            let mut keys: Vec<&str> = file
                .iter()
                .flat_map(|i| {
                    let o = &i.origin;
                    std::iter::once(&o.source_key)
                        .chain(&o.parent_key)
                        .chain(&o.replaces)
                })
                .map(String::as_str)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            tx.lock_sources(&tenant, &keys).await?;
            let now = Timestamp::now();
            let mut outcomes = Vec::with_capacity(file.len());
            for (index, import) in file.iter().enumerate() {
                // Every import's entries serialized: checked before the write began.
                let prepared = import.prepared.as_deref().unwrap_or_default();
                let key = &import.origin.source_key;
                let (pk, outcome) = match tx.source(&tenant, key).await? {
                    Some((_, run)) => {
                        extend(tx, &tenant, (index, import, prepared), &run, reimport, now).await?
                    }
                    None => match tx.deleted_source(&tenant, key).await? {
                        Some((run, at)) if reimport != Reimport::Restore => {
                            outcomes.push(Imported::Deleted { run, at });
                            continue;
                        }
                        // A run is made of a whole transcript only.
                        _ if import.skipped > 0 => {
                            return Err(ImportRejection::PrefixNotHeld {
                                index,
                                skipped: import.skipped,
                                stored: 0,
                            }
                            .into());
                        }
                        Some(_) => {
                            tx.restore_source(&tenant, key).await?;
                            create(tx, &tenant, import, prepared, now).await?
                        }
                        None => create(tx, &tenant, import, prepared, now).await?,
                    },
                };
                // A response's usage is kept once its message is stored, and a live file's
                // response still streaming with them: all of them, unless the source grew and
                // was not extended (then none of its new responses, streaming or not).
                let kept = match &outcome {
                    Imported::Grown { new, .. } => {
                        (import.entries().len() as u64).saturating_sub(*new)
                    }
                    _ => u64::MAX,
                };
                tx.insert_usage(&tenant, pk, &import.usage, kept).await?;
                if outcome.run().is_some()
                    && let Some(stand_in) = &import.origin.replaces
                {
                    replace(tx, &tenant, stand_in, now).await?;
                }
                outcomes.push(outcome);
            }
            Ok(outcomes)
        }))
        .await
}

/// Deletes the run imported from `stand_in` (see [`Origin::replaces`]) when it is still as it
/// was imported: no summary, no pin, and no message beyond its source's. One that was worked
/// on since is kept.
async fn replace<T: RunRows + ImportRows>(
    tx: &mut T,
    tenant: &TenantId,
    stand_in: &str,
    now: Timestamp,
) -> Result<(), Error> {
    let Some((pk, run)) = tx.source(tenant, stand_in).await? else {
        return Ok(());
    };
    let row = lock(tx, tenant, &run).await?;
    let held = tx.origin(pk).await?.map_or(0, |o| o.source_messages);
    if row.active_summary_id.is_some()
        || row.last_seq.0 != held
        || !tx.pins(pk).await?.is_empty()
        || !tx.children(pk).await?.is_empty()
    {
        tracing::info!(run = %run, source = stand_in, "kept the run recovered from a prompt history: it was worked on since");
        return Ok(());
    }
    tx.keep_deleted(pk, now).await?;
    tx.delete_run(pk).await?;
    tracing::info!(run = %run, source = stand_in, "the session's file replaced the run recovered from a prompt history");
    Ok(())
}

/// The text fields of an import's usage records, named for [`check_text`].
fn usage_texts(usage: &ImportUsage) -> impl Iterator<Item = (&'static str, Option<&String>)> {
    [
        ("usage session", Some(&usage.session)),
        ("usage project", usage.project.as_ref()),
        ("usage agent", Some(&usage.agent)),
    ]
    .into_iter()
    .chain(usage.records.iter().flat_map(|(r, _)| {
        [
            ("usage record id", Some(&r.id)),
            ("usage model", r.model.as_ref()),
            ("usage response id", r.response_id.as_ref()),
            ("usage request id", r.request_id.as_ref()),
        ]
    }))
}

/// An origin's model names as stored: a JSON list.
fn models(origin: &Origin) -> Result<String, Error> {
    serde_json::to_string(&origin.models).map_err(|e| Error::Corrupt {
        what: format!("model names do not serialize: {e}"),
    })
}

/// A new run holding the whole transcript.
async fn create(
    tx: &mut (impl RunRows + ImportRows),
    tenant: &TenantId,
    import: &NewImport,
    prepared: &[Prepared],
    now: Timestamp,
) -> Result<(i64, Imported), Error> {
    let id = match &import.id {
        Some(id) => id.clone(),
        None => generate_run_id()?,
    };
    let Some(pk) = tx.insert_run(tenant, &id, None, None, now).await? else {
        return Err(Error::RunExists { run: id });
    };
    tx.insert_entries(pk, Seq::ZERO, prepared, now).await?;
    tx.insert_compactions(pk, &import.compactions, 0).await?;
    let parent = match &import.origin.parent_key {
        Some(key) => tx.source(tenant, key).await?.map(|(pk, _)| pk),
        None => None,
    };
    let models = models(&import.origin)?;
    let origin = NewOrigin {
        origin: &import.origin,
        parent,
        models: &models,
        messages: import.len(),
        digest: import.digest(),
        now,
    };
    tx.insert_origin(pk, tenant, &origin).await?;
    Ok((pk, Imported::Created(load(tx, tenant, &id).await?.1)))
}

/// A transcript whose source the tenant holds as `run` already: up to date, grown, or extended.
async fn extend(
    tx: &mut (impl RunRows + ImportRows),
    tenant: &TenantId,
    (index, import, prepared): (usize, &NewImport, &[Prepared]),
    run: &RunId,
    reimport: Reimport,
    now: Timestamp,
) -> Result<(i64, Imported), Error> {
    // The run's lock first, then what `decide` compares.
    let row = lock(tx, tenant, run).await?;
    let (source_messages, digest, compactions) = tx.stored_source(row.pk).await?;
    let stored = Stored {
        source_messages,
        digest,
        last_seq: row.last_seq,
        compactions,
    };
    let decision = match decide(import, index, run, stored, reimport) {
        Ok(decision) => decision,
        Err(why) if import.skipped == 0 && import.len() < stored.source_messages => {
            // An older copy of the source holds nothing new.
            let prefix = match import.entries().len() as u64 {
                0 => Vec::new(),
                n => tx.entries(row.pk, Seq(1), Some(Seq(n)), None).await?,
            };
            if !is_older_copy(import, prefix.iter().map(|e| &e.message)) {
                return Err(match why {
                    ImportRejection::Diverged {
                        index, run, stored, ..
                    } => ImportRejection::Diverged {
                        first: first_difference(import, Seq(1), prefix.iter().map(|e| &e.message)),
                        index,
                        run,
                        stored,
                    },
                    other => other,
                }
                .into());
            }
            Decision::UpToDate
        }
        Err(why) => {
            // Was only the last imported message still being written?
            let n = Seq(stored.source_messages);
            let last = tx.entries(row.pk, n, Some(n), Some(1)).await?;
            let why = match last.first() {
                Some(entry) => refine_divergence(why, import, stored, &entry.message),
                None => why,
            };
            return Err(name_difference(tx, row.pk, import, why).await?.into());
        }
    };
    let (from, compactions_from) = match decision {
        Decision::UpToDate => {
            let run = load(tx, tenant, run).await?.1;
            return Ok((row.pk, Imported::UpToDate(run)));
        }
        Decision::Grown { new } => {
            let run = load(tx, tenant, run).await?.1;
            return Ok((row.pk, Imported::Grown { run, new }));
        }
        Decision::Append {
            from,
            compactions_from,
        } => (from, compactions_from),
    };
    if row.status != RunStatus::Active {
        return Err(Error::RunNotActive {
            run: run.clone(),
            status: row.status,
        });
    }
    let skipped = usize::try_from(import.skipped).unwrap_or(usize::MAX);
    let appended = prepared
        .get(from.saturating_sub(skipped)..)
        .unwrap_or_default();
    tx.insert_entries(row.pk, row.last_seq, appended, now)
        .await?;
    tx.insert_compactions(row.pk, &import.compactions, compactions_from)
        .await?;
    let models = models(&import.origin)?;
    let origin = NewOrigin {
        origin: &import.origin,
        parent: None,
        models: &models,
        messages: import.len(),
        digest: import.digest(),
        now,
    };
    tx.update_origin(row.pk, &origin).await?;
    let extended = Imported::Extended {
        run: load(tx, tenant, run).await?.1,
        from: if appended.is_empty() {
            row.last_seq
        } else {
            row.last_seq.next()
        },
        appended: appended.len() as u64,
    };
    Ok((row.pk, extended))
}

#[cfg(test)]
mod tests;
