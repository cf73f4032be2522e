//! Section 19: the corpus as gateway traffic (issue 18, the capture and managed-context bars).
//!
//! Every Claude Code and Codex session of the shared corpus (`../shared/corpus`) is replayed
//! through `baton serve`'s gateway, one request per model call: the request carries the whole
//! transcript before the assistant message, and the scripted upstream
//! (`baton_provider::scripted`, on loopback) answers with that assistant message, ids kept, so
//! the next request repeats it as a real client would. Claude Code sessions go to
//! `/v1/messages` the way Claude Code sends them (content as blocks, a system prompt and the
//! last block marked `cache_control`), against an upstream that models Anthropic's prompt
//! cache; Codex sessions go to `/v1/responses`, as Codex sends them (the input items, reasoning
//! included, with `store: false`). A call whose request the real API
//! would refuse (`check_messages`: e.g. a transcript that opens with the assistant, a tool call
//! left unanswered) is not sent; its reply reaches the run as part of the next request.
//!
//! Two passes, each on a fresh SQLite store:
//! - **capture**: each session's run is compared with a direct import of the same file
//!   (`Transcript::to_import`, as `baton import` does) through the last message a call
//!   answered: equal messages, equal tool calls and results. Per request: the answer's latency,
//!   and how long capture took after it (until the run holds the reply), at about 10, 100 and
//!   400 messages; the bar is a capture cost flat in the conversation's length.
//! - **managed**: the same replay with `x-baton-context: structured` at a 32k budget. Counted:
//!   requests the upstream refused (a broken tool pair is a 400 there), fallbacks, the peak
//!   input the upstream received (its usage: fresh + cache reads + cache writes) and baton's own
//!   estimate of it; bytes of the previous request's prompt, through its last breakpoint, that
//!   the next one changed (`prompt_blocks`, `cache_control` aside), split between requests
//!   where baton installed a new compaction (the prefix changes then, by design) and the rest
//!   (bar: 0); and the share of input read from the cache against the unmanaged pass's.
//!
//! Without the corpus the section says so in one line and is skipped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow};
use baton_core::prices::PriceTable;
use baton_core::tokens::ByteEstimate;
use baton_core::{ContentBlock, Message, Role, RunId, Seq, TenantId, Timestamp};
use baton_provider::scripted::{Script, ScriptedServer, prompt_blocks};
use baton_server::{AppState, Config};
use baton_sqlite::SqliteStore;
use baton_store::{Reimport, Store, UsageQuery};
use baton_wire::{Format, MaxTokensField, RequestBody};
use serde_json::{Value, json};

use crate::import::CORPUS;
use crate::{Report, Target, Unit, on_worker, thousands};

/// The managed pass's budget, the issue's.
const BUDGET: u64 = 32_000;

/// A system prompt of the size of an agent's, marked as Claude Code marks it.
fn system_prompt() -> Value {
    let text = "You are an interactive coding agent. Use the tools to read, search and change files and to run commands. "
        .repeat(60);
    json!([{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}])
}

/// One session to replay.
struct Session {
    name: String,
    path: PathBuf,
    index: usize,
    wire: Format,
    /// Whether its calls go to the Responses API (Codex's), not `wire`'s own route.
    responses: bool,
    model: String,
    messages: Vec<Message>,
    /// The assistant messages answered by a call, by index.
    calls: Vec<usize>,
}

impl Session {
    /// The messages a replay's run holds: through the last call's reply.
    fn replayed(&self) -> usize {
        self.calls.last().map_or(0, |k| k + 1)
    }
}

/// One request's figures.
#[derive(Clone, Copy, Default)]
struct Sample {
    messages: usize,
    answer_ms: f64,
    capture_ms: f64,
    upstream_input: u64,
    cache_read: u64,
    baton_after: u64,
    rewritten: bool,
    fallback: bool,
    refused: bool,
    /// Sent to the Anthropic upstream, which models the prompt cache.
    anthropic: bool,
}

