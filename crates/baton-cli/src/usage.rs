//! `baton report usage`: token usage and cost reports over the usage records imports stored.
//!
//! The store keeps one record per model response (the larger copy when a response is found in
//! several files or imported again), so the report counts each response once; grouping,
//! pricing and the tables are `baton-usage`'s. `--json` prints ccusage's JSON shape for the
//! same report (`{"daily": [...], "totals": {...}}`, `{"session": [...]}`, `{"blocks": [...]}`).

use std::io::Write;

use baton_core::Timestamp;
use baton_core::prices::PriceTable;
use baton_store::UsageQuery;
use baton_usage::{Entry, Options, Order, Period, Table, TextOptions};

use crate::args::{UsageArgs, UsageOrder, UsageReport};
use crate::env::{Env, print_json};
use crate::exit::InvalidInput;

/// Runs `baton report usage`.
pub async fn run(env: &Env, args: UsageArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let prices = match &args.prices {
        Some(path) => crate::compaction::load_prices(path)?,
        None => PriceTable::defaults(),
    };
    let text = TextOptions {
        since: args.since.as_deref(),
        until: args.until.as_deref(),
        timezone: Some(&args.timezone),
        project: args.project.as_deref(),
        order: match args.order {
            UsageOrder::Asc => Order::Asc,
            UsageOrder::Desc => Order::Desc,
        },
    };
    let options = Options::from_text(&text, prices)
        .map_err(|e| InvalidInput(format!("--{}: {}", e.option, e.reason)))?;
    let query = UsageQuery {
        estimated: args.estimated,
        project: args.project.clone(),
    };
    let entries: Vec<Entry> = env
        .store
        .usage(&env.tenant, &query)
        .await?
        .into_iter()
        .map(|u| Entry {
            record: u.record,
            session: u.session,
            project: u.project,
            agent: u.agent,
        })
        .collect();
    let period = match args.report {
        UsageReport::Daily => Some(Period::Daily),
        UsageReport::Weekly => Some(Period::Weekly),
        UsageReport::Monthly => Some(Period::Monthly),
        UsageReport::Session | UsageReport::Blocks => None,
    };
    if let Some(period) = period {
        let report = baton_usage::report(&entries, period, &options);
        return show(env, out, &report, Table::Period(&report), args.breakdown);
    }
    match args.report {
        UsageReport::Session => {
            let report = baton_usage::sessions(&entries, &options);
            show(env, out, &report, Table::Sessions(&report), args.breakdown)
        }
        _ => {
            let report = baton_usage::blocks(&entries, &options, Timestamp::now());
            show(env, out, &report, Table::Blocks(&report), args.breakdown)
        }
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
