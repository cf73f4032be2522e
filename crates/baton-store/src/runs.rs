//! Runs as people look for them ([`RunQuery`], [`RunPage`]) and runs deleted whole
//! ([`Deleted`]).
//!
//! # Design
//!
//! A listing reads one row per run of the tenant (its origin, its history's token sum and
//! first and last store times) and one per run, model and kind of its usage records, in one
//! snapshot; filtering, sorting, pricing and the cursor are done here, in Rust, once for every
//! backend. That costs a read of every run's summary per page, which is milliseconds for the
//! thousands of runs a person imports, and lets a page be sorted by cost, which no database
//! can compute (prices are baton's). A run's *activity* is what its source recorded (the first
//! and last timestamps of an imported session; unknown when the source records none, and such
//! a run sorts last and is left out by `since`), and for a run made through baton when it
//! stored its first and last message (when it was created, while it has none).
//!
//! The cursor is opaque to callers: it names the sort and the position (sort key and run) of
//! the last run of the page, and the next page starts strictly after it, so runs imported
//! between two pages never repeat a run or shift the pages before them; a run whose own key
//! changed in between (a session that grew) may show again or be passed over.
//!
//! A deletion removes every row of a run, in every table, in one write transaction that holds
//! the run's lock: the search index (on SQLite the FTS5 words too), pins, constraints, started
//! tools, summaries, source compactions, usage records, its origin, its history and the run.
//! History and its index are append-only: their triggers refuse every UPDATE and DELETE except
//! a DELETE of a run whose key the transaction wrote to `run_deletions` first (and removes
//! again before it commits), so only this path removes history. Subagent runs linked to the
//! run (an imported session's subagents, file-based or inline) go with it, recursively: a
//! subagent's run without its parent's is a fragment nobody asked to keep. A usage record
//! another run brought first stays with that run.

use baton_core::prices::PriceTable;
use baton_core::usage::Usage;
use baton_core::{Run, RunId, Timestamp};

use crate::Error;
use crate::import::RunUsage;

/// How [`crate::Store::list_run_summaries`] orders runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunSort {
    /// By creation, oldest first (what `GET /v1/runs` always returned).
    #[default]
    Created,
    /// By last activity, most recent first.
    Last,
    /// By first activity, most recent first.
    First,
    /// By message count, most first.
    Messages,
    /// By the stored messages' token count, most first.
    Tokens,
    /// By cost, highest first; runs without a priced response last.
    Cost,
}

impl RunSort {
    /// Every sort, by name.
    pub const ALL: [RunSort; 6] = [
        RunSort::Created,
        RunSort::Last,
        RunSort::First,
        RunSort::Messages,
        RunSort::Tokens,
        RunSort::Cost,
    ];

    /// Its name (`--sort`, `?sort=`).
    pub fn name(self) -> &'static str {
        match self {
            RunSort::Created => "created",
            RunSort::Last => "last",
            RunSort::First => "first",
            RunSort::Messages => "messages",
            RunSort::Tokens => "tokens",
            RunSort::Cost => "cost",
        }
    }

    /// The sort named `name`.
    pub fn parse(name: &str) -> Option<RunSort> {
        RunSort::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The names, for an error message.
    pub fn names() -> String {
        RunSort::ALL.map(RunSort::name).join(", ")
    }
}

/// Which runs a listing returns, in what order, how many.
#[derive(Clone, Debug, Default)]
pub struct RunQuery {
    /// Only runs of this project: its full path, or its last path component (`baton` matches
    /// `/work/baton`).
    pub project: Option<String>,
    /// Only runs active at or after this time (their last activity; a run whose activity is
    /// unknown is left out).
    pub since: Option<Timestamp>,
    /// The order.
    pub sort: RunSort,
    /// At most this many (every run when `None`); must not be 0.
    pub limit: Option<u64>,
    /// Where the page starts: the [`RunPage::next_cursor`] of the page before.
    pub cursor: Option<String>,
    /// Prices for the cost (the built-in table when `None`).
    pub prices: Option<PriceTable>,
}

/// One run as a listing shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    /// The run.
    pub run: Run,
    /// The agent that wrote it, for an imported run (its reader: `claude-code`, `codex`, …).
    pub agent: Option<String>,
    /// The project it worked in, when known.
    pub project: Option<String>,
    /// Its first user instruction, cut short (an imported run's), or its goal.
    pub title: Option<String>,
    /// The models that wrote it, in order of first appearance.
    pub models: Vec<String>,
    /// The run it is a subagent of.
    pub parent_run: Option<RunId>,
    /// Its subagent runs.
    pub subagents: u64,
    /// Its first activity (see the module docs); `None` for an imported run whose source
    /// records no time.
    pub first_activity: Option<Timestamp>,
    /// Its last activity, likewise.
    pub last_activity: Option<Timestamp>,
    /// Messages in its history.
    pub messages: u64,
    /// Their stored token counts, summed.
    pub tokens: u64,
    /// Its responses' usage, summed over models.
    pub usage: Usage,
    /// Whether some of that usage is baton's estimate (a source that records none).
    pub usage_estimated: bool,
    /// The cost of the responses whose model has a price, in US dollars; `None` when none has.
    pub cost: Option<f64>,
}