pub(crate) fn section(
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    writeln!(
        out,
        "\n[19] replay: the corpus's Claude Code and Codex sessions as gateway traffic, one request per model call, against the scripted upstream (prompt cache modelled for Claude Code)"
    )?;
    let corpus = Path::new(CORPUS);
    if !corpus.is_dir() {
        writeln!(out, "  skipped: no corpus at {}", corpus.display())?;
        return Ok(());
    }
    let mut sessions = sessions(corpus)?;
    if quick {
        sessions.truncate(3);
    }
    let calls: usize = sessions.iter().map(|s| s.calls.len()).sum();
    writeln!(out, "  {} sessions, {calls} model calls", sessions.len())?;
    out.flush()?;
    let sessions = Arc::new(sessions);
    // The gateways and clients need I/O, which the shared runtime does not enable.
    let rt = &tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the replay's tokio runtime")?;

    // Pass 1: capture.
    let db = dir.join("replay-capture.db");
    let s = sessions.clone();
    let (samples, equal, unequal, costs) = on_worker(rt, async move {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).await?);
        let samples = replay(&store, &s, false).await?;
        let (equal, unequal) = compare(&store, &s).await?;
        let costs = costs(&store, samples.len()).await?;
        anyhow::Ok((samples, equal, unequal, costs))
    })?;
    let (logged, reported, responses) = costs;
    let gap = (logged - reported).abs() / reported.max(f64::MIN_POSITIVE);
    writeln!(
        out,
        "  cost of the replay's {responses} responses: call log ${logged:.4}, usage report ${reported:.4} (difference {:.3}%)",
        gap * 100.0
    )?;
    report.figure(
        "replay_cost_gap",
        "replay: call-log cost against the usage report's (%)",
        gap * 100.0,
        Unit::Count("%"),
        Some(Target::AtMost(0.01)),
    );
    writeln!(
        out,
        "  capture: {equal} of {} sessions stored equal to a direct import of the same file",
        sessions.len()
    )?;
    for line in unequal.iter().take(8) {
        writeln!(out, "    differs: {line}")?;
    }
    if unequal.len() > 8 {
        writeln!(out, "    … and {} more", unequal.len() - 8)?;
    }
    report.figure(
        "replay_capture_unequal",
        "replayed sessions whose run differs from a direct import",
        unequal.len() as f64,
        Unit::Count("sessions"),
        Some(Target::AtMost(0.0)),
    );
    let mut flat = Vec::new();
    for (at, low, high) in [(10, 8, 12), (100, 90, 110), (400, 360, 440)] {
        let near: Vec<&Sample> = samples
            .iter()
            .filter(|s| (low..=high).contains(&s.messages))
            .collect();
        let answer = median(near.iter().map(|s| s.answer_ms));
        let capture = median(near.iter().map(|s| s.capture_ms));
        writeln!(
            out,
            "  at ~{at} messages ({} requests): answer {answer:.2} ms, capture after it {capture:.2} ms",
            near.len()
        )?;
        flat.push(capture);
    }
    let growth = flat[2] / flat[0];
    writeln!(
        out,
        "  capture at ~400 messages / at ~10: {growth:.2}x (flat: about 1)"
    )?;
    report.figure(
        "replay_capture_growth",
        "capture cost at 400 messages / at 10",
        growth,
        Unit::Ratio,
        Some(Target::AtMost(2.0)),
    );
    let unmanaged_share = cache_share(&samples);

    // Pass 2: managed context.
    let db = dir.join("replay-managed.db");
    let s = sessions.clone();
    let (managed, changed) = on_worker(rt, async move {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).await?);
        replay_managed(&store, &s).await
    })?;
    let rewritten = managed.iter().filter(|s| s.rewritten).count();
    let fallbacks = managed.iter().filter(|s| s.fallback).count();
    let refused = managed.iter().filter(|s| s.refused).count();
    let peak = managed.iter().map(|s| s.upstream_input).max().unwrap_or(0);
    let peak_baton = managed.iter().map(|s| s.baton_after).max().unwrap_or(0);
    let managed_share = cache_share(&managed);
    writeln!(
        out,
        "  managed (structured, {BUDGET} budget): {rewritten} of {} requests rewritten, {fallbacks} fallbacks, {refused} refused by the upstream",
        managed.len()
    )?;
    writeln!(
        out,
        "  peak upstream input {} tokens (its usage; baton's own estimate of what it sent: {}); unmanaged peak {}",
        thousands(peak as f64),
        thousands(peak_baton as f64),
        thousands(samples.iter().map(|s| s.upstream_input).max().unwrap_or(0) as f64)
    )?;
    writeln!(
        out,
        "  prompt bytes through the last breakpoint changed by the next request: {} between compactions, {} at the {} compactions",
        changed.between, changed.at_compaction, changed.compactions
    )?;
    writeln!(
        out,
        "  input read from the prompt cache: managed {:.1}%, unmanaged {:.1}% (Claude Code sessions)",
        managed_share * 100.0,
        unmanaged_share * 100.0
    )?;
    report.figure(
        "replay_managed_broken",
        "managed replay: requests refused by the upstream or fallen back",
        (refused + fallbacks) as f64,
        Unit::Count("requests"),
        Some(Target::AtMost(0.0)),
    );
    report.figure(
        "replay_managed_peak",
        "managed replay: peak upstream input",
        peak as f64,
        Unit::Count("tokens"),
        Some(Target::AtMost(BUDGET as f64)),
    );
    report.figure(
        "replay_managed_changed",
        "managed replay: prefix bytes changed between compactions",
        changed.between as f64,
        Unit::Count("bytes"),
        Some(Target::AtMost(0.0)),
    );
    report.figure(
        "replay_cache_share_gap",
        "managed replay: cache-read share below the unmanaged one",
        ((unmanaged_share - managed_share) * 100.0).max(0.0),
        Unit::Count("points"),
        Some(Target::AtMost(5.0)),
    );
    out.flush()?;
    Ok(())
}

