//! Every strategy against hand-made transcripts (one line each) and against generated
//! histories: whatever the history, a plan never leaves a tool result without its call in the
//! context, never separates a call from its result, and `budget` ends under its target when a
//! safe cut allows it. Then the logging decorator and replay's invariants.

use std::sync::Arc;

use baton_compact::config::CompactionConfig;
use baton_compact::replay::{Replay, replay};
use baton_compact::strategies::{Budget, ClearToolResults, Sliding, Structured, Summarize};
use baton_compact::{HistoryView, Keep, Plan, Strategy};
use baton_core::units::{ProtocolEvents, ProtocolMap};
use baton_core::{ContentBlock, Entry, EntryMeta, Message, Role, RunId, Seq, Timestamp};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

/// A transcript in a compact line format: `u 100` (user text of 100 tokens), `a 50` (assistant
/// text), `call x 20` (assistant tool_use `x`; `call x+y 20` calls `x` and `y` in parallel),
/// `res x 300` (tool_result for `x`).
fn parse(transcript: &str) -> Vec<EntryMeta> {
    transcript
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, line)| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let seq = Seq(i as u64 + 1);
            let (uses, results, tokens) = match parts.as_slice() {
                ["u" | "a", n] => (vec![], vec![], n.parse().unwrap()),
                ["call", ids, n] => (
                    ids.split('+').map(str::to_owned).collect(),
                    vec![],
                    n.parse().unwrap(),
                ),
                ["res", id, n] => (vec![], vec![(*id).to_owned()], n.parse().unwrap()),
                other => panic!("bad line {other:?}"),
            };
            EntryMeta {
                events: ProtocolEvents { seq, uses, results },
                tokens,
            }
        })
        .collect()
}

#[track_caller]
fn check(strategy: &dyn Strategy, transcript: &str, expect: &str) {
    let tail = parse(transcript);
    let view = HistoryView::new(None, &tail, &[], 0);
    let plan = strategy.plan(&view);
    let got = match &plan {
        Plan::Keep(keep) => format!("keep: {keep}"),
        Plan::ClearToolResults {
            through,
            min_tokens,
        } => format!(
            "clear through {through} (>= {min_tokens}), {} tokens after",
            plan.tokens_after(&view)
        ),
        other => format!(
            "{} through {}, {} tokens after",
            other.kind(),
            other.cut().unwrap(),
            other.tokens_after(&view)
        ),
    };
    assert_eq!(got, expect, "{} on {transcript}", strategy.name());
}

#[test]
fn sliding() {
    let s = Sliding { keep_last: 2 };
    check(
        &s,
        "u 10, a 10, u 10, a 10",
        "drop through 2, 20 tokens after",
    );
    check(
        &s,
        "u 10, a 10",
        "keep: the tail has 2 messages and the strategy keeps the last 2",
    );
    // The desired cut (2) would split call x from its result: rounds back to 1.
    check(
        &s,
        "u 10, call x 5, res x 50, a 10",
        "drop through 1, 65 tokens after",
    );
    // A call open from the first message on: nothing safe to drop.
    check(
        &s,
        "call x 5, u 10, res x 50, a 10",
        "keep: no safe cut at or before seq 2: a tool call and its result would be separated",
    );
}

#[test]
fn budget() {
    let b = Budget {
        max_tokens: 100,
        target_tokens: Some(60),
    };
    check(
        &b,
        "u 30, a 30, u 30",
        "keep: 90 tokens is under the threshold of 100",
    );
    check(
        &b,
        "u 40, a 40, u 40, a 20",
        "drop through 2, 60 tokens after",
    );
    // The unit [call, res] is dropped whole or kept whole.
    check(
        &b,
        "u 10, call x 5, res x 80, a 10, u 10",
        "drop through 3, 20 tokens after",
    );
    // The last message alone is over: it cuts as far as it can and stays over.
    check(&b, "u 40, a 40, u 200", "drop through 2, 200 tokens after");
}

