//! The tools: each one's arguments (their JSON Schema comes from the type), and what it does,
//! as a call on the store or on the crates the CLI and the HTTP API use.
//!
//! Every tool answers a JSON object as `structuredContent` and as its text (except `recall`,
//! whose text blocks are the stored originals themselves). Failures are tool errors naming the
//! argument or the record that was wrong.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use baton_core::prices::PriceTable;
use baton_core::{ContentBlock as Block, Entry, RunId, Seq, Timestamp};
use baton_store::{SearchKind, SearchQuery};
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, TextContent, ToolAnnotations,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::listing::{self, Filter};
use crate::{Scope, tool_error};

/// A tool the server offers: its name, what it does for the model, its arguments' schema.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    /// Its name.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Whether it only reads.
    pub read_only: bool,
    schema: fn() -> Arc<JsonObject>,
}

impl Tool {
    /// Its MCP definition.
    pub fn definition(&self) -> rmcp::model::Tool {
        rmcp::model::Tool::new(self.name, self.description, (self.schema)()).with_annotations(
            ToolAnnotations::new()
                .read_only(self.read_only)
                .open_world(false),
        )
    }
}

fn schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    rmcp::handler::server::common::schema_for_type::<T>()
}

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "search",
        description: "Find where something was said, across runs or in one run: a phrase search on whole words (a word ending in * matches every word it begins) over the stored originals, summaries hiding nothing. Answers an index, never whole messages: per hit the run, seq, role, tool name and a short snippet. Fetch the originals with `recall`.",
        read_only: true,
        schema: schema::<SearchArgs>,
    },
    Tool {
        name: "recall",
        description: "The stored originals of a run: one seq, a range from..to, or a `cursor` from a previous answer. Each message comes as one text block holding baton's stored message JSON byte for byte, tagged with its run and seq (in `_meta` and in the first block's index). Answers at most `max_bytes` (a message is never cut; the first is given whole), with a cursor for the rest.",
        read_only: true,
        schema: schema::<RecallArgs>,
    },
    Tool {
        name: "runs",
        description: "The runs (agent sessions) stored for this tenant, most recently active first: id, status, messages, project, last activity, active summary.",
        read_only: true,
        schema: schema::<RunsArgs>,
    },
    Tool {
        name: "run",
        description: "One run in detail: counts (messages, tool calls, bytes, tokens), usage per model, where it was imported from, the source agent's own compactions (after which seq), and baton's summary versions with the seqs each covers.",
        read_only: true,
        schema: schema::<RunArgs>,
    },
    Tool {
        name: "working_state",
        description: "The run's current working state: the typed claims of its active summary (objective, instructions, tasks, files, problems, …), each with the seq of the message it rests on.",
        read_only: true,
        schema: schema::<RunArgs>,
    },
    Tool {
        name: "context",
        description: "What the next model call of the run would get: rules, goal, the active summary, pinned messages and the tail after the summary, with token counts per part (the messages themselves by seq: recall them for their text).",
        read_only: true,
        schema: schema::<RunArgs>,
    },
    Tool {
        name: "pin",
        description: "Pin a message of the run: every compaction strategy keeps it, and a summary covering it carries it whole.",
        read_only: false,
        schema: schema::<PinArgs>,
    },
    Tool {
        name: "unpin",
        description: "Unpin a message of the run.",
        read_only: false,
        schema: schema::<PinArgs>,
    },
    Tool {
        name: "compact",
        description: "Compact the run's context with a strategy (none, sliding, budget, clear-tool-results, summarize, structured). A dry run by default: says what would be dropped and what the new summary would say, installing nothing. History is never touched; a real run installs a new summary version. Makes no model call: a strategy that would need one is refused.",
        read_only: false,
        schema: schema::<CompactArgs>,
    },
    Tool {
        name: "report",
        description: "A report: `usage` (tokens and cost per day, week, month, session or 5-hour block, ccusage's fields), `growth` (a run's input tokens per model call, whole transcript against the compacted context) or `duplicates` (repeated identical model calls or tool calls).",
        read_only: true,
        schema: schema::<ReportArgs>,
    },
];

/// A tool's failure, for the caller to read.
struct Failure(String);

impl From<baton_store::Error> for Failure {
    fn from(e: baton_store::Error) -> Self {
        Failure(e.to_string())
    }
}

type Answer = Result<CallToolResult, Failure>;

fn bad(message: impl Into<String>) -> Failure {
    Failure(message.into())
}

/// Arguments checked against their type: a tool error naming the tool and what was wrong.
/// The error names the argument (`seq: invalid type: string "one", expected u64`).
fn parse<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, Failure> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let at = e.path().to_string();
        match at.as_str() {
            "." => bad(format!("{tool}: bad arguments: {}", e.inner())),
            _ => bad(format!("{tool}: bad arguments: {at}: {}", e.inner())),
        }
    })
}

