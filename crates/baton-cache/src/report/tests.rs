//! The report's arithmetic, on generated logs: the seed's worked example, overlap, days.

#![allow(clippy::unwrap_used)]

use baton_core::Timestamp;
use baton_core::key::RequestKey;
use baton_store::{CallOutcome, CallRecord};

use super::{ToolCall, calls, day, tools, total};

const DAY: i64 = 86_400_000;
/// 2026-12-02T00:00:00Z.
const DEC_2: i64 = 1_796_169_600_000;

fn hash(n: u32) -> RequestKey {
    let mut k = [0u8; 32];
    k[..4].copy_from_slice(&n.to_be_bytes());
    RequestKey(k)
}

fn call(at: i64, n: u32, latency_ms: u64, outcome: CallOutcome) -> CallRecord {
    CallRecord {
        at: Timestamp(at),
        operation: "extract".into(),
        request_hash: hash(n),
        model: "gpt-4o-mini".into(),
        input_tokens: 1000,
        output_tokens: 100,
        cost_usd: Some(0.004),
        outcome,
        latency_ms,
        overlapped: false,
    }
}

#[test]
fn the_seeds_worked_example_15_percent_24_dollars_a_day_720_a_month() {
    assert_eq!(day(Timestamp(DEC_2)), "2026-12-02");
    // 40,000 calls in a day, one every 2 s; in every 20, the last 3 repeat a call 20 s before.
    let log: Vec<CallRecord> = (0..40_000u32)
        .map(|i| {
            let n = if i % 20 >= 17 { i - 10 } else { i };
            call(DEC_2 + i64::from(i) * 2_000, n, 500, CallOutcome::Executed)
        })
        .collect();
    let rows = calls(&log, None);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.day.as_str(), row.calls, row.repeats),
        ("2026-12-02", 40_000, 6_000)
    );
    assert!((row.ratio - 0.15).abs() < 1e-12, "{}", row.ratio);
    assert!((row.repeat_cost - 24.0).abs() < 1e-6, "{}", row.repeat_cost);
    assert!((row.repeat_cost * 30.0 - 720.0).abs() < 1e-4);
    // Repeats 40 s apart never overlapped: only a cache would have saved them.
    assert_eq!(row.coincident, 0);
}

#[test]
fn coincident_calls_are_the_ones_that_started_while_an_identical_one_ran() {
    let log = [
        call(DEC_2, 1, 1_000, CallOutcome::Executed),
        // Starts while the first runs: coincident (coalesced).
        call(DEC_2 + 200, 1, 800, CallOutcome::Coalesced),
        // After both ended: a repeat, not coincident (a cache hit).
        call(DEC_2 + 5_000, 1, 1, CallOutcome::CacheHit),
        call(DEC_2 + 5_000, 2, 10, CallOutcome::Executed),
        // The next day starts afresh.
        call(DEC_2 + DAY, 1, 10, CallOutcome::Executed),
    ];
    let rows = calls(&log, None);
    assert_eq!(rows.len(), 2);
    let (first, second) = (&rows[0], &rows[1]);
    assert_eq!((first.calls, first.repeats, first.coincident), (4, 2, 1));
    assert!((first.saved_by_cache - 0.004).abs() < 1e-12);
    assert!((first.saved_by_coalescing - 0.004).abs() < 1e-12);
    assert_eq!(
        (second.day.as_str(), second.calls, second.repeats),
        ("2026-12-03", 1, 0)
    );
    let all = total(&rows);
    assert_eq!((all.calls, all.repeats, all.coincident), (5, 2, 1));
    assert!(calls(&log, Some("other")).is_empty());
}

fn tool(run: &str, at: i64, id: &str, name: &str, input: &str) -> ToolCall {
    ToolCall {
        run: run.into(),
        at: Timestamp(at),
        id: id.into(),
        tool: name.into(),
        canonical_input: input.into(),
    }
}

#[test]
fn tool_repeats_are_per_run_across_days_and_one_id_counts_once() {
    let calls = [
        tool("r1", DEC_2, "a", "Read", r#"{"path":"x"}"#),
        tool("r1", DEC_2, "a", "Read", r#"{"path":"x"}"#),
        tool("r1", DEC_2 + DAY, "b", "Read", r#"{"path":"x"}"#),
        tool("r1", DEC_2 + DAY, "c", "Bash", r#"{"path":"x"}"#),
        tool("r2", DEC_2, "a", "Read", r#"{"path":"x"}"#),
    ];
    let rows = tools(&calls, None, Timestamp(i64::MIN), Timestamp(i64::MAX));
    let seen: Vec<_> = rows
        .iter()
        .map(|r| (r.day.as_str(), r.operation.as_str(), r.calls, r.repeats))
        .collect();
    assert_eq!(
        seen,
        [
            ("2026-12-02", "Read", 2, 0),
            ("2026-12-03", "Bash", 1, 0),
            ("2026-12-03", "Read", 1, 1),
        ]
    );
    assert_eq!(
        tools(
            &calls,
            Some("Bash"),
            Timestamp(i64::MIN),
            Timestamp(i64::MAX)
        )
        .len(),
        1
    );
    // A day's rows count its calls' repeats of earlier days' calls.
    let dec_3 = tools(
        &calls,
        None,
        Timestamp(DEC_2 + DAY),
        Timestamp(DEC_2 + 2 * DAY),
    );
    let read = dec_3.iter().find(|r| r.operation == "Read").unwrap();
    assert_eq!((read.calls, read.repeats), (1, 1));
}