#[test]
fn clear_tool_results() {
    let c = ClearToolResults {
        keep_recent: 2,
        min_tokens: 100,
    };
    check(
        &c,
        "u 10, call x 5, res x 500, call y 5, res y 50, call z 5, res z 900",
        "clear through 5 (>= 100), 1015 tokens after",
    );
    check(
        &c,
        "u 10, call y 5, res y 50, a 5, u 5",
        "keep: no old tool result is large enough to clear",
    );
}

#[test]
fn summarizing_strategies() {
    let s = Structured {
        threshold: 100,
        keep_recent: 2,
        keep_tokens: Some(1_000),
    };
    check(
        &s,
        "u 30, a 30",
        "keep: 60 tokens is under the threshold of 100",
    );
    check(
        &s,
        "u 30, a 30, u 30, a 30",
        "update_state through 2, 60 tokens after",
    );
    // By default the kept messages hold at most a quarter of the threshold: here only the
    // last one (which always stays, whatever its size).
    let s = Structured {
        keep_tokens: None,
        ..s
    };
    check(
        &s,
        "u 30, a 30, u 30, a 30",
        "update_state through 3, 30 tokens after",
    );
    check(
        &s,
        "u 30, a 30, u 200",
        "update_state through 2, 200 tokens after",
    );
    // The cut the settings ask for falls inside parallel results, with no safe cut before it:
    // the first safe one after it, so a context over its threshold still shrinks.
    let s = Structured {
        threshold: 100,
        keep_recent: 3,
        keep_tokens: Some(100),
    };
    check(
        &s,
        "call a+b+c 10, res a 10, res b 5000, res c 10, a 10, u 10",
        "update_state through 4, 20 tokens after",
    );
    let m = Summarize {
        threshold: 100,
        keep_recent: 1,
        keep_tokens: Some(1000),
        instructions: None,
    };
    check(
        &m,
        "u 30, a 30, u 30, a 30",
        "summarize through 3, 30 tokens after",
    );
}

/// A generated history: user turns, assistant turns with 0–3 tool calls each answered (in
/// order, sometimes late, sometimes never), with random sizes.
fn history() -> impl proptest::strategy::Strategy<Value = Vec<EntryMeta>> {
    prop::collection::vec((0u8..5, 1u32..400, 0usize..3), 1..80).prop_map(|steps| {
        let mut out = Vec::new();
        let mut open: Vec<String> = Vec::new();
        let mut next = 0;
        let push =
            |uses: Vec<String>, results: Vec<String>, tokens: u32, out: &mut Vec<EntryMeta>| {
                let seq = Seq(out.len() as u64 + 1);
                out.push(EntryMeta {
                    events: ProtocolEvents { seq, uses, results },
                    tokens,
                });
            };
        for (kind, tokens, calls) in steps {
            match kind {
                0 | 1 => push(vec![], vec![], tokens, &mut out),
                2 | 3 => {
                    let ids: Vec<String> = (0..calls.max(1))
                        .map(|_| {
                            next += 1;
                            format!("c{next}")
                        })
                        .collect();
                    open.extend(ids.iter().cloned());
                    push(ids, vec![], tokens, &mut out);
                }
                _ => {
                    if !open.is_empty() {
                        let id = open.remove(0);
                        push(vec![], vec![id], tokens, &mut out);
                    }
                }
            }
        }
        out
    })
}