/// Calls `tool`; every failure becomes a tool error.
pub(crate) async fn call(baton: &Scope<'_>, tool: Tool, arguments: Value) -> CallToolResult {
    let answer = match tool.name {
        "search" => search(baton, parse(tool.name, arguments)).await,
        "recall" => recall(baton, parse(tool.name, arguments)).await,
        "runs" => runs(baton, parse(tool.name, arguments)).await,
        "run" => run(baton, parse(tool.name, arguments)).await,
        "working_state" => working_state(baton, parse(tool.name, arguments)).await,
        "context" => context(baton, parse(tool.name, arguments)).await,
        "pin" => pin(baton, parse(tool.name, arguments), true).await,
        "unpin" => pin(baton, parse(tool.name, arguments), false).await,
        "compact" => compact(baton, parse(tool.name, arguments)).await,
        "report" => report(baton, parse(tool.name, arguments)).await,
        other => Err(bad(format!("no tool {other:?}"))),
    };
    answer.unwrap_or_else(|Failure(message)| tool_error(message))
}

fn structured(value: Value) -> Answer {
    Ok(CallToolResult::structured(value))
}

fn run_id(what: &str, text: &str) -> Result<RunId, Failure> {
    RunId::new(text).map_err(|e| bad(format!("{what} {text:?}: {e}")))
}

fn since(text: Option<&str>) -> Result<Option<Timestamp>, Failure> {
    text.map(|t| {
        listing::parse_time(t).ok_or_else(|| {
            bad(format!(
                "since {t:?}: expected a day (2026-02-01) or an RFC 3339 time (2026-02-01T10:00:00Z)"
            ))
        })
    })
    .transpose()
}

fn limit(given: Option<u32>, default: u32, max: u32) -> Result<usize, Failure> {
    match given.unwrap_or(default) {
        n if n == 0 || n > max => Err(bad(format!("limit {n}: expected 1 to {max}"))),
        n => Ok(n as usize),
    }
}

// ---- search -----------------------------------------------------------------------------

/// Which blocks a search looks in.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Kind {
    /// Text and thinking.
    Text,
    /// Tool calls: the tool's name and its input.
    ToolUse,
    /// Tool results.
    ToolResult,
}

impl From<Kind> for SearchKind {
    fn from(kind: Kind) -> Self {
        match kind {
            Kind::Text => SearchKind::Text,
            Kind::ToolUse => SearchKind::ToolUse,
            Kind::ToolResult => SearchKind::ToolResult,
        }
    }
}

/// Arguments of `search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// The phrase: whole words, in order, adjacent; `mai*` matches every word starting with `mai`.
    query: String,
    /// Only this run.
    run: Option<String>,
    /// Only runs of this project (ignored with `run`).
    project: Option<String>,
    /// Only blocks of this kind.
    kind: Option<Kind>,
    /// Only runs active at or after this day (`2026-02-01`) or time (RFC 3339); ignored with `run`.
    since: Option<String>,
    /// The most hits (1 to 100, default 20).
    limit: Option<u32>,
}

/// The most characters of a hit's snippet before it is measured in tokens.
const SNIPPET_CHARS: usize = 240;
/// The most tokens of a hit's snippet.
pub const SNIPPET_TOKENS: u32 = 100;

