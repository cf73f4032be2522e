//! The OpenHands reader over every `openhands-events/` corpus file: detection, the tool-call
//! protocol, and per-transcript counts.
//!
//! Counting rule. SOURCES.md counts messages = events and tool calls = agent actions other than
//! `message`/`system`/`recall`. The reader turns each event into at most one message, so
//! messages + skipped events = SOURCES.md's events, and its tool calls equal SOURCES.md's
//! exactly. Skipped events: environment state changes and `change_agent_state` actions, and
//! `null` observations answering messages (`basic_gui_mode.json`: 8 of 18).
//! Dangling calls: every stream that ends in `finish` leaves that call unanswered, because
//! OpenHands never emits an observation for it; no other call dangles.

use baton_import::Format;

use crate::messages::{corpus_files, pairing_problems};

/// file, transcript index, messages, skipped events, tool calls, models, dangling finish id.
type Expected = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    &'static [&'static str],
    Option<&'static str>,
);

const EXPECTED: &[Expected] = &[
    // Resolver runs, older schema: no ids or sources; calls get `oh-<position>` ids.
    (
        "openhands__resolver__mock_output__output.jsonl",
        0,
        8,
        0,
        4,
        &[],
        Some("oh-7"),
    ),
    (
        "openhands__resolver__mock_output__output.jsonl",
        1,
        44,
        0,
        22,
        &[],
        Some("oh-43"),
    ),
    (
        "openhands__runtime_trajs__basic.json",
        0,
        4,
        0,
        2,
        &["claude-3-5-sonnet-20241022"],
        Some("toolu_01BUKu3B7nY574atNECkBiFk"),
    ),
    (
        "openhands__runtime_trajs__basic_gui_mode.json",
        0,
        10,
        8,
        4,
        &["claude-3-5-sonnet-20241022"],
        None,
    ),
    (
        "openhands__runtime_trajs__basic_interactions.json",
        0,
        6,
        0,
        1,
        &["gpt-4o-2024-08-06"],
        Some("call_IpyczPgEAwtpRWFZ2RNokTdH"),
    ),
    (
        "openhands__runtime_trajs__wrong_initial_state.json",
        0,
        8,
        0,
        4,
        &["claude-3-5-sonnet-20241022"],
        Some("toolu_01G98EmHEC8HgktRjJBYXqEa"),
    ),
];

#[test]
fn every_corpus_file_reads_with_the_expected_counts() {
    let Some(files) = corpus_files("openhands-events") else {
        return;
    };
    assert_eq!(files.len(), 5, "corpus files changed");
    let mut seen = 0;
    for (name, bytes) in &files {
        assert_eq!(
            baton_import::detect(bytes),
            Some(Format::OpenHands),
            "{name}"
        );
        let ts =
            baton_import::parse(Format::OpenHands, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected: Vec<&Expected> = EXPECTED.iter().filter(|e| e.0 == name).collect();
        assert_eq!(ts.len(), expected.len(), "{name}: transcripts");
        for (t, &&(_, index, messages, skipped, tools, models, dangling)) in
            ts.iter().zip(&expected)
        {
            assert_eq!(t.format, Format::OpenHands);
            assert_eq!(t.index, index, "{name}");
            assert_eq!(
                (
                    t.messages.len(),
                    t.skipped.non_message_lines,
                    t.tool_calls()
                ),
                (messages, skipped, tools),
                "{name}[{index}]: messages, skipped, tool calls"
            );
            assert_eq!(t.models, models, "{name}[{index}]");
            let want: Vec<String> = dangling
                .map(|id| format!("dangling {id}"))
                .into_iter()
                .collect();
            assert_eq!(pairing_problems(t), want, "{name}[{index}]");
            if dangling.is_some() {
                let last = &t.messages.last().unwrap().message;
                assert!(
                    last.tool_use_ids().next().is_some(),
                    "{name}: the finish call ends the stream"
                );
            }
            seen += 1;
        }
    }
    assert_eq!(seen, EXPECTED.len());
}
