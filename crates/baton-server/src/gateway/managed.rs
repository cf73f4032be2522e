//! Managed context (issue 18, item 6): on request, the gateway sends the upstream the run's
//! assembled context — the working state in place of what it covers, then the conversation's
//! tail — instead of the client's whole transcript.
//!
//! # Asking for it
//!
//! `x-baton-context: structured | budget | clear-tool-results | sliding` names the policy (a
//! compaction strategy that needs no model), `x-baton-context-budget: N` the tokens the
//! conversation may take before it is compacted (default [`DEFAULT_BUDGET`]). Both are baton's
//! own headers and are not forwarded. It works on `POST /v1/messages`,
//! `POST /v1/chat/completions` and `POST /v1/responses` (whose `input` items it keeps the same
//! way: system and developer messages first, then the summary as an `input_text` message, then
//! the client's items from the first kept message on, with the `reasoning` items just before
//! it; a request with `previous_response_id` goes whole, since the upstream holds that
//! conversation; `clear-tool-results` is refused there), and needs capture (the run is where
//! the history lives); on embeddings, with `--no-capture` or with a policy it does not know,
//! the request is refused (400, in the vendor's shape) rather than silently sent whole.
//!
//! # What is sent
//!
//! Tokens are counted as the request's JSON bytes / 4 (an over-estimate, since escapes and keys
//! count too: the safe side of a budget). Under the budget, the request goes as the client
//! sent it. Over it, the request's messages are stored in the run first (what capture would
//! store), the policy compacts the run as `POST /v1/runs/{id}/compact` would (the offline
//! summarizer, a new summary version installed by compare-and-swap, nothing of history
//! changed), with the share of the budget the fields sent as they are (system, tools) leave to
//! the messages, and the run's context is read back. The clearing layer is off: every change
//! to the context's prefix costs the provider's prompt cache a rewrite of all that follows, so
//! the context moves in few large steps (a summary version). The upstream then gets the
//! client's body with only `messages` changed:
//!
//! - for Chat Completions, the client's `system`/`developer` messages first, as sent;
//! - one user message holding the context's preamble (rules, goal, working state, pinned
//!   messages), which stands for every message the summary covers;
//! - the tail: the client's own messages from the first one the context keeps, **byte for
//!   byte** (thinking and redacted-thinking blocks with their signatures, `server_tool_use`,
//!   `cache_control` breakpoints and every field baton does not read travel untouched); only a
//!   tool result the policy cleared is replaced by its stub.
//!
//! A message holding a result the `clear-tool-results` policy cleared is the one exception: it
//! is rebuilt from the run's copy (so its other parts are the redacted, stored ones, without
//! `cache_control`).
//!
//! Tool results whose texts together take more than half the budget in one message (over
//! `2 × budget` characters, at four a token) are the other: each is cut to a common length at
//! which they fit (the shorter ones whole), its head and tail kept and the middle replaced by a
//! line naming the seq to recall (`baton_core::context::clip_text`, as `baton context
//! --budget` clips), in the message re-serialized with every other field kept. The cap depends
//! on the message and the budget alone, so each request carrying it carries the same bytes and
//! the prompt cache keeps hitting. Without it one result larger than the budget (a log, a
//! whole file), always in the tail since the model is answering it, would hold the request
//! over the budget whatever the policy summarizes. The run keeps the results whole.
//!
//! Every other field (`system`, `tools`, `tool_choice`, `metadata`, …) is copied as its raw
//! JSON text. So between two compactions each request's upstream body extends the previous one
//! by its new messages: the prefix is stable and the provider's prompt cache keeps hitting;
//! a compaction changes the prefix once.
//!
//! The rewrite is refused (the request goes whole, and the response says why) when it would
//! not be smaller, when the run's history is not the request's conversation message for
//! message (a branch, a run named by `x-baton-run` that holds something else), or when the
//! kept messages hold a tool result whose call is not among them — checked on the raw JSON,
//! not with the parser that stored it.
//!
//! # Failing open
//!
//! When the upstream answers a rewritten request with a client error (4xx other than 401, 403,
//! 408, 409 and 429, which say nothing about the body), the client's own request is sent once
//! instead, and the response says so (`x-baton-context-action: fallback`, the upstream's status
//! in `-reason`); the failure is logged with its policy. With an `Idempotency-Key`, the key's
//! record is the rewritten call's (a retryable failure then), and the fallback runs without it.
//!
//! The request's messages are in the run before the call is made, whatever becomes of it: a
//! request over the budget is history as soon as it arrives.
//!
//! # What every answer says
//!
//! `x-baton-context-policy`, `x-baton-context-action` (`rewritten`, `unchanged` or
//! `fallback`), `x-baton-context-reason` when unchanged, `x-baton-context-run`,
//! `x-baton-context-tokens-before` and `-after` (the bodies' bytes / 4, the unit the budget is
//! in), `x-baton-context-summarized: FIRST-LAST` (the seqs the working state stands for) and
//! `x-baton-context-cleared: N` (tool results shown as a stub) and `x-baton-context-clipped: N`
//! (tool results sent clipped), so a client sees when the prefix changed.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use baton_compact::Offline;
use baton_compact::config::CompactionConfig;
use baton_core::prices::PriceTable;
use baton_core::{Context, RunId, tokens};
use baton_runtime::{Compactor, Outcome};
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Call, Endpoint, capture};
use crate::problem::Problem;