async fn search(baton: &Scope<'_>, args: Result<SearchArgs, Failure>) -> Answer {
    let args = args?;
    let limit = limit(args.limit, 20, 100)?;
    let kind = args.kind.map(SearchKind::from);
    let runs = match &args.run {
        Some(run) => vec![run_id("run", run)?],
        None => {
            let filter = Filter {
                project: args.project.clone(),
                since: since(args.since.as_deref())?,
                non_empty: true,
            };
            listing::list(baton.store(), baton.memo, &baton.tenant, &filter)
                .await?
                .into_iter()
                .map(|l| l.run.id)
                .collect()
        }
    };
    // Over many runs, one read first finds the runs the phrase matches at all, so a rare or
    // absent phrase costs one query, not one per run; a common one (more than ACROSS_CAP
    // matching rows) is searched run by run, where the first runs fill the limit.
    let mut prefix_form = None;
    let runs = if args.run.is_some() {
        runs
    } else {
        let across = SearchQuery {
            pattern: args.query.clone(),
            kind,
            limit: 1,
        };
        match baton
            .store()
            .search_across(&baton.tenant, &across, ACROSS_CAP)
            .await?
        {
            None => runs,
            Some(found) => {
                if found.is_empty() {
                    prefix_form = prefix_hint(baton, &args.query, kind).await?;
                }
                runs.into_iter().filter(|r| found.contains_key(r)).collect()
            }
        }
    };
    let counter = baton_tokens::counter(baton_tokens::TokenizerChoice::O200k, None);
    let mut hits = Vec::new();
    let mut more = false;
    for run in &runs {
        if hits.len() == limit {
            more = true;
            break;
        }
        let query = SearchQuery {
            pattern: args.query.clone(),
            kind,
            limit: limit - hits.len() + 1,
        };
        let found = baton.store().search(&baton.tenant, run, &query).await?;
        if prefix_form.is_none() {
            prefix_form = found.prefix_form;
        }
        let mut entries = found.entries;
        if entries.len() > limit - hits.len() {
            entries.truncate(limit - hits.len());
            more = true;
        }
        let names = tool_names(baton, run, &entries).await?;
        for entry in &entries {
            let mut snippet =
                baton_store::search::snippet(&entry.message, kind, &args.query, SNIPPET_CHARS);
            let mut chars = SNIPPET_CHARS;
            while counter.count_text(&snippet) > SNIPPET_TOKENS && chars > 8 {
                chars = chars * 3 / 4;
                snippet = baton_store::search::snippet(&entry.message, kind, &args.query, chars);
            }
            let tools = tools_of(&entry.message.content, &names);
            hits.push(json!({
                "run": run.as_str(),
                "seq": entry.seq.0,
                "role": entry.message.role.as_str(),
                "tool": tools.first(),
                "tools": tools,
                "snippet": snippet,
                "tokens": entry.tokens,
            }));
        }
    }
    let mut answer = json!({ "hits": hits, "more": more });
    if hits_empty(&answer)
        && let Some(form) = prefix_form
    {
        answer["hint"] = json!(format!(
            "no whole-word match for {:?}; words starting with it match: search {form:?}",
            args.query.trim()
        ));
    }
    structured(answer)
}

/// Matching index rows past which `search` goes run by run (see `search`).
const ACROSS_CAP: u64 = 2_000;

/// The prefix form of `query` (`word*` for each whole word) when it matches where the query
/// did not: the hint a search with no hit answers.
async fn prefix_hint(
    baton: &Scope<'_>,
    query: &str,
    kind: Option<SearchKind>,
) -> Result<Option<String>, Failure> {
    let words: Vec<&str> = query.split_whitespace().collect();
    if words.iter().any(|w| w.ends_with('*')) {
        return Ok(None);
    }
    let form = words
        .iter()
        .map(|w| format!("{w}*"))
        .collect::<Vec<_>>()
        .join(" ");
    let prefixed = SearchQuery {
        pattern: form.clone(),
        kind,
        limit: 1,
    };
    let found = baton
        .store()
        .search_across(&baton.tenant, &prefixed, 1)
        .await?;
    Ok((found.is_none_or(|f| !f.is_empty())).then_some(form))
}

fn hits_empty(answer: &Value) -> bool {
    answer["hits"].as_array().is_none_or(Vec::is_empty)
}

/// The tool names a message's blocks name: its calls' names, and for its results the name of
/// the call each answers (`names`, by call id).
fn tools_of(content: &[Block], names: &HashMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for block in content {
        let name = match block {
            Block::ToolUse { name, .. } => Some(name.clone()),
            Block::ToolResult { tool_use_id, .. } => names.get(tool_use_id).cloned(),
            _ => None,
        };
        if let Some(name) = name
            && !out.contains(&name)
        {
            out.push(name);
        }
    }
    out
}

/// The names of the calls the tool results among `entries` answer, by call id: found through
/// the run's protocol rows (which message made each call), then those messages.
async fn tool_names(
    baton: &Scope<'_>,
    run: &RunId,
    entries: &[Entry],
) -> Result<HashMap<String, String>, Failure> {
    let wanted: Vec<&str> = entries
        .iter()
        .flat_map(|e| e.message.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    let mut names = HashMap::new();
    if wanted.is_empty() {
        return Ok(names);
    }
    let window = baton
        .store()
        .protocol_window(&baton.tenant, run, Seq::ZERO)
        .await?;
    let mut seqs: Vec<Seq> = window
        .iter()
        .filter(|e| e.uses.iter().any(|u| wanted.contains(&u.as_str())))
        .map(|e| e.seq)
        .collect();
    seqs.dedup();
    for seq in seqs {
        for entry in baton
            .store()
            .read_range(&baton.tenant, run, seq, Some(seq))
            .await?
        {
            for block in &entry.message.content {
                if let Block::ToolUse { id, name, .. } = block {
                    names.insert(id.clone(), name.clone());
                }
            }
        }
    }
    Ok(names)
}

// ---- recall -----------------------------------------------------------------------------

/// Arguments of `recall`: one of `seq`, `from` (with `to`) or `cursor`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecallArgs {
    /// The run.
    run: String,
    /// One message.
    seq: Option<u64>,
    /// The first message of a range.
    from: Option<u64>,
    /// The last message of a range (default: the run's last).
    to: Option<u64>,
    /// Where a previous answer stopped (its `next_cursor`).
    cursor: Option<String>,
    /// The most bytes of originals to answer (default 65536, at most 4194304); a message is
    /// never cut, and the first is answered whole whatever its size.
    max_bytes: Option<u64>,
}

