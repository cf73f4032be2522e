//! `baton report duplicates`: the duplicate-work report over the call log, or over the stored
//! runs' tool calls (`--tools`).

use std::io::Write;

use baton_cache::report::{self, Row};
use baton_core::Timestamp;
use baton_view::DuplicatesReport;

use crate::args::DuplicatesArgs;
use crate::env::{Env, print_json};
use crate::exit::InvalidInput;

const DAY_MS: i64 = 86_400_000;

/// Runs the report.
pub async fn run(env: &Env, args: DuplicatesArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (since, until) = range(&args)?;
    let rows = if args.tools {
        let calls = baton_reports::tool_calls(&*env.store, &env.tenant).await?;
        report::tools(&calls, args.operation.as_deref(), since, until)
    } else {
        let records = env.store.calls(&env.tenant, since, until).await?;
        report::calls(&records, args.operation.as_deref())
    };
    let total = report::total(&rows);
    if env.json {
        return print_json(out, &DuplicatesReport::of(args.tools, &rows, &total));
    }
    if rows.is_empty() {
        let what = if args.tools {
            "tool calls in the stored runs"
        } else {
            "calls in the call log"
        };
        writeln!(out, "no {what} in that range")?;
        return Ok(());
    }
    print_rows(out, &rows, &total, args.tools)?;
    Ok(())
}

fn print_rows(out: &mut dyn Write, rows: &[Row], total: &Row, tools: bool) -> anyhow::Result<()> {
    if tools {
        writeln!(
            out,
            "{:<10}  {:<28} {:>8} {:>8} {:>6}",
            "day", "tool", "calls", "repeats", "ratio"
        )?;
        for r in rows.iter().chain(std::iter::once(total)) {
            writeln!(
                out,
                "{:<10}  {:<28} {:>8} {:>8} {:>5.1}%",
                r.day,
                truncate(&r.operation, 28),
                r.calls,
                r.repeats,
                r.ratio * 100.0
            )?;
        }
        writeln!(
            out,
            "\na repeat is a call with the same tool and input as an earlier call of the same run; imported runs are dated by when their session started"
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<10}  {:<28} {:>8} {:>8} {:>6} {:>11} {:>10} {:>10} {:>10}",
        "day",
        "operation",
        "calls",
        "repeats",
        "ratio",
        "repeat cost",
        "coincident",
        "cache",
        "coalescing"
    )?;
    for r in rows.iter().chain(std::iter::once(total)) {
        writeln!(
            out,
            "{:<10}  {:<28} {:>8} {:>8} {:>5.1}% {:>11} {:>10} {:>10} {:>10}",
            r.day,
            truncate(&r.operation, 28),
            r.calls,
            r.repeats,
            r.ratio * 100.0,
            dollars(r.repeat_cost),
            r.coincident,
            dollars(r.saved_by_cache),
            dollars(r.saved_by_coalescing),
        )?;
    }
    let days = rows
        .iter()
        .map(|r| r.day.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        .max(1);
    let per_day = total.repeat_cost / days as f64;
    writeln!(
        out,
        "\nrepeats cost {} a day on average ({} over 30 days); {} of them overlapped an identical call in flight, which only in-flight deduplication removes",
        dollars(per_day),
        dollars(per_day * 30.0),
        total.coincident
    )?;
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(n - 1).collect();
    t.push('…');
    t
}

fn dollars(x: f64) -> String {
    if x >= 100.0 {
        format!("${x:.0}")
    } else {
        format!("${x:.2}")
    }
}

/// `[since, until)` in milliseconds, from `--day` or `--since`/`--until` (UTC days, inclusive).
fn range(args: &DuplicatesArgs) -> anyhow::Result<(Timestamp, Timestamp)> {
    if let Some(day) = &args.day {
        let start = parse_day(day, "--day")?;
        return Ok((start, Timestamp(start.0 + DAY_MS)));
    }
    let since = match &args.since {
        Some(d) => parse_day(d, "--since")?,
        None => Timestamp(i64::MIN),
    };
    let until = match &args.until {
        Some(d) => Timestamp(parse_day(d, "--until")?.0 + DAY_MS),
        None => Timestamp(i64::MAX),
    };
    if since >= until {
        return Err(InvalidInput("--since is after --until".into()).into());
    }
    Ok((since, until))
}

/// A UTC day `YYYY-MM-DD` as the millisecond its midnight is.
fn parse_day(text: &str, flag: &str) -> anyhow::Result<Timestamp> {
    Timestamp::from_day(text).ok_or_else(|| {
        InvalidInput(format!("{flag} {text:?}: expected a day as YYYY-MM-DD")).into()
    })
}