/// A page of a listing.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPage {
    /// The runs, in the query's order.
    pub runs: Vec<RunSummary>,
    /// Runs the query selects, on every page together.
    pub total: u64,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// What [`crate::Store::delete_run`] removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deleted {
    /// The run named.
    pub run: RunId,
    /// Its subagent runs, deleted with it (theirs too, recursively).
    pub subagents: Vec<RunId>,
    /// Messages removed, over every run deleted.
    pub messages: u64,
}

/// One run's listing row, as a backend reads it (see [`crate::backend::Row::listed_run`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ListedRun {
    /// The run's key.
    pub pk: i64,
    /// The run.
    pub run: Run,
    /// Its origin's format.
    pub format: Option<String>,
    /// Its origin's project.
    pub project: Option<String>,
    /// Its origin's title.
    pub title: Option<String>,
    /// Its origin's models.
    pub models: Vec<String>,
    /// The parent's run.
    pub parent_run: Option<RunId>,
    /// The source's first timestamp, as written.
    pub first_at: Option<String>,
    /// The source's last timestamp, as written.
    pub last_at: Option<String>,
    /// The history's token sum.
    pub tokens: u64,
    /// When baton stored its first message.
    pub first_stored: Option<Timestamp>,
    /// When baton stored its last message.
    pub last_stored: Option<Timestamp>,
}

/// The time a `--since`/`?since=` text names, `now` being the time it is read: a UTC day
/// (`2026-02-01`, its midnight), an RFC 3339 time (`2026-02-01T10:00:00Z`), or an age (`90m`,
/// `12h`, `7d`, `2w`: that long before `now`). The error says what is accepted.
pub fn parse_since(text: &str, now: Timestamp) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Some(day) = Timestamp::from_day(text) {
        return Ok(day);
    }
    if let Some(at) = Timestamp::parse(text) {
        return Ok(at);
    }
    let unit = text.chars().last().and_then(|u| match u {
        'm' => Some(60_000),
        'h' => Some(3_600_000),
        'd' => Some(86_400_000),
        'w' => Some(7 * 86_400_000),
        _ => None,
    });
    let number = text
        .get(..text.len().saturating_sub(1))
        .and_then(|n| n.parse::<i64>().ok());
    match (number, unit) {
        (Some(n), Some(unit)) if n >= 0 => n
            .checked_mul(unit)
            .map(|ms| Timestamp(now.0.saturating_sub(ms)))
            .ok_or_else(|| format!("{text:?}: too long ago")),
        _ => Err(format!(
            "{text:?}: expected a day (2026-02-01), a time (2026-02-01T10:00:00Z) or an age (90m, 12h, 7d, 2w)"
        )),
    }
}

/// The most runs one page of `GET /v1/runs` returns.
pub const MAX_PAGE: u64 = 1000;

/// A page of `rows` (every run of the tenant, with `usage` per run key), as `query` asks.
pub(crate) fn page(
    rows: Vec<ListedRun>,
    usage: &[(i64, RunUsage)],
    query: &RunQuery,
) -> Result<RunPage, Error> {
    if query.limit == Some(0) {
        return Err(Error::InvalidQuery {
            detail: "limit: must be at least 1".into(),
        });
    }
    let after = query
        .cursor
        .as_deref()
        .map(|c| Cursor::decode(c, query.sort))
        .transpose()?;
    let defaults;
    let prices = match &query.prices {
        Some(p) => p,
        None => {
            defaults = PriceTable::defaults();
            &defaults
        }
    };
    let mut subagents: std::collections::HashMap<RunId, u64> = Default::default();
    for row in &rows {
        if let Some(parent) = &row.parent_run {
            *subagents.entry(parent.clone()).or_default() += 1;
        }
    }
    let mut summaries: Vec<(Key, RunSummary)> = rows
        .into_iter()
        .map(|row| {
            let pk = row.pk;
            let summary = summarize(row, usage, prices, &subagents);
            (Key::of(query.sort, pk, &summary), summary)
        })
        .filter(|(_, s)| matches(query, s))
        .collect();
    summaries.sort_by_key(|(k, _)| *k);
    let total = summaries.len() as u64;
    let start = match after {
        Some(after) => summaries.partition_point(|(k, _)| *k <= after),
        None => 0,
    };
    let limit = query
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut runs: Vec<(Key, RunSummary)> = summaries.into_iter().skip(start).collect();
    let more = runs.len() > limit;
    runs.truncate(limit);
    let next_cursor = match (more, runs.last()) {
        (true, Some((key, _))) => Some(key.encode(query.sort)),
        _ => None,
    };
    Ok(RunPage {
        runs: runs.into_iter().map(|(_, s)| s).collect(),
        total,
        next_cursor,
    })
}

