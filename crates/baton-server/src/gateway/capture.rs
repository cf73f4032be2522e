//! Capture: every conversation through the gateway becomes a run of the caller's tenant
//! (issue 18, item 5), unless `baton serve --no-capture`.
//!
//! # Which run
//!
//! - `x-baton-run: NAME` names it: the run with id `NAME` (a run id's rules; a bad name is
//!   refused before the call with 400, kind `invalid-run-name`, in the vendor's error shape).
//! - Without the header the run is derived from the conversation: `gw-` and the first 24 hex
//!   digits of SHA-256 over the tenant, the system prompt and the messages up to and including
//!   the first user message (on Chat Completions, the system prompt is the system messages
//!   among those). Every later request of one conversation repeats those, so they all
//!   land in one run; two conversations that open with the same system prompt and the same
//!   first question share a run until they differ, where the later one branches (below). The
//!   tenant is in the hash only so that ids do not tell tenants' conversations apart; runs are
//!   per tenant anyway.
//!
//! # What is stored
//!
//! The gateway conversation is an imported *source* ([`baton_store::import`]) with the source
//! key `gateway:<run id>`: each request is an import of its messages followed by the reply's
//! assistant message (a streamed reply assembled), with [`Reimport::AppendNew`]. The store
//! compares the request's rolling digest at the length it holds with its own, so only the new
//! messages are appended and no history is read back. A hit or coalesced answer imports the
//! same messages and reply, so a repeated request stores nothing.
//!
//! # Work per request
//!
//! A request repeats its whole conversation, so reading all of it each time would make a
//! conversation's capture quadratic. [`Tails`] remembers, per conversation, the last request
//! captured (its bytes, shared with the call, not copied), where each of its messages ends in
//! those bytes, and where each ended in the run: how many source messages, their rolling
//! digest. The next request of the conversation on Messages or Chat Completions is compared
//! with it byte for byte (the longest common prefix, a `memcmp`): the messages that end inside
//! it are the same messages, since every byte before them is too. Only the messages after them
//! (one a client changed in a way the run does not keep, such as the `cache_control` mark
//! Claude Code moves to the newest message; the last reply, as the client sends it back; what
//! is new) are located, parsed, split, redacted and digested, and are handed to the store as an
//! import that continues after the remembered prefix ([`NewImport::after`]), which checks them
//! against what it holds as for any import. Anything else (a first request, a rewritten
//! conversation, a run that moved on, a conversation forgotten or captured by another process,
//! a managed call, the Responses API, whose input items do not map one for one onto messages)
//! takes the whole path above, which gives the same run: the continuation is only a shortcut.
//! The memory is bounded ([`Tails::CAPACITY`] conversations, [`Tails::BYTES`] of requests; the
//! least recently captured forgotten first).
//! Secrets are redacted before anything is stored, as on import.
//! The reply's usage, as the upstream reported it, is kept with it under the response's id
//! (`gateway:<id>`), so the usage reports count gateway traffic, each response once: a cache hit
//! answers with the same response and adds no record.
//!
//! # Branches
//!
//! A request that no longer extends what its run holds (the client rewrote an earlier
//! message) is never an error and never overwrites: it goes to a branch run, `<run id>.<12 hex>`
//! (the hex: the request's rolling digest through the first message that differs, which the
//! store names), whose origin's parent is the first run's source, so `runs show` lists it under
//! it (a first run's id is cut to 115 characters before the suffix, to stay a valid id).
//! Later requests of the branch find the same branch (the store reads the first run's
//! history to find the difference, so branch requests cost a read of it). A branch that itself
//! diverges branches again, up to [`MAX_DEPTH`] levels.
//!
//! # Failures
//!
//! Capture runs on a task of its own after the answer is complete, so it never delays or fails
//! the client's request; a failure is logged and counted in
//! `baton_gateway_captures_total{outcome="failed"}` (other outcomes: `stored`, `unchanged`,
//! `branched`). A call this process captured already (the same tenant, run name, route,
//! request and answer: a cache hit, mostly) is counted `unchanged` without being captured
//! again ([`Recent`]), which keeps the work off the hit path.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderName};
use baton_core::usage::UsageRecord;
use baton_core::{ContentBlock, Message, Role, RunId, TenantId};
use baton_store::{
    Digest, Error, ImportRejection, ImportUsage, Imported, NewEntry, NewImport, Origin, Reimport,
};
use baton_wire::RequestBody;
use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::Endpoint;
use super::upstream::Recorded;
use crate::state::AppState;