/// The default of `recall`'s `max_bytes`.
pub const RECALL_BYTES: u64 = 64 * 1024;
/// The most `recall`'s `max_bytes` may be.
pub const RECALL_MAX_BYTES: u64 = 4 * 1024 * 1024;
/// How many messages `recall` reads from the store at a time.
const RECALL_BATCH: u64 = 64;

/// `from..to` or `from..` (a cursor is a range, so a client may also write one).
fn parse_cursor(text: &str) -> Option<(u64, Option<u64>)> {
    let (from, to) = text.split_once("..")?;
    let from = from.trim().parse().ok()?;
    let to = match to.trim() {
        "" => None,
        to => Some(to.parse().ok()?),
    };
    Some((from, to))
}

async fn recall(baton: &Scope<'_>, args: Result<RecallArgs, Failure>) -> Answer {
    let args = args?;
    let run = run_id("run", &args.run)?;
    let (from, to) = match (args.seq, args.from, args.cursor.as_deref()) {
        (Some(seq), None, None) if args.to.is_none() => (seq, Some(seq)),
        (None, Some(from), None) => (from, args.to),
        (None, None, Some(cursor)) if args.to.is_none() => parse_cursor(cursor).ok_or_else(|| {
            bad(format!(
                "cursor {cursor:?}: expected a cursor from a previous answer (FROM..TO or FROM..)"
            ))
        })?,
        (None, None, None) => {
            return Err(bad(
                "recall: give `seq`, or `from` (and `to`), or a `cursor`",
            ));
        }
        _ => {
            return Err(bad(
                "recall: give one of `seq`, `from` (with `to`) or `cursor`",
            ));
        }
    };
    let max_bytes = args.max_bytes.unwrap_or(RECALL_BYTES);
    if max_bytes == 0 || max_bytes > RECALL_MAX_BYTES {
        return Err(bad(format!(
            "max_bytes {max_bytes}: expected 1 to {RECALL_MAX_BYTES}"
        )));
    }
    let last = baton.store().run(&baton.tenant, &run).await?.last_seq.0;
    if from == 0 || from > last || to.is_some_and(|to| to < from) {
        let asked = match to {
            Some(to) if to == from => format!("seq {from}"),
            Some(to) => format!("{from}..{to}"),
            None => format!("{from}.."),
        };
        return Err(bad(format!(
            "recall {asked}: run {run} has seqs 1..{last}{}",
            if to.is_some_and(|to| to < from) {
                " (and the range ends before it starts)"
            } else {
                ""
            }
        )));
    }
    let end = to.map_or(last, |to| to.min(last));
    let mut blocks = Vec::new();
    let mut index = Vec::new();
    let mut bytes = 0u64;
    let mut next = from;
    'read: while next <= end {
        let batch_end = end.min(next + RECALL_BATCH - 1);
        let entries = baton
            .store()
            .read_range(&baton.tenant, &run, Seq(next), Some(Seq(batch_end)))
            .await?;
        if entries.is_empty() {
            break;
        }
        for entry in entries {
            let original = serde_json::to_string(&entry.message)
                .map_err(|e| bad(format!("recall: seq {}: {e}", entry.seq)))?;
            let size = original.len() as u64;
            if !blocks.is_empty() && bytes + size > max_bytes {
                break 'read;
            }
            bytes += size;
            next = entry.seq.0 + 1;
            let mut meta = JsonObject::new();
            meta.insert("baton/run".into(), json!(run.as_str()));
            meta.insert("baton/seq".into(), json!(entry.seq.0));
            meta.insert("baton/role".into(), json!(entry.message.role.as_str()));
            let meta = MetaObject(meta);
            index.push(json!({
                "seq": entry.seq.0,
                "role": entry.message.role.as_str(),
                "bytes": size,
                "tokens": entry.tokens,
                "created_at": entry.created_at.to_string(),
            }));
            blocks.push(ContentBlock::Text(
                TextContent::new(original).with_meta(meta),
            ));
        }
    }
    let next_cursor = (next <= end).then(|| match to {
        Some(to) => format!("{next}..{to}"),
        None => format!("{next}.."),
    });
    let answer = json!({
        "run": run.as_str(),
        "messages": index,
        "bytes": bytes,
        "next_cursor": next_cursor,
    });
    // The first block is the index, so a model reading only the text knows which run and seq
    // each of the following blocks is.
    let mut content = vec![ContentBlock::text(answer.to_string())];
    content.extend(blocks);
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(answer);
    Ok(result)
}

