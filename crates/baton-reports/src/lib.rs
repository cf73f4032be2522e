//! baton's reports, read from the store once for every front end: the command line
//! (`baton report …`), the HTTP API (`/v1/reports/…`, `/v1/runs/{id}/growth`), the MCP
//! server's `report` tool and the dashboard (`/ui`) all call these, so the four cannot count
//! differently.
//!
//! - [`usage`]: token usage and cost per day, week, month, session or 5-hour block, over the
//!   usage records imports kept (ccusage's shapes, from `baton-usage`);
//! - [`GrowthJob`]: a run replayed offline under a strategy, every model call's input tokens
//!   with the whole transcript against the compacted context (`baton-compact`'s replay);
//! - [`duplicates`]: the duplicate-work report over the call log or over the stored runs'
//!   tool calls (`baton-cache`'s report).
//!
//! Each takes its options already parsed where a front end parses them its own way (flags,
//! query strings, tool arguments) and answers a typed value; bad options come back as
//! [`Error::Invalid`] with a message that names the option, store failures as
//! [`Error::Store`].

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use baton_cache::report::{self, ToolCall};
use baton_compact::config::CompactionConfig;
use baton_compact::growth::Growth;
use baton_compact::replay::{Replay, replay_unless};
use baton_core::key::canonical_json;
use baton_core::prices::PriceTable;
use baton_core::{ContentBlock, Entry, RunId, Seq, TenantId, Timestamp};
use baton_store::{RunUsage, Store};
use baton_usage::{BlocksReport, Order, Period, SessionReport, TextOptions};
use baton_view::{DuplicatesReport, GrowthReport};
use serde::Serialize;

/// Why a report was not made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option the caller gave is wrong; the message names it and says what is expected.
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
}

/// Which usage report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageKind {
    /// Per day, week or month.
    Period(Period),
    /// Per session.
    Session,
    /// Per 5-hour billing block, the active one with its burn rate.
    Blocks,
}

impl UsageKind {
    /// Every report's name, as the command line and the API spell it.
    pub const NAMES: &'static str = "daily, weekly, monthly, session or blocks";

    /// The report `name` stands for.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "daily" => UsageKind::Period(Period::Daily),
            "weekly" => UsageKind::Period(Period::Weekly),
            "monthly" => UsageKind::Period(Period::Monthly),
            "session" => UsageKind::Session,
            "blocks" => UsageKind::Blocks,
            _ => return None,
        })
    }
}

/// What a usage report covers.
#[derive(Clone, Debug, Default)]
pub struct UsageOptions<'a> {
    /// From this day on (inclusive), `YYYY-MM-DD` or `YYYYMMDD`, in `timezone`.
    pub since: Option<&'a str>,
    /// Up to this day (inclusive).
    pub until: Option<&'a str>,
    /// Only this project.
    pub project: Option<&'a str>,
    /// The zone days are told in: `UTC` (when `None`) or an offset such as `+02:00`.
    pub timezone: Option<&'a str>,
    /// Newest first instead of oldest first.
    pub descending: bool,
    /// Also count baton's estimates for sources that record no usage.
    pub estimated: bool,
}

/// A usage report, serialized with ccusage's JSON fields.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Usage {
    /// `{"daily": [...], "totals": {...}}` (or `weekly`, `monthly`).
    Period(baton_usage::Report),
    /// `{"session": [...], "totals": {...}}`.
    Session(SessionReport),
    /// `{"blocks": [...]}`.
    Blocks(BlocksReport),
}