/// A complete answer's content type and body, copied from the cached [`Recorded`] value.
pub(crate) struct Answer {
    pub(crate) content_type: String,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn of(recorded: &Recorded) -> Self {
        Answer {
            content_type: recorded.content_type().to_owned(),
            body: recorded.body_text().to_owned(),
        }
    }
}

/// The request header naming the run a call is captured in.
pub const RUN_HEADER: HeaderName = HeaderName::from_static("x-baton-run");

/// How many branches of branches a capture follows before it gives up.
pub const MAX_DEPTH: usize = 4;

/// The run named by `x-baton-run`, if any; `Err` with the reason for a bad name.
pub(crate) fn named_run(headers: &HeaderMap) -> Result<Option<RunId>, String> {
    let Some(value) = headers.get(&RUN_HEADER) else {
        return Ok(None);
    };
    let name = value
        .to_str()
        .map_err(|_| "x-baton-run: the run name is not visible ASCII".to_owned())?;
    RunId::new(name)
        .map(Some)
        .map_err(|e| format!("x-baton-run: {e}"))
}

/// The run derived from a conversation (see the module docs): `request` needs to hold its
/// messages up to the first user message only ([`head`]).
pub(crate) fn derived_run(
    tenant: &TenantId,
    endpoint: Endpoint,
    request: &RequestBody,
) -> Result<RunId, baton_core::Error> {
    let head = request
        .messages
        .iter()
        .position(|m| m.role == Role::User)
        .map_or(request.messages.len(), |i| i + 1);
    let head = &request.messages[..head];
    let system = match endpoint {
        Endpoint::Chat => baton_wire::openai::system_text(head),
        _ => request.system.clone(),
    }
    .unwrap_or_default();
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(tenant.as_str().as_bytes());
    field(system.as_bytes());
    for message in head {
        field(
            serde_json::to_string(message)
                .unwrap_or_default()
                .as_bytes(),
        );
        if message.role == Role::User {
            break;
        }
    }
    let digest: [u8; 32] = hasher.finalize().into();
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    RunId::new(format!("gw-{hex}"))
}

/// What one capture did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Stored,
    Unchanged,
    Branched,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Stored => "stored",
            Outcome::Unchanged => "unchanged",
            Outcome::Branched => "branched",
        }
    }
}

/// The calls this process captured lately, by [`fingerprint`], so that a repeat (a cache hit,
/// mostly) skips a capture whose import could only find nothing new: the same tenant, run
/// name, route, request bytes and answer were stored once already (a run deleted since stays
/// deleted, as the import would have it). At most [`Recent::CAPACITY`], the oldest forgotten
/// first; a call not remembered is captured in full, so forgetting costs time, never data.
pub(crate) struct Recent {
    seen: Mutex<Remembered>,
}

/// The fingerprints, as a set and in the order they came.
type Remembered = (HashSet<[u8; 32]>, VecDeque<[u8; 32]>);

impl Recent {
    /// The most fingerprints kept (2 MiB of them).
    pub(crate) const CAPACITY: usize = 65_536;

    pub(crate) fn new() -> Self {
        Recent {
            seen: Mutex::new((HashSet::new(), VecDeque::new())),
        }
    }

    pub(crate) fn contains(&self, fingerprint: &[u8; 32]) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.0.contains(fingerprint)
    }

    fn insert(&self, fingerprint: [u8; 32]) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let (set, order) = &mut *seen;
        if set.insert(fingerprint) {
            order.push_back(fingerprint);
            if order.len() > Self::CAPACITY
                && let Some(oldest) = order.pop_front()
            {
                set.remove(&oldest);
            }
        }
    }
}