// ---- runs, run --------------------------------------------------------------------------

/// Arguments of `runs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunsArgs {
    /// Only runs of this project.
    project: Option<String>,
    /// Only runs active at or after this day (`2026-02-01`) or time (RFC 3339).
    since: Option<String>,
    /// The most runs (1 to 500, default 50).
    limit: Option<u32>,
}

async fn runs(baton: &Scope<'_>, args: Result<RunsArgs, Failure>) -> Answer {
    let args = args?;
    let limit = limit(args.limit, 50, 500)?;
    let filter = Filter {
        project: args.project,
        since: since(args.since.as_deref())?,
        non_empty: false,
    };
    let listed = listing::list(baton.store(), baton.memo, &baton.tenant, &filter).await?;
    let more = listed.len() > limit;
    let runs: Vec<Value> = listed
        .iter()
        .take(limit)
        .map(|l| {
            json!({
                "id": l.run.id.as_str(),
                "status": l.run.status.as_str(),
                "messages": l.run.last_seq.0,
                "project": l.project,
                "goal": l.run.goal,
                "active_summary": l.run.active_summary_id.map(|s| s.0),
                "created_at": l.run.created_at.to_string(),
                "last_active": l.last_active.to_string(),
            })
        })
        .collect();
    structured(json!({ "runs": runs, "more": more }))
}

/// Arguments naming one run.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The run's id.
    run: String,
}

async fn run(baton: &Scope<'_>, args: Result<RunArgs, Failure>) -> Answer {
    let run = run_id("run", &args?.run)?;
    let report = baton.store().run_report(&baton.tenant, &run).await?;
    let summaries = baton.store().summaries(&baton.tenant, &run).await?;
    let coverage: HashMap<u64, u64> = summaries.iter().map(|s| (s.id.0, s.coverage.0)).collect();
    let versions: Vec<Value> = summaries
        .iter()
        .map(|s| {
            let from = s
                .previous_id
                .and_then(|p| coverage.get(&p.0))
                .map_or(1, |c| c + 1);
            json!({
                "id": s.id.0,
                "active": report.run.active_summary_id == Some(s.id),
                "covers": { "from": from, "through": s.coverage.0 },
                "previous_id": s.previous_id.map(|p| p.0),
                "claims": s.claims.len(),
                "strategy": s.meta.as_ref().and_then(|m| m.get("strategy")).cloned(),
                "created_at": s.created_at.to_string(),
            })
        })
        .collect();
    let pins = baton.store().pins(&baton.tenant, &run).await?;
    let mut answer = serde_json::to_value(baton_view::RunReportView::from(&report))
        .map_err(|e| bad(e.to_string()))?;
    answer["summaries"] = json!(versions);
    answer["pins"] = json!(pins.iter().map(|s| s.0).collect::<Vec<_>>());
    structured(answer)
}

// ---- working_state, context -------------------------------------------------------------

async fn working_state(baton: &Scope<'_>, args: Result<RunArgs, Failure>) -> Answer {
    let run = run_id("run", &args?.run)?;
    let record = baton.store().run(&baton.tenant, &run).await?;
    let Some(active) = record.active_summary_id else {
        return structured(json!({
            "run": run.as_str(),
            "summary_id": null,
            "coverage": null,
            "state": {},
            "note": "the run has no summary yet: its whole history is its context",
        }));
    };
    let summary = baton.store().summary(&baton.tenant, active).await?;
    let mut state: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for claim in &summary.claims {
        let view = baton_view::ClaimView::from(claim);
        let mut item = serde_json::to_value(&view).map_err(|e| bad(e.to_string()))?;
        let kind = item
            .as_object_mut()
            .and_then(|o| o.remove("kind"))
            .and_then(|k| k.as_str().map(str::to_owned))
            .unwrap_or_else(|| "note".to_owned());
        state.entry(kind).or_default().push(item);
    }
    let tokens = summary.state_tokens().unwrap_or_else(|| {
        baton_compact::executor::estimate_state(summary.coverage, &summary.claims)
    });
    structured(json!({
        "run": run.as_str(),
        "summary_id": summary.id.0,
        "coverage": summary.coverage.0,
        "tokens": tokens,
        "state": state,
    }))
}