/// The request header naming the policy.
pub const CONTEXT_HEADER: HeaderName = HeaderName::from_static("x-baton-context");
/// The request header giving the budget, in tokens.
pub const BUDGET_HEADER: HeaderName = HeaderName::from_static("x-baton-context-budget");
/// The budget when the request gives none: the issue's replay budget, well inside every
/// current model's window.
pub const DEFAULT_BUDGET: u64 = 32_000;
/// The smallest budget taken: below it the working state alone would not fit.
pub const MIN_BUDGET: u64 = 1_000;
/// The policies offered: the strategies that compact without a model.
pub const POLICIES: [&str; 4] = ["structured", "budget", "clear-tool-results", "sliding"];

/// What `x-baton-context` says to turn managed context off for one request, when its tenant
/// has it on by default.
pub const OFF: &str = "off";

/// A request's managed-context policy.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    pub(crate) name: &'static str,
    pub(crate) budget: u64,
}

/// A tenant's managed context for the gateway requests that name none (`baton serve
/// --managed-context TENANT=POLICY[:BUDGET]`): as if each sent `x-baton-context: POLICY`, with
/// `x-baton-context-budget: BUDGET` unless it sends its own. A request opts out with
/// `x-baton-context: off`. Where the policy cannot apply (embeddings, `clear-tool-results` on
/// the Responses API), the request goes as sent rather than being refused: the client asked
/// for nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantContext {
    policy: &'static str,
    budget: u64,
}

impl TenantContext {
    /// `policy` (`structured`, `budget`, `clear-tool-results` or `sliding`) at `budget` tokens
    /// (32,000 when `None`, at least 1,000); an error that names what is wrong.
    pub fn new(policy: &str, budget: Option<u64>) -> Result<Self, String> {
        let Some(name) = POLICIES.iter().find(|p| p.eq_ignore_ascii_case(policy)) else {
            return Err(format!(
                "{policy:?} is not a managed-context policy; expected one of {}",
                POLICIES.join(", ")
            ));
        };
        let budget = budget.unwrap_or(DEFAULT_BUDGET);
        if budget < MIN_BUDGET {
            return Err(format!(
                "a budget of {budget} tokens is below the least, {MIN_BUDGET}"
            ));
        }
        Ok(TenantContext {
            policy: name,
            budget,
        })
    }

    /// The policy's name.
    pub fn policy(&self) -> &'static str {
        self.policy
    }

    /// The budget, in tokens.
    pub fn budget(&self) -> u64 {
        self.budget
    }
}

/// The policy the request asks for (or its tenant's, `tenant`, when it names none), if any; a
/// problem for one the gateway cannot honour.
pub(crate) fn requested(
    headers: &HeaderMap,
    endpoint: Endpoint,
    capture: bool,
    tenant: Option<&TenantContext>,
) -> Result<Option<Policy>, Problem> {
    let Some(value) = headers.get(&CONTEXT_HEADER) else {
        return Ok(tenant.and_then(|t| tenant_default(t, headers, endpoint, capture)));
    };
    if value
        .to_str()
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case(OFF))
    {
        return Ok(None);
    }
    let invalid = |detail: String| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-context-policy",
            "Invalid managed-context request",
            detail,
        )
    };
    let asked = value.to_str().unwrap_or("").trim();
    let Some(name) = POLICIES.iter().find(|p| p.eq_ignore_ascii_case(asked)) else {
        return Err(invalid(format!(
            "x-baton-context: {asked:?} is not a policy; expected one of {}",
            POLICIES.join(", ")
        )));
    };
    if endpoint == Endpoint::Embeddings {
        return Err(invalid(
            "x-baton-context: managed context works on /v1/messages, /v1/chat/completions and /v1/responses, not on embeddings".into(),
        ));
    }
    if endpoint == Endpoint::Responses && *name == "clear-tool-results" {
        return Err(invalid(
            "x-baton-context: clear-tool-results rewrites tool results, which baton does not rebuild as Responses input items; use structured, budget or sliding".into(),
        ));
    }
    if !capture {
        return Err(invalid(
            "x-baton-context: managed context needs the conversation's run, and this server runs with --no-capture".into(),
        ));
    }
    let budget = match headers.get(&BUDGET_HEADER) {
        // The tenant's budget fits its model's window, whichever policy the request names.
        None => tenant.map_or(DEFAULT_BUDGET, |t| t.budget),
        Some(v) => budget_of(v).ok_or_else(|| {
            invalid(format!(
                "x-baton-context-budget: expected a whole number of tokens, at least {MIN_BUDGET}"
            ))
        })?,
    };
    Ok(Some(Policy { name, budget }))
}