/// Every Claude Code and Codex transcript of the corpus that has a model call to replay.
fn sessions(corpus: &Path) -> anyhow::Result<Vec<Session>> {
    let mut sessions = Vec::new();
    for (folder, wire, responses) in [
        ("claude-code-jsonl", Format::Anthropic, false),
        ("codex-rollout-jsonl", Format::OpenAi, true),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(corpus.join(folder))
            .with_context(|| format!("reading {folder}"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        for path in files {
            let bytes = std::fs::read(&path)?;
            let Some(format) = baton_import::detect(&bytes) else {
                continue;
            };
            let transcripts = baton_import::parse(format, &bytes)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            for t in transcripts {
                let messages: Vec<Message> = t.messages.iter().map(|m| m.message.clone()).collect();
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                let mut session = Session {
                    name: format!("{name}#{}", t.index),
                    path: path.clone(),
                    index: t.index,
                    wire,
                    responses,
                    model: t
                        .models
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "claude-sonnet-4-5".into()),
                    messages,
                    calls: Vec::new(),
                };
                // The calls whose request, as sent, the real API would take.
                session.calls = (1..session.messages.len())
                    .filter(|&k| session.messages[k].role == Role::Assistant)
                    .filter(|&k| {
                        let sent = parse_sent(&session, &request(&session, k));
                        sent.is_ok_and(|r| {
                            r.messages.iter().any(|m| m.role == Role::User)
                                && wire.check_messages(&r.messages).is_ok()
                        })
                    })
                    .collect();
                if !session.calls.is_empty() {
                    sessions.push(session);
                }
            }
        }
    }
    Ok(sessions)
}

fn run_id(i: usize) -> RunId {
    RunId::new(format!("replay-{i}")).unwrap_or_else(|_| unreachable!("a valid id"))
}

fn tenant() -> TenantId {
    TenantId::new("replay").unwrap_or_else(|_| unreachable!("a valid tenant"))
}

/// A request of `session` as the gateway reads it.
fn parse_sent(session: &Session, request: &Value) -> Result<RequestBody, baton_wire::Error> {
    match session.responses {
        true => baton_wire::responses::parse_request(request),
        false => session.wire.parse_request(request),
    }
}

/// The request of call `k` of `session`, in its wire format: Codex's on the Responses API, its
/// reasoning as reasoning items, as Codex sends it.
fn request(session: &Session, k: usize) -> Value {
    if session.responses {
        let input = baton_wire::responses::render_input(&session.messages[..k]);
        return json!({"model": session.model, "input": input, "max_output_tokens": 4096,
                      "store": false});
    }
    let body = RequestBody {
        model: session.model.clone(),
        system: None,
        messages: session.messages[..k].to_vec(),
        tools: Vec::new(),
        max_tokens: Some(4096),
        temperature: None,
        stream: false,
    };
    let mut value = session
        .wire
        .render_request(&body, MaxTokensField::MaxTokens);
    if session.wire == Format::Anthropic {
        value["system"] = system_prompt();
        // Claude Code marks the end of the conversation as a cache breakpoint.
        if let Some(last) = value["messages"]
            .as_array_mut()
            .and_then(|m| m.last_mut())
            .and_then(|m| m["content"].as_array_mut())
            .and_then(|c| c.last_mut())
            && !matches!(
                last["type"].as_str(),
                Some("thinking" | "redacted_thinking")
            )
        {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    value
}

/// A scripted upstream answering `session`'s calls in order with its own assistant messages.
fn upstream(session: &Session) -> anyhow::Result<ScriptedServer> {
    let turns: Vec<Value> = session
        .calls
        .iter()
        .map(|&k| {
            let message = match session.wire {
                _ if session.responses => Value::Array(baton_wire::responses::render_input(
                    std::slice::from_ref(&session.messages[k]),
                )),
                Format::Anthropic => baton_wire::anthropic::render_message(&session.messages[k]),
                Format::OpenAi => baton_wire::openai::render_message(&session.messages[k])
                    .into_iter()
                    .next()
                    .unwrap_or(Value::Null),
            };
            json!({"reply": {"message": message}})
        })
        .collect();
    let script = json!({"prompt_cache": true, "turns": turns});
    Ok(ScriptedServer::start(Script::from_json(
        &script.to_string(),
    )?)?)
}

/// A gateway over `store` in front of `up`, its base URL, and the sender that stops it.
async fn gateway(
    store: &Arc<dyn Store>,
    up: &ScriptedServer,
) -> anyhow::Result<(String, tokio::sync::oneshot::Sender<()>)> {
    let config = Config {
        upstream_openai: Some(up.openai_url()),
        upstream_anthropic: Some(up.anthropic_url()),
        gateway_tenant: Some(tenant()),
        ..Config::default()
    };
    let state = AppState::new(store.clone(), config)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(baton_server::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Ok((url, stop))
}

/// Replays every session; `managed` asks for managed context.
async fn replay(
    store: &Arc<dyn Store>,
    sessions: &[Session],
    managed: bool,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let (got, _) = replay_one(store, i, session, managed).await?;
        samples.extend(got);
    }
    Ok(samples)
}

/// Prefix bytes changed from one upstream request to the next.
#[derive(Default)]
struct Changed {
    between: u64,
    at_compaction: u64,
    compactions: u64,
}

async fn replay_managed(
    store: &Arc<dyn Store>,
    sessions: &[Session],
) -> anyhow::Result<(Vec<Sample>, Changed)> {
    let mut samples = Vec::new();
    let mut changed = Changed::default();
    for (i, session) in sessions.iter().enumerate() {
        let (got, bodies) = replay_one(store, i, session, true).await?;
        samples.extend(got);
        if session.wire != Format::Anthropic {
            continue;
        }
        for pair in bodies.windows(2) {
            let ((before, summarized_before), (after, summarized_after)) = (&pair[0], &pair[1]);
            let bytes = changed_prefix(before, after);
            if summarized_before == summarized_after {
                changed.between += bytes;
            } else {
                changed.at_compaction += bytes;
                changed.compactions += 1;
            }
        }
    }
    Ok((samples, changed))
}

/// The bytes of `before`'s prompt, through its last breakpoint, that `after` does not repeat
/// as its own prefix (`cache_control` aside).
fn changed_prefix(before: &Value, after: &Value) -> u64 {
    let (before, after) = (prompt_blocks(before), prompt_blocks(after));
    let Some(last) = before.iter().rposition(|b| b.marked) else {
        return 0;
    };
    let same = before[..=last]
        .iter()
        .zip(&after)
        .take_while(|(a, b)| a.role == b.role && a.text == b.text)
        .count();
    before[same..=last]
        .iter()
        .map(|b| b.text.len() as u64)
        .sum()
}

/// Replays one session: its samples, and each upstream request's body with the
/// `x-baton-context-summarized` its answer carried.
async fn replay_one(
    store: &Arc<dyn Store>,
    i: usize,
    session: &Session,
    managed: bool,
) -> anyhow::Result<(Vec<Sample>, Vec<(Value, String)>)> {
    let up = upstream(session)?;
    let (base, stop) = gateway(store, &up).await?;
    let client = reqwest::Client::new();
    let run = run_id(i);
    let path = match session.wire {
        _ if session.responses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
        Format::OpenAi => "/v1/chat/completions",
    };
    let mut samples = Vec::new();
    let mut summaries = Vec::new();
    let mut captured = (0u64, 0f64);
    for &k in &session.calls {
        let body = request(session, k);
        let mut call = client
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("x-api-key", "sk-replay")
            .header("anthropic-version", "2023-06-01")
            .header("x-baton-run", run.as_str())
            .body(body.to_string());
        if managed {
            call = call
                .header("x-baton-context", "structured")
                .header("x-baton-context-budget", BUDGET.to_string());
        }
        let started = Instant::now();
        let response = call.send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.bytes().await?;
        let answered = Instant::now();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let mut sample = Sample {
            messages: k,
            answer_ms: (answered - started).as_secs_f64() * 1e3,
            refused: !status.is_success(),
            rewritten: header("x-baton-context-action") == "rewritten",
            fallback: header("x-baton-context-action") == "fallback",
            baton_after: header("x-baton-context-tokens-after").parse().unwrap_or(0),
            anthropic: session.wire == Format::Anthropic,
            ..Sample::default()
        };
        let reply = match session.responses {
            true => baton_wire::responses::parse_response(&text),
            false => session.wire.parse_response(&text),
        };
        if let Ok(reply) = reply {
            let u = reply.usage;
            sample.upstream_input = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
            sample.cache_read = u.cache_read_tokens;
        }
        // What baton's policy made of the prefix: a change is a new step by design.
        summaries.push(format!(
            "{}/{}",
            header("x-baton-context-summarized"),
            header("x-baton-context-cleared")
        ));

        // Capture runs after the answer: wait until it has, and take its time from the
        // server's own histogram (`baton_gateway_capture_duration_seconds`).
        let deadline = answered + Duration::from_secs(30);
        loop {
            let (count, sum) = capture_totals(&client, &base).await?;
            if count > captured.0 {
                sample.capture_ms = (sum - captured.1) * 1e3;
                captured = (count, sum);
                break;
            }
            if Instant::now() > deadline {
                anyhow::bail!("{}: call {k} was never captured", session.name);
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let want = Seq(k as u64 + 1);
        let held = store.run(&tenant(), &run).await?.last_seq;
        anyhow::ensure!(
            held >= want,
            "{}: the run holds {} of {} messages",
            session.name,
            held.0,
            want.0
        );
        samples.push(sample);
    }
    let _ = stop.send(());
    let bodies = up
        .requests()
        .into_iter()
        .map(|r| r.body)
        .zip(summaries)
        .collect();
    up.shutdown().await;
    Ok((samples, bodies))
}

/// The replay's cost as the call log has it and as the usage reports price the captured runs'
/// records (the same price table), and how many responses the usage records hold. The call
/// log is written in the background: waited for until it holds every request.
async fn costs(store: &Arc<dyn Store>, requests: usize) -> anyhow::Result<(f64, f64, usize)> {
    let prices = PriceTable::defaults();
    let deadline = Instant::now() + Duration::from_secs(10);
    let calls = loop {
        let calls = store
            .calls(&tenant(), Timestamp(0), Timestamp::now())
            .await?;
        if calls.len() >= requests || Instant::now() > deadline {
            break calls;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    anyhow::ensure!(
        calls.len() == requests,
        "{} calls logged of {requests}",
        calls.len()
    );
    let logged = calls.iter().filter_map(|c| c.cost_usd).sum();
    let usage = store.usage(&tenant(), &UsageQuery::default()).await?;
    let reported = usage
        .iter()
        .filter_map(|u| {
            let price = prices.get(u.record.model.as_deref()?)?;
            Some(price.usage_cost(&u.record.usage))
        })
        .sum();
    Ok((logged, reported, usage.len()))
}

/// The gateway's captures so far and the seconds they took, from its `/metrics`.
async fn capture_totals(client: &reqwest::Client, base: &str) -> anyhow::Result<(u64, f64)> {
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let count = value("baton_gateway_capture_duration_seconds_count").unwrap_or(0.0);
    let sum = value("baton_gateway_capture_duration_seconds_sum").unwrap_or(0.0);
    Ok((count as u64, sum))
}

/// How many sessions' runs equal a direct import of their file (through the replayed
/// messages), and a line for each that does not.
async fn compare(
    store: &Arc<dyn Store>,
    sessions: &[Session],
) -> anyhow::Result<(usize, Vec<String>)> {
    let (mut equal, mut unequal) = (0, Vec::new());
    for (i, session) in sessions.iter().enumerate() {
        // A tenant each: two files of one session (a resumed one) would otherwise share a run.
        let direct = TenantId::new(format!("direct-{i}"))?;
        let bytes = std::fs::read(&session.path)?;
        let format = baton_import::detect(&bytes).ok_or_else(|| anyhow!("no format"))?;
        let mut transcript = baton_import::parse(format, &bytes)
            .map_err(|e| anyhow!("{e}"))?
            .into_iter()
            .find(|t| t.index == session.index)
            .ok_or_else(|| anyhow!("{}: transcript gone", session.name))?;
        let id = RunId::new(format!("direct-{i}"))?;
        let path = session.path.display().to_string();
        let (import, _) = transcript.to_import(&path, Some(id.clone()), &ByteEstimate);
        store.import(&direct, vec![import], Reimport::No).await?;
        let n = session.replayed();
        let want = store
            .read_range(&direct, &id, Seq(1), Some(Seq(n as u64)))
            .await?;
        let have = store
            .read_range(&tenant(), &run_id(i), Seq(1), None)
            .await?;
        let want: Vec<&Message> = want.iter().map(|e| &e.message).collect();
        let have: Vec<&Message> = have.iter().map(|e| &e.message).collect();
        if want == have {
            equal += 1;
            continue;
        }
        let first = want.iter().zip(&have).position(|(a, b)| a != b);
        // What a wire format cannot carry (Chat Completions has no reasoning items).
        let reasoning = if without_reasoning(&want) == without_reasoning(&have) {
            "; equal but for reasoning blocks"
        } else {
            ""
        };

        unequal.push(match first {
            Some(at) => format!(
                "{}: message {} of {} differs{reasoning}",
                session.name,
                at + 1,
                want.len(),
            ),
            None => format!(
                "{}: {} messages stored, {} in the direct import{reasoning}",
                session.name,
                have.len(),
                want.len()
            ),
        });
    }
    Ok((equal, unequal))
}

/// The messages without their thinking blocks (plain or redacted), those left empty dropped.
fn without_reasoning(messages: &[&Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|m| Message {
            role: m.role,
            content: m
                .content
                .iter()
                .filter(|b| {
                    !matches!(
                        b,
                        ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
                    )
                })
                .cloned()
                .collect(),
        })
        .filter(|m| !m.content.is_empty())
        .collect()
}

/// The share of the Anthropic upstream's input read from the prompt cache.
fn cache_share(samples: &[Sample]) -> f64 {
    let anthropic = || samples.iter().filter(|s| s.anthropic);
    let input: u64 = anthropic().map(|s| s.upstream_input).sum();
    let read: u64 = anthropic().map(|s| s.cache_read).sum();
    read as f64 / input.max(1) as f64
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
