//! The OpenAI / Anthropic message-list readers, and checks over the whole corpus that involve
//! every reader of this crate's non-JSONL formats: exactly one sniffer claims each corpus file,
//! and truncated or corrupted input never panics.
//!
//! The corpus holds no plain message-list files, so the message readers are checked here on
//! hand-made files in each container; the corpus checks guard their sniffers against claiming
//! another format's file.

use std::path::PathBuf;

use baton_core::Seq;
use baton_core::units::{Problem, ProtocolEvents, ProtocolMap};
use baton_import::{Format, Transcript};
use proptest::prelude::*;

/// The corpus root, or `None` (after saying so) when it is absent.
pub fn corpus_root() -> Option<PathBuf> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    if root.is_dir() {
        Some(root)
    } else {
        println!("skipping: corpus not found at {}", root.display());
        None
    }
}

/// Every file of one corpus folder, by name, sorted.
pub fn corpus_files(dir: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let dir = corpus_root()?.join(dir);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    Some(files)
}

/// Orphan results, duplicate ids, dangling calls (as `dangling <id>`), and results that come
/// before their call.
pub fn pairing_problems(t: &Transcript) -> Vec<String> {
    let events: Vec<ProtocolEvents> = (1..)
        .zip(&t.messages)
        .map(|(seq, m)| ProtocolEvents::of(Seq(seq), &m.message))
        .collect();
    let mut out: Vec<String> = ProtocolMap::analyze(Seq::ZERO, &events)
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

/// The formats whose sniffer claims `bytes` (`detect` returns only the first).
fn claimed_by(bytes: &[u8]) -> Vec<Format> {
    Format::ALL
        .into_iter()
        .filter(|f| baton_import::formats::sniff(*f, bytes))
        .collect()
}

#[test]
fn each_corpus_file_is_claimed_by_exactly_one_sniffer() {
    let Some(_) = corpus_root() else { return };
    let expected = [
        ("claude-code-jsonl", Format::ClaudeCode),
        ("codex-rollout-jsonl", Format::Codex),
        ("openhands-events", Format::OpenHands),
        ("swe-agent-traj", Format::SweAgent),
        ("aider-chat-md", Format::Aider),
    ];
    let mut checked = 0;
    for (dir, format) in expected {
        for (name, bytes) in corpus_files(dir).unwrap() {
            let claims = claimed_by(&bytes);
            // The Claude Code and Codex sniffers are another engineer's; only mine must not
            // overlap with theirs, and each file of my formats must be claimed by its own alone.
            let mine: Vec<Format> = claims
                .iter()
                .copied()
                .filter(|f| {
                    matches!(
                        f,
                        Format::OpenHands
                            | Format::SweAgent
                            | Format::OpenAi
                            | Format::Anthropic
                            | Format::Aider
                    )
                })
                .collect();
            match format {
                Format::ClaudeCode | Format::Codex => {
                    assert_eq!(mine, [], "{dir}/{name}: claimed by {claims:?}");
                }
                _ => assert_eq!(claims, [format], "{dir}/{name}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 71, "corpus files changed");
}

#[test]
fn message_lists_in_every_container() {
    let cases: [(&str, Format, usize, usize); 6] = [
        (
            r#"[{"role":"system","content":"S"},{"role":"user","content":"ls"},
               {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",
                 "function":{"name":"ls","arguments":"{}"}}]},
               {"role":"tool","tool_call_id":"c1","content":"a.txt"},
               {"role":"assistant","content":"one file"}]"#,
            Format::OpenAi,
            5,
            1,
        ),
        (
            "{\"role\":\"user\",\"content\":\"ls\"}\n{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"ls\",\"input\":{}}]}\n{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\",\"content\":\"a\"}]}\n",
            Format::Anthropic,
            3,
            1,
        ),
        (
            r#"{"model":"claude-x","system":"be brief","messages":[{"role":"user","content":"hi"},
               {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},
                 {"type":"text","text":"hello"}]}]}"#,
            Format::Anthropic,
            3,
            0,
        ),
        (
            r#"{"model":"gpt-4o","messages":[{"role":"developer","content":"D"},{"role":"user","content":"hi"}]}"#,
            Format::OpenAi,
            2,
            0,
        ),
        (r#"[{"role":"user","content":"hi"}]"#, Format::OpenAi, 1, 0),
        (
            "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]}\n{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/y.png\"}}]}]}\n",
            Format::OpenAi,
            3,
            0,
        ),
    ];
    for (text, format, messages, tools) in cases {
        let bytes = text.as_bytes();
        assert_eq!(baton_import::detect(bytes), Some(format), "{text}");
        assert_eq!(claimed_by(bytes), [format], "{text}");
        let ts = baton_import::parse(format, bytes).unwrap_or_else(|e| panic!("{text}: {e}"));
        let n: usize = ts.iter().map(|t| t.messages.len()).sum();
        let calls: usize = ts.iter().map(Transcript::tool_calls).sum();
        assert_eq!((n, calls), (messages, tools), "{text}");
        for t in &ts {
            assert_eq!(t.format, format);
            assert_eq!(pairing_problems(t), Vec::<String>::new(), "{text}");
        }
    }
}

/// Inputs for the fuzz test: a prefix of every corpus file of the non-JSONL formats (and the
/// OpenHands JSONL), or hand-made seeds when the corpus is absent.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(read_seeds)
}

fn read_seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        br#"[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[]}]"#.to_vec(),
        br#"{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}"#.to_vec(),
        br#"[{"id":0,"source":"user","action":"message","args":{"content":"x"}},{"id":1,"source":"agent","action":"run","args":{}},{"id":2,"observation":"run","cause":1,"content":"y"}]"#.to_vec(),
        br#"{"history":[{"role":"assistant","content":"x","action":"ls"},{"role":"user","content":"y"}],"trajectory":[]}"#.to_vec(),
        b"# aider chat started at 2024-01-01 00:00:00\n#### hi\nok\n> Applied edit to a.py  \n".to_vec(),
    ];
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    for dir in ["openhands-events", "swe-agent-traj", "aider-chat-md"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                out.push(bytes[..bytes.len().min(48 * 1024)].to_vec());
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn truncated_or_corrupted_input_never_panics(
        pick in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    ) {
        let seeds = seeds();
        let seed = &seeds[pick.index(seeds.len())];
        let mut bytes = seed[..cut.index(seed.len() + 1)].to_vec();
        if !bytes.is_empty() {
            let len = bytes.len();
            for (at, byte) in &flips {
                bytes[at.index(len)] = *byte;
            }
        }
        let _ = baton_import::detect(&bytes);
        for format in [Format::OpenHands, Format::SweAgent, Format::OpenAi, Format::Anthropic, Format::Aider] {
            let _ = baton_import::formats::sniff(format, &bytes);
            if let Ok(ts) = baton_import::parse(format, &bytes) {
                for t in &ts {
                    let _ = pairing_problems(t);
                }
            }
        }
    }
}