/// The tenant's policy for a request that names none, where it applies; its budget unless the
/// request gives one it can read.
fn tenant_default(
    tenant: &TenantContext,
    headers: &HeaderMap,
    endpoint: Endpoint,
    capture: bool,
) -> Option<Policy> {
    let applies = capture
        && endpoint != Endpoint::Embeddings
        && !(endpoint == Endpoint::Responses && tenant.policy == "clear-tool-results");
    let budget = headers
        .get(&BUDGET_HEADER)
        .and_then(budget_of)
        .unwrap_or(tenant.budget);
    applies.then_some(Policy {
        name: tenant.policy,
        budget,
    })
}

/// The budget an `x-baton-context-budget` value gives: a whole number of tokens, at least
/// [`MIN_BUDGET`].
fn budget_of(value: &HeaderValue) -> Option<u64> {
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n >= MIN_BUDGET)
}

/// What managed context did for one request, as its response headers say.
#[derive(Clone, Debug)]
pub(crate) struct Report {
    policy: &'static str,
    run: Option<RunId>,
    action: &'static str,
    reason: Option<String>,
    before: u64,
    after: u64,
    summarized: Option<(u64, u64)>,
    /// Tool results the context shows as a stub.
    cleared: usize,
    /// Tool results sent clipped to their head and tail.
    clipped: usize,
}

impl Report {
    fn unchanged(policy: &Policy, before: u64, reason: impl Into<String>) -> Self {
        Report {
            policy: policy.name,
            run: None,
            action: "unchanged",
            reason: Some(reason.into()),
            before,
            after: before,
            summarized: None,
            cleared: 0,
            clipped: 0,
        }
    }

    /// Whether the upstream got a rewritten body.
    pub(crate) fn rewritten(&self) -> bool {
        self.action == "rewritten"
    }

    /// The client's own request went after the upstream refused the rewrite with `status`.
    pub(crate) fn fell_back(&mut self, status: StatusCode) {
        self.action = "fallback";
        self.reason = Some(format!(
            "the upstream answered the rewritten request {status}"
        ));
        self.after = self.before;
    }

    /// Writes the `x-baton-context-*` headers.
    pub(crate) fn write(&self, headers: &mut HeaderMap) {
        let mut put = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        };
        put("x-baton-context-policy", self.policy.to_owned());
        put("x-baton-context-action", self.action.to_owned());
        put("x-baton-context-tokens-before", self.before.to_string());
        put("x-baton-context-tokens-after", self.after.to_string());
        if let Some(reason) = &self.reason {
            // Header values are visible ASCII: a reason is baton's own English.
            put(
                "x-baton-context-reason",
                reason.replace(|c: char| !c.is_ascii_graphic() && c != ' ', " "),
            );
        }
        if let Some(run) = &self.run {
            put("x-baton-context-run", run.to_string());
        }
        if let Some((first, last)) = self.summarized {
            put("x-baton-context-summarized", format!("{first}-{last}"));
        }
        if self.cleared > 0 {
            put("x-baton-context-cleared", self.cleared.to_string());
        }
        if self.clipped > 0 {
            put("x-baton-context-clipped", self.clipped.to_string());
        }
    }
}

/// Applies `policy` to `call`: the call to send (a rewritten one, or `None` for the client's
/// own) and what was done. Never fails: anything that goes wrong leaves the request whole and
/// says why.
pub(crate) async fn apply(call: &Call, policy: &Policy) -> (Option<Arc<Call>>, Report) {
    let body = match capture::parse(call.endpoint, &call.value) {
        Ok(body) => body,
        Err(e) => {
            return (
                None,
                Report::unchanged(policy, 0, format!("unreadable request: {e}")),
            );
        }
    };
    let before = estimate(call.body.len());
    if call.endpoint == Endpoint::Responses {
        if call
            .value
            .get("previous_response_id")
            .is_some_and(|v| !v.is_null())
        {
            let why = "previous_response_id: the upstream holds the conversation";
            return (None, Report::unchanged(policy, before, why));
        }
        if !call.value["input"].is_array() {
            return (
                None,
                Report::unchanged(policy, before, "the input is one text"),
            );
        }
    }
    if before <= policy.budget {
        return (None, Report::unchanged(policy, before, "under the budget"));
    }
    let messages = body.messages.len();
    match rewrite(call, policy, body, before).await {
        Ok(Rewrite::Sent(rewritten, report)) => (Some(rewritten), report),
        Ok(Rewrite::Whole(report)) => (None, report),
        Err(e) => {
            tracing::warn!(policy = policy.name, messages, error = %e, "managed context left the request whole");
            (None, Report::unchanged(policy, before, e.to_string()))
        }
    }
}

