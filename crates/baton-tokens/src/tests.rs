//! Known counts, the model table, and parsing `--tokenizer`.

use baton_core::tokens::{ByteEstimate, TokenCounter};
use baton_core::{ContentBlock, Message, Role};

use super::*;

const O200K: Tiktoken = Tiktoken {
    encoding: Encoding::O200k,
};
const CL100K: Tiktoken = Tiktoken {
    encoding: Encoding::Cl100k,
};

#[track_caller]
fn check_counts(text: &str, o200k: u32, cl100k: u32) {
    assert_eq!(
        (O200K.count_text(text), CL100K.count_text(text)),
        (o200k, cl100k),
        "{text:?} (o200k_base, cl100k_base)"
    );
}

#[test]
fn known_counts() {
    // tiktoken's own tests: "hello world" is [24912, 2375] in o200k_base and [15339, 1917] in
    // cl100k_base; "👍" is three byte-level tokens in cl100k_base, [9468, 239, 235].
    check_counts("hello world", 2, 2);
    assert_eq!(Encoding::O200k.bpe().encode("hello world"), [24912, 2375]);
    assert_eq!(Encoding::Cl100k.bpe().encode("hello world"), [15339, 1917]);
    assert_eq!(Encoding::Cl100k.bpe().encode("👍"), [9468, 239, 235]);
    check_counts("", 0, 0);
    check_counts("👍", 1, 3);
    // Both split digits into runs of at most three, each one token.
    check_counts("1234567890", 4, 4);
}

#[test]
fn special_token_text_is_ordinary_text() {
    // As one special token it would be 1; as text it is several, and never an error.
    let n = O200K.count_text("<|endoftext|>");
    assert!(n > 1, "{n}");
    assert!(CL100K.count_text("before <|endoftext|> after") > 3);
}

#[test]
fn names_are_the_vocabularies() {
    assert_eq!(O200K.name(), "o200k_base");
    assert_eq!(CL100K.name(), "cl100k_base");
    assert_eq!(Tiktoken::new(Encoding::Cl100k).encoding(), Encoding::Cl100k);
}

#[test]
fn a_message_counts_at_least_its_text() {
    let text = "Read src/main.rs and tell me why `cargo build --release` fails on line 42.";
    let message = Message::text(Role::User, text);
    for counter in [O200K, CL100K] {
        let n = counter.count_message(&message);
        assert!(n >= counter.count_text(text), "{}: {n}", counter.name());
        // The same structure overhead as the byte-based proxy: one block, one message.
        assert_eq!(n, counter.count_text(text) + 3 + 4, "{}", counter.name());
    }
}

#[test]
fn tool_calls_count_their_name_and_input() {
    let message = Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: "call_1".into(),
            name: "read_file".into(),
            input: serde_json::json!({ "path": "src/lib.rs" }),
        }],
    };
    let input = r#"{"path":"src/lib.rs"}"#;
    assert_eq!(
        O200K.count_message(&message),
        O200K.count_text("read_file") + O200K.count_text(input) + 3 + 4
    );
}

#[test]
fn real_counts_differ_from_the_proxy() {
    let text = "x".repeat(4000);
    // A run of one letter merges into long tokens: far fewer than one per four bytes.
    assert!(O200K.count_text(&text) < ByteEstimate.count_text(&text));
}

#[track_caller]
fn check_models(table: &[(&str, Encoding)]) {
    for (model, expected) in table {
        assert_eq!(encoding_for_model(model), *expected, "{model}");
    }
}

#[test]
fn models_of_the_o200k_family() {
    use Encoding::O200k;
    check_models(&[
        ("gpt-4o", O200k),
        ("gpt-4o-mini-2024-07-18", O200k),
        ("chatgpt-4o-latest", O200k),
        ("gpt-4.1-nano", O200k),
        ("gpt-4.5-preview", O200k),
        ("gpt-5", O200k),
        ("gpt-5.1-codex-max", O200k),
        ("o1-preview", O200k),
        ("o3-mini", O200k),
        ("o4-mini", O200k),
        ("codex-mini-latest", O200k),
        ("my-codex-finetune", O200k),
        ("GPT-4O", O200k),
        ("openai/gpt-4o", O200k),
        ("  gpt-5-mini  ", O200k),
    ]);
}

