//! `daily`, `weekly`, `monthly` and `session` on hand-made entries.

use baton_core::Timestamp;
use baton_core::prices::PriceTable;
use baton_core::usage::{Usage, UsageRecord};
use baton_usage::{
    Day, Entry, Options, Order, Period, Table, Zone, dedupe, report, sessions, table,
};

/// An entry: `at` as RFC 3339, `model`, session, project, and (input, output, 5-minute write,
/// 1-hour write, cache read).
pub fn entry(
    id: &str,
    at: &str,
    model: &str,
    session: &str,
    project: &str,
    u: (u64, u64, u64, u64, u64),
) -> Entry {
    Entry {
        record: UsageRecord {
            id: id.into(),
            model: Some(model.into()),
            response_id: None,
            request_id: None,
            at: Timestamp::parse(at),
            usage: Usage {
                input: u.0,
                output: u.1,
                cache_write_5m: u.2,
                cache_write_1h: u.3,
                cache_read: u.4,
            },
            estimated: false,
        },
        session: session.into(),
        project: Some(project.into()),
        agent: "claude-code".into(),
    }
}

fn sample() -> Vec<Entry> {
    vec![
        entry(
            "a",
            "2026-02-09T23:30:00Z",
            "claude-opus-4-6",
            "s1",
            "p1",
            (10, 100, 1_000, 0, 9_000),
        ),
        entry(
            "b",
            "2026-02-10T00:30:00Z",
            "claude-opus-4-6",
            "s1",
            "p1",
            (5, 50, 0, 2_000, 20_000),
        ),
        entry(
            "c",
            "2026-02-10T12:00:00Z",
            "claude-haiku-4-5-20251001",
            "s2",
            "p2",
            (1, 1, 0, 0, 0),
        ),
        entry(
            "d",
            "2026-03-02T08:00:00Z",
            "my-local-model",
            "s2",
            "p2",
            (7, 7, 0, 0, 0),
        ),
    ]
}

fn options() -> Options {
    Options::new(PriceTable::defaults())
}

#[test]
fn days_weeks_and_months_group_and_price() {
    let entries = sample();
    let daily = report(&entries, Period::Daily, &options());
    let days: Vec<&str> = daily.rows.iter().map(|r| r.period.as_str()).collect();
    assert_eq!(days, ["2026-02-09", "2026-02-10", "2026-03-02"]);
    let feb10 = &daily.rows[1];
    assert_eq!(
        (
            feb10.input_tokens,
            feb10.output_tokens,
            feb10.cache_creation_tokens,
            feb10.cache_read_tokens
        ),
        (6, 51, 2_000, 20_000)
    );
    assert_eq!(feb10.total_tokens, 6 + 51 + 2_000 + 20_000);
    assert_eq!(
        feb10.models_used,
        ["claude-haiku-4-5-20251001", "claude-opus-4-6"]
    );
    // Opus 4.6: 5 in x $5, 50 out x $25, 2,000 1-hour writes x $10, 20,000 reads x $0.50 per
    // million; Haiku 4.5: 1 in x $1, 1 out x $5.
    let opus = (5.0 * 5.0 + 50.0 * 25.0 + 2_000.0 * 10.0 + 20_000.0 * 0.5) / 1e6;
    let haiku = (1.0 + 5.0) / 1e6;
    assert!(
        (feb10.total_cost - (opus + haiku)).abs() < 1e-12,
        "{}",
        feb10.total_cost
    );
    assert_eq!(feb10.cache_efficiency, Some(20_000.0 / 22_000.0));
    assert_eq!(feb10.model_breakdowns.len(), 2);
    assert_eq!(feb10.model_breakdowns[1].cache_creation_1h_tokens, 2_000);
    // A model without a price costs nothing and is named.
    assert_eq!(daily.rows[2].total_cost, 0.0);
    assert_eq!(daily.rows[2].unpriced_models, ["my-local-model"]);
    assert_eq!(daily.rows[2].cache_efficiency, None);
    assert_eq!(daily.totals.input_tokens, 23);

    let weekly = report(&entries, Period::Weekly, &options());
    let weeks: Vec<&str> = weekly.rows.iter().map(|r| r.period.as_str()).collect();
    // 2026-02-09 is a Monday; 2026-03-02 too.
    assert_eq!(weeks, ["2026-02-09", "2026-03-02"]);
    let monthly = report(&entries, Period::Monthly, &options());
    let months: Vec<&str> = monthly.rows.iter().map(|r| r.period.as_str()).collect();
    assert_eq!(months, ["2026-02", "2026-03"]);
    assert_eq!(monthly.totals, daily.totals);
}