enum Rewrite {
    Sent(Arc<Call>, Report),
    Whole(Report),
}

async fn rewrite(
    call: &Call,
    policy: &Policy,
    body: baton_wire::RequestBody,
    before: u64,
) -> anyhow::Result<Rewrite> {
    let state = &call.state;
    // How many stored messages each of the request's became (parallel tool results split).
    let (messages, counts) = capture::as_stored(body.messages.clone());
    let n: u64 = counts.iter().map(|c| *c as u64).sum();
    let named = call.capture.clone().flatten();
    let (_, run) = capture::store(state, &call.tenant, call.endpoint, named, body, None).await?;
    let mut report = Report::unchanged(policy, before, "");
    report.run = Some(run.clone());

    // The strategy counts the messages' content; the budget is of the whole body. So it gets
    // what the budget leaves beside the fields kept as sent (system, tools, …), in its own
    // unit: the messages' share of the budget scaled by its count over their JSON's.
    let fields: Fields<'_> = serde_json::from_slice(&call.body)?;
    let json = fields
        .0
        .iter()
        .find(|(k, _)| k == list_key(call.endpoint))
        .map_or(0, |(_, v)| estimate(v.get().len()));
    let fixed = before.saturating_sub(json);
    if fixed + MIN_BUDGET / 2 > policy.budget {
        return Ok(Rewrite::Whole(Report {
            reason: Some(format!(
                "the request's fields other than its messages take {fixed} of the {} tokens",
                policy.budget
            )),
            ..report
        }));
    }
    let counted: u64 = messages
        .iter()
        .map(|m| u64::from(tokens::estimate_message(m)))
        .sum();
    let share = (policy.budget - fixed) as f64 * counted as f64 / json.max(1) as f64;
    let mut config = CompactionConfig::named(policy.name).with_budget(share as u64);
    // Every change to the context's prefix costs the provider's prompt cache a rewrite of all
    // that follows, so the context moves in few large steps (a summary version) rather than in
    // the clearing layer's many small ones.
    config.settings.clear_layer = false;
    let strategy = config.build()?;
    let (prices, clear) = (PriceTable::defaults(), config.clear()?);
    let counter = tokens::ByteEstimate;
    let whole = |mut report: Report, reason: &str| {
        report.reason = Some(reason.to_owned());
        Ok(Rewrite::Whole(report))
    };
    // Once as the policy plans; again, forced, when what it left is still over the budget (the
    // kept messages' JSON weighs more than the average the share assumed).
    let mut built = None;
    for force in [false, true] {
        let compactor = Compactor {
            strategy: &*strategy,
            summarizer: &Offline,
            settings: &config.settings,
            clear,
            prices: &prices,
            counter: &counter,
            force,
            dry_run: false,
        };
        let outcome = baton_runtime::compact(&*state.store, &call.tenant, &run, &compactor).await?;
        state.metrics.compaction(outcome.name());
        let declined = match &outcome {
            Outcome::Kept(keep) => Some(keep.to_string()),
            Outcome::Refused { reason, .. } => Some(reason.to_string()),
            _ => None,
        };
        let context = state.store.context(&call.tenant, &run).await?;
        // The run holds the request's messages (the store matched them by digest), and more
        // when this is a repeat of a request whose reply was captured since: the rewrite is
        // then the one the first call sent, as long as the summary covers none of the more.
        let first = context.messages.first().map_or(n + 1, |e| e.seq.0);
        if context.messages.last().is_none_or(|e| e.seq.0 < n) || first > n {
            return whole(
                report,
                "the run's history is not this conversation message for message",
            );
        }
        let kept_all = first <= 1 && context.cleared.is_empty();
        if kept_all && force {
            break;
        }
        let Some(skip) = client_index(&counts, first) else {
            return whole(
                report,
                "the context starts inside one of the request's messages",
            );
        };
        let cap = clip_cap(policy.budget);
        let Some((text, clipped)) = upstream_body(call, &context, skip, &counts, cap)? else {
            return whole(
                report,
                "the kept messages would break a tool call from its result",
            );
        };
        if kept_all && clipped == 0 {
            let why = declined.unwrap_or_else(|| "it kept every message".into());
            return whole(
                report,
                &format!("the policy kept the whole conversation: {why}"),
            );
        }
        let after = estimate(text.len());
        built = Some((text, after, first, context.cleared.len(), clipped));
        if after <= policy.budget {
            break;
        }
    }
    let Some((text, after, first, cleared, clipped)) = built else {
        return whole(report, "the policy kept the whole conversation");
    };
    if after >= before {
        return whole(report, "the managed context would not be smaller");
    }
    let value: Value = serde_json::from_str(&text)?;
    let rewritten = Call {
        state: call.state.clone(),
        cache: call.cache.clone(),
        endpoint: call.endpoint,
        operation: call.operation,
        url: call.url.clone(),
        headers: call.headers.clone(),
        body: Bytes::from(text),
        value: Arc::new(value),
        model: call.model.clone(),
        versions: call.versions.clone(),
        policy: call.policy.clone(),
        scope: call.scope.clone(),
        tenant: call.tenant.clone(),
        capture: call.capture.clone(),
        context: None,
        original: Some(call.value.clone()),
    };
    report.action = "rewritten";
    report.reason = None;
    report.after = after;
    report.summarized = (first > 1).then_some((1, first - 1));
    report.cleared = cleared;
    report.clipped = clipped;
    if after > policy.budget {
        report.reason = Some(format!(
            "over the budget by {} even compacted: the newest messages take it",
            after - policy.budget
        ));
    }
    Ok(Rewrite::Sent(Arc::new(rewritten), report))
}

