//! The retention audit on small hand-made transcripts.

use baton_core::{Claim, ClaimKind, ContentBlock, Entry, Message, Role, Seq, Timestamp};
use serde_json::json;

use super::*;

fn entry(seq: u64, message: Message) -> Entry {
    Entry {
        seq: Seq(seq),
        message,
        tokens: 10,
        created_at: Timestamp(0),
    }
}

fn bash(id: &str, command: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "Bash".into(),
            input: json!({ "command": command }),
        }],
    }
}

fn result(id: &str, text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text { text: text.into() }],
            is_error: false,
        }],
    }
}

fn artifact(text: &str, seq: u64) -> Claim {
    Claim::new(ClaimKind::Artifact, text, Seq(seq))
}

fn dropped() -> Vec<Entry> {
    vec![
        entry(
            1,
            Message::text(
                Role::User,
                "The build of src/main.rs takes 12 ms; see https://ex.org/b and v1.2.3.",
            ),
        ),
        entry(
            2,
            bash("t1", "cargo build --manifest-path crates/a/Cargo.toml"),
        ),
        entry(3, result("t1", "Finished in 3.5s; wrote target/out.bin")),
    ]
}

#[test]
fn facts_are_what_people_and_agents_wrote_and_ran() {
    let f = facts(&dropped());
    assert_eq!(
        f.paths.iter().collect::<Vec<_>>(),
        ["crates/a/Cargo.toml", "src/main.rs"]
    );
    assert_eq!(
        f.commands.iter().collect::<Vec<_>>(),
        ["cargo build --manifest-path crates/a/Cargo.toml"]
    );
    assert_eq!(f.urls.iter().collect::<Vec<_>>(), ["https://ex.org/b"]);
    // `3.5s` and `target/out.bin` are tool output: not facts of the dropped part.
    assert_eq!(f.numbers.iter().collect::<Vec<_>>(), ["12 ms", "v1.2.3"]);
}

#[test]
fn a_fact_is_kept_by_a_claim_quoting_it() {
    let claims = [
        artifact("path src/main.rs", 1),
        artifact("command cargo build --manifest-path crates/a/Cargo.toml", 2),
    ];
    let r = audit(&dropped(), &claims, &[]);
    // The command's claim quotes the path inside it too.
    assert_eq!(r.paths, Share { kept: 2, total: 2 });
    assert_eq!(r.commands, Share { kept: 1, total: 1 });
    assert_eq!(r.urls, Share { kept: 0, total: 1 });
    assert_eq!(r.numbers, Share { kept: 0, total: 2 });
}

#[test]
fn a_fact_is_kept_by_the_tail_in_any_visible_part() {
    let tail = [
        entry(
            4,
            Message::text(Role::Assistant, "Now https://ex.org/b again."),
        ),
        entry(5, bash("t2", "ls src")),
        entry(
            6,
            result("t2", "main.rs took 12 ms to build, version v1.2.3"),
        ),
    ];
    let r = audit(&dropped(), &[], &tail);
    assert_eq!(r.urls, Share { kept: 1, total: 1 });
    // Tool output in the tail is in the context: its numbers are reachable.
    assert_eq!(r.numbers, Share { kept: 2, total: 2 });
    assert_eq!(r.paths, Share { kept: 0, total: 2 });
    assert_eq!(r.commands, Share { kept: 0, total: 1 });
}

#[test]
fn empty_parts_have_no_ratio() {
    let r = audit(&[], &[], &[]);
    assert_eq!(r, Retention::default());
    assert_eq!(r.paths.ratio(), None);
    assert_eq!(Share { kept: 9, total: 10 }.ratio(), Some(0.9));
}

#[test]
fn shares_add_up_and_round_trip() {
    let mut total = Retention::default();
    total += audit(&dropped(), &[artifact("path src/main.rs", 1)], &[]);
    total += audit(&dropped(), &[], &[]);
    assert_eq!(total.paths, Share { kept: 1, total: 4 });
    let json = serde_json::to_string(&total).unwrap();
    assert_eq!(serde_json::from_str::<Retention>(&json).unwrap(), total);
    assert!(
        json.starts_with(r#"{"paths":{"kept":1,"total":4},"commands":"#),
        "{json}"
    );
}