/// What makes two captures of a call the same: the tenant, the run `x-baton-run` named (or
/// none), the route, the request's key (it covers every field of the request capture reads)
/// and the answer's bytes.
pub(crate) fn fingerprint(
    tenant: &TenantId,
    run: Option<&RunId>,
    endpoint: Endpoint,
    key: &[u8],
    answer: &str,
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for field in [
        tenant.as_str().as_bytes(),
        run.map_or(&b""[..], |r| r.as_str().as_bytes()),
        endpoint.operation().as_bytes(),
        key,
        answer.as_bytes(),
    ] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher.finalize().into()
}

/// Where each conversation's last capture stopped, so the next request of it is read only from
/// there (see "Work per request" in the module docs).
pub(crate) struct Tails {
    inner: Mutex<TailMap>,
}

/// A conversation: its tenant, route and run (as named or derived, before any branch).
type TailKey = (TenantId, Endpoint, RunId);

#[derive(Default)]
struct TailMap {
    /// Each conversation's tail, stamped with the capture that left it.
    tails: HashMap<TailKey, (u64, Tail)>,
    /// The last stamp given.
    clock: u64,
    /// The remembered requests' sizes, summed.
    bytes: usize,
}

/// The last captured request of a conversation and where its messages ended in the run.
#[derive(Clone)]
struct Tail {
    /// The request's bytes (shared with the call, not copied).
    body: Bytes,
    /// Where each of its messages ends in `body` (exclusive).
    offsets: Vec<usize>,
    /// Where each of its messages ended in the run (`ends[i]`: the stored prefix through
    /// message `i`).
    ends: Vec<Prefix>,
    /// The run holding them (a branch, when the conversation branched) and, for a branch, its
    /// parent's source key.
    run: RunId,
    parent: Option<String>,
}

/// A stored prefix of a conversation: how many source messages, their digest, and the secrets
/// redacted in them.
#[derive(Clone, Copy)]
struct Prefix {
    messages: u64,
    digest: Digest,
    redactions: u64,
}

impl Tails {
    /// The most conversations remembered.
    pub(crate) const CAPACITY: usize = 4_096;
    /// The most request bytes remembered.
    pub(crate) const BYTES: usize = 256 << 20;

    pub(crate) fn new() -> Self {
        Tails {
            inner: Mutex::new(TailMap::default()),
        }
    }

    fn get(&self, key: &TailKey) -> Option<Tail> {
        let map = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        map.tails.get(key).map(|(_, tail)| tail.clone())
    }

    fn put(&self, key: TailKey, tail: Tail) {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let map = &mut *guard;
        map.clock += 1;
        map.bytes += tail.body.len();
        if let Some((_, old)) = map.tails.insert(key, (map.clock, tail)) {
            map.bytes -= old.body.len();
        }
        while map.tails.len() > Self::CAPACITY || map.bytes > Self::BYTES {
            let oldest = map
                .tails
                .iter()
                .min_by_key(|(_, (stamp, _))| *stamp)
                .map(|(key, _)| key.clone());
            match oldest.and_then(|key| map.tails.remove(&key)) {
                Some((_, old)) => map.bytes -= old.body.len(),
                None => break,
            }
        }
    }
}

/// The message list of a Messages or Chat Completions request; `None` on other routes, whose
/// requests are always read whole.
fn items(endpoint: Endpoint, request: &Value) -> Option<&[Value]> {
    match endpoint {
        Endpoint::Messages | Endpoint::Chat => request["messages"].as_array().map(Vec::as_slice),
        Endpoint::Responses | Endpoint::Embeddings => None,
    }
}

/// Where a request continues `tail`'s (see "Work per request" in the module docs): how many
/// of its messages are byte for byte `tail`'s, and where each message after them ends in
/// `body`. `None` when they share no message, or `body`'s messages after the shared ones are
/// not `count - shared` (a body whose bytes say otherwise than its parsed value).
fn continuation(tail: &Tail, body: &[u8], count: usize) -> Option<(usize, Vec<usize>)> {
    let common = common_prefix(&tail.body, body);
    let same = tail.offsets.partition_point(|&end| end <= common);
    let from = *tail.offsets.get(same.checked_sub(1)?)?;
    let after = raw::ends_after(body, from)?;
    (same + after.len() == count && count > same).then_some((same, after))
}