/// The body sent upstream: the client's, with `messages` (`input` for the Responses API) as the
/// module docs say, and how many tool results it clips; `None` when the kept messages would
/// answer a tool call they do not hold.
fn upstream_body(
    call: &Call,
    context: &Context,
    skip: usize,
    counts: &[usize],
    cap: usize,
) -> anyhow::Result<Option<(String, usize)>> {
    let fields: Fields<'_> = serde_json::from_slice(&call.body)?;
    let list_key = list_key(call.endpoint);
    let raw_list = fields
        .0
        .iter()
        .find(|(k, _)| k == list_key)
        .map(|(_, v)| *v)
        .ok_or_else(|| anyhow::anyhow!("the request has no {list_key} list"))?;
    let raw: Vec<&RawValue> = serde_json::from_str(raw_list.get())?;
    let summary = context.preamble().map(|preamble| {
        format!(
            "The conversation before this point, summarized by baton (its originals stay in the run's history):\n\n{}",
            preamble.plain_text()
        )
    });
    let (list, clipped) = match call.endpoint {
        Endpoint::Responses => input_items(call, context, (skip, counts), &raw, summary, cap)?,
        _ => messages(call, context, (skip, counts), &raw, summary, cap)?,
    };
    let parsed: Vec<Value> = list
        .iter()
        .map(|m| serde_json::from_str(m))
        .collect::<Result<_, _>>()?;
    if let Some(orphan) = orphan_result(&parsed) {
        tracing::debug!(orphan, "managed context would orphan a tool result");
        return Ok(None);
    }
    let mut out = String::with_capacity(call.body.len());
    out.push('{');
    for (i, (key, value)) in fields.0.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(key)?);
        out.push(':');
        match key == list_key {
            true => {
                out.push('[');
                out.push_str(&list.join(","));
                out.push(']');
            }
            false => out.push_str(value.get()),
        }
    }
    out.push('}');
    Ok(Some((out, clipped)))
}

/// The field holding the conversation: `input` in the Responses API, `messages` elsewhere.
fn list_key(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Responses => "input",
        _ => "messages",
    }
}

/// The `messages` of a Messages or Chat Completions request: Chat's system and developer
/// messages, the summary, then the client's own from request message `skip` on (their tool
/// results over `cap` characters clipped, see [`clip_results`]); and how many were clipped.
fn messages(
    call: &Call,
    context: &Context,
    (skip, counts): (usize, &[usize]),
    raw: &[&RawValue],
    summary: Option<String>,
    cap: usize,
) -> anyhow::Result<(Vec<String>, usize)> {
    if raw.len() != counts.len() {
        anyhow::bail!(
            "the request's messages were read as {} messages, not {}",
            counts.len(),
            raw.len()
        );
    }
    let mut messages: Vec<String> = Vec::with_capacity(raw.len() + 1 - skip.min(raw.len()));
    let chat = call.endpoint == Endpoint::Chat;
    if chat {
        // The client's instructions stay first, whatever the summary covers.
        for m in &raw[..skip.min(raw.len())] {
            let role: RoleOnly = serde_json::from_str(m.get())?;
            if matches!(role.role.as_str(), "system" | "developer") {
                messages.push(m.get().to_owned());
            }
        }
    }
    if let Some(text) = summary {
        let summary = match chat {
            true => serde_json::json!({"role": "user", "content": text}),
            false => {
                serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}]})
            }
        };
        messages.push(summary.to_string());
    }
    let mut seq: u64 = counts[..skip].iter().map(|c| *c as u64).sum();
    let mut clipped = 0;
    for (m, count) in raw.iter().zip(counts).skip(skip) {
        let seqs = seq + 1..=seq + *count as u64;
        seq += *count as u64;
        if !context.cleared.iter().any(|s| seqs.contains(&s.0)) {
            let (message, n) = clip_results(m.get(), seqs.clone(), cap)?;
            clipped += n;
            messages.push(message);
            continue;
        }
        // Results the policy cleared: the message as the context holds it, stubs included.
        let held: Vec<baton_core::Message> = context
            .messages
            .iter()
            .filter(|e| seqs.contains(&e.seq.0))
            .map(|e| e.message.clone())
            .collect();
        match chat {
            true => messages.extend(
                held.iter()
                    .flat_map(baton_wire::openai::render_message)
                    .map(|v| v.to_string()),
            ),
            false => messages.extend(
                baton_wire::anthropic::render_request_messages(&held)
                    .1
                    .iter()
                    .map(Value::to_string),
            ),
        }
    }
    Ok((messages, clipped))
}

