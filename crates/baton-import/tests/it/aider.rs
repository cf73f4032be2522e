//! The aider reader over every `aider-chat-md/` corpus file: detection, the tool-call protocol,
//! and per-file counts against SOURCES.md.
//!
//! Counting rule. SOURCES.md counts transcripts = sessions, messages = `####` runs and tool calls
//! = `> Applied edit to` lines. The reader's tool calls equal SOURCES.md's exactly. Its user
//! messages are the `####` runs (checked here in order and by text against a line scan of the
//! file, so their number is SOURCES.md's) plus one per run of other console output, and it adds
//! assistant replies and one tool result per edit, so its message totals are larger by design.
//! Transcripts: `chat-history__filtered.md` starts with the tail of a session whose header was
//! cut off; the reader keeps it as a session of its own, so it sees 1129 sessions where
//! SOURCES.md (counting headers) says 1128; 150 of them hold no message (aider started and
//! quit) and yield no transcript, so it reads 979.
//! No call dangles and no result is an orphan: each edit's result follows its call.

use baton_core::Role;
use baton_import::Format;

use crate::messages::{corpus_files, pairing_problems};

/// file, transcripts, `####` runs (SOURCES.md messages), tool calls.
const EXPECTED: &[(&str, usize, usize, usize)] = &[
    (
        "aider__tests_fixtures_chat-history__filtered.md",
        979,
        1735,
        399,
    ),
    ("aider__website_examples__2048-game.md", 1, 3, 1),
    ("aider__website_examples__add-test.md", 1, 3, 2),
    ("aider__website_examples__asciinema.md", 1, 1, 1),
    ("aider__website_examples__chat-transcript-css.md", 1, 11, 9),
    ("aider__website_examples__complex-change.md", 1, 10, 15),
    ("aider__website_examples__css-exercises.md", 1, 4, 1),
    ("aider__website_examples__hello-world-flask.md", 1, 4, 4),
    ("aider__website_examples__hello.md", 1, 1, 1),
    ("aider__website_examples__no-color.md", 1, 3, 3),
    ("aider__website_examples__pong.md", 1, 5, 7),
    (
        "aider__website_examples__semantic-search-replace.md",
        1,
        1,
        3,
    ),
    ("aider__website_examples__update-docs.md", 1, 1, 1),
];

/// The text of each run of `####` lines, by a plain line scan (SOURCES.md's rule).
fn prompt_runs(text: &str) -> Vec<String> {
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut in_run = false;
    for line in text.lines() {
        let body = line.strip_suffix("  ").unwrap_or(line);
        let rest = if body == "####" {
            Some("")
        } else {
            body.strip_prefix("#### ")
        };
        match rest {
            Some(rest) => {
                if !in_run {
                    runs.push(Vec::new());
                }
                runs.last_mut().unwrap().push(rest);
                in_run = true;
            }
            None => in_run = false,
        }
    }
    runs.into_iter()
        .map(|r| r.join("\n").trim_end().to_owned())
        .collect()
}

#[test]
fn every_corpus_file_reads_with_the_expected_counts() {
    let Some(files) = corpus_files("aider-chat-md") else {
        return;
    };
    assert_eq!(files.len(), EXPECTED.len(), "corpus files changed");
    for (name, bytes) in &files {
        let &(_, transcripts, prompts, tools) = EXPECTED
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("no expectation for {name}"));
        assert_eq!(baton_import::detect(bytes), Some(Format::Aider), "{name}");
        let ts =
            baton_import::parse(Format::Aider, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ts.len(), transcripts, "{name}: transcripts");
        assert_eq!(
            ts.iter().map(|t| t.tool_calls()).sum::<usize>(),
            tools,
            "{name}: tool calls"
        );

        let expected_prompts = prompt_runs(std::str::from_utf8(bytes).unwrap());
        assert_eq!(
            expected_prompts.len(),
            prompts,
            "{name}: the line scan disagrees with SOURCES.md"
        );
        // Every prompt run is a user message, in order, among the console-output user messages.
        let users: Vec<String> = ts
            .iter()
            .flat_map(|t| &t.messages)
            .filter(|m| m.message.role == Role::User)
            .map(|m| m.message.plain_text())
            .collect();
        let mut next = expected_prompts.iter().peekable();
        for text in &users {
            if next.peek().is_some_and(|p| *p == text) {
                next.next();
            }
        }
        assert_eq!(
            next.next(),
            None,
            "{name}: a prompt run is not a user message"
        );

        for (i, t) in ts.iter().enumerate() {
            assert!(
                t.index >= i,
                "{name}: the index is the session's place in the file"
            );
            assert!(
                !t.messages.is_empty(),
                "{name}[{i}]: an empty session is no transcript"
            );
            assert_eq!(t.format, Format::Aider);
            assert_eq!(pairing_problems(t), Vec::<String>::new(), "{name}[{i}]");
        }
        let with_header = ts
            .iter()
            .filter(|t| t.messages.first().is_some_and(|m| m.timestamp.is_some()));
        if name.contains("chat-history") {
            assert_eq!(with_header.count(), 978, "{name}");
            assert_eq!(ts.last().unwrap().index, 1128, "{name}");
            assert!(ts[0].messages[0].timestamp.is_none());
            assert!(
                ts.iter()
                    .flat_map(|t| &t.models)
                    .any(|m| m == "claude-3-5-sonnet-20240620")
            );
        } else {
            assert_eq!(
                with_header.count(),
                0,
                "{name}: website examples have no header"
            );
            assert!(
                ts[0].skipped.non_message_lines >= 3,
                "{name}: front matter is skipped"
            );
        }
    }
}

/// A key cut in half by the title's 80 characters is still redacted from the title: the title
/// is made again from its redacted line (issue 17, item 6).
#[test]
fn a_key_cut_by_the_title_is_redacted_from_it() {
    let prefix = "please deploy with this key, the staging one from the vault, ok?"; // 64 chars
    let key = "sk-ant-api03-abcdefghij0123456789XYZ";
    let text = format!(
        "# aider chat started at 2024-08-05 19:33:02\n\n#### {prefix} now {key} thanks\n\nDone.\n"
    );
    let mut ts = baton_import::parse(Format::Aider, text.as_bytes()).unwrap();
    let title = ts[0].title.clone().unwrap();
    assert!(
        title.contains("sk-ant-a") && !title.contains(key),
        "{title}"
    );
    let (_, redacted) = ts[0].to_import("/x.md", None, &baton_core::tokens::ByteEstimate);
    assert_eq!(redacted, 1, "the key is counted once, in its message");
    let title = ts[0].title.clone().unwrap();
    assert!(!title.contains("sk-ant"), "{title}");
    assert!(title.starts_with(prefix), "{title}");
}
