//! Token usage and cost reports over usage records, the reports ccusage makes and the ones it
//! cannot: cache efficiency per day and session, and peak context per session.
//!
//! Roles:
//! - [`Entry`]: one model response's [`UsageRecord`] with the session, project and agent it
//!   belongs to. Entries are counted as given: the caller keeps one record per
//!   [`UsageRecord::id`] (a store does; [`dedupe`] does it for records read from files).
//! - [`Options`]: what ccusage's flags choose (`--since`/`--until`, `--project`, `--order`,
//!   `--breakdown`, the time zone) and the [`PriceTable`] costs come from.
//! - [`report`] for `daily`, `weekly` and `monthly`, [`sessions`] for `session`, [`blocks`] for
//!   `blocks` (5-hour windows, with burn rate and projection for the active one): each returns a
//!   serializable report whose JSON has ccusage's field names ([`Report`], [`SessionReport`],
//!   [`BlocksReport`]), and [`table()`] draws them with ccusage's columns.
//! - [`parity`]: compares a report with ccusage's JSON for the same files.
//!
//! Pure: no IO, no clock (a blocks report takes "now" as an argument).
//!
//! ```
//! use baton_core::prices::PriceTable;
//! use baton_core::usage::{Usage, UsageRecord};
//! use baton_core::Timestamp;
//! use baton_usage::{report, Entry, Options, Period};
//!
//! let record = UsageRecord {
//!     id: "claude-code:msg_1:req_1".into(),
//!     model: Some("claude-sonnet-4-5-20250929".into()),
//!     response_id: None,
//!     request_id: None,
//!     at: Timestamp::parse("2026-02-11T21:46:25Z"),
//!     usage: Usage { input: 10, output: 200, cache_write_5m: 1000, cache_write_1h: 0, cache_read: 9000 },
//!     estimated: false,
//! };
//! let entries = [Entry { record, session: "s1".into(), project: None, agent: "claude-code".into() }];
//! let daily = report(&entries, Period::Daily, &Options::new(PriceTable::defaults()));
//! assert_eq!(daily.rows[0].period, "2026-02-11");
//! assert_eq!(daily.rows[0].cache_efficiency, Some(0.9));
//! ```

mod blocks;
mod calendar;
pub mod parity;
pub mod table;

use std::collections::{BTreeMap, HashMap};

use baton_core::Timestamp;
use baton_core::prices::PriceTable;
use baton_core::usage::{Usage, UsageRecord};
use serde::Serialize;

pub use blocks::{Block, BlocksReport, BurnRate, Projection, TokenCounts, blocks};
pub use calendar::{Day, Zone};
pub use table::{Table, table};

/// One model response's usage, and where it belongs.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The response's usage.
    pub record: UsageRecord,
    /// The session it belongs to (a subagent's responses belong to its parent's session, as
    /// ccusage counts them).
    pub session: String,
    /// The project it was made in, when known.
    pub project: Option<String>,
    /// The agent that made it (`claude-code`, `codex`, …).
    pub agent: String,
}

/// The session a transcript's usage belongs to: its own session id, or, for a subagent
/// (`<session>/agent-<id>`, `<session>/sidechain-<uuid>`), its parent's, as ccusage counts it.
pub fn root_session(session_id: &str) -> &str {
    session_id.split('/').next().unwrap_or(session_id)
}

/// Keeps one record per [`UsageRecord::id`]: the larger copy ([`UsageRecord::keep_larger`]),
/// in the place of the first.
pub fn dedupe(entries: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    let mut at: HashMap<String, usize> = HashMap::new();
    for e in entries {
        match at.get(&e.record.id) {
            Some(&i) => {
                let kept = out[i].record.clone();
                out[i].record = kept.keep_larger(e.record);
            }
            None => {
                at.insert(e.record.id.clone(), out.len());
                out.push(e);
            }
        }
    }
    out
}

/// The periods `daily`, `weekly` and `monthly` group by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// Calendar days.
    Daily,
    /// Weeks starting on Monday, named by that Monday.
    Weekly,
    /// Calendar months, `YYYY-MM`.
    Monthly,
}