/// The `input` of a Responses request: its system and developer messages, the summary, then the
/// client's own items from the first that makes message `skip` on, with the `reasoning` items
/// just before it (the API wants a reasoning item followed by what it produced).
fn input_items(
    call: &Call,
    context: &Context,
    (skip, counts): (usize, &[usize]),
    raw: &[&RawValue],
    summary: Option<String>,
    cap: usize,
) -> anyhow::Result<(Vec<String>, usize)> {
    let owners = baton_wire::responses::input_messages(&call.value)?;
    if owners.len() != raw.len() {
        anyhow::bail!(
            "the request's input was read as {} items, not {}",
            owners.len(),
            raw.len()
        );
    }
    if !context.cleared.is_empty() {
        anyhow::bail!("cleared tool results are not rebuilt as Responses input items");
    }
    let mut start = owners
        .iter()
        .position(|o| o.is_some_and(|m| m >= skip))
        .unwrap_or(raw.len());
    while start > 0 && owners[start - 1].is_none() {
        start -= 1;
    }
    let mut items = Vec::with_capacity(raw.len() - start + 1);
    for item in &raw[..start] {
        let role: RoleOnly = serde_json::from_str(item.get())?;
        if matches!(role.role.as_str(), "system" | "developer") {
            items.push(item.get().to_owned());
        }
    }
    if let Some(text) = summary {
        let summary = serde_json::json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]});
        items.push(summary.to_string());
    }
    let mut clipped = 0;
    for (item, owner) in raw[start..].iter().zip(&owners[start..]) {
        // An item the run keeps as no message has no seq to recall: sent as it is.
        let Some(owner) = owner else {
            items.push(item.get().to_owned());
            continue;
        };
        // The item's stored seq: the stored messages of the request's before its owner, + 1.
        let before: usize = counts[..(*owner).min(counts.len())].iter().sum();
        let seq = before as u64 + 1;
        let (item, n) = clip_results(item.get(), seq..=seq, cap)?;
        clipped += n;
        items.push(item);
    }
    Ok((items, clipped))
}

/// The most characters of tool-result text one message may send: half the budget's tokens,
/// at the budget's four bytes a token. It depends on the budget alone, so a message is clipped
/// the same way in every request that carries it.
fn clip_cap(budget: u64) -> usize {
    usize::try_from(budget.saturating_mul(2)).unwrap_or(usize::MAX)
}

