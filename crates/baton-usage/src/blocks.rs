//! 5-hour blocks, as ccusage's `blocks` report cuts them.
//!
//! Entries are taken in time order. A block starts at the hour (UTC) of the first entry not in a
//! block yet and lasts [`BLOCK`]; an entry belongs to it while it comes before the block's end and
//! within [`BLOCK`] of the entry before it. Between two blocks whose activity is more than
//! [`BLOCK`] apart, a *gap* block covers the idle time (from [`BLOCK`] after the last activity to
//! the next). A block is *active* when `now` is before its end and within [`BLOCK`] of its last
//! activity; the active block has a burn rate (tokens per minute between its first and last
//! entry, and cost per hour) and a projection of its totals at its end at that rate.

use baton_core::Timestamp;
use serde::Serialize;

use crate::{Entry, Options};

/// A block's length: five hours, in milliseconds.
pub const BLOCK: i64 = 5 * 3_600_000;

/// Token counts of a block, named as ccusage names them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenCounts {
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache writes of both lifetimes.
    pub cache_creation_input_tokens: u64,
    /// Cache reads.
    pub cache_read_input_tokens: u64,
}

/// How fast the active block spends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BurnRate {
    /// All tokens per minute between the block's first and last entry.
    pub tokens_per_minute: f64,
    /// Input and output tokens per minute (what ccusage colours its indicator by).
    pub tokens_per_minute_for_indicator: f64,
    /// Dollars per hour.
    pub cost_per_hour: f64,
}

/// Where the active block ends up at its burn rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Projection {
    /// Tokens at the block's end.
    pub total_tokens: u64,
    /// Dollars at the block's end.
    pub total_cost: f64,
    /// Minutes left in the block.
    pub remaining_minutes: u64,
}

/// One block, or a gap between two.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Block {
    /// `startTime` as RFC 3339, with `gap-` before it for a gap.
    pub id: String,
    /// When it starts.
    pub start_time: Timestamp,
    /// When it ends (a gap: when activity resumed).
    pub end_time: Timestamp,
    /// Its last activity (`null` for a gap).
    pub actual_end_time: Option<Timestamp>,
    /// Whether it is the active block.
    pub is_active: bool,
    /// Whether it is a gap.
    pub is_gap: bool,
    /// Responses in it.
    pub entries: u64,
    /// Its tokens.
    pub token_counts: TokenCounts,
    /// All of them.
    pub total_tokens: u64,
    /// Dollars.
    #[serde(rename = "costUSD")]
    pub cost_usd: f64,
    /// Its models, in order of first use.
    pub models: Vec<String>,
    /// The active block's burn rate.
    pub burn_rate: Option<BurnRate>,
    /// The active block's projection.
    pub projection: Option<Projection>,
    /// `cache_read / (cache_read + cache_creation)` (baton's).
    pub cache_efficiency: Option<f64>,
}

/// The `blocks` report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlocksReport {
    /// The blocks and gaps, oldest first.
    pub blocks: Vec<Block>,
}

/// The `blocks` report of `entries` at time `now` ([`Options::since`]/[`Options::until`] and
/// [`Options::project`] choose the entries; entries without a timestamp are left out).
pub fn blocks(entries: &[Entry], options: &Options, now: Timestamp) -> BlocksReport {
    let mut timed: Vec<(Timestamp, &Entry)> = entries
        .iter()
        .filter(|e| options.admits(e))
        .filter_map(|e| e.record.at.map(|at| (at, e)))
        .collect();
    timed.sort_by_key(|(at, _)| *at);
    let mut out = Vec::new();
    let mut current: Vec<(Timestamp, &Entry)> = Vec::new();
    let mut start = Timestamp(0);
    for (at, e) in timed {
        if let Some(&(last, _)) = current.last() {
            if at.0 - start.0 > BLOCK || at.0 - last.0 > BLOCK {
                out.push(block(start, &current, options, now));
                if at.0 - last.0 > BLOCK {
                    out.push(gap(last, at));
                }
                current.clear();
            } else {
                current.push((at, e));
                continue;
            }
        }
        start = Timestamp(at.0 - at.0.rem_euclid(3_600_000));
        current.push((at, e));
    }
    if !current.is_empty() {
        out.push(block(start, &current, options, now));
    }
    BlocksReport { blocks: out }
}

fn gap(last: Timestamp, next: Timestamp) -> Block {
    let start = Timestamp(last.0 + BLOCK);
    Block {
        id: format!("gap-{start}"),
        start_time: start,
        end_time: next,
        actual_end_time: None,
        is_active: false,
        is_gap: true,
        entries: 0,
        token_counts: TokenCounts::default(),
        total_tokens: 0,
        cost_usd: 0.0,
        models: Vec::new(),
        burn_rate: None,
        projection: None,
        cache_efficiency: None,
    }
}

fn block(
    start: Timestamp,
    entries: &[(Timestamp, &Entry)],
    options: &Options,
    now: Timestamp,
) -> Block {
    let end = Timestamp(start.0 + BLOCK);
    let first = entries.first().map_or(start, |(at, _)| *at);
    let last = entries.last().map_or(start, |(at, _)| *at);
    let mut usage = baton_core::usage::Usage::default();
    let mut cost = 0.0;
    let mut models: Vec<String> = Vec::new();
    for (_, e) in entries {
        usage.add(&e.record.usage);
        if let Some(model) = &e.record.model {
            if let Some(price) = options.prices.get(model) {
                cost += price.usage_cost(&e.record.usage);
            }
            if !models.contains(model) {
                models.push(model.clone());
            }
        }
    }
    let is_active = now.0 - last.0 < BLOCK && now.0 < end.0;
    let minutes = (last.0 - first.0) as f64 / 60_000.0;
    let burn_rate = (is_active && minutes > 0.0).then(|| BurnRate {
        tokens_per_minute: usage.total() as f64 / minutes,
        tokens_per_minute_for_indicator: (usage.input + usage.output) as f64 / minutes,
        cost_per_hour: cost / minutes * 60.0,
    });
    let projection = burn_rate.map(|rate| {
        let remaining = ((end.0 - now.0).max(0) as f64) / 60_000.0;
        Projection {
            total_tokens: (usage.total() as f64 + rate.tokens_per_minute * remaining).round()
                as u64,
            total_cost: ((cost + rate.cost_per_hour / 60.0 * remaining) * 100.0).round() / 100.0,
            remaining_minutes: remaining.round() as u64,
        }
    });
    Block {
        id: start.to_string(),
        start_time: start,
        end_time: end,
        actual_end_time: Some(last),
        is_active,
        is_gap: false,
        entries: entries.len() as u64,
        token_counts: TokenCounts {
            input_tokens: usage.input,
            output_tokens: usage.output,
            cache_creation_input_tokens: usage.cache_write(),
            cache_read_input_tokens: usage.cache_read,
        },
        total_tokens: usage.total(),
        cost_usd: cost,
        models,
        burn_rate,
        projection,
        cache_efficiency: usage.cache_efficiency(),
    }
}