/// How many bytes `a` and `b` share from their start (compared a block at a time, which the
/// standard library does as `memcmp`).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Where messages end in a request's raw JSON.
mod raw {
    use serde::Deserialize as _;
    use serde_json::value::RawValue;

    use super::super::managed::Fields;

    /// The end (exclusive) of each element of the body's top-level `messages` list, as offsets
    /// into `body`; `None` when it has none.
    pub(super) fn ends(body: &[u8]) -> Option<Vec<usize>> {
        let fields: Fields<'_> = serde_json::from_slice(body).ok()?;
        let (_, list) = fields.0.iter().find(|(key, _)| key == "messages")?;
        let elements: Vec<&RawValue> = serde_json::from_str(list.get()).ok()?;
        Some(elements.iter().map(|e| end(body, e)).collect())
    }

    /// The ends of the list elements that follow the element ending at `from`, up to the
    /// list's `]`.
    pub(super) fn ends_after(body: &[u8], mut from: usize) -> Option<Vec<usize>> {
        let mut ends = Vec::new();
        loop {
            from += body
                .get(from..)?
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
            match body.get(from)? {
                b']' => return Some(ends),
                b',' => from += 1,
                _ => return None,
            }
            let mut de = serde_json::Deserializer::from_slice(body.get(from..)?);
            let element = <&RawValue>::deserialize(&mut de).ok()?;
            from = end(body, element);
            ends.push(from);
        }
    }

    /// Where `element`, a slice of `body`, ends in it.
    fn end(body: &[u8], element: &RawValue) -> usize {
        element.get().as_ptr() as usize - body.as_ptr() as usize + element.get().len()
    }
}

/// The start of a request's conversation, through its first user message, parsed: what the
/// derived run and the run's title need. Routes that do not list messages one for one are
/// parsed whole.
fn head(endpoint: Endpoint, request: &Value) -> anyhow::Result<RequestBody> {
    let Some(list) = items(endpoint, request) else {
        return parse(endpoint, request);
    };
    let through = list
        .iter()
        .position(|m| m["role"] == "user")
        .map_or(list.len(), |i| i + 1);
    let mut head = serde_json::Map::new();
    for field in ["model", "max_tokens", "system"] {
        if let Some(value) = request.get(field) {
            head.insert(field.to_owned(), value.clone());
        }
    }
    head.insert("messages".into(), Value::Array(list[..through].to_vec()));
    parse(endpoint, &Value::Object(head))
}

/// Captures one answered call, counting and logging the outcome; never fails. A call with a
/// `fingerprint` is remembered once stored, so its repeats skip capture ([`Recent`]).
/// `request` is the request as parsed, with its bytes when they are the client's (not those of
/// a managed call's rewrite), which let the next request of the conversation be read from here.
pub(crate) async fn capture(
    state: Arc<AppState>,
    tenant: TenantId,
    endpoint: Endpoint,
    run: Option<RunId>,
    (request, body): (Arc<Value>, Option<Bytes>),
    answer: Answer,
    fingerprint: Option<[u8; 32]>,
) {
    let started = std::time::Instant::now();
    let captured = capture_inner(&state, &tenant, endpoint, run, (&request, body), &answer);
    let outcome = match captured.await {
        Ok(outcome) => {
            if let Some(fingerprint) = fingerprint {
                state.captured.insert(fingerprint);
            }
            outcome.name()
        }
        Err(e) => {
            tracing::warn!(tenant = %tenant, error = %e, "gateway capture failed");
            "failed"
        }
    };
    state.metrics.capture(outcome, Some(started.elapsed()));
    // The request is freed here, once the run holds it: often its last holder, this task pays
    // for freeing what the call parsed, which is the request's own cost, not capture's.
    drop(request);
}

