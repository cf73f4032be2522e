//! The Codex reader over every `codex-rollout-jsonl/` corpus file: detection, the tool-call
//! protocol, and per-file counts checked by hand.
//!
//! Counting rule (SOURCES.md counts `message` items): messages are user/system messages, one
//! assistant message per run of assistant-side items (reasoning, text, calls), and one tool
//! message per call output, plus `user_message` events no item repeats. Tool calls are
//! `function_call` + `custom_tool_call` + `local_shell_call` items and match SOURCES.md.

use baton_import::Format;

use crate::claude_code::{corpus, protocol_problems};

/// file, messages, tool calls, models.
/// Hand-checked (and recomputed by a separate script): `lanegrid…codex_session` (3 user items,
/// 7 assistant runs, 5 outputs: 15), `codemie…rollout` (3 `user_message` events with no user
/// item, 20 assistant runs, 38 outputs: 61).
const EXPECTED: &[(&str, usize, usize, &[&str])] = &[
    (
        "codemie-code__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
        61,
        38,
        &[],
    ),
    (
        "lanegrid-agtrace__codex_session.jsonl",
        15,
        5,
        &["gpt-5.1-codex-max"],
    ),
    (
        "tomjnsn-agentlogs__codex__crud.jsonl",
        13,
        4,
        &["gpt-5.2-codex"],
    ),
    (
        "tomjnsn-agentlogs__codex__images.jsonl",
        29,
        10,
        &["gpt-5.2-codex"],
    ),
];

#[test]
fn every_corpus_file_reads_with_the_expected_counts() {
    let Some(files) = corpus("codex-rollout-jsonl") else {
        return;
    };
    assert_eq!(files.len(), EXPECTED.len(), "corpus files changed");
    for (name, bytes) in &files {
        let &(_, messages, tools, models) = EXPECTED
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("no expectation for {name}"));
        assert_eq!(baton_import::detect(bytes), Some(Format::Codex), "{name}");
        let ts =
            baton_import::parse(Format::Codex, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ts.len(), 1, "{name}");
        let t = &ts[0];
        assert_eq!(
            (t.messages.len(), t.tool_calls()),
            (messages, tools),
            "{name}"
        );
        assert_eq!(t.models, models, "{name}");
        assert!(t.source_session_id.is_some(), "{name}");
        assert_eq!(protocol_problems(t), Vec::<String>::new(), "{name}");
    }
}