impl Period {
    /// The report's name, which is also its JSON key (`daily`, `weekly`, `monthly`).
    pub fn name(self) -> &'static str {
        match self {
            Period::Daily => "daily",
            Period::Weekly => "weekly",
            Period::Monthly => "monthly",
        }
    }
}

/// The order rows are listed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Order {
    /// Oldest first (ccusage's default).
    #[default]
    Asc,
    /// Newest first.
    Desc,
}

/// What a report covers and how it prices.
#[derive(Clone, Debug)]
pub struct Options {
    /// The first day counted (in [`Options::zone`]), inclusive.
    pub since: Option<Day>,
    /// The last day counted, inclusive.
    pub until: Option<Day>,
    /// Only entries of this project.
    pub project: Option<String>,
    /// Row order.
    pub order: Order,
    /// The zone days are told in.
    pub zone: Zone,
    /// The prices costs are computed with.
    pub prices: PriceTable,
}

impl Options {
    /// Everything, oldest first, in UTC, priced by `prices`.
    pub fn new(prices: PriceTable) -> Self {
        Options {
            since: None,
            until: None,
            project: None,
            order: Order::Asc,
            zone: Zone::UTC,
            prices,
        }
    }

    /// Options as an interface receives them (command-line flags, query parameters), checked
    /// here once for every interface: each error names its option.
    pub fn from_text(text: &TextOptions<'_>, prices: PriceTable) -> Result<Self, OptionError> {
        let day = |option: &'static str, value: Option<&str>| {
            value.map(Day::parse).transpose().map_err(|e| OptionError {
                option,
                reason: e.to_string(),
            })
        };
        let since = day("since", text.since)?;
        let until = day("until", text.until)?;
        if let (Some(s), Some(u)) = (since, until)
            && u < s
        {
            return Err(OptionError {
                option: "until",
                reason: format!(
                    "{} is before since {}",
                    text.until.unwrap_or_default(),
                    text.since.unwrap_or_default()
                ),
            });
        }
        let zone = match text.timezone {
            Some(z) => Zone::parse(z).map_err(|e| OptionError {
                option: "timezone",
                reason: e.to_string(),
            })?,
            None => Zone::UTC,
        };
        Ok(Options {
            since,
            until,
            project: text.project.map(str::to_owned),
            order: text.order,
            zone,
            prices,
        })
    }

    /// Whether `entry` is counted: its project matches and its day is in range (an entry
    /// without a timestamp is counted only when no range is set).
    fn admits(&self, entry: &Entry) -> bool {
        if let Some(p) = &self.project
            && entry.project.as_ref() != Some(p)
        {
            return false;
        }
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        let Some(at) = entry.record.at else {
            return false;
        };
        let day = self.zone.day(at);
        self.since.is_none_or(|s| s <= day) && self.until.is_none_or(|u| day <= u)
    }
}

/// [`Options`] as text, unchecked (see [`Options::from_text`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TextOptions<'a> {
    /// The first day, `YYYY-MM-DD` or `YYYYMMDD`.
    pub since: Option<&'a str>,
    /// The last day.
    pub until: Option<&'a str>,
    /// `UTC` or an offset such as `+02:00` (UTC when absent).
    pub timezone: Option<&'a str>,
    /// Only this project.
    pub project: Option<&'a str>,
    /// Row order.
    pub order: Order,
}

/// An option [`Options::from_text`] refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{option}: {reason}")]
pub struct OptionError {
    /// The option's name (`since`, `until`, `timezone`), without an interface's spelling.
    pub option: &'static str,
    /// What was wrong with it.
    pub reason: String,
}

/// Tokens and cost of one model within a row.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelBreakdown {
    /// The model (`unknown` when the source does not name it).
    pub model_name: String,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache writes of both lifetimes.
    pub cache_creation_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cost in US dollars (0 when the model has no price).
    pub cost: f64,
    /// The split of `cache_creation_tokens`: the 1-hour writes (baton's, not ccusage's).
    pub cache_creation_1h_tokens: u64,
    /// Whether some of these tokens are estimates (baton's).
    pub estimated: bool,
}