async fn context(baton: &Scope<'_>, args: Result<RunArgs, Failure>) -> Answer {
    let run = run_id("run", &args?.run)?;
    let ctx = baton.store().context(&baton.tenant, &run).await?;
    let tail_tokens: u64 = ctx.messages.iter().map(|e| u64::from(e.tokens)).sum();
    let pinned_tokens: u64 = ctx.pinned.iter().map(|e| u64::from(e.tokens)).sum();
    let tail = match (ctx.messages.first(), ctx.messages.last()) {
        (Some(first), Some(last)) => json!({
            "from": first.seq.0,
            "through": last.seq.0,
            "messages": ctx.messages.len(),
            "tokens": tail_tokens,
        }),
        _ => json!({ "messages": 0, "tokens": 0 }),
    };
    let summary = ctx.summary.as_ref().map(|s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| {
                Some(json!({
                    "id": v.get("id")?,
                    "coverage": v.get("coverage")?,
                }))
            })
            .unwrap_or(Value::Null)
    });
    structured(json!({
        "run": run.as_str(),
        "tokens": ctx.tokens,
        "tokens_note": "estimated, as `baton context` counts them; per-message counts are the ones stored at append",
        "rules": ctx.rules.is_some(),
        "goal": ctx.goal,
        "summary": summary,
        "pinned": { "seqs": ctx.pinned.iter().map(|e| e.seq.0).collect::<Vec<_>>(), "tokens": pinned_tokens },
        "tail": tail,
        "cleared": ctx.cleared.iter().map(|s| s.0).collect::<Vec<_>>(),
        "problems": ctx.problems,
    }))
}

// ---- pin, unpin -------------------------------------------------------------------------

/// Arguments of `pin` and `unpin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PinArgs {
    /// The run.
    run: String,
    /// The message's seq.
    seq: u64,
}

async fn pin(baton: &Scope<'_>, args: Result<PinArgs, Failure>, on: bool) -> Answer {
    let args = args?;
    let run = run_id("run", &args.run)?;
    let changed = if on {
        baton
            .store()
            .pin(&baton.tenant, &run, Seq(args.seq))
            .await?
    } else {
        baton
            .store()
            .unpin(&baton.tenant, &run, Seq(args.seq))
            .await?
    };
    let pins = baton.store().pins(&baton.tenant, &run).await?;
    let view = baton_view::Pins::of(&pins, changed);
    structured(serde_json::to_value(view).map_err(|e| bad(e.to_string()))?)
}

// ---- compact ----------------------------------------------------------------------------

/// Arguments of `compact`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompactArgs {
    /// The run.
    run: String,
    /// The strategy: none, sliding, budget, clear-tool-results, summarize or structured.
    strategy: String,
    /// Plan and check but install nothing (default true).
    dry_run: Option<bool>,
    /// Skip the trigger's admission (threshold, minimum reduction); the checks on the
    /// written summary still apply.
    force: Option<bool>,
    /// `sliding`: messages to keep.
    keep_last: Option<usize>,
    /// `clear-tool-results`, `summarize`, `structured`: messages at the end that stay whole.
    keep_recent: Option<usize>,
    /// `budget`: the most tokens the context may hold.
    max_tokens: Option<u64>,
    /// `summarize`, `structured`: context tokens at which they compact.
    threshold: Option<u64>,
}