#[test]
fn the_zone_moves_days_and_the_filters_choose() {
    let entries = sample();
    let mut o = options();
    o.zone = Zone::parse("+01:00").unwrap();
    let days: Vec<String> = report(&entries, Period::Daily, &o)
        .rows
        .into_iter()
        .map(|r| r.period)
        .collect();
    assert_eq!(days, ["2026-02-10", "2026-03-02"]);

    let mut o = options();
    o.since = Some(Day::parse("20260210").unwrap());
    o.until = Some(Day::parse("2026-02-10").unwrap());
    let daily = report(&entries, Period::Daily, &o);
    assert_eq!(daily.rows.len(), 1);
    assert_eq!(daily.totals.input_tokens, 6);

    let mut o = options();
    o.project = Some("p2".into());
    o.order = Order::Desc;
    let daily = report(&entries, Period::Daily, &o);
    let days: Vec<&str> = daily.rows.iter().map(|r| r.period.as_str()).collect();
    assert_eq!(days, ["2026-03-02", "2026-02-10"]);
}

#[test]
fn sessions_have_their_last_activity_cache_efficiency_and_peak_context() {
    let report = sessions(&sample(), &options());
    let names: Vec<&str> = report.rows.iter().map(|r| r.period.as_str()).collect();
    assert_eq!(names, ["s1", "s2"]);
    let s1 = &report.rows[0];
    assert_eq!(s1.project.as_deref(), Some("p1"));
    assert_eq!(s1.last_activity, Timestamp::parse("2026-02-10T00:30:00Z"));
    assert_eq!(s1.peak_context, Some(5 + 2_000 + 20_000));
    assert_eq!(s1.cache_efficiency, Some(29_000.0 / 32_000.0));
    assert_eq!(report.totals.output_tokens, 158);

    let json = serde_json::to_value(&report).unwrap();
    let row = &json["session"][0];
    for key in [
        "period",
        "inputTokens",
        "outputTokens",
        "cacheCreationTokens",
        "cacheReadTokens",
        "totalTokens",
        "totalCost",
        "modelsUsed",
        "modelBreakdowns",
        "lastActivity",
        "peakContext",
        "cacheEfficiency",
    ] {
        assert!(row.get(key).is_some(), "{key} missing from {row}");
    }
    assert_eq!(json["totals"]["outputTokens"], 158);
    let daily = serde_json::to_value(report_of_sample()).unwrap();
    assert!(daily["daily"].is_array() && daily["totals"].is_object());
    assert!(daily["daily"][0].get("lastActivity").is_none());
}

fn report_of_sample() -> baton_usage::Report {
    report(&sample(), Period::Daily, &options())
}

#[test]
fn the_same_response_from_two_files_counts_once_the_larger_copy() {
    let mut entries = sample();
    let mut partial = entries[0].clone();
    partial.record.usage.output = 3;
    entries.insert(0, partial);
    entries.push(entries[1].clone());
    let kept = dedupe(entries);
    assert_eq!(kept.len(), 4);
    assert_eq!(kept[0].record.usage.output, 100);
}

#[test]
fn tables_have_ccusages_columns_and_bad_options_name_the_value() {
    let daily = report_of_sample();
    let text = table(Table::Period(&daily), true);
    let header = text.lines().next().unwrap();
    for column in [
        "Date",
        "Models",
        "Input",
        "Output",
        "Cache Create",
        "Cache Read",
        "Total Tokens",
        "Cost (USD)",
        "Cache Hit",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        text.contains("opus-4-6, haiku-4-5") || text.contains("haiku-4-5, opus-4-6"),
        "{text}"
    );
    assert!(text.contains("└ opus-4-6"), "{text}");
    assert!(text.contains("22,057"), "{text}");
    assert!(text.lines().last().unwrap().starts_with("Total"), "{text}");
    let s = sessions(&sample(), &options());
    assert!(
        table(Table::Sessions(&s), false)
            .lines()
            .next()
            .unwrap()
            .contains("Peak Context")
    );

    for bad in [
        "2026-13-01",
        "2026-02-30",
        "26-02-01",
        "yesterday",
        "2026/02/01",
        "",
    ] {
        let err = Day::parse(bad).unwrap_err();
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
    }
    for bad in ["CET", "+25:00", "+1:2x", "0100"] {
        let err = Zone::parse(bad).unwrap_err();
        assert!(err.to_string().starts_with("invalid time zone"), "{err}");
    }
    assert_eq!(Zone::parse("-05:30").unwrap().offset_minutes, -330);
    assert_eq!(Day::parse("2024-02-29").unwrap().to_string(), "2024-02-29");
}