/// One row of a period or session report.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The day (`YYYY-MM-DD`), week (its Monday), month (`YYYY-MM`) or session.
    pub period: String,
    /// The agents whose responses it counts, in order of name.
    pub agents: Vec<String>,
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache writes of both lifetimes.
    pub cache_creation_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// All of the above.
    pub total_tokens: u64,
    /// Cost in US dollars of the priced models.
    pub total_cost: f64,
    /// The models, in order of name.
    pub models_used: Vec<String>,
    /// Per model.
    pub model_breakdowns: Vec<ModelBreakdown>,
    /// `cache_read / (cache_read + cache_creation)`; `null` when nothing was cached (baton's).
    pub cache_efficiency: Option<f64>,
    /// Models without a price, whose tokens cost nothing here (baton's).
    pub unpriced_models: Vec<String>,
    /// Responses counted.
    pub entries: u64,
    /// Session rows: the session's project (its earliest response's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// Session rows: the time of its last response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<Timestamp>,
    /// Session rows: its largest prompt (fresh input, cache writes and reads of one response),
    /// the context it peaked at (baton's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_context: Option<u64>,
}

/// Sums over a report's rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Fresh input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache writes of both lifetimes.
    pub cache_creation_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// All of the above.
    pub total_tokens: u64,
    /// Cost in US dollars.
    pub total_cost: f64,
    /// Cache efficiency over everything (baton's).
    pub cache_efficiency: Option<f64>,
}

/// A `daily`, `weekly` or `monthly` report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Which grouping.
    pub period: Period,
    /// The rows.
    pub rows: Vec<Row>,
    /// Their sums.
    pub totals: Totals,
}

impl Serialize for Report {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry(self.period.name(), &self.rows)?;
        map.serialize_entry("totals", &self.totals)?;
        map.end()
    }
}

/// A `session` report: one row per session (see [`sessions`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionReport {
    /// The rows.
    #[serde(rename = "session")]
    pub rows: Vec<Row>,
    /// Their sums.
    pub totals: Totals,
}

/// Accumulates the entries of one row.
#[derive(Default)]
struct Acc {
    usage: Usage,
    cost: f64,
    entries: u64,
    agents: Vec<String>,
    models: BTreeMap<String, (Usage, f64, bool)>,
    unpriced: Vec<String>,
    project: Option<String>,
    /// The time and id of the entry `project` comes from: the earliest with one, so the row
    /// does not depend on the order of the entries.
    project_of: Option<(Option<Timestamp>, String)>,
    last: Option<Timestamp>,
    peak: u64,
}

impl Acc {
    fn add(&mut self, e: &Entry, prices: &PriceTable) {
        let u = &e.record.usage;
        let model = e
            .record
            .model
            .clone()
            .unwrap_or_else(|| "unknown".to_owned());
        let cost = match e.record.model.as_deref().and_then(|m| prices.get(m)) {
            Some(price) => price.usage_cost(u),
            None => {
                if !self.unpriced.contains(&model) {
                    self.unpriced.push(model.clone());
                }
                0.0
            }
        };
        self.usage.add(u);
        self.cost += cost;
        self.entries += 1;
        if !self.agents.contains(&e.agent) {
            self.agents.push(e.agent.clone());
        }
        let slot = self.models.entry(model).or_default();
        slot.0.add(u);
        slot.1 += cost;
        slot.2 |= e.record.estimated;
        if e.project.is_some() {
            let key = (e.record.at, e.record.id.clone());
            if self.project_of.as_ref().is_none_or(|k| key < *k) {
                self.project.clone_from(&e.project);
                self.project_of = Some(key);
            }
        }
        if let Some(at) = e.record.at {
            self.last = Some(self.last.map_or(at, |l| l.max(at)));
        }
        self.peak = self.peak.max(u.context());
    }

