//! Capture: every conversation through the gateway becomes a run of the caller's tenant
//! (issue 18, item 5), unless `baton serve --no-capture`.
//!
//! # Which run
//!
//! - `x-baton-run: NAME` names it: the run with id `NAME` (a run id's rules; a bad name is
//!   refused before the call with 400, kind `invalid-run-name`, in the vendor's error shape).
//! - Without the header the run is derived from the conversation: `gw-` and the first 24 hex
//!   digits of SHA-256 over the tenant, the system prompt and the messages up to and including
//!   the first user message. Every later request of one conversation repeats those, so they all
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
//! messages are appended and no history is read back (O(new messages) in the store; parsing and
//! hashing the request is linear in its size, like receiving it). A hit or coalesced answer
//! imports the same messages and reply, so a repeated request stores nothing.
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

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderName};
use baton_core::usage::UsageRecord;
use baton_core::{ContentBlock, Message, Role, RunId, TenantId};
use baton_store::{
    Error, ImportRejection, ImportUsage, Imported, NewEntry, NewImport, Origin, Reimport,
};
use baton_wire::RequestBody;
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

/// The run derived from a conversation (see the module docs).
pub(crate) fn derived_run(
    tenant: &TenantId,
    request: &RequestBody,
) -> Result<RunId, baton_core::Error> {
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(tenant.as_str().as_bytes());
    field(request.system.as_deref().unwrap_or("").as_bytes());
    for message in &request.messages {
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
/// none), the route, the request's bytes and the answer's.
pub(crate) fn fingerprint(
    tenant: &TenantId,
    run: Option<&RunId>,
    endpoint: Endpoint,
    request: &[u8],
    answer: &str,
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for field in [
        tenant.as_str().as_bytes(),
        run.map_or(&b""[..], |r| r.as_str().as_bytes()),
        endpoint.operation().as_bytes(),
        request,
        answer.as_bytes(),
    ] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher.finalize().into()
}

/// Captures one answered call, counting and logging the outcome; never fails. A call with a
/// `fingerprint` is remembered once stored, so its repeats skip capture ([`Recent`]).
pub(crate) async fn capture(
    state: Arc<AppState>,
    tenant: TenantId,
    endpoint: Endpoint,
    run: Option<RunId>,
    request: serde_json::Value,
    answer: Answer,
    fingerprint: Option<[u8; 32]>,
) {
    let started = std::time::Instant::now();
    let outcome = match capture_inner(&state, &tenant, endpoint, run, &request, &answer).await {
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
}

async fn capture_inner(
    state: &AppState,
    tenant: &TenantId,
    endpoint: Endpoint,
    run: Option<RunId>,
    request: &serde_json::Value,
    answer: &Answer,
) -> anyhow::Result<Outcome> {
    let body = parse(endpoint, request)?;
    let reply = reply_message(endpoint, answer)?;
    let usage = usage_record(&reply, answer);
    let stored = store(
        state,
        tenant,
        endpoint,
        run,
        body,
        Some((reply.message, usage)),
    )
    .await?;
    Ok(stored.0)
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
        None => derived_run(tenant, &body)?,
    };
    let (mut messages, _) = as_stored(body.messages);
    let usage = reply.map(|(message, usage)| {
        messages.push(message);
        (usage, Some(messages.len() - 1))
    });
    let mut redactions = 0;
    for message in &mut messages {
        redactions += baton_import::redact::redact_message(message);
    }
    let title = messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(|m| m.plain_text().chars().take(80).collect::<String>());

    let base: String = run.as_str().chars().take(115).collect();
    let mut run = run;
    let mut parent: Option<String> = None;
    for _ in 0..=MAX_DEPTH {
        let key = format!("gateway:{run}");
        let origin = Origin {
            source_key: key.clone(),
            path: format!("gateway:{}", endpoint.operation()),
            format: "gateway".into(),
            parent_key: parent.clone(),
            models: vec![body.model.clone()],
            redactions: redactions as u64,
            title: title.clone(),
            ..Origin::default()
        };
        let entries = messages.iter().cloned().map(NewEntry::estimated).collect();
        let mut import = NewImport::new(Some(run.clone()), origin, entries, vec![]);
        import.usage = ImportUsage {
            session: run.to_string(),
            project: None,
            agent: "gateway".into(),
            records: usage.iter().cloned().collect(),
        };
        let at = match state
            .store
            .import(tenant, vec![import.clone()], Reimport::AppendNew)
            .await
        {
            Ok(done) => {
                let branched = parent.is_some();
                let outcome = match done.first() {
                    // A run the user deleted stays deleted: nothing stored, as for a repeat.
                    Some(Imported::UpToDate(_) | Imported::Deleted { .. }) => Outcome::Unchanged,
                    _ if branched => Outcome::Branched,
                    _ => Outcome::Stored,
                };
                return Ok((outcome, run));
            }
            Err(Error::Import(ImportRejection::Diverged { first, stored, .. })) => {
                first.map_or(stored, |d| d.seq.0)
            }
            Err(Error::Import(ImportRejection::LastMessageChanged { stored, .. })) => stored,
            Err(e) => return Err(e.into()),
        };
        let point = import
            .digest_after(at.min(messages.len() as u64))
            .unwrap_or_else(|| import.digest());
        let hex = point.to_hex();
        run = RunId::new(format!("{base}.{}", &hex[..12]))?;
        parent = Some(key);
    }
    anyhow::bail!("the conversation diverged from more than {MAX_DEPTH} branches of run {run}")
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