fn strategies() -> Vec<Arc<dyn Strategy>> {
    vec![
        Arc::new(Sliding { keep_last: 5 }),
        Arc::new(Budget {
            max_tokens: 1_500,
            target_tokens: None,
        }),
        Arc::new(ClearToolResults {
            keep_recent: 3,
            min_tokens: 100,
        }),
        Arc::new(Structured {
            threshold: 1_000,
            keep_recent: 4,
            keep_tokens: None,
        }),
        Arc::new(Summarize {
            threshold: 1_000,
            keep_recent: 4,
            keep_tokens: None,
            instructions: None,
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_plan_breaks_the_tool_pairing(tail in history()) {
        let view = HistoryView::new(None, &tail, &[], 0);
        let events: Vec<ProtocolEvents> = tail.iter().map(|m| m.events.clone()).collect();
        let whole = ProtocolMap::analyze(Seq::ZERO, &events);
        for strategy in strategies() {
            let plan = strategy.plan(&view);
            let Some(cut) = plan.cut() else { continue };
            prop_assert!(whole.is_safe(cut), "{} cut at unsafe {cut}", strategy.name());
            // The kept side has no result whose call was dropped.
            let kept: Vec<ProtocolEvents> = events.iter().filter(|e| e.seq > cut).cloned().collect();
            let after = ProtocolMap::analyze(cut, &kept);
            let orphans_before = whole.problems().iter().filter(|p| matches!(p, baton_core::units::Problem::OrphanResult { .. })).count();
            let orphans_after = after.problems().iter().filter(|p| matches!(p, baton_core::units::Problem::OrphanResult { .. })).count();
            prop_assert!(orphans_after <= orphans_before, "{} made an orphan at cut {cut}", strategy.name());
            // A cut drops at least one message and keeps at least one.
            prop_assert!(cut < tail.last().unwrap().seq());
            if strategy.name() == "budget" {
                let safe_target_exists = view.safe_cuts().any(|c| view.tokens_after(c.seq()) <= 1_125);
                if safe_target_exists {
                    prop_assert!(plan.tokens_after(&view) <= 1_125);
                }
            }
        }
    }
}

fn entry(seq: u64, role: Role, text: &str) -> Entry {
    let message = Message::text(role, text);
    Entry {
        seq: Seq(seq),
        tokens: baton_core::tokens::estimate_message(&message),
        message,
        created_at: Timestamp(0),
    }
}

#[test]
fn replay_counts_every_model_call_and_none_is_the_quadratic_baseline() {
    let mut entries = vec![entry(
        1,
        Role::User,
        "Never delete the backups. Fix the nightly job.",
    )];
    for i in 0..60u64 {
        let seq = entries.len() as u64 + 1;
        entries.push(Entry {
            seq: Seq(seq),
            tokens: 50,
            message: Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: format!("t{i}"),
                    name: "bash".into(),
                    input: serde_json::json!({"command": format!("ls /var/backups/{i}")}),
                }],
            },
            created_at: Timestamp(0),
        });
        entries.push(Entry {
            seq: Seq(seq + 1),
            tokens: 400,
            message: Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: format!("t{i}"),
                    content: vec![ContentBlock::Text {
                        text: "x ".repeat(800),
                    }],
                    is_error: false,
                }],
            },
            created_at: Timestamp(0),
        });
    }
    let run = RunId::new("r").unwrap();
    let report = |name: &str| {
        let mut config = CompactionConfig::named(name).with_budget(3_000);
        config.set("structured", "keep_recent", serde_json::json!(4));
        replay(&entries, &Replay::new(run.clone(), &config).unwrap())
    };
    let none = report("none");
    assert_eq!(none.steps.len(), 60);
    assert_eq!(none.compactions, 0);
    // Without compaction, step k sends everything before it: the sum of prefix sums.
    let mut expected = 0;
    let mut prefix = 0;
    for e in &entries {
        if e.message.role == Role::Assistant {
            expected += prefix;
        }
        prefix += u64::from(e.tokens);
    }
    assert_eq!(none.total_input_tokens, expected);
    assert_eq!(none.total_full_tokens, expected);
    for name in ["budget", "structured"] {
        let r = report(name);
        assert!(r.compactions > 0, "{name}");
        assert!(
            r.peak_context_tokens <= 3_000,
            "{name}: {}",
            r.peak_context_tokens
        );
        assert!(r.total_input_tokens * 4 < none.total_input_tokens, "{name}");
        assert!(r.steps.iter().all(|s| s.context_tokens <= s.full_tokens));
        assert_eq!(r.steps_over_budget, 0, "{name}");
    }
    let structured = report("structured");
    assert_eq!(
        structured.probes.constraints.kept,
        structured.probes.constraints.total
    );
    assert!(structured.probes.constraints.total > 0);
    assert_eq!(
        structured.retention.commands.kept,
        structured.retention.commands.total
    );
    let _ = Keep::Baseline;
}

