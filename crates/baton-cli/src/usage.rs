//! `baton report usage`: token usage and cost reports over the usage records imports stored.
//!
//! The store keeps one record per model response (the larger copy when a response is found in
//! several files or imported again), so the report counts each response once; grouping,
//! pricing and the tables are `baton-usage`'s. `--json` prints ccusage's JSON shape for the
//! same report (`{"daily": [...], "totals": {...}}`, `{"session": [...]}`, `{"blocks": [...]}`).

use std::io::Write;

use baton_core::prices::PriceTable;
use baton_reports::{Usage, UsageKind, UsageOptions};
use baton_usage::{Period, Table};

use crate::args::{UsageArgs, UsageOrder, UsageReport};
use crate::env::{Env, print_json};
use crate::exit::InvalidInput;

/// Runs `baton report usage`.
pub async fn run(env: &Env, args: UsageArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let prices = match &args.prices {
        Some(path) => crate::compaction::load_prices(path)?,
        None => PriceTable::defaults(),
    };
    let options = UsageOptions {
        since: args.since.as_deref(),
        until: args.until.as_deref(),
        timezone: Some(&args.timezone),
        project: args.project.as_deref(),
        descending: matches!(args.order, UsageOrder::Desc),
        estimated: args.estimated,
    };
    let kind = match args.report {
        UsageReport::Daily => UsageKind::Period(Period::Daily),
        UsageReport::Weekly => UsageKind::Period(Period::Weekly),
        UsageReport::Monthly => UsageKind::Period(Period::Monthly),
        UsageReport::Session => UsageKind::Session,
        UsageReport::Blocks => UsageKind::Blocks,
    };
    let report = baton_reports::usage(&*env.store, &env.tenant, kind, &options, prices)
        .await
        .map_err(|e| match e {
            baton_reports::Error::Invalid(m) => anyhow::Error::from(InvalidInput(format!("--{m}"))),
            baton_reports::Error::Store(e) => e.into(),
        })?;
    match &report {
        Usage::Period(r) => show(env, out, r, Table::Period(r), args.breakdown),
        Usage::Session(r) => show(env, out, r, Table::Sessions(r), args.breakdown),
        Usage::Blocks(r) => show(env, out, r, Table::Blocks(r), args.breakdown),
    }
}

fn show(
    env: &Env,
    out: &mut dyn Write,
    json: &impl serde::Serialize,
    table: Table<'_>,
    breakdown: bool,
) -> anyhow::Result<()> {
    if env.json {
        return print_json(out, json);
    }
    write!(out, "{}", baton_usage::table(table, breakdown))?;
    Ok(())
}
