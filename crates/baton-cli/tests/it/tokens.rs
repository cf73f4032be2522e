//! `--tokenizer` (issue 5, item 1): the count stored with each message comes from the chosen
//! counter, on append and on import, and a bad name exits 4 naming it.

use baton_core::tokens::TokenCounter;
use baton_tokens::{Encoding, Tiktoken};
use serde_json::Value;

use crate::support::{Sandbox, ran};

/// English with code and a path: far from four bytes a token in every vocabulary.
const LINE: &str = r#"{"role":"user","content":"Please read src/main.rs and explain why `cargo build --release` fails: error[E0308]: mismatched types, expected `u32`, found `usize`. Keep it read-only; never run `git push`."}"#;

/// The stored token counts of a run's messages, in seq order.
fn stored_tokens(sb: &Sandbox, run: &str) -> Vec<u64> {
    sb.run(&["--json", "history", run]).ok().json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["tokens"].as_u64().unwrap())
        .collect()
}

fn count(counter: &dyn TokenCounter, line: &str) -> u64 {
    let value: Value = serde_json::from_str(line).unwrap();
    let message = baton_wire::parse_message(&value).unwrap();
    u64::from(counter.count_message(&message))
}

#[test]
fn append_stores_the_count_of_the_chosen_tokenizer() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    sb.run_with_stdin(&["--tokenizer", "bytes", "append", "r"], LINE)
        .ok();
    sb.run_with_stdin(&["append", "r", "--tokenizer", "o200k_base"], LINE)
        .ok();
    sb.run_with_stdin(&["append", "r", "--tokenizer", "cl100k"], LINE)
        .ok();
    let stored = stored_tokens(&sb, "r");
    let expected = [
        count(&baton_core::tokens::ByteEstimate, LINE),
        count(&Tiktoken::new(Encoding::O200k), LINE),
        count(&Tiktoken::new(Encoding::Cl100k), LINE),
    ];
    assert_eq!(stored, expected);
    assert_ne!(
        stored[0], stored[1],
        "the proxy and o200k_base agree: {stored:?}"
    );
}

#[test]
fn append_counts_with_o200k_by_default() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let path = sb.file("m.jsonl", LINE);
    ran(sb
        .command(&["append", "r", "--file", path.to_str().unwrap()])
        .env_remove("BATON_TOKENIZER")
        .output()
        .unwrap())
    .ok();
    assert_eq!(
        stored_tokens(&sb, "r"),
        [count(&Tiktoken::new(Encoding::O200k), LINE)]
    );
}

#[test]
fn the_environment_chooses_the_tokenizer_too() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let path = sb.file("m.jsonl", LINE);
    ran(sb
        .command(&["append", "r", "--file", path.to_str().unwrap()])
        .env("BATON_TOKENIZER", "bytes")
        .output()
        .unwrap())
    .ok();
    assert_eq!(
        stored_tokens(&sb, "r"),
        [count(&baton_core::tokens::ByteEstimate, LINE)]
    );
}

#[test]
fn a_bad_tokenizer_exits_4_naming_it_and_stores_nothing() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let err = sb
        .run_with_stdin(&["--tokenizer", "p50k_base", "append", "r"], LINE)
        .fails(4, r#"tokenizer "p50k_base""#);
    assert!(
        err.stderr
            .contains("expected one of auto, bytes, o200k_base, cl100k_base"),
        "{}",
        err.stderr
    );
    assert_eq!(stored_tokens(&sb, "r"), Vec::<u64>::new());
    let from_env = ran(sb
        .command(&["runs", "list"])
        .env("BATON_TOKENIZER", "gpt2")
        .output()
        .unwrap());
    from_env.fails(4, r#"tokenizer "gpt2""#);
}

/// A Claude Code session of two messages whose model is a Claude model.
fn claude_session() -> String {
    let line = |v: Value| v.to_string();
    [
        line(serde_json::json!({
            "type": "user", "uuid": "1", "parentUuid": null, "sessionId": "tok-s1",
            "isSidechain": false, "timestamp": "2026-01-02T03:04:05Z",
            "message": {"role": "user", "content": "solo lectura, por favor: ¿por qué falla la compilación? 👍👍👍"}
        })),
        line(serde_json::json!({
            "type": "assistant", "uuid": "2", "parentUuid": "1", "sessionId": "tok-s1",
            "isSidechain": false, "timestamp": "2026-01-02T03:04:06Z",
            "message": {"role": "assistant", "id": "m1", "model": "claude-sonnet-4-5",
                        "content": [{"type": "text", "text": "Entendido: solo leeré los archivos. 🔍"}]}
        })),
    ]
    .join("\n")
}

/// Imports `file` with `args` added; returns the new run's stored counts.
fn import_tokens(sb: &Sandbox, file: &str, args: &[&str]) -> Vec<u64> {
    let mut all = vec!["import", "--json", file];
    all.extend_from_slice(args);
    let report = sb.run(&all).ok().json();
    let run = report["runs"][0]["id"].as_str().unwrap().to_owned();
    stored_tokens(sb, &run)
}

#[test]
fn import_counts_each_transcript_with_its_models_vocabulary() {
    let expected = |counter: &dyn TokenCounter| -> Vec<u64> {
        let sb = Sandbox::new();
        let file = sb.finished_file("session.jsonl", &claude_session());
        let bytes = std::fs::read(&file).unwrap();
        let transcripts =
            baton_import::parse(baton_import::detect(&bytes).unwrap(), &bytes).unwrap();
        transcripts[0]
            .messages
            .iter()
            .map(|m| u64::from(counter.count_message(&m.message)))
            .collect()
    };
    let cl100k = expected(&Tiktoken::new(Encoding::Cl100k));
    let o200k = expected(&Tiktoken::new(Encoding::O200k));
    assert_ne!(cl100k, o200k, "the vocabularies agree on this text");

    // auto: the session's model is a Claude model, counted with the cl100k_base proxy.
    let sb = Sandbox::new();
    let file = sb.finished_file("session.jsonl", &claude_session());
    let file = file.to_str().unwrap();
    assert_eq!(import_tokens(&sb, file, &["--tokenizer", "auto"]), cl100k);

    let sb = Sandbox::new();
    let file = sb.finished_file("session.jsonl", &claude_session());
    let file = file.to_str().unwrap();
    assert_eq!(
        import_tokens(&sb, file, &["--tokenizer", "o200k_base"]),
        o200k
    );
}