async fn capture_inner(
    state: &AppState,
    tenant: &TenantId,
    endpoint: Endpoint,
    run: Option<RunId>,
    (request, body): (&Value, Option<Bytes>),
    answer: &Answer,
) -> anyhow::Result<Outcome> {
    let reply = reply_message(endpoint, answer)?;
    let usage = usage_record(&reply, answer);
    let reply = (reply.message, usage);
    let head = head(endpoint, request)?;
    let run = match run {
        Some(run) => run,
        None => derived_run(tenant, endpoint, &head)?,
    };
    let key = (tenant.clone(), endpoint, run.clone());
    let list = items(endpoint, request);
    let remembered = match (list, &body) {
        (Some(_), Some(_)) => state.tails.get(&key),
        _ => None,
    };
    if let (Some(tail), Some(list), Some(body)) = (remembered, list, &body)
        && let Some((same, offsets)) = continuation(&tail, body, list.len())
    {
        let new = &list[same..];
        let messages = new
            .iter()
            .map(|item| endpoint.format().parse_message(item))
            .collect::<Result<Vec<_>, _>>()?;
        state.metrics.capture_read("continued", new.len());
        let after = tail.ends[same - 1];
        let conversation = Conversation::new(&head, Some(after), messages, Some(reply.clone()));
        let place = (tail.run.clone(), tail.parent.clone());
        match put(state, tenant, endpoint, place, &conversation, false).await {
            Ok(put) => {
                let outcome = put.outcome;
                let ends = [&tail.ends[..same], &put.ends].concat();
                let offsets = [&tail.offsets[..same], &offsets].concat();
                state.tails.put(key, put.tail(body.clone(), offsets, ends));
                return Ok(outcome);
            }
            // The store could not check the continuation: the whole request decides.
            Err(e) => tracing::debug!(run = %tail.run, error = %e, "capturing the whole request"),
        }
    }
    let parsed = parse(endpoint, request)?;
    state.metrics.capture_read("whole", parsed.messages.len());
    let conversation = Conversation::new(&head, None, parsed.messages, Some(reply));
    let put = put(state, tenant, endpoint, (run, None), &conversation, true).await?;
    let outcome = put.outcome;
    if let (Some(list), Some(body)) = (list, body)
        && let Some(offsets) = raw::ends(&body).filter(|o| o.len() == list.len())
    {
        let ends = put.ends.clone();
        state.tails.put(key, put.tail(body, offsets, ends));
    }
    Ok(outcome)
}

/// The conversation of a request of `endpoint`.
pub(crate) fn parse(
    endpoint: Endpoint,
    request: &serde_json::Value,
) -> anyhow::Result<RequestBody> {
    Ok(match endpoint {
        Endpoint::Chat => baton_wire::openai::parse_request(request)?,
        Endpoint::Messages => baton_wire::anthropic::parse_request(request)?,
        Endpoint::Responses => baton_wire::responses::parse_request(request)?,
        Endpoint::Embeddings => anyhow::bail!("embeddings are not a conversation"),
    })
}

/// A request's conversation (or what follows a stored prefix of it) as its run keeps it.
struct Conversation {
    model: String,
    title: Option<String>,
    /// The stored prefix these messages follow (a continuation), if any.
    after: Option<Prefix>,
    /// The request's messages, as stored (split, redacted), then the reply's.
    messages: Vec<Message>,
    /// For each of the request's messages as sent: how many stored messages it became, and the
    /// secrets redacted in them.
    sent: Vec<(usize, u64)>,
    /// Secrets redacted in the request's messages, and in the reply's.
    redactions: (u64, u64),
    /// The reply's usage.
    usage: Option<UsageRecord>,
}