/// The usage report `kind` of `tenant`'s stored usage records, at `prices`.
pub async fn usage(
    store: &dyn Store,
    tenant: &TenantId,
    kind: UsageKind,
    options: &UsageOptions<'_>,
    prices: PriceTable,
) -> Result<Usage, Error> {
    let text = TextOptions {
        since: options.since,
        until: options.until,
        timezone: options.timezone,
        project: options.project,
        order: if options.descending {
            Order::Desc
        } else {
            Order::Asc
        },
    };
    let parsed = baton_usage::Options::from_text(&text, prices)
        .map_err(|e| Error::Invalid(format!("{}: {}", e.option, e.reason)))?;
    let query = baton_store::UsageQuery {
        estimated: options.estimated,
        project: options.project.map(str::to_owned),
    };
    let entries: Vec<baton_usage::Entry> = store
        .usage(tenant, &query)
        .await?
        .into_iter()
        .map(|u| baton_usage::Entry {
            record: u.record,
            session: u.session,
            project: u.project,
            agent: u.agent,
        })
        .collect();
    Ok(match kind {
        UsageKind::Period(period) => Usage::Period(baton_usage::report(&entries, period, &parsed)),
        UsageKind::Session => Usage::Session(baton_usage::sessions(&entries, &parsed)),
        UsageKind::Blocks => {
            Usage::Blocks(baton_usage::blocks(&entries, &parsed, Timestamp::now()))
        }
    })
}

/// Starts loading the tokenizer vocabularies a growth replay counts with, in the background
/// ([`baton_tokens::preload`]): a server that answers growth reports calls it when it starts,
/// so the first report does not wait for them.
pub fn preload() {
    baton_tokens::preload();
}

/// A run's growth report, read and ready to replay: [`GrowthJob::prepare`] reads the run
/// (async), [`GrowthJob::run`] replays it (CPU work that grows with the run: call it where
/// blocking is fine).
pub struct GrowthJob {
    run: RunId,
    how: Replay,
    entries: Arc<[Entry]>,
    usage: Arc<[RunUsage]>,
}

impl GrowthJob {
    /// Reads `run` to replay it under `strategy` (a strategy's name) with `budget` (the token
    /// budget of `budget`, `summarize` and `structured`).
    pub async fn prepare(
        store: &dyn Store,
        tenant: &TenantId,
        run: &RunId,
        strategy: &str,
        budget: Option<u64>,
    ) -> Result<GrowthJob, Error> {
        let mut how = Self::how(run, strategy, budget)?;
        let record = store.run(tenant, run).await?;
        let entries = store.read_range(tenant, run, Seq(1), None).await?;
        let usage = store.run_report(tenant, run).await?.usage;
        how.rules = record.rules.clone();
        how.goal = record.goal.clone();
        Ok(GrowthJob {
            run: run.clone(),
            how,
            entries: entries.into(),
            usage: usage.into(),
        })
    }

    /// The same run, already read, replayed under another strategy and budget: a report that
    /// compares strategies reads the run once and may replay them side by side.
    pub fn also(&self, strategy: &str, budget: Option<u64>) -> Result<GrowthJob, Error> {
        let mut how = Self::how(&self.run, strategy, budget)?;
        how.rules = self.how.rules.clone();
        how.goal = self.how.goal.clone();
        Ok(GrowthJob {
            run: self.run.clone(),
            how,
            entries: self.entries.clone(),
            usage: self.usage.clone(),
        })
    }

    /// How `strategy` with `budget` replays `run` for a growth report: no probes, the run's
    /// tokenizer.
    fn how(run: &RunId, strategy: &str, budget: Option<u64>) -> Result<Replay, Error> {
        let mut config = CompactionConfig::named(strategy);
        if let Some(budget) = budget {
            config = config.with_budget(budget);
        }
        let mut how = Replay::new(run.clone(), &config).map_err(|e| {
            Error::Invalid(format!(
                "{e} (strategies: {}; budget: 1 or more tokens)",
                baton_compact::strategies::names().join(", ")
            ))
        })?;
        how.probes = false;
        how.counter = baton_tokens::counter(baton_tokens::TokenizerChoice::Auto, None);
        Ok(how)
    }

    /// Replays the run; `None` when `cancel` was set before it finished. A strategy that needs
    /// a model to write its summaries is not replayed: [`Error::Invalid`] says so.
    pub fn run(self, cancel: &AtomicBool) -> Option<Result<GrowthReport, Error>> {
        let replayed = replay_unless(&self.entries, &self.how, cancel)?;
        if replayed.needs_model {
            return Some(Err(Error::Invalid(format!(
                "strategy {} needs a model to write its summaries and is not replayed offline; use structured",
                replayed.strategy
            ))));
        }
        let growth = Growth::of(&replayed.strategy, &replayed.steps);
        Some(Ok(
            GrowthReport::of(&self.run, &growth).with_reported(&self.usage)
        ))
    }
}