    fn row(self, period: String, session: bool) -> Row {
        let u = self.usage;
        let mut agents = self.agents;
        agents.sort();
        Row {
            period,
            agents,
            input_tokens: u.input,
            output_tokens: u.output,
            cache_creation_tokens: u.cache_write(),
            cache_read_tokens: u.cache_read,
            total_tokens: u.total(),
            total_cost: self.cost,
            models_used: self
                .models
                .keys()
                .filter(|m| *m != "unknown")
                .cloned()
                .collect(),
            model_breakdowns: self
                .models
                .into_iter()
                .map(|(model_name, (u, cost, estimated))| ModelBreakdown {
                    model_name,
                    input_tokens: u.input,
                    output_tokens: u.output,
                    cache_creation_tokens: u.cache_write(),
                    cache_read_tokens: u.cache_read,
                    cost,
                    cache_creation_1h_tokens: u.cache_write_1h,
                    estimated,
                })
                .collect(),
            cache_efficiency: u.cache_efficiency(),
            unpriced_models: self.unpriced,
            entries: self.entries,
            project: if session { self.project } else { None },
            last_activity: if session { self.last } else { None },
            peak_context: session.then_some(self.peak),
        }
    }
}

fn totals(rows: &[Row]) -> Totals {
    let mut t = Totals::default();
    let mut written = 0;
    for r in rows {
        t.input_tokens += r.input_tokens;
        t.output_tokens += r.output_tokens;
        t.cache_creation_tokens += r.cache_creation_tokens;
        t.cache_read_tokens += r.cache_read_tokens;
        t.total_tokens += r.total_tokens;
        t.total_cost += r.total_cost;
        written += r.cache_creation_tokens;
    }
    let cached = t.cache_read_tokens + written;
    t.cache_efficiency = (cached > 0).then(|| t.cache_read_tokens as f64 / cached as f64);
    t
}

/// The `daily`, `weekly` or `monthly` report of `entries`. Entries without a timestamp cannot be
/// placed in a period and are left out.
pub fn report(entries: &[Entry], period: Period, options: &Options) -> Report {
    let mut groups: BTreeMap<Day, Acc> = BTreeMap::new();
    for e in entries.iter().filter(|e| options.admits(e)) {
        let Some(at) = e.record.at else { continue };
        let day = options.zone.day(at);
        let key = match period {
            Period::Daily => day,
            Period::Weekly => day.week_start(),
            Period::Monthly => {
                let (y, m, _) = day.ymd();
                Day::from_ymd(y, m, 1).unwrap_or(day)
            }
        };
        groups.entry(key).or_default().add(e, &options.prices);
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(day, acc)| {
            let name = match period {
                Period::Monthly => day.month(),
                _ => day.to_string(),
            };
            acc.row(name, false)
        })
        .collect();
    if options.order == Order::Desc {
        rows.reverse();
    }
    let totals = totals(&rows);
    Report {
        period,
        rows,
        totals,
    }
}

/// The `session` report of `entries`: one row per [`Entry::session`], ordered by last activity
/// ([`Options::order`]; ccusage's JSON lists sessions by cost, which [`parity`] does not rely
/// on). `--since`/`--until` admit the responses of those days.
pub fn sessions(entries: &[Entry], options: &Options) -> SessionReport {
    let mut groups: HashMap<&str, Acc> = HashMap::new();
    for e in entries.iter().filter(|e| options.admits(e)) {
        groups
            .entry(e.session.as_str())
            .or_default()
            .add(e, &options.prices);
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|(session, acc)| acc.row(session.to_owned(), true))
        .collect();
    rows.sort_by(|a, b| {
        a.last_activity
            .cmp(&b.last_activity)
            .then_with(|| a.period.cmp(&b.period))
    });
    if options.order == Order::Desc {
        rows.reverse();
    }
    let totals = totals(&rows);
    SessionReport { rows, totals }
}

/// Why a report's options could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A day that is not `YYYY-MM-DD` or `YYYYMMDD`, or does not exist.
    #[error("invalid day {value:?}: expected YYYY-MM-DD or YYYYMMDD")]
    InvalidDay {
        /// The offending text.
        value: String,
    },
    /// A zone that is not `UTC` or `±HH:MM`.
    #[error("invalid time zone {value:?}: expected UTC or an offset such as +02:00")]
    InvalidZone {
        /// The offending text.
        value: String,
    },
}