#[test]
fn models_of_the_cl100k_family() {
    use Encoding::Cl100k;
    check_models(&[
        ("gpt-4", Cl100k),
        ("gpt-4-0613", Cl100k),
        ("gpt-4-turbo-2024-04-09", Cl100k),
        ("gpt-3.5-turbo", Cl100k),
        ("gpt-35-turbo", Cl100k),
        ("text-embedding-3-small", Cl100k),
        ("text-embedding-ada-002", Cl100k),
        ("openai/gpt-4-32k", Cl100k),
    ]);
}

#[test]
fn claude_models_use_the_cl100k_proxy() {
    use Encoding::Cl100k;
    check_models(&[
        ("claude-opus-4-1-20250805", Cl100k),
        ("claude-3-5-sonnet-20241022", Cl100k),
        ("Claude-Sonnet-4-5", Cl100k),
        ("anthropic/claude-haiku-4-5", Cl100k),
        ("anthropic.claude-3-haiku-20240307-v1:0", Cl100k),
    ]);
}

#[test]
fn unknown_models_use_o200k() {
    use Encoding::O200k;
    check_models(&[
        ("", O200k),
        ("llama-3.1-70b", O200k),
        ("gemini-2.5-pro", O200k),
        ("some/vendor/model", O200k),
    ]);
}

#[test]
fn choices_parse_by_name() {
    for choice in TokenizerChoice::ALL {
        assert_eq!(TokenizerChoice::parse(choice.name()), Ok(choice));
    }
    assert_eq!(TokenizerChoice::parse("o200k"), Ok(TokenizerChoice::O200k));
    assert_eq!(
        TokenizerChoice::parse("cl100k"),
        Ok(TokenizerChoice::Cl100k)
    );
    assert_eq!(TokenizerChoice::default(), TokenizerChoice::Auto);
}

#[test]
fn a_bad_choice_names_itself_and_the_known_ones() {
    for bad in ["x", "", "O200K_BASE", " bytes", "p50k_base"] {
        let err = TokenizerChoice::parse(bad).unwrap_err();
        assert_eq!(
            err,
            Error::UnknownTokenizer {
                value: bad.to_owned()
            }
        );
        assert_eq!(
            err.to_string(),
            format!("tokenizer {bad:?}: expected one of auto, bytes, o200k_base, cl100k_base")
        );
    }
}

#[test]
fn counter_follows_the_choice_and_the_model() {
    let name = |choice, model| counter(choice, model).name().to_owned();
    use TokenizerChoice::*;
    assert_eq!(name(Auto, None), "o200k_base");
    assert_eq!(name(Auto, Some("claude-sonnet-4-5")), "cl100k_base");
    assert_eq!(name(Auto, Some("gpt-5-codex")), "o200k_base");
    assert_eq!(name(Bytes, Some("gpt-4o")), "bytes");
    assert_eq!(name(O200k, Some("claude-sonnet-4-5")), "o200k_base");
    assert_eq!(name(Cl100k, Some("gpt-4o")), "cl100k_base");
    assert_eq!(counter(Bytes, None).count_text("abcdefgh"), 2);
}

#[test]
fn the_memo_counts_as_the_tokenizer_does_cold_warm_on_other_threads_and_after_a_reset() {
    // Words that recur, long pieces the memo skips, and more distinct pieces than it holds.
    let recurring = "fn main() { println!(\"hello, world\"); } // the the the café 👍 ".repeat(50);
    let long = format!("{} {}", "x".repeat(MEMO_PIECE_BYTES + 7), "é".repeat(40));
    let distinct: String = (0..MEMO_PIECES + 1000)
        .map(|i| format!(" w{i:x}q"))
        .collect();
    let texts = [
        recurring.as_str(),
        long.as_str(),
        distinct.as_str(),
        recurring.as_str(),
    ];
    let direct = |e: Encoding, t: &str| u32::try_from(e.bpe().count(t)).unwrap();
    for counter in [O200K, CL100K] {
        for text in texts {
            let want = direct(counter.encoding, text);
            assert_eq!(counter.count_text(text), want, "cold or warm");
            assert_eq!(counter.count_text(text), want, "warm");
            let other = std::thread::scope(|s| s.spawn(|| counter.count_text(text)).join());
            assert_eq!(other.unwrap(), want, "another thread");
        }
    }
}

