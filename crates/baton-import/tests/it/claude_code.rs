//! The Claude Code reader over every `claude-code-jsonl/` corpus file: detection, the tool-call
//! protocol, and per-file counts checked by hand.
//!
//! Counting rule (differs from SOURCES.md, which counts user+assistant *lines*): messages are
//! the main branch's, after streamed pieces of one response are merged and with the
//! `isCompactSummary` line turned into a compaction event; side-branch lines are counted
//! apart. Tool calls are `tool_use` blocks on the main branch, and match SOURCES.md wherever
//! the file has no side branches.

use std::path::PathBuf;

use baton_core::Seq;
use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_import::{Format, Transcript};
use proptest::prelude::*;

pub fn corpus(format_dir: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ))
    .join(format_dir);
    if !dir.is_dir() {
        println!("skipping: corpus not found at {}", dir.display());
        return None;
    }
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    Some(files)
}

/// Pairing problems of a transcript, plus results that come before their call.
pub fn protocol_problems(t: &Transcript) -> Vec<String> {
    let events: Vec<ProtocolEvents> = (1..)
        .zip(&t.messages)
        .map(|(seq, m)| ProtocolEvents::of(Seq(seq), &m.message))
        .collect();
    let map = ProtocolMap::analyze(Seq::ZERO, &events);
    let mut out: Vec<String> = map
        .problems()
        .iter()
        .map(|p| match p {
            Problem::DanglingUse { tool_use_id, .. } => format!("dangling {tool_use_id}"),
            other => format!("{other:?}"),
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    for m in &t.messages {
        for id in m.message.tool_result_ids() {
            if !seen.contains(id) {
                out.push(format!("result before its call: {id}"));
            }
        }
        seen.extend(m.message.tool_use_ids());
    }
    out
}

/// file, then of its main transcript: messages, tool calls, compactions, side branches,
/// side-branch messages, dangling calls; then inline subagent runs (transcripts of their own)
/// and queued messages.
/// Hand-checked: `tomjnsn…compact` (10 lines: 4 user, 2 assistant pieces of one response, the
/// summary line, 3 user: 8 messages, compaction after 5), `marot-spotter__short` (4 user and 5
/// pieces of one response: 5), `tomjnsn…subagent` (2 user and 4 pieces of 2 responses: 4; the
/// embedded sidechain's 2 lines are one side branch). The `d-kimuson` 1.0.x sessions write
/// each `Task` run inline as an `isSidechain` chain rooted at `parentUuid: null`: each run is a
/// transcript of its own, and the main transcript's tool calls are the main branch's only
/// (`5c0375b4`: 2 runs, 22 lines, 8 of its 21 calls; `fe5e1c67`: 5 runs, 405 lines, 156 of its
/// 167 calls — each run's count matches its result's `toolUseResult.totalToolUseCount`). The
/// compaction agents' files (`agent-acompact-*`) open with hook output copied from the parent
/// (`isMeta` lines hanging off parent lines), which is not theirs. Queued messages: `624a4a58`
/// has one `enqueue`/`remove` pair; `258c7280` has "check again" and "new beads for the epic were
/// added. tackle them" (its task notifications are not typed input).
type Expected = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);
const EXPECTED: &[Expected] = &[
    (
        "codemie-code__incremental-subagents__turn-1.jsonl",
        14,
        7,
        0,
        0,
        0,
        1,
        0,
        0,
    ),
    (
        "codemie-code__incremental-subagents__turn-2.jsonl",
        26,
        14,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "codemie-code__incremental-subagents__turn-2__subagents__agent-a485154.jsonl",
        27,
        20,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "codemie-code__session-196820da.jsonl",
        128,
        65,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "codemie-code__session-624a4a58.jsonl",
        124,
        48,
        1,
        0,
        0,
        0,
        0,
        1,
    ),
    (
        "codemie-code__session-9eda1058.jsonl",
        12,
        3,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "d-kimuson-claude-code-viewer__1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        21,
        12,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "d-kimuson-claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        25,
        13,
        0,
        0,
        0,
        0,
        2,
        0,
    ),
    (
        "d-kimuson-claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
        23,
        11,
        0,
        0,
        0,
        0,
        5,
        0,
    ),
    (
        "lanegrid-agtrace__claude_session.jsonl",
        15,
        4,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        345,
        186,
        1,
        0,
        0,
        0,
        0,
        2,
    ),
    (
        "marot-spotter__258c7280-ae70-4798-800f-63464d01a85d__subagents__agent-a881341.jsonl",
        6,
        2,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__258c7280-ae70-4798-800f-63464d01a85d__subagents__agent-acompact-fffbd0.jsonl",
        2,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__4d5611e5-241a-462a-8d15-5122611a9569__subagents__agent-a2898e3.jsonl",
        46,
        33,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__4d5611e5-241a-462a-8d15-5122611a9569__subagents__agent-acompact-e1f845.jsonl",
        2,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__6c2214d7-b87e-4432-8e41-22ba294ea584__subagents__agent-afc096d.jsonl",
        67,
        48,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20__subagents__agent-a7be2f0.jsonl",
        33,
        19,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__8463c716-a2ea-4c14-9efa-87158ebd9f20__subagents__agent-acompact-f46190.jsonl",
        2,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
        465,
        242,
        1,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04__subagents__agent-aac57f5.jsonl",
        16,
        12,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04__subagents__agent-acompact-946d2b.jsonl",
        2,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    ("marot-spotter__short.jsonl", 5, 2, 0, 0, 0, 0, 0, 0),
    ("marot-spotter__subagent.jsonl", 32, 16, 0, 0, 0, 0, 0, 0),
    ("marot-spotter__tool_heavy.jsonl", 17, 6, 0, 0, 0, 0, 0, 0),
    (
        "tomjnsn-agentlogs__claudecode__compact.jsonl",
        8,
        0,
        1,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "tomjnsn-agentlogs__claudecode__crud.jsonl",
        20,
        9,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
    (
        "tomjnsn-agentlogs__claudecode__subagent.jsonl",
        4,
        1,
        0,
        0,
        0,
        0,
        1,
        0,
    ),
    (
        "tomjnsn-agentlogs__claudecode__todos.jsonl",
        12,
        5,
        0,
        0,
        0,
        0,
        0,
        0,
    ),
];

#[test]
fn every_corpus_file_reads_with_the_expected_counts() {
    let Some(files) = corpus("claude-code-jsonl") else {
        return;
    };
    assert_eq!(files.len(), EXPECTED.len(), "corpus files changed");
    for (name, bytes) in &files {
        let &(_, messages, tools, compactions, branches, branch_messages, dangling, runs, queued) =
            EXPECTED
                .iter()
                .find(|e| e.0 == name)
                .unwrap_or_else(|| panic!("no expectation for {name}"));
        assert_eq!(
            baton_import::detect(bytes),
            Some(Format::ClaudeCode),
            "{name}"
        );
        let ts = baton_import::parse(Format::ClaudeCode, bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ts.len(), 1 + runs, "{name}");
        let t = &ts[0];
        assert_eq!(t.queued, queued, "{name}");
        for run in &ts[1..] {
            assert!(run.parent_tool_use_id.is_some(), "{name}: an unlinked run");
            assert_eq!(run.parent_session_id, t.source_session_id, "{name}");
            assert!(
                t.spawned
                    .iter()
                    .any(|s| Some(&s.session_id) == run.source_session_id.as_ref()),
                "{name}"
            );
            assert_eq!(protocol_problems(run), Vec::<String>::new(), "{name}");
        }
        // Every response's usage is somewhere, once; the file's all at once settled or not.
        assert!(!t.usage.is_empty(), "{name}");
        let got = (
            t.messages.len(),
            t.tool_calls(),
            t.compactions.len(),
            t.skipped.side_branches,
            t.skipped.side_branch_messages,
        );
        assert_eq!(
            got,
            (messages, tools, compactions, branches, branch_messages),
            "{name}"
        );
        let problems = protocol_problems(t);
        let n_dangling = problems
            .iter()
            .filter(|p| p.starts_with("dangling"))
            .count();
        assert_eq!(problems.len(), n_dangling, "{name}: {problems:?}");
        assert_eq!(n_dangling, dangling, "{name}: {problems:?}");
        assert!(t.source_session_id.is_some(), "{name}");
        assert_eq!(
            t.parent_session_id.is_some(),
            name.contains("__subagents__agent-"),
            "{name}"
        );
        assert!(
            !t.models.is_empty() && t.models.iter().all(|m| m.starts_with("claude-")),
            "{name}"
        );
        assert!(
            t.compactions
                .iter()
                .all(|c| c.summary.as_ref().is_some_and(|s| !s.is_empty())),
            "{name}"
        );
    }
}

#[test]
fn subagent_files_name_their_parent_session() {
    let Some(files) = corpus("claude-code-jsonl") else {
        return;
    };
    for (name, bytes) in files
        .iter()
        .filter(|(n, _)| n.contains("__subagents__agent-"))
    {
        let t = &baton_import::parse(Format::ClaudeCode, bytes).unwrap()[0];
        // `<org>__<parent session>__subagents__agent-<id>.jsonl`
        let parent = name.split("__").nth(1).unwrap();
        let parent = parent
            .strip_prefix("incremental-subagents")
            .map_or(parent, |_| "e9fb405b");
        assert!(
            t.parent_session_id.as_deref().unwrap().starts_with(parent),
            "{name}"
        );
        let agent = name
            .rsplit("agent-")
            .next()
            .unwrap()
            .trim_end_matches(".jsonl");
        assert!(
            t.source_session_id
                .as_deref()
                .unwrap()
                .ends_with(&format!("/agent-{agent}")),
            "{name}"
        );
    }
}

fn small_files() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for dir in ["claude-code-jsonl", "codex-rollout-jsonl"] {
        let Some(files) = corpus(dir) else { continue };
        out.extend(
            files
                .into_iter()
                .map(|(_, b)| b)
                .filter(|b| b.len() < 40_000),
        );
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Truncated or corrupted corpus bytes give errors or transcripts, never a panic.
    #[test]
    fn damaged_corpus_bytes_never_panic(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    ) {
        let files = small_files();
        if files.is_empty() {
            return Ok(());
        }
        let mut bytes = pick.get(&files).clone();
        bytes.truncate(cut.index(bytes.len() + 1));
        for (at, byte) in flips {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
        }
        let _ = baton_import::detect(&bytes);
        for format in [Format::ClaudeCode, Format::Codex] {
            if let Ok(ts) = baton_import::parse(format, &bytes) {
                for t in &ts {
                    let _ = protocol_problems(t);
                }
            }
        }
    }
}