impl Conversation {
    /// `messages` (the request's, as the client sent them, after the prefix `after`) and the
    /// reply; `head` is the request's start ([`head`]).
    fn new(
        head: &RequestBody,
        after: Option<Prefix>,
        messages: Vec<Message>,
        reply: Option<(Message, UsageRecord)>,
    ) -> Self {
        let (mut messages, counts) = as_stored(messages);
        let mut redacted = messages
            .iter_mut()
            .map(|m| baton_import::redact::redact_message(m) as u64);
        let sent: Vec<(usize, u64)> = counts
            .into_iter()
            .map(|n| (n, redacted.by_ref().take(n).sum()))
            .collect();
        drop(redacted);
        let mut redactions = (sent.iter().map(|(_, r)| r).sum(), 0);
        let usage = reply.map(|(mut message, usage)| {
            redactions.1 = baton_import::redact::redact_message(&mut message) as u64;
            messages.push(message);
            usage
        });
        // The first user message, as stored: split and redacted.
        let first = head.messages.iter().find(|m| m.role == Role::User);
        let title = first.and_then(|m| as_stored(vec![m.clone()]).0.into_iter().next());
        let title = title.map(|mut m| {
            baton_import::redact::redact_message(&mut m);
            m.plain_text().chars().take(80).collect::<String>()
        });
        Conversation {
            model: head.model.clone(),
            title,
            after,
            messages,
            sent,
            redactions,
            usage,
        }
    }

    /// The import of this conversation into `run`, a branch of `parent`'s when there is one.
    fn import(&self, endpoint: Endpoint, run: &RunId, parent: Option<&String>) -> NewImport {
        let after = self.after.map_or(0, |p| p.redactions);
        let origin = Origin {
            source_key: format!("gateway:{run}"),
            path: format!("gateway:{}", endpoint.operation()),
            format: "gateway".into(),
            parent_key: parent.cloned(),
            models: vec![self.model.clone()],
            redactions: after + self.redactions.0 + self.redactions.1,
            title: self.title.clone(),
            ..Origin::default()
        };
        let prefix = self
            .after
            .map_or((0, Digest::empty()), |p| (p.messages, p.digest));
        let entries = self
            .messages
            .iter()
            .cloned()
            .map(NewEntry::estimated)
            .collect();
        let mut import = NewImport::after(Some(run.clone()), origin, prefix, entries, vec![]);
        import.usage = ImportUsage {
            session: run.to_string(),
            project: None,
            agent: "gateway".into(),
            records: self
                .usage
                .iter()
                .map(|u| (u.clone(), Some(self.messages.len() - 1)))
                .collect(),
        };
        import
    }
}

/// What storing a conversation did, and where each of the request's messages after the
/// prefix ended.
struct Put {
    outcome: Outcome,
    run: RunId,
    parent: Option<String>,
    ends: Vec<Prefix>,
}

impl Put {
    fn tail(self, body: Bytes, offsets: Vec<usize>, ends: Vec<Prefix>) -> Tail {
        Tail {
            body,
            offsets,
            ends,
            run: self.run,
            parent: self.parent,
        }
    }
}

/// Stores `conversation` in `run` (a branch of the source `parent`, when there is one). With
/// `branch`, a conversation that no longer extends its run goes to a branch (see the module
/// docs); without, any refusal is an error.
async fn put(
    state: &AppState,
    tenant: &TenantId,
    endpoint: Endpoint,
    (mut run, mut parent): (RunId, Option<String>),
    conversation: &Conversation,
    branch: bool,
) -> anyhow::Result<Put> {
    let base: String = run.as_str().chars().take(115).collect();
    for _ in 0..=MAX_DEPTH {
        let import = conversation.import(endpoint, &run, parent.as_ref());
        let at = match state
            .store
            .import(tenant, vec![import.clone()], Reimport::AppendNew)
            .await
        {
            Ok(done) => {
                let outcome = match done.first() {
                    // A run the user deleted stays deleted: nothing stored, as for a repeat.
                    Some(Imported::UpToDate(_) | Imported::Deleted { .. }) => Outcome::Unchanged,
                    _ if parent.is_some() => Outcome::Branched,
                    _ => Outcome::Stored,
                };
                let mut end = Prefix {
                    messages: import.skipped(),
                    digest: import
                        .digest_after(import.skipped())
                        .unwrap_or_else(|| import.digest()),
                    redactions: conversation.after.map_or(0, |p| p.redactions),
                };
                let ends = conversation
                    .sent
                    .iter()
                    .map(|&(n, redactions)| {
                        end.messages += n as u64;
                        end.redactions += redactions;
                        end.digest = import.digest_after(end.messages).unwrap_or(end.digest);
                        end
                    })
                    .collect();
                return Ok(Put {
                    outcome,
                    run,
                    parent,
                    ends,
                });
            }
            Err(Error::Import(ImportRejection::Diverged { first, stored, .. })) if branch => {
                first.map_or(stored, |d| d.seq.0)
            }
            Err(Error::Import(ImportRejection::LastMessageChanged { stored, .. })) if branch => {
                stored
            }
            Err(e) => return Err(e.into()),
        };
        let point = import
            .digest_after(at.min(import.len()))
            .unwrap_or_else(|| import.digest());
        let hex = point.to_hex();
        parent = Some(format!("gateway:{run}"));
        run = RunId::new(format!("{base}.{}", &hex[..12]))?;
    }
    anyhow::bail!("the conversation diverged from more than {MAX_DEPTH} branches of run {run}")
}