/// Characters of every class the split patterns tell apart, ASCII and not: letters of each
/// case (and a title-case, a modifier and a combining mark), digits (and digits and numbers
/// from outside ASCII), each kind of white space (and the non-breaking, next-line and line
/// separators), the apostrophe and the letters of contractions (and the long s that folds to
/// `s`), `/` (which `o200k_base` lets follow a newline), punctuation, control characters, CJK
/// and an emoji.
const ALPHABET: &[char] = &[
    'a', 'z', 'A', 'Z', 's', 'S', 't', 'T', 'r', 'R', 'e', 'E', 'v', 'l', 'L', 'm', 'd', 'D', 'x',
    '0', '5', '9', ' ', ' ', ' ', '\t', '\n', '\r', '\u{b}', '\u{c}', '\'', '\'', '/', '.', ',',
    '(', '{', '"', '-', '_', '#', '\u{0}', '\u{1c}', '\u{7f}', 'é', 'É', 'ſ', 'ǅ', 'ʰ', '\u{301}',
    '²', '٣', 'Ⅻ', '\u{a0}', '\u{85}', '\u{2028}', '中', '😀', '—',
];

/// Short sequences where the patterns' alternatives meet: newlines after symbols and before
/// a `/`, white space before a newline or the end, contractions against letters.
const SNIPPETS: &[&str] = &[
    "\n/", "*/\n/", ".\r\n", "  \n  ", "\t\n\t", " \u{a0}", "'s", "'LL", "n't", " //", "x'ſ",
    "\n\u{85}",
];

fn arbitrary_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    // Mostly ASCII, as transcripts are, with runs that make words, numbers and indentation.
    let piece = prop_oneof![
        4 => proptest::sample::select(ALPHABET).prop_map(String::from),
        2 => proptest::sample::select(SNIPPETS).prop_map(String::from),
        2 => "[a-zA-Z]{1,12}",
        1 => "[ \t]{1,6}",
        1 => "[0-9]{1,7}",
        1 => "'(s|t|re|ve|m|ll|d|RE|Ll|S)",
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|parts| parts.concat())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4_000))]

    /// The table's pieces are `bpe-openai`'s regex pieces, for both vocabularies.
    #[test]
    fn pieces_are_the_regex_pieces(text in arbitrary_text()) {
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            let tokenizer = encoding.bpe();
            let ours: Vec<&str> = split::Pieces::new(encoding, tokenizer, &text).collect();
            let regex: Vec<&str> = tokenizer.split(&text).collect();
            proptest::prop_assert_eq!(ours, regex, "{} on {:?}", encoding.name(), text);
        }
    }
}

#[test]
fn pieces_of_known_texts_are_the_regex_pieces() {
    let texts = [
        "",
        "hello world",
        "  indented\n\n    code();  \n",
        "don't DON'T we'RE they'll 'sup '",
        "HTTPServer parseJSON x86_64 3.14159 2026-12-07",
        "trailing space   ",
        "a\r\n\r\n  b",
        "*/\n/ -\n// path/to/file.rs:12",
        "café naïve ſt Über ǅx ʰa e\u{301}\u{a0}b\u{85}c 中文 😀 — ²³ ٣",
    ];
    for text in texts {
        for encoding in [Encoding::O200k, Encoding::Cl100k] {
            let tokenizer = encoding.bpe();
            let ours: Vec<&str> = split::Pieces::new(encoding, tokenizer, text).collect();
            let regex: Vec<&str> = tokenizer.split(text).collect();
            assert_eq!(ours, regex, "{} on {text:?}", encoding.name());
        }
    }
}