async fn compact(baton: &Scope<'_>, args: Result<CompactArgs, Failure>) -> Answer {
    use baton_compact::Offline;
    use baton_compact::config::{CompactionConfig, Overrides};
    use baton_runtime::{Compactor, Outcome};

    let args = args?;
    let run = run_id("run", &args.run)?;
    let known = baton_compact::strategies::names();
    if !known.contains(&args.strategy.as_str()) {
        return Err(bad(format!(
            "strategy {:?}: expected one of {}",
            args.strategy,
            known.join(", ")
        )));
    }
    let mut config = CompactionConfig::named(&args.strategy);
    config.apply(&Overrides {
        keep_last: args.keep_last,
        max_tokens: args.max_tokens,
        keep_recent: args.keep_recent,
        threshold: args.threshold,
        ..Overrides::default()
    });
    let invalid = |e: baton_compact::config::Error| bad(format!("compact: {e}"));
    config.validate().map_err(invalid)?;
    let strategy = config.build().map_err(invalid)?;
    let clear = config.clear().map_err(invalid)?;
    let prices = PriceTable::defaults();
    let counter = baton_tokens::counter(baton_tokens::TokenizerChoice::Auto, None);
    let dry_run = args.dry_run.unwrap_or(true);
    let compactor = Compactor {
        strategy: &*strategy,
        summarizer: &Offline,
        settings: &config.settings,
        clear,
        prices: &prices,
        counter: &*counter,
        force: args.force.unwrap_or(false),
        dry_run,
    };
    let outcome = baton_runtime::compact(baton.store(), &baton.tenant, &run, &compactor)
        .await
        .map_err(|e| match e {
            baton_runtime::Error::Store(e) => Failure::from(e),
            needs @ baton_runtime::Error::NeedsModel { .. } => bad(format!(
                "needs-model: {needs} (the MCP server makes no model calls; use structured, or `baton compact` with a provider)"
            )),
            other => bad(format!("compact: {other}")),
        })?;
    let name = strategy.name();
    let report = match outcome {
        Outcome::Kept(keep) => json!({
            "outcome": "kept", "strategy": name, "dry_run": dry_run,
            "reason": keep.to_string(),
        }),
        Outcome::Refused {
            plan,
            reason,
            tokens_before,
            tokens_after,
        } => json!({
            "outcome": "refused", "strategy": name, "dry_run": dry_run, "plan": plan,
            "reason": reason.to_string(),
            "tokens_before": tokens_before, "tokens_after": tokens_after,
        }),
        Outcome::Planned { compaction, claims } => {
            let active = baton
                .store()
                .run(&baton.tenant, &run)
                .await?
                .active_summary_id;
            let from = match active {
                Some(id) => baton.store().summary(&baton.tenant, id).await?.coverage.0 + 1,
                None => 1,
            };
            json!({
                "outcome": "planned", "strategy": name, "dry_run": true,
                "plan": compaction.plan,
                "tokens_before": compaction.tokens_before,
                "tokens_after": compaction.tokens_after,
                "cut": compaction.cut.map(|s| s.0),
                "dropped": compaction.cut.map(|c| json!({ "from": from, "through": c.0 })),
                "claims": claims.iter().map(baton_view::ClaimView::from).collect::<Vec<_>>(),
            })
        }
        Outcome::Compacted(compaction) => {
            let mut dropped = Value::Null;
            if let (Some(id), Some(cut)) = (compaction.summary_id, compaction.cut) {
                let base = baton.store().summary(&baton.tenant, id).await?.previous_id;
                let from = match base {
                    Some(b) => baton.store().summary(&baton.tenant, b).await?.coverage.0 + 1,
                    None => 1,
                };
                dropped = json!({ "from": from, "through": cut.0 });
            }
            json!({
                "outcome": "compacted", "strategy": name, "dry_run": false,
                "plan": compaction.plan,
                "tokens_before": compaction.tokens_before,
                "tokens_after": compaction.tokens_after,
                "cut": compaction.cut.map(|s| s.0),
                "dropped": dropped,
                "summary_id": compaction.summary_id.map(|s| s.0),
            })
        }
        Outcome::Conflict(why) => {
            return Err(bad(format!(
                "compact: another writer moved run {run} first; nothing was written ({why:?})"
            )));
        }
    };
    structured(report)
}

// ---- report -----------------------------------------------------------------------------

/// Which report.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ReportKind {
    /// Tokens and cost.
    Usage,
    /// A run's input tokens per model call, replayed under a strategy.
    Growth,
    /// Repeated identical calls.
    Duplicates,
}

/// How `usage` groups.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Period {
    /// Per day.
    Daily,
    /// Per week.
    Weekly,
    /// Per month.
    Monthly,
    /// Per session.
    Session,
    /// Per 5-hour billing block.
    Blocks,
}

/// Arguments of `report`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReportArgs {
    /// Which report.
    kind: ReportKind,
    /// `usage`: how to group (default daily).
    period: Option<Period>,
    /// `usage`, `duplicates`: from this day on (`2026-02-01`).
    since: Option<String>,
    /// `usage`, `duplicates`: up to this day (inclusive).
    until: Option<String>,
    /// `usage`: only this project.
    project: Option<String>,
    /// `growth`: the run.
    run: Option<String>,
    /// `growth`: the strategy the compacted figures come from (default structured).
    strategy: Option<String>,
    /// `growth`: the token budget of the strategy.
    budget: Option<u64>,
    /// `duplicates`: repeated tool calls of the stored runs instead of repeated model calls.
    tools: Option<bool>,
}

async fn report(baton: &Scope<'_>, args: Result<ReportArgs, Failure>) -> Answer {
    let args = args?;
    match args.kind {
        ReportKind::Usage => usage(baton, &args).await,
        ReportKind::Growth => growth(baton, &args).await,
        ReportKind::Duplicates => duplicates(baton, &args).await,
    }
}