/// Stores the request's conversation, and `reply` after it when there is one (with its usage,
/// which the usage reports then count), in its run (or the run's branch, see the module docs):
/// what it did, and the run that holds it now.
pub(crate) async fn store(
    state: &AppState,
    tenant: &TenantId,
    endpoint: Endpoint,
    run: Option<RunId>,
    body: RequestBody,
    reply: Option<(Message, UsageRecord)>,
) -> anyhow::Result<(Outcome, RunId)> {
    let run = match run {
        Some(run) => run,
        None => derived_run(tenant, endpoint, &body)?,
    };
    let conversation = Conversation::new(&body, None, body.messages.clone(), reply);
    let put = put(state, tenant, endpoint, (run, None), &conversation, true).await?;
    Ok((put.outcome, put.run))
}

/// The messages of a request as its run keeps them, and how many each became: a user message
/// holding only tool results (Anthropic's answer to parallel calls, which the API requires in
/// one message) is kept as one message per result, as Claude Code's own log and OpenAI's
/// `tool` messages keep them, so a captured conversation equals an import of the agent's log.
/// The same request always splits the same way, so later requests still extend the run.
pub(crate) fn as_stored(messages: Vec<Message>) -> (Vec<Message>, Vec<usize>) {
    let mut stored = Vec::with_capacity(messages.len());
    let mut counts = Vec::with_capacity(messages.len());
    for message in messages {
        let results_only = message.role == Role::User
            && message.content.len() > 1
            && message
                .content
                .iter()
                .all(|b| matches!(b, ContentBlock::ToolResult { .. }));
        if !results_only {
            stored.push(message);
            counts.push(1);
            continue;
        }
        counts.push(message.content.len());
        stored.extend(message.content.into_iter().map(|block| Message {
            role: Role::User,
            content: vec![block],
        }));
    }
    (stored, counts)
}

/// The assistant message of a complete answer: a JSON body parsed, a stream assembled.
fn reply_message(endpoint: Endpoint, answer: &Answer) -> anyhow::Result<baton_wire::Reply> {
    let text = &answer.body;
    let reply = if answer.content_type.starts_with("text/event-stream") {
        let mut stream = endpoint
            .stream()
            .ok_or_else(|| anyhow::anyhow!("this endpoint does not stream"))?;
        stream.feed(text.as_bytes())?;
        stream.finish()?
    } else {
        match endpoint {
            Endpoint::Responses => baton_wire::responses::parse_response(text.as_bytes())?,
            _ => endpoint.format().parse_response(text.as_bytes())?,
        }
    };
    Ok(reply)
}

/// The provider's id of an answer: the body's `id` (`message.id`, `response.id` in a stream's
/// first event); `None` when it has none.
fn response_id(answer: &Answer) -> Option<String> {
    let first = match answer.content_type.starts_with("text/event-stream") {
        true => answer
            .body
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .map(str::trim)?,
        false => answer.body.as_str(),
    };
    let value: serde_json::Value = serde_json::from_str(first).ok()?;
    [
        &value["id"],
        &value["message"]["id"],
        &value["response"]["id"],
    ]
    .into_iter()
    .find_map(|v| v.as_str())
    .map(str::to_owned)
}

