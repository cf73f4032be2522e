//! The duplicate-work report: how much of a day's work repeated work already done.
//!
//! Over the call log ([`calls`]): per UTC day and operation, the calls, the calls repeating an
//! earlier request of that day (same request hash), their ratio and cost, and, apart, the
//! calls that started while an identical one was still running (*coincident*: the repeats only
//! in-flight deduplication removes, since the first had no result to cache yet), with what the
//! cache and the coalescing saved.
//!
//! Over imported transcripts' tool calls ([`tools`]): the operation is the tool's name, and a
//! repeat is a call with the same tool and canonical input as an earlier call *of the same
//! run*, whatever the day (the day only says where the row is counted). A tool call is
//! identified by its `tool_use` id, so a call stored twice counts once.

use std::collections::{BTreeMap, HashMap, HashSet};

use baton_core::Timestamp;
use baton_store::{CallOutcome, CallRecord};
use serde::Serialize;

/// One day and operation of the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// The operation (or the tool).
    pub operation: String,
    /// Calls.
    pub calls: u64,
    /// Calls repeating an earlier one.
    pub repeats: u64,
    /// `repeats / calls`.
    pub ratio: f64,
    /// What the repeats cost (or would have, executed), in US dollars.
    pub repeat_cost: f64,
    /// Calls that started while an identical call was in flight.
    pub coincident: u64,
    /// The cost of the calls the cache answered.
    pub saved_by_cache: f64,
    /// The cost of the calls answered by an identical call in flight.
    pub saved_by_coalescing: f64,
}

/// The UTC day of a timestamp, `YYYY-MM-DD`.
pub fn day(at: Timestamp) -> String {
    let text = at.to_string();
    text.get(..10).unwrap_or(&text).to_owned()
}

#[derive(Default)]
struct Tally {
    calls: u64,
    repeats: u64,
    repeat_cost: f64,
    coincident: u64,
    saved_by_cache: f64,
    saved_by_coalescing: f64,
}

impl Tally {
    fn row(self, (day, operation): (String, String)) -> Row {
        Row {
            day,
            operation,
            calls: self.calls,
            repeats: self.repeats,
            ratio: if self.calls == 0 {
                0.0
            } else {
                self.repeats as f64 / self.calls as f64
            },
            repeat_cost: self.repeat_cost,
            coincident: self.coincident,
            saved_by_cache: self.saved_by_cache,
            saved_by_coalescing: self.saved_by_coalescing,
        }
    }
}

/// The report over call records (in any order), optionally for one operation; rows by day,
/// then operation.
pub fn calls(records: &[CallRecord], operation: Option<&str>) -> Vec<Row> {
    let mut sorted: Vec<&CallRecord> = records
        .iter()
        .filter(|r| operation.is_none_or(|op| r.operation == op))
        .collect();
    sorted.sort_by_key(|r| r.at);
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    // Per (day, operation): the hashes seen, and when each one's latest call ends.
    let mut seen: HashMap<(String, String), HashMap<[u8; 32], i64>> = HashMap::new();
    for r in sorted {
        let group = (day(r.at), r.operation.clone());
        let tally = tallies.entry(group.clone()).or_default();
        let ends = seen.entry(group).or_default();
        let cost = r.cost_usd.unwrap_or(0.0);
        tally.calls += 1;
        let end =
            r.at.0
                .saturating_add(i64::try_from(r.latency_ms).unwrap_or(i64::MAX));
        match ends.get_mut(&r.request_hash.0) {
            Some(prev_end) => {
                tally.repeats += 1;
                tally.repeat_cost += cost;
                if r.at.0 < *prev_end {
                    tally.coincident += 1;
                }
                *prev_end = (*prev_end).max(end);
            }
            None => {
                ends.insert(r.request_hash.0, end);
            }
        }
        match r.outcome {
            CallOutcome::CacheHit => tally.saved_by_cache += cost,
            CallOutcome::Coalesced => tally.saved_by_coalescing += cost,
            CallOutcome::Executed | CallOutcome::Error => {}
        }
    }
    tallies.into_iter().map(|(k, t)| t.row(k)).collect()
}

/// A tool call read from a stored run.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The run it belongs to.
    pub run: String,
    /// When its message was stored (for an imported run, when the source wrote it).
    pub at: Timestamp,
    /// The `tool_use` id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// Its input, canonicalized (RFC 8785), so key order and number spelling do not matter.
    pub canonical_input: String,
}

/// The report over tool calls (in run order within each run), optionally for one tool, with
/// rows for the calls in `since..until`. A call repeats an earlier call of its run whatever
/// day that one was, so the range only chooses which calls are counted.
pub fn tools(
    tool_calls: &[ToolCall],
    tool: Option<&str>,
    since: Timestamp,
    until: Timestamp,
) -> Vec<Row> {
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    let mut ids: HashSet<(&str, &str)> = HashSet::new();
    let mut seen: HashSet<(&str, &str, &str)> = HashSet::new();
    for c in tool_calls {
        if tool.is_some_and(|t| c.tool != t) || !ids.insert((&c.run, &c.id)) {
            continue;
        }
        let repeat = !seen.insert((&c.run, &c.tool, &c.canonical_input));
        if c.at < since || c.at >= until {
            continue;
        }
        let tally = tallies.entry((day(c.at), c.tool.clone())).or_default();
        tally.calls += 1;
        if repeat {
            tally.repeats += 1;
        }
    }
    tallies.into_iter().map(|(k, t)| t.row(k)).collect()
}

/// The rows' totals, as one row (`day` and `operation` are `"all"`).
pub fn total(rows: &[Row]) -> Row {
    let mut t = Tally::default();
    for r in rows {
        t.calls += r.calls;
        t.repeats += r.repeats;
        t.repeat_cost += r.repeat_cost;
        t.coincident += r.coincident;
        t.saved_by_cache += r.saved_by_cache;
        t.saved_by_coalescing += r.saved_by_coalescing;
    }
    t.row(("all".into(), "all".into()))
}

#[cfg(test)]
mod tests;