async fn usage(baton: &Scope<'_>, args: &ReportArgs) -> Answer {
    use baton_reports::{UsageKind, UsageOptions};
    let kind = match args.period.unwrap_or(Period::Daily) {
        Period::Daily => UsageKind::Period(baton_usage::Period::Daily),
        Period::Weekly => UsageKind::Period(baton_usage::Period::Weekly),
        Period::Monthly => UsageKind::Period(baton_usage::Period::Monthly),
        Period::Session => UsageKind::Session,
        Period::Blocks => UsageKind::Blocks,
    };
    let options = UsageOptions {
        since: args.since.as_deref(),
        until: args.until.as_deref(),
        project: args.project.as_deref(),
        ..UsageOptions::default()
    };
    let report = baton_reports::usage(
        baton.store(),
        &baton.tenant,
        kind,
        &options,
        PriceTable::defaults(),
    )
    .await
    .map_err(|e| report_error("report usage", e))?;
    structured(serde_json::to_value(report).map_err(|e| bad(e.to_string()))?)
}

/// A report's failure as the tool's: a bad option is the caller's, the store's is the store's.
fn report_error(what: &str, e: baton_reports::Error) -> Failure {
    match e {
        baton_reports::Error::Invalid(m) => bad(format!("{what}: {m}")),
        baton_reports::Error::Store(e) => e.into(),
    }
}

async fn growth(baton: &Scope<'_>, args: &ReportArgs) -> Answer {
    let Some(run) = args.run.as_deref() else {
        return Err(bad("report growth: give `run`"));
    };
    let run = run_id("run", run)?;
    let strategy = args.strategy.as_deref().unwrap_or("structured");
    let job = baton_reports::GrowthJob::prepare(
        baton.store(),
        &baton.tenant,
        &run,
        strategy,
        args.budget,
    )
    .await
    .map_err(|e| report_error("report growth", e))?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let report = tokio::task::spawn_blocking(move || job.run(&never))
        .await
        .map_err(|e| bad(format!("report growth: {e}")))?
        .ok_or_else(|| bad("report growth: the replay was cancelled"))?
        .map_err(|e| report_error("report growth", e))?;
    structured(serde_json::to_value(report).map_err(|e| bad(e.to_string()))?)
}

async fn duplicates(baton: &Scope<'_>, args: &ReportArgs) -> Answer {
    let (since, until) = baton_reports::day_range(
        None,
        args.since.as_deref(),
        args.until.as_deref(),
        ["day", "since", "until"],
    )
    .map_err(|e| report_error("report duplicates", e))?;
    let options = baton_reports::DuplicatesOptions {
        tools: args.tools.unwrap_or(false),
        operation: None,
        since,
        until,
    };
    let report = baton_reports::duplicates(baton.store(), &baton.tenant, &options)
        .await
        .map_err(|e| report_error("report duplicates", e))?;
    structured(serde_json::to_value(report).map_err(|e| bad(e.to_string()))?)
}

// ---- resources --------------------------------------------------------------------------

/// The text of `baton://run/{id}` (what `run` answers) or `baton://run/{id}/seq/{n}` (the
/// stored message JSON).
pub(crate) async fn read_resource(baton: &Scope<'_>, uri: &str) -> Result<String, rmcp::ErrorData> {
    let not_found = |why: String| rmcp::ErrorData::resource_not_found(why, None);
    let Some(path) = uri.strip_prefix("baton://run/") else {
        return Err(not_found(format!(
            "{uri}: expected baton://run/{{id}} or baton://run/{{id}}/seq/{{n}}"
        )));
    };
    let (id, seq) = match path.split_once("/seq/") {
        Some((id, n)) => match n.parse::<u64>() {
            Ok(n) => (id, Some(n)),
            Err(_) => return Err(not_found(format!("{uri}: the seq {n:?} is not a number"))),
        },
        None => (path, None),
    };
    let Some(seq) = seq else {
        let result = run(baton, Ok(RunArgs { run: id.to_owned() })).await;
        return answer_text(result, uri);
    };
    let run = RunId::new(id).map_err(|e| not_found(format!("{uri}: {e}")))?;
    let entries = baton
        .store()
        .read_range(&baton.tenant, &run, Seq(seq), Some(Seq(seq)))
        .await
        .map_err(|e| not_found(format!("{uri}: {e}")))?;
    match entries.first() {
        Some(entry) => serde_json::to_string(&entry.message)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None)),
        None => Err(not_found(format!("{uri}: run {run} has no seq {seq}"))),
    }
}

fn answer_text(answer: Answer, uri: &str) -> Result<String, rmcp::ErrorData> {
    match answer {
        Ok(result) => Ok(result
            .structured_content
            .map(|v| v.to_string())
            .unwrap_or_default()),
        Err(Failure(why)) => Err(rmcp::ErrorData::resource_not_found(
            format!("{uri}: {why}"),
            None,
        )),
    }
}