/// The corpus figures use one detector for both the extractor's artifacts and the audit's facts;
/// this checks the extractor against paths, commands and constraints listed here by hand.
#[test]
fn the_extractor_keeps_what_a_person_would_list() {
    let tool = |seq: u64, id: &str, name: &str, input: serde_json::Value| Entry {
        seq: Seq(seq),
        tokens: 40,
        message: Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: name.into(),
                input,
            }],
        },
        created_at: Timestamp(0),
    };
    let result = |seq: u64, id: &str, text: &str, is_error: bool| Entry {
        seq: Seq(seq),
        tokens: 200,
        message: Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.into(),
                content: vec![ContentBlock::Text { text: text.into() }],
                is_error,
            }],
        },
        created_at: Timestamp(0),
    };
    let old = vec![
        entry(
            1,
            Role::User,
            "Upgrade the parser in crates/parser/src/lib.rs. Do not change the public API. Only touch files under crates/parser.",
        ),
        tool(
            2,
            "a",
            "Read",
            serde_json::json!({"file_path": "crates/parser/src/lib.rs"}),
        ),
        result(3, "a", "pub fn parse(...)", false),
        tool(
            4,
            "b",
            "Bash",
            serde_json::json!({"command": "cargo test -p parser --release"}),
        ),
        result(
            5,
            "b",
            "error: test failed, to rerun pass `-p parser`",
            true,
        ),
        entry(
            6,
            Role::Assistant,
            "The failure is probably in the tokenizer. See https://docs.rs/logos for the lexer.",
        ),
        tool(
            7,
            "c",
            "Edit",
            serde_json::json!({"file_path": "crates/parser/src/token.rs", "old_string": "x", "new_string": "y"}),
        ),
        result(8, "c", "ok", false),
        entry(
            9,
            Role::Assistant,
            "Next I will run the benchmarks in benches/parse.rs.",
        ),
    ];
    let claims = baton_compact::Offline
        .write(&baton_compact::SummaryRequest {
            base: None,
            old: &old,
            cut: Seq(9),
            instructions: None,
            pins: &[],
            cap: 4_000,
            counter: &baton_core::tokens::ByteEstimate,
        })
        .claims;
    let texts: Vec<String> = claims
        .iter()
        .map(|c| match c.status {
            Some(s) => format!("{} [{s}] {} [{}]", c.kind, c.text, c.source_seq),
            None => format!("{} {} [{}]", c.kind, c.text, c.source_seq),
        })
        .collect();
    let has = |needle: &str| texts.iter().any(|t| t.contains(needle));
    for expected in [
        "instruction Upgrade the parser in crates/parser/src/lib.rs. Do not change the public API. Only touch files under crates/parser. [1]",
        "file [read] crates/parser/src/lib.rs [2]",
        "file [modified] crates/parser/src/token.rs [7]",
        "command cargo test -p parser --release [4]",
        "artifact https://docs.rs/logos [6]",
        "hypothesis The failure is probably in the tokenizer. [6]",
        "next_step Next I will run the benchmarks in benches/parse.rs. [9]",
        // The test run failed, then a file was fixed, but no command has run since.
        "problem [unresolved] `cargo test -p parser --release`: error: test failed, to rerun pass `-p parser` [5]",
    ] {
        assert!(has(expected), "{expected:?} not in\n{}", texts.join("\n"));
    }
    assert!(
        texts.iter().all(|t| !t.starts_with("verified")),
        "nothing was verified: {}",
        texts.join("\n")
    );
}

