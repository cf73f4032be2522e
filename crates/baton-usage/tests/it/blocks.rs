//! 5-hour blocks on hand-made entries, as ccusage cuts them.

use baton_core::Timestamp;
use baton_core::prices::PriceTable;
use baton_usage::{Options, blocks};

use crate::reports::entry;

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap()
}

#[test]
fn blocks_start_at_the_hour_and_gaps_cover_idle_time() {
    let m = "claude-sonnet-4-5-20250929";
    let entries = vec![
        entry("a", "2025-09-03T00:10:00Z", m, "s", "p", (1, 1, 0, 0, 0)),
        entry(
            "b",
            "2025-09-03T01:02:03.665Z",
            m,
            "s",
            "p",
            (1, 1, 0, 0, 0),
        ),
        // Within 5 h of the last entry, but past the block's end: a new block, no gap.
        entry("c", "2025-09-03T05:30:00Z", m, "s", "p", (1, 1, 0, 0, 0)),
        // More than 5 h after the last entry: a gap first.
        entry(
            "d",
            "2025-09-07T09:52:09.443Z",
            m,
            "s",
            "p",
            (1, 1, 0, 0, 0),
        ),
    ];
    let o = Options::new(PriceTable::defaults());
    let r = blocks(&entries, &o, at("2026-01-01T00:00:00Z"));
    let shape: Vec<(String, bool, u64)> = r
        .blocks
        .iter()
        .map(|b| (b.id.clone(), b.is_gap, b.entries))
        .collect();
    assert_eq!(
        shape,
        [
            ("2025-09-03T00:00:00.000Z".to_owned(), false, 2),
            ("2025-09-03T05:00:00.000Z".to_owned(), false, 1),
            ("gap-2025-09-03T10:30:00.000Z".to_owned(), true, 0),
            ("2025-09-07T09:00:00.000Z".to_owned(), false, 1),
        ]
    );
    assert_eq!(r.blocks[0].end_time, at("2025-09-03T05:00:00Z"));
    assert_eq!(
        r.blocks[0].actual_end_time,
        Some(at("2025-09-03T01:02:03.665Z"))
    );
    assert_eq!(r.blocks[2].end_time, at("2025-09-07T09:52:09.443Z"));
    assert!(
        r.blocks
            .iter()
            .all(|b| !b.is_active && b.burn_rate.is_none())
    );
    let json = serde_json::to_value(&r).unwrap();
    let b = &json["blocks"][0];
    for key in [
        "id",
        "startTime",
        "endTime",
        "actualEndTime",
        "isActive",
        "isGap",
        "entries",
        "tokenCounts",
        "totalTokens",
        "costUSD",
        "models",
        "burnRate",
        "projection",
    ] {
        assert!(b.get(key).is_some(), "{key} missing from {b}");
    }
    assert_eq!(b["tokenCounts"]["inputTokens"], 2);
}

#[test]
fn the_active_block_has_a_burn_rate_and_a_projection() {
    let m = "claude-sonnet-4-5-20250929";
    let entries = vec![
        entry(
            "a",
            "2026-02-11T20:00:00Z",
            m,
            "s",
            "p",
            (0, 1_000, 0, 0, 0),
        ),
        entry(
            "b",
            "2026-02-11T20:10:00Z",
            m,
            "s",
            "p",
            (0, 1_000, 0, 0, 0),
        ),
    ];
    let o = Options::new(PriceTable::defaults());
    let r = blocks(&entries, &o, at("2026-02-11T21:00:00Z"));
    let b = &r.blocks[0];
    assert!(b.is_active);
    let rate = b.burn_rate.unwrap();
    // 2,000 tokens over the 10 minutes between the first and last entry.
    assert_eq!(rate.tokens_per_minute, 200.0);
    assert_eq!(rate.tokens_per_minute_for_indicator, 200.0);
    // $15 per million output tokens: $0.03 in 10 minutes.
    assert!(
        (rate.cost_per_hour - 0.18).abs() < 1e-9,
        "{}",
        rate.cost_per_hour
    );
    let p = b.projection.unwrap();
    // The block ends at 01:00: 240 minutes left at 200 tokens a minute.
    assert_eq!(p.remaining_minutes, 240);
    assert_eq!(p.total_tokens, 2_000 + 48_000);
    assert_eq!(p.total_cost, 0.75);
    // Five hours after the last activity it is no longer active.
    let later = blocks(&entries, &o, at("2026-02-12T02:00:00Z"));
    assert!(!later.blocks[0].is_active && later.blocks[0].projection.is_none());
}
