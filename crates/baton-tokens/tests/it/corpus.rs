//! Every text baton counts in the shared corpus, counted by baton's `Tiktoken` (the `bpe-openai`
//! tokenizers) and by `tiktoken-rs` (the reference port of OpenAI's tiktoken), in both
//! vocabularies: the counts must be identical, text by text.
// issue 17, item 7: a faster exact BPE, checked for identical counts on the whole corpus.

use std::path::PathBuf;

use baton_core::tokens::TokenCounter;
use baton_core::{ContentBlock, Message};
use baton_tokens::{Encoding, Tiktoken};

/// The texts `TokenCounter::count_message` hands to `count_text` for `message`.
fn texts(message: &Message, out: &mut Vec<String>) {
    fn block(b: &ContentBlock, out: &mut Vec<String>) {
        match b {
            ContentBlock::Text { text } => out.push(text.clone()),
            ContentBlock::Thinking { thinking, .. } => out.push(thinking.clone()),
            ContentBlock::ToolUse { name, input, .. } => {
                out.push(name.clone());
                out.push(input.to_string());
            }
            ContentBlock::ToolResult { content, .. } => {
                for b in content {
                    block(b, out);
                }
            }
            _ => {}
        }
    }
    for b in &message.content {
        block(b, out);
    }
}

fn corpus_texts() -> Option<Vec<String>> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    if !root.is_dir() {
        println!("skipping: corpus not found at {}", root.display());
        return None;
    }
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let Some(format) = baton_import::detect(&bytes) else {
                continue;
            };
            for t in baton_import::parse(format, &bytes).unwrap() {
                for m in &t.messages {
                    texts(&m.message, &mut out);
                }
            }
        }
    }
    // Special-token markers and edge cases of the pre-tokenizers, beside the corpus.
    out.extend(
        [
            "<|endoftext|> and <|im_start|>",
            "trailing spaces   ",
            "   leading",
            "\n\n\n",
            "a  \n  b\t\t\r\n",
            "don't I'LL we've",
            "1234567890 3.14159",
            "日本語のテキスト、そして emoji 🎉🎉",
            "",
        ]
        .map(str::to_owned),
    );
    Some(out)
}

#[test]
fn counts_equal_tiktokens_on_every_text_of_the_corpus() {
    let Some(texts) = corpus_texts() else { return };
    let bytes: usize = texts.iter().map(String::len).sum();
    assert!(bytes > 5_000_000, "{bytes} bytes of text");
    for (encoding, reference) in [
        (Encoding::O200k, tiktoken_rs::o200k_base().unwrap()),
        (Encoding::Cl100k, tiktoken_rs::cl100k_base().unwrap()),
    ] {
        let ours = Tiktoken::new(encoding);
        let mut differ = Vec::new();
        let mut total = 0u64;
        for text in &texts {
            let theirs = reference.encode_ordinary(text).len() as u32;
            let got = ours.count_text(text);
            total += u64::from(got);
            if got != theirs {
                differ.push(format!(
                    "{got} vs {theirs}: {:?}",
                    text.chars().take(80).collect::<String>()
                ));
            }
        }
        println!(
            "{}: {} texts, {bytes} bytes, {total} tokens, {} differ",
            encoding.name(),
            texts.len(),
            differ.len()
        );
        assert!(
            differ.is_empty(),
            "{}: {} of {} texts counted differently:\n{}",
            encoding.name(),
            differ.len(),
            texts.len(),
            differ[..differ.len().min(10)].join("\n")
        );
    }
}