/// Issue 15, item 5: every strategy setting defaults field by field, so a table with one field
/// loads; a table named after no strategy, or a field a strategy does not have, is refused
/// naming it.
#[test]
fn every_setting_defaults_field_by_field() {
    let config: CompactionConfig =
        toml::from_str("strategy = \"structured\"\n[structured]\nthreshold = 16000\n").unwrap();
    let structured: Structured = config.table("structured").unwrap();
    assert_eq!(structured.threshold, 16_000);
    assert_eq!(structured.keep_recent, Structured::default().keep_recent);
    assert_eq!(config.build().unwrap().limit(), Some(16_000));
    for (table, field) in [
        ("sliding", "keep_last = 3"),
        ("budget", "target_tokens = 100"),
        ("clear-tool-results", "min_tokens = 10"),
        ("summarize", "keep_tokens = 5"),
        ("structured", "keep_recent = 2"),
    ] {
        let text = format!("strategy = \"{table}\"\n[\"{table}\"]\n{field}\n");
        let config: CompactionConfig = toml::from_str(&text).unwrap();
        config.build().unwrap_or_else(|e| panic!("{text}: {e}"));
    }
    let err = toml::from_str::<CompactionConfig>("strategy = \"none\"\n[slidng]\nkeep_last = 3\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown key compaction.slidng"), "{err}");
    let err = toml::from_str::<CompactionConfig>("strategy = \"sliding\"\n[sliding]\nkeep = 3\n")
        .unwrap()
        .build()
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.starts_with("compaction.sliding: unknown field `keep`"),
        "{err}"
    );
    let err =
        toml::from_str::<CompactionConfig>("strategy = \"sliding\"\n[sliding]\nkeep_last = 0\n")
            .unwrap()
            .build()
            .err()
            .unwrap()
            .to_string();
    assert_eq!(err, "compaction.sliding.keep_last = 0: expected 1 or more");
}

/// The registry is the one list of strategies: every name builds, and builds that strategy.
#[test]
fn the_registry_builds_every_strategy_by_its_name() {
    for registered in baton_compact::strategies::REGISTRY {
        let strategy = CompactionConfig::named(registered.name).build().unwrap();
        assert_eq!(strategy.name(), registered.name);
        assert!(!registered.about.is_empty());
    }
}

/// Issue 20 item 1: a replay whose caller has gone (the growth report's request dropped or
/// timed out) stops at its next model call; with the flag never set it is the whole replay.
#[test]
fn r20_a_set_flag_stops_a_replay() {
    let mut entries = Vec::new();
    for s in 1..=400u64 {
        let role = if s % 2 == 1 {
            Role::User
        } else {
            Role::Assistant
        };
        let text = match s % 7 {
            1 => format!("Do not touch /etc/app{s}.conf. Run cargo test -p app{s}."),
            3 => format!("Confirmed: the limit is {s} in src/limit{s}.rs."),
            _ => format!("step {s} goes on "),
        };
        entries.push(Entry {
            seq: Seq(s),
            tokens: 40 + (s % 13) as u32,
            message: Message::text(role, text.repeat(6)),
            created_at: Timestamp(0),
        });
    }
    let run = RunId::new("r").unwrap();
    let config = CompactionConfig::named("structured").with_budget(2_000);
    let mut how = Replay::new(run, &config).unwrap();
    how.probes = false;
    let whole = replay(&entries, &how);
    assert!(whole.compactions > 0, "the run compacts: {whole:?}");
    let flag = std::sync::atomic::AtomicBool::new(false);
    let unless = baton_compact::replay::replay_unless(&entries, &how, &flag).unwrap();
    assert_eq!(unless.steps, whole.steps);
    assert_eq!(unless.compactions, whole.compactions);
    flag.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(baton_compact::replay::replay_unless(&entries, &how, &flag).is_none());
}
