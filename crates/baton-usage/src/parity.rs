//! Comparing baton's reports with ccusage's, on the same session files.
//!
//! [`layout`] says where a Claude Code session file goes under a `~/.claude/projects` tree so
//! that ccusage names its sessions as baton does (by session id; a subagent's file under its
//! parent session). `compare` lines up baton's `daily` or `session` rows with ccusage's
//! `--json` output (ccusage 20's `period`, or older versions' `date`/`sessionId`) and lists
//! every token count that differs and how far the costs are apart. The IO (writing the tree,
//! running `npx ccusage`) is the caller's: `baton-bench` and this crate's tests.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::{Report, Row, SessionReport};

/// The ccusage release baton is compared with (20.0.26 published no Linux binary).
pub const CCUSAGE: &str = "ccusage@20.0.24";

/// The command that runs ccusage's `report` (`daily`, `session`, …) as `--json --offline` in
/// UTC over the Claude Code data under `home/.claude`, with npm's cache at `npm_cache` (so that
/// ccusage is fetched from the registry once). The caller runs it.
pub fn command(home: &Path, report: &str, npm_cache: &Path) -> Command {
    let mut c = Command::new("npx");
    c.args([
        "--yes",
        CCUSAGE,
        report,
        "--json",
        "--offline",
        "--timezone",
        "UTC",
    ])
    .env("HOME", home)
    .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
    .env("TZ", "UTC")
    .env("npm_config_cache", npm_cache)
    .env("npm_config_update_notifier", "false");
    c
}

/// Where a Claude Code file goes under `projects/`: `<project>/<session id>.jsonl`, a subagent's
/// `<project>/<parent session id>/subagents/<file>`, with `<project>` the part of `name` before
/// its first `__` (the shared corpus names files `<repo>__<rest>`). A second file of a session
/// already placed (an older copy of it) goes to `<project>-copy-<n>/`, since one directory holds
/// one file per session. `taken` remembers what is placed.
pub fn layout(
    name: &str,
    session: &str,
    parent: Option<&str>,
    taken: &mut HashSet<String>,
) -> String {
    let project = name.split("__").next().unwrap_or(name);
    let file = name.rsplit("__").next().unwrap_or(name);
    let mut n = 0;
    loop {
        let dir = if n == 0 {
            project.to_owned()
        } else {
            format!("{project}-copy-{n}")
        };
        let path = match parent {
            Some(p) => format!("{dir}/{p}/subagents/{file}"),
            None => format!("{dir}/{session}.jsonl"),
        };
        if taken.insert(path.clone()) {
            return path;
        }
        n += 1;
    }
}

/// One token count that differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// The day or session.
    pub key: String,
    /// Which count (`input`, `output`, `cache_creation`, `cache_read`).
    pub field: &'static str,
    /// baton's.
    pub ours: u64,
    /// ccusage's.
    pub theirs: u64,
}

/// How a baton report and ccusage's agree.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Rows compared (days or sessions either side has).
    pub rows: usize,
    /// Every token count that differs.
    pub differences: Vec<Difference>,
    /// The largest relative cost difference of a row whose tokens agree, `|ours - theirs| /
    /// theirs`.
    pub worst_cost: f64,
    /// The row it is in.
    pub worst_cost_key: Option<String>,
    /// Total cost, baton's.
    pub cost_ours: f64,
    /// Total cost, ccusage's.
    pub cost_theirs: f64,
}

impl Comparison {
    /// The days or sessions where the counts differ.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.differences.iter().map(|d| d.key.as_str()).collect();
        keys.dedup();
        keys
    }
}

/// Counts of one row: input, output, cache creation, cache read, cost.
type Counts = [f64; 5];

/// Compares baton's daily report with ccusage's `daily --json`.
pub fn compare_daily(ours: &Report, theirs: &Value) -> Result<Comparison, String> {
    compare(&ours.rows, theirs, "daily", &["period", "date"])
}

/// Compares baton's session report with ccusage's `session --json` (rows of the same session in
/// several projects are summed).
pub fn compare_sessions(ours: &SessionReport, theirs: &Value) -> Result<Comparison, String> {
    compare(&ours.rows, theirs, "session", &["period", "sessionId"])
}

fn compare(ours: &[Row], theirs: &Value, list: &str, keys: &[&str]) -> Result<Comparison, String> {
    let rows = theirs
        .get(list)
        .or_else(|| theirs.get(format!("{list}s")))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("ccusage's output has no \"{list}\" list"))?;
    let mut them: BTreeMap<String, Counts> = BTreeMap::new();
    for row in rows {
        let key = keys
            .iter()
            .find_map(|k| row.get(*k).and_then(Value::as_str))
            .ok_or_else(|| format!("a \"{list}\" row without {keys:?}: {row}"))?;
        let n = |k: &str| row.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let slot = them.entry(key.to_owned()).or_default();
        for (i, k) in [
            "inputTokens",
            "outputTokens",
            "cacheCreationTokens",
            "cacheReadTokens",
            "totalCost",
        ]
        .iter()
        .enumerate()
        {
            slot[i] += n(k);
        }
    }
    let mut us: BTreeMap<String, Counts> = BTreeMap::new();
    for r in ours {
        let slot = us.entry(r.period.clone()).or_default();
        slot[0] += r.input_tokens as f64;
        slot[1] += r.output_tokens as f64;
        slot[2] += r.cache_creation_tokens as f64;
        slot[3] += r.cache_read_tokens as f64;
        slot[4] += r.total_cost;
    }
    let all: HashSet<&String> = them.keys().chain(us.keys()).collect();
    let mut all: Vec<&String> = all.into_iter().collect();
    all.sort();
    let mut c = Comparison {
        rows: all.len(),
        ..Comparison::default()
    };
    for key in all {
        let zero = [0.0; 5];
        let (a, b) = (us.get(key).unwrap_or(&zero), them.get(key).unwrap_or(&zero));
        let mut agree = true;
        for (i, field) in ["input", "output", "cache_creation", "cache_read"]
            .iter()
            .enumerate()
        {
            if a[i] != b[i] {
                agree = false;
                c.differences.push(Difference {
                    key: key.clone(),
                    field,
                    ours: a[i] as u64,
                    theirs: b[i] as u64,
                });
            }
        }
        c.cost_ours += a[4];
        c.cost_theirs += b[4];
        if agree && b[4] > 0.0 {
            let rel = (a[4] - b[4]).abs() / b[4];
            if rel > c.worst_cost {
                c.worst_cost = rel;
                c.worst_cost_key = Some(key.clone());
            }
        }
    }
    Ok(c)
}