/// `message` (one message or input item, as its raw JSON) with its tool results' texts cut, when
/// together they are longer than `cap` characters, to a common length at which they fit (the
/// shorter ones whole), each keeping its head and tail, the middle replaced by a line naming
/// the seq to recall ([`baton_core::context::clip_text`], as `baton context --budget` clips);
/// and how many texts it clipped. A message with nothing to clip is returned byte for byte; a
/// clipped one is re-serialized (the same bytes for the same message and cap, every time), its
/// other fields (`tool_use_id`, `cache_control`, …) kept. `seqs` are the stored messages the
/// message became: the `k`-th result of an Anthropic message of results only is the `k`-th of
/// them (the run keeps parallel results apart).
fn clip_results(
    message: &str,
    seqs: std::ops::RangeInclusive<u64>,
    cap: usize,
) -> anyhow::Result<(String, usize)> {
    if message.len() <= cap {
        return Ok((message.to_owned(), 0));
    }
    /// The texts of one result's content: a string, or the `text` of each part.
    fn texts(content: &mut Value) -> Vec<&mut String> {
        match content {
            Value::String(s) => vec![s],
            Value::Array(parts) => parts
                .iter_mut()
                .filter_map(|p| match p.get_mut("text") {
                    Some(Value::String(s)) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    let (first, last) = (*seqs.start(), *seqs.end());
    let mut value: Value = serde_json::from_str(message)?;
    let mut found: Vec<(&mut String, u64)> = Vec::new();
    if value["role"] == "tool" {
        // Chat Completions: a `tool` message's content.
        found.extend(texts(&mut value["content"]).into_iter().map(|s| (s, first)));
    } else if value["type"] == "function_call_output" {
        // Responses: an output item.
        found.extend(texts(&mut value["output"]).into_iter().map(|s| (s, first)));
    } else if let Some(blocks) = value.get_mut("content").and_then(Value::as_array_mut) {
        // Anthropic: the tool_result blocks of a user message.
        let results = blocks.iter_mut().filter(|b| b["type"] == "tool_result");
        for (k, block) in results.enumerate() {
            let seq = (first + k as u64).min(last);
            if let Some(content) = block.get_mut("content") {
                found.extend(texts(content).into_iter().map(|s| (s, seq)));
            }
        }
    }
    let lengths: Vec<usize> = found.iter().map(|(s, _)| s.len()).collect();
    let Some(each) = common_cap(&lengths, cap) else {
        return Ok((message.to_owned(), 0));
    };
    let mut clipped = 0;
    for (text, seq) in found {
        // A text just over its share would come back longer, its note added: left whole.
        if let Some(cut) = baton_core::context::clip_text(text, each, baton_core::Seq(seq))
            && cut.len() < text.len()
        {
            *text = cut;
            clipped += 1;
        }
    }
    Ok(match clipped {
        0 => (message.to_owned(), 0),
        n => (value.to_string(), n),
    })
}

/// The largest length at which texts of `lengths` fit in `total` characters together, each cut
/// to it (the shorter ones whole); `None` when they fit whole.
fn common_cap(lengths: &[usize], total: usize) -> Option<usize> {
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let mut left = total;
    for (i, &len) in sorted.iter().enumerate() {
        let share = left / (sorted.len() - i);
        if len > share {
            return Some(share);
        }
        left -= len;
    }
    None
}

/// The index of the request's message whose first stored message is `seq`, by how many
/// stored messages each became; the request's length for the seq after its last. `None` when
/// `seq` falls inside a message.
fn client_index(counts: &[usize], seq: u64) -> Option<usize> {
    let mut before = 0u64;
    for (j, count) in counts.iter().enumerate() {
        if before + 1 == seq {
            return Some(j);
        }
        before += *count as u64;
        if before + 1 > seq {
            return None;
        }
    }
    (before + 1 == seq).then_some(counts.len())
}

/// The tokens a request of `bytes` counts for, as the budget counts them: its JSON bytes / 4
/// (rounded up). Escapes and keys make it an over-estimate, the safe side of a budget.
fn estimate(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// A message's role, read alone.
#[derive(Deserialize)]
struct RoleOnly {
    #[serde(default)]
    role: String,
}

/// The id of a tool result among `messages` (in any vendor's shape: Anthropic blocks, Chat
/// `tool` messages, Responses items) that answers no tool call of an earlier one, if any.
/// Read from the JSON as the vendors define it.
fn orphan_result(messages: &[Value]) -> Option<String> {
    let mut calls = std::collections::HashSet::new();
    for m in messages {
        // OpenAI: an assistant's tool_calls, and `tool` messages answering them.
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            if let Some(id) = call["id"].as_str() {
                calls.insert(id.to_owned());
            }
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            if !calls.contains(id) {
                return Some(id.to_owned());
            }
        }
        // Responses: function_call items, and function_call_output items answering them.
        match m["type"].as_str() {
            Some("function_call") => {
                calls.insert(m["call_id"].as_str().unwrap_or_default().to_owned());
            }
            Some("function_call_output") => {
                let id = m["call_id"].as_str().unwrap_or_default();
                if !calls.contains(id) {
                    return Some(id.to_owned());
                }
            }
            _ => {}
        }
        // Anthropic: tool_use blocks, and tool_result blocks answering them.
        for block in m["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => {
                    if let Some(id) = block["id"].as_str() {
                        calls.insert(id.to_owned());
                    }
                }
                Some("tool_result") => {
                    let id = block["tool_use_id"].as_str().unwrap_or_default();
                    if !calls.contains(id) {
                        return Some(id.to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// A JSON object's fields, each value as its raw text, in the order sent.
pub(crate) struct Fields<'a>(pub(crate) Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Object<'a> {
            type Value = Fields<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'a>, M::Error> {
                let mut fields = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    // A repeated key: its last value, as every other reader of the body takes.
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some(field) => field.1 = value,
                        None => fields.push((key, value)),
                    }
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Object(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_keep_their_order_and_raw_text() {
        let body = br#"{"z": 1.50, "messages": [ {"role":"user"} ], "a": "\u00e9"}"#;
        let fields: Fields<'_> = serde_json::from_slice(body).unwrap();
        let got: Vec<(&str, &str)> = fields
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), v.get()))
            .collect();
        assert_eq!(
            got,
            [
                ("z", "1.50"),
                ("messages", r#"[ {"role":"user"} ]"#),
                ("a", r#""\u00e9""#)
            ]
        );
    }

    #[test]
    fn a_repeated_field_is_read_as_its_last_value() {
        let body = br#"{"messages": [1], "model": "m", "messages": [2]}"#;
        let fields: Fields<'_> = serde_json::from_slice(body).unwrap();
        let got: Vec<(&str, &str)> = fields
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), v.get()))
            .collect();
        assert_eq!(got, [("messages", "[2]"), ("model", r#""m""#)]);
        let serde: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(
            serde["messages"],
            serde_json::json!([2]),
            "as serde reads it"
        );
    }

    #[test]
    fn seqs_map_to_the_requests_messages() {
        // Three messages; the second held three parallel results, stored apart.
        let counts = [1, 1, 3, 1];
        assert_eq!(client_index(&counts, 1), Some(0));
        assert_eq!(client_index(&counts, 2), Some(1));
        assert_eq!(client_index(&counts, 3), Some(2));
        assert_eq!(client_index(&counts, 4), None);
        assert_eq!(client_index(&counts, 5), None);
        assert_eq!(client_index(&counts, 6), Some(3));
        assert_eq!(client_index(&counts, 7), Some(4));
        assert_eq!(client_index(&counts, 8), None);
    }

    #[test]
    fn tool_results_over_the_cap_are_clipped_in_each_shape_the_same_way_every_time() {
        let long = "line of output\n".repeat(400);
        let short = "ok";
        // Anthropic: results only, stored one per seq; the other fields stay.
        let anthropic = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": short},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": long}],
             "cache_control": {"type": "ephemeral"}},
        ]})
        .to_string();
        let (out, n) = clip_results(&anthropic, 4..=5, 1_000).unwrap();
        assert_eq!(n, 1, "the short one fits whole beside the long one");
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["content"][0]["content"], short);
        let clipped = &value["content"][1];
        assert_eq!(clipped["tool_use_id"], "t2");
        assert_eq!(clipped["cache_control"], json!({"type": "ephemeral"}));
        let text = clipped["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("recall seq 5 for the original"), "{text}");
        assert!(text.len() < 1_200, "{}", text.len());
        assert_eq!(clip_results(&anthropic, 4..=5, 1_000).unwrap().0, out);
        // Chat Completions and the Responses API.
        let chat = json!({"role": "tool", "tool_call_id": "c1", "content": long}).to_string();
        let (out, n) = clip_results(&chat, 9..=9, 1_000).unwrap();
        assert_eq!(n, 1);
        assert!(out.contains("recall seq 9") && out.contains("\"tool_call_id\":\"c1\""));
        let item = json!({"type": "function_call_output", "call_id": "c2", "output": long});
        let (out, n) = clip_results(&item.to_string(), 3..=3, 1_000).unwrap();
        assert_eq!(n, 1);
        assert!(out.contains("recall seq 3") && out.contains("\"call_id\":\"c2\""));
        // Under the cap, or no tool result: the raw bytes, spacing and escapes kept.
        let raw = r#"{ "role": "tool", "tool_call_id": "c1", "content": "caf\u00e9" }"#;
        assert_eq!(
            clip_results(raw, 1..=1, 1_000).unwrap(),
            (raw.to_owned(), 0)
        );
        let text = json!({"role": "user", "content": long}).to_string();
        assert_eq!(
            clip_results(&text, 1..=1, 1_000).unwrap(),
            (text.clone(), 0)
        );
    }

    #[test]
    fn parallel_results_share_the_cap_the_shorter_ones_whole() {
        assert_eq!(common_cap(&[10, 20], 100), None);
        assert_eq!(common_cap(&[10, 500, 900], 610), Some(300));
        assert_eq!(common_cap(&[400, 400], 600), Some(300));
        let results: Vec<Value> = [13_000, 35_000, 21_000]
            .iter()
            .enumerate()
            .map(|(k, n)| json!({"type": "tool_result", "tool_use_id": format!("t{k}"), "content": "x".repeat(*n)}))
            .collect();
        let message = json!({"role": "user", "content": results}).to_string();
        let (out, n) = clip_results(&message, 10..=12, 40_000).unwrap();
        assert_eq!(n, 2, "the 13,000 fit whole; the others share the rest");
        assert!(out.len() < 41_000, "{}", out.len());
        assert!(out.contains("recall seq 11") && out.contains("recall seq 12"));
        assert!(!out.contains("recall seq 10"));
    }

    #[test]
    fn orphans_are_found_in_both_shapes() {
        let anthropic = [
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]}),
        ];
        assert_eq!(orphan_result(&anthropic), None);
        assert_eq!(orphan_result(&anthropic[1..]), Some("t1".into()));
        let openai = [
            json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function"}]}),
            json!({"role": "tool", "tool_call_id": "c1", "content": "a"}),
        ];
        assert_eq!(orphan_result(&openai), None);
        assert_eq!(orphan_result(&openai[1..]), Some("c1".into()));
    }
}