/// What a duplicate-work report covers.
#[derive(Clone, Debug)]
pub struct DuplicatesOptions<'a> {
    /// Over the stored runs' tool calls instead of the call log.
    pub tools: bool,
    /// Only this operation (with `tools`: this tool).
    pub operation: Option<&'a str>,
    /// From this millisecond on.
    pub since: Timestamp,
    /// Before this millisecond.
    pub until: Timestamp,
}

const DAY_MS: i64 = 86_400_000;

/// `[since, until)` in milliseconds from UTC days (`YYYY-MM-DD`, inclusive): `day` alone, or
/// `since` and/or `until`. `names` are what the front end calls the three (`day`, `since`,
/// `until`), for the messages.
pub fn day_range(
    day: Option<&str>,
    since: Option<&str>,
    until: Option<&str>,
    names: [&str; 3],
) -> Result<(Timestamp, Timestamp), Error> {
    let parse =
        |text: &str, what: &str| {
            Timestamp::from_day(text).filter(|t| t.0 >= 0).ok_or_else(|| {
            Error::Invalid(format!(
                "{what} {text:?}: expected a day as YYYY-MM-DD, from 1970-01-01 to 9999-12-31"
            ))
        })
        };
    if let Some(day) = day {
        if since.is_some() || until.is_some() {
            return Err(Error::Invalid(format!(
                "give `{}`, or `{}` and `{}`, not both",
                names[0], names[1], names[2]
            )));
        }
        let start = parse(day, names[0])?;
        return Ok((start, Timestamp(start.0 + DAY_MS)));
    }
    let from = since.map(|d| parse(d, names[1])).transpose()?;
    let to = until.map(|d| parse(d, names[2])).transpose()?;
    let from = from.unwrap_or(Timestamp(i64::MIN));
    let to = to.map_or(Timestamp(i64::MAX), |t| Timestamp(t.0 + DAY_MS));
    if from >= to {
        return Err(Error::Invalid(format!(
            "{} {:?} is after {} {:?}",
            names[1],
            since.unwrap_or(""),
            names[2],
            until.unwrap_or("")
        )));
    }
    Ok((from, to))
}

/// The duplicate-work report of `tenant`. The call log is read as stored: a front end that
/// logs in the background flushes its log first.
pub async fn duplicates(
    store: &dyn Store,
    tenant: &TenantId,
    options: &DuplicatesOptions<'_>,
) -> Result<DuplicatesReport, Error> {
    let rows = if options.tools {
        let calls = tool_calls(store, tenant).await?;
        report::tools(&calls, options.operation, options.since, options.until)
    } else {
        let records = match store.calls(tenant, options.since, options.until).await {
            Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
            other => other?,
        };
        report::calls(&records, options.operation)
    };
    let total = report::total(&rows);
    Ok(DuplicatesReport::of(options.tools, &rows, &total))
}

/// Every tool call of the tenant's runs. An imported run's calls are dated by when its source
/// session started (the import's own time says nothing about the work); a native run's by
/// when each message was stored.
pub async fn tool_calls(store: &dyn Store, tenant: &TenantId) -> Result<Vec<ToolCall>, Error> {
    let runs = match store.list_runs(tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => Vec::new(),
        other => other?,
    };
    let mut calls = Vec::new();
    for run in runs {
        if run.last_seq == Seq(0) {
            continue;
        }
        let report = store.run_report(tenant, &run.id).await?;
        let source_day = report
            .origin
            .as_ref()
            .and_then(|o| o.first_at.as_deref())
            .and_then(|at| humantime::parse_rfc3339_weak(at).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
        for entry in store.read_range(tenant, &run.id, Seq(1), None).await? {
            for block in &entry.message.content {
                if let ContentBlock::ToolUse { id, name, input } = block {
                    calls.push(ToolCall {
                        run: run.id.to_string(),
                        at: source_day.unwrap_or(entry.created_at),
                        id: id.clone(),
                        tool: name.clone(),
                        canonical_input: canonical_json(input),
                    });
                }
            }
        }
    }
    Ok(calls)
}