fn summarize(
    row: ListedRun,
    usage: &[(i64, RunUsage)],
    prices: &PriceTable,
    subagents: &std::collections::HashMap<RunId, u64>,
) -> RunSummary {
    let mut total = Usage::default();
    let (mut cost, mut estimated) = (None::<f64>, false);
    for (_, u) in usage.iter().filter(|(pk, _)| *pk == row.pk) {
        total.add(&u.usage);
        estimated |= u.estimated;
        if let Some(price) = u.model.as_deref().and_then(|m| prices.get(m)) {
            *cost.get_or_insert(0.0) += price.usage_cost(&u.usage);
        }
    }
    let parse = |at: &Option<String>| at.as_deref().and_then(Timestamp::parse);
    // An imported run's activity is its source's: the time it was imported says nothing
    // about the work. A native run's is when its messages were stored.
    let (first_activity, last_activity) = match &row.format {
        Some(_) => {
            let first = parse(&row.first_at);
            (first, parse(&row.last_at).or(first))
        }
        None => {
            let first = row.first_stored.unwrap_or(row.run.created_at);
            (Some(first), Some(row.last_stored.unwrap_or(first)))
        }
    };
    RunSummary {
        agent: row.format,
        project: row.project,
        title: row.title.or_else(|| row.run.goal.clone()),
        models: row.models,
        subagents: subagents.get(&row.run.id).copied().unwrap_or(0),
        parent_run: row.parent_run,
        first_activity,
        last_activity,
        messages: row.run.last_seq.0,
        tokens: row.tokens,
        usage: total,
        usage_estimated: estimated,
        cost,
        run: row.run,
    }
}

/// Whether `summary` passes the query's filters.
fn matches(query: &RunQuery, summary: &RunSummary) -> bool {
    if query
        .since
        .is_some_and(|since| summary.last_activity.is_none_or(|last| last < since))
    {
        return false;
    }
    match (&query.project, &summary.project) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(wanted), Some(project)) => {
            let wanted = wanted.trim_end_matches(['/', '\\']);
            let project = project.trim_end_matches(['/', '\\']);
            project == wanted || project.rsplit(['/', '\\']).next() == Some(wanted)
        }
    }
}

/// A run's place in a sort: ascending keys come first.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key {
    /// The sort's value, negated for the descending sorts.
    value: f64,
    /// The run's key, negated likewise, so ties keep one order.
    pk: i64,
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.value
            .total_cmp(&other.value)
            .then(self.pk.cmp(&other.pk))
    }
}

impl Key {
    fn of(sort: RunSort, pk: i64, s: &RunSummary) -> Key {
        // Every value is exact in an f64: times in milliseconds and counts are far below 2^53.
        let value = match sort {
            RunSort::Created => return Key { value: 0.0, pk },
            // A run whose source records no time comes last.
            RunSort::Last => s.last_activity.map_or(f64::NEG_INFINITY, |t| t.0 as f64),
            RunSort::First => s.first_activity.map_or(f64::NEG_INFINITY, |t| t.0 as f64),
            RunSort::Messages => s.messages as f64,
            RunSort::Tokens => s.tokens as f64,
            RunSort::Cost => s.cost.unwrap_or(-1.0),
        };
        Key {
            value: -value,
            pk: -pk,
        }
    }

    /// The cursor after this key: `<sort>.<value bits>.<pk>`, hex, behind a version prefix.
    fn encode(self, sort: RunSort) -> String {
        let plain = format!("{}.{:x}.{}", sort.name(), self.value.to_bits(), self.pk);
        let hex: String = plain.bytes().map(|b| format!("{b:02x}")).collect();
        format!("r1{hex}")
    }
}

/// A cursor read back.
struct Cursor;

impl Cursor {
    fn decode(text: &str, sort: RunSort) -> Result<Key, Error> {
        let bad = || Error::InvalidQuery {
            detail: format!(
                "cursor {text:?}: not a cursor of this listing (pass next_cursor as it was given)"
            ),
        };
        let hex = text.strip_prefix("r1").ok_or_else(bad)?;
        if hex.len() % 2 != 0 || hex.len() > 256 {
            return Err(bad());
        }
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|b| u8::from_str_radix(b, 16).ok())
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let plain = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = plain.split('.');
        let (Some(name), Some(bits), Some(pk), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if name != sort.name() {
            return Err(Error::InvalidQuery {
                detail: format!(
                    "cursor: it continues a listing sorted by {name}, not by {}",
                    sort.name()
                ),
            });
        }
        let value = u64::from_str_radix(bits, 16)
            .map(f64::from_bits)
            .map_err(|_| bad())?;
        let pk = pk.parse().map_err(|_| bad())?;
        Ok(Key { value, pk })
    }
}

#[cfg(test)]
mod tests;