/// The usage record of a captured answer: the provider's own counts, under the response's id
/// (`gateway:<id>`, or a digest of the answer when it has no id), so a cache hit, which answers
/// with the same response, adds no second record: only the call that reached the upstream was
/// paid for.
fn usage_record(reply: &baton_wire::Reply, answer: &Answer) -> UsageRecord {
    let response_id = response_id(answer);
    let id = match &response_id {
        Some(id) => format!("gateway:{id}"),
        None => {
            let digest: [u8; 32] = Sha256::digest(answer.body.as_bytes()).into();
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            format!("gateway:sha256:{hex}")
        }
    };
    UsageRecord {
        id,
        model: Some(reply.model.clone()).filter(|m| !m.is_empty()),
        response_id,
        request_id: None,
        at: Some(baton_core::Timestamp::now()),
        usage: reply.usage.priced(),
        estimated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ends_are_found_in_the_raw_body() {
        let body = br#"{"model": "m", "messages": [ {"role":"user","content":"a]"} ,{"role":"assistant","content":[{"type":"text","text":"b,"}]}], "x": 1}"#;
        let ends = raw::ends(body).unwrap();
        let text = std::str::from_utf8(body).unwrap();
        assert_eq!(
            &text[..ends[0]],
            r#"{"model": "m", "messages": [ {"role":"user","content":"a]"}"#
        );
        assert!(text[..ends[1]].ends_with(r#""b,"}]}"#));
        // From the first message's end on: the second.
        assert_eq!(raw::ends_after(body, ends[0]), Some(vec![ends[1]]));
        assert_eq!(raw::ends_after(body, ends[1]), Some(vec![]));
        assert_eq!(raw::ends_after(body, 3), None, "not after a list element");
        assert_eq!(raw::ends(br#"{"model": "m"}"#), None);
        assert_eq!(raw::ends(b"not json"), None);
    }

    #[test]
    fn the_common_prefix_is_counted_across_blocks() {
        let a = vec![7u8; 10_000];
        let mut b = a.clone();
        assert_eq!(common_prefix(&a, &b), 10_000);
        b[9_000] = 0;
        assert_eq!(common_prefix(&a, &b), 9_000);
        b[5] = 0;
        assert_eq!(common_prefix(&a, &b), 5);
        assert_eq!(common_prefix(&a[..100], &a), 100);
        assert_eq!(common_prefix(b"", &a), 0);
    }

    #[test]
    fn recent_calls_are_remembered_up_to_the_capacity() {
        let recent = Recent::new();
        let print = |i: usize| {
            let tenant = TenantId::new("t").unwrap();
            fingerprint(
                &tenant,
                None,
                Endpoint::Messages,
                &i.to_be_bytes(),
                "answer",
            )
        };
        for i in 0..=Recent::CAPACITY {
            recent.insert(print(i));
        }
        assert!(!recent.contains(&print(0)), "the oldest is forgotten");
        assert!(recent.contains(&print(1)));
        assert!(recent.contains(&print(Recent::CAPACITY)));
    }

    #[test]
    fn a_fingerprint_covers_tenant_run_route_request_and_answer() {
        let (a, b) = (TenantId::new("a").unwrap(), TenantId::new("b").unwrap());
        let run = RunId::new("r").unwrap();
        let base = fingerprint(&a, None, Endpoint::Chat, b"{}", "x");
        for other in [
            fingerprint(&b, None, Endpoint::Chat, b"{}", "x"),
            fingerprint(&a, Some(&run), Endpoint::Chat, b"{}", "x"),
            fingerprint(&a, None, Endpoint::Messages, b"{}", "x"),
            fingerprint(&a, None, Endpoint::Chat, b"{ }", "x"),
            fingerprint(&a, None, Endpoint::Chat, b"{}", "y"),
        ] {
            assert_ne!(base, other);
        }
        assert_eq!(base, fingerprint(&a, None, Endpoint::Chat, b"{}", "x"));
    }
}
