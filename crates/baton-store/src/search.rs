//! Recall search, the part both backends share: what text of a message is searchable, how it is
//! cut into words, and how a query is checked.
//!
//! Both backends index and query only the text produced here, so their tokenizers (SQLite
//! FTS5's `unicode61`, PostgreSQL's `simple` configuration) see nothing but lowercase words of
//! letters and digits separated by single spaces, and agree on what a word is:
//! - a word is a maximal run of alphanumeric characters; everything else separates words
//!   (so `src/main.rs` is the words `src main rs`, and `read_file` is `read file`);
//! - case is folded, and so are compatibility forms and diacritics (NFKD, combining marks
//!   dropped): `Café` and `cafe` are the same word;
//! - a word longer than [`MAX_WORD_BYTES`] is cut to its first [`MAX_WORD_BYTES`] bytes, in the
//!   body and in the pattern alike.
//!
//! A long text is indexed as several overlapping parts of at most [`PART_WORDS`] words, each
//! sharing [`MAX_PHRASE_WORDS`] words with the next, so every phrase of up to
//! [`MAX_PHRASE_WORDS`] words lies whole inside one part. That keeps each PostgreSQL `tsvector`
//! far below its 1 MB limit and its positions below 16,383 (beyond which phrase matching stops
//! working), and gives SQLite the same parts, so both backends answer alike.
//!
//! # Design
//!
//! `Store::search` is a phrase search on whole words, in seq order, over the originals (summaries do not hide anything from it).
//! SQLite indexes with FTS5 (`unicode61`, contentless), PostgreSQL with a `tsvector` column and a GIN index; both index the words baton itself produced, so tokenizer differences (PostgreSQL keeps `src/main.rs` as one token, FTS5 splits it) cannot make the backends disagree.
//! The index is brought up to date by `search` itself, from a per-run "indexed through" mark: on SQLite 1,000 messages per write transaction, so appends (which need SQLite's one write lock) slip in between batches of a long run's first search; on PostgreSQL in one transaction holding the run's progress row, which appends never lock. Writing it inside `append` made a single-message append several times slower, and an index that only a search reads can be built when a search first needs it.
//! The first search of a long run pays for indexing it.

use baton_core::{ContentBlock, Entry, Message};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::Error;
use crate::backend::Phrase;

/// Which blocks a search looks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchKind {
    /// Text and thinking blocks.
    Text,
    /// Tool calls: the tool's name and its input's keys and values.
    ToolUse,
    /// The text blocks of tool results.
    ToolResult,
}

impl SearchKind {
    /// Every kind, in the order [`search_texts`] returns them.
    pub const ALL: [SearchKind; 3] = [
        SearchKind::Text,
        SearchKind::ToolUse,
        SearchKind::ToolResult,
    ];

    /// The snake_case name, as stored in the search index.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchKind::Text => "text",
            SearchKind::ToolUse => "tool_use",
            SearchKind::ToolResult => "tool_result",
        }
    }

    /// The kind named `s` (as [`SearchKind::as_str`] spells it).
    pub fn parse(s: &str) -> Option<SearchKind> {
        SearchKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for SearchKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A recall search.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchQuery {
    /// The phrase to find: its words, in order, adjacent (see [`crate::search`]); a word
    /// followed by `*` matches every word it begins (`mai*` finds `main`).
    pub pattern: String,
    /// Only blocks of this kind; every kind when `None`.
    pub kind: Option<SearchKind>,
    /// The most entries to return; at least 1.
    pub limit: usize,
}

impl SearchQuery {
    /// A search of every kind for `pattern`, returning at most `limit` entries.
    pub fn new(pattern: impl Into<String>, limit: usize) -> Self {
        SearchQuery {
            pattern: pattern.into(),
            kind: None,
            limit,
        }
    }
}

/// Words longer than this (in UTF-8 bytes) are cut to this length.
pub const MAX_WORD_BYTES: usize = 255;
/// The most words of one indexed part.
pub const PART_WORDS: usize = 2048;
/// The most words of a pattern; also the overlap of consecutive parts.
pub const MAX_PHRASE_WORDS: usize = 256;

/// One row of the search index: the words of one part of one kind of text of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRow {
    /// Which blocks the words come from.
    pub kind: SearchKind,
    /// The part's number, from 0.
    pub part: u32,
    /// The words, normalized, separated by single spaces.
    pub body: String,
}

/// The searchable text of a message, one string per kind that has any: text and thinking
/// blocks ([`SearchKind::Text`]); each tool call's name and its input's keys and values
/// ([`SearchKind::ToolUse`]); the text blocks of tool results ([`SearchKind::ToolResult`]).
/// Blocks of one kind are joined by newlines. Redacted thinking, images and documents have no
/// searchable text.
pub fn search_texts(message: &Message) -> Vec<(SearchKind, String)> {
    let mut texts: [String; 3] = Default::default();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => push_line(&mut texts[0], text),
            ContentBlock::Thinking { thinking, .. } => push_line(&mut texts[0], thinking),
            ContentBlock::ToolUse { name, input, .. } => {
                push_line(&mut texts[1], name);
                render_json(&mut texts[1], input);
            }
            ContentBlock::ToolResult { content, .. } => {
                for inner in content {
                    match inner {
                        ContentBlock::Text { text } => push_line(&mut texts[2], text),
                        ContentBlock::ToolReference { tool_name } => {
                            push_line(&mut texts[2], tool_name);
                        }
                        _ => {}
                    }
                }
            }
            ContentBlock::ToolReference { tool_name } => push_line(&mut texts[2], tool_name),
            ContentBlock::RedactedThinking { .. }
            | ContentBlock::Opaque { .. }
            | ContentBlock::Image { .. }
            | ContentBlock::Document { .. } => {}
        }
    }
    SearchKind::ALL
        .into_iter()
        .zip(texts)
        .filter(|(_, text)| !text.is_empty())
        .collect()
}

/// The rows a backend writes to its search index for a message, when a search first indexes
/// it: [`search_texts`] cut into normalized words and overlapping parts. Kinds whose text has
/// no words get no row.
pub fn search_rows(message: &Message) -> Vec<SearchRow> {
    let mut rows = Vec::new();
    for (kind, text) in search_texts(message) {
        for (part, body) in parts(Words::of(&text), PART_WORDS, MAX_PHRASE_WORDS)
            .into_iter()
            .enumerate()
        {
            rows.push(SearchRow {
                kind,
                part: u32::try_from(part).unwrap_or(u32::MAX),
                body,
            });
        }
    }
    rows
}

/// Messages a search indexes per write transaction while it brings a run's index up to date.
pub(crate) const INDEX_BATCH: u64 = 1000;

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The matching entries, in seq order.
    pub entries: Vec<Entry>,
    /// Set when nothing matched the pattern's words whole but their prefix form does: that
    /// form (every word followed by `*`, as a pattern takes it), for the caller to suggest.
    /// `None` when something matched, when the pattern already had a prefix, or when the
    /// prefix form finds nothing either.
    pub prefix_form: Option<String>,
}

/// Checks a query and returns the phrase a backend matches: its pattern's normalized words,
/// in order, each marked a prefix when `*` follows it in the pattern (`mai*`, `src/mai*`).
pub(crate) fn phrase(query: &SearchQuery) -> Result<Phrase, Error> {
    if query.limit == 0 {
        return Err(Error::InvalidQuery {
            detail: "limit is 0: ask for at least one entry".into(),
        });
    }
    let mut words = Vec::new();
    let pieces: Vec<&str> = query.pattern.split('*').collect();
    for (i, piece) in pieces.iter().enumerate() {
        let of = Words::of(piece);
        let starred = i + 1 < pieces.len() && piece.ends_with(char::is_alphanumeric);
        for w in 0..of.len() {
            words.push((of.span(w, w + 1).to_owned(), starred && w + 1 == of.len()));
        }
    }
    if words.is_empty() {
        return Err(Error::InvalidQuery {
            detail: format!("pattern {:?} has no words", query.pattern),
        });
    }
    if words.len() > MAX_PHRASE_WORDS {
        return Err(Error::InvalidQuery {
            detail: format!(
                "pattern has {} words; a phrase has at most {MAX_PHRASE_WORDS}",
                words.len()
            ),
        });
    }
    Ok(Phrase {
        words,
        kind: query.kind,
        limit: u64::try_from(query.limit).unwrap_or(u64::MAX),
    })
}

fn push_line(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(text);
}

/// A JSON value as text: object keys and scalar values, unescaped, one per line.
fn render_json(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::Bool(b) => push_line(out, if *b { "true" } else { "false" }),
        Value::Number(n) => push_line(out, &n.to_string()),
        Value::String(s) => push_line(out, s),
        Value::Array(items) => items.iter().for_each(|v| render_json(out, v)),
        Value::Object(map) => {
            for (key, v) in map {
                push_line(out, key);
                render_json(out, v);
            }
        }
    }
}

/// The normalized words of a text, stored once: `text` holds them separated by single spaces,
/// `bounds` where each one is.
struct Words {
    text: String,
    bounds: Vec<(usize, usize)>,
}

impl Words {
    /// The normalized words of `text`, in order.
    ///
    /// ASCII characters other than letters and digits separate words under every
    /// normalization, so the text is split on them first; ASCII pieces (nearly all of them)
    /// are only lowercased, and the rest are folded: lowercase, NFKD with combining marks
    /// dropped, NFC, final sigma as sigma, then split again on what is not alphanumeric.
    fn of(text: &str) -> Words {
        let mut words = Words {
            text: String::with_capacity(text.len()),
            bounds: Vec::new(),
        };
        for piece in text.split(|c: char| c.is_ascii() && !c.is_ascii_alphanumeric()) {
            if piece.is_empty() {
                continue;
            }
            if piece.is_ascii() {
                words.push(piece, true);
            } else {
                let folded: String = piece
                    .to_lowercase()
                    .nfkd()
                    .filter(|c| !is_combining_mark(*c))
                    .nfc()
                    .map(|c| if c == 'ς' { 'σ' } else { c })
                    .collect();
                for word in folded.split(|c: char| !c.is_alphanumeric()) {
                    if !word.is_empty() {
                        words.push(word, false);
                    }
                }
            }
        }
        words
    }

    /// Appends one word, cut to [`MAX_WORD_BYTES`]; ASCII words are lowercased here.
    fn push(&mut self, word: &str, ascii: bool) {
        let mut end = word.len().min(MAX_WORD_BYTES);
        while !word.is_char_boundary(end) {
            end -= 1;
        }
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        let from = self.text.len();
        self.text.push_str(&word[..end]);
        if ascii {
            self.text[from..].make_ascii_lowercase();
        }
        self.bounds.push((from, self.text.len()));
    }

    fn len(&self) -> usize {
        self.bounds.len()
    }

    fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// Words `from..to`, separated by single spaces.
    fn span(&self, from: usize, to: usize) -> &str {
        &self.text[self.bounds[from].0..self.bounds[to - 1].1]
    }
}

/// `words` as bodies of at most `size` words, each starting `size - overlap` words after the
/// previous one: every run of up to `overlap` consecutive words lies whole inside one body.
fn parts(words: Words, size: usize, overlap: usize) -> Vec<String> {
    if words.len() <= size {
        return if words.is_empty() {
            Vec::new()
        } else {
            vec![words.text]
        };
    }
    let step = size.saturating_sub(overlap).max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < words.len() {
        let end = (start + size).min(words.len());
        out.push(words.span(start, end).to_owned());
        if end == words.len() {
            break;
        }
        start += step;
    }
    out
}

/// One line of a search hit (`recall --grep`, the MCP `search` tool): the first line of the
/// message's searchable text (of the kind searched) that holds the pattern's first word, cut to
/// at most `max` characters around it (plus `…` where it was cut); the message's first line when no line holds it as written (the
/// index folds case and diacritics, this only case).
pub fn snippet(message: &Message, kind: Option<SearchKind>, pattern: &str, max: usize) -> String {
    let word: String = pattern
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .to_lowercase();
    let texts: Vec<String> = search_texts(message)
        .into_iter()
        .filter(|(k, _)| kind.is_none_or(|kind| kind == *k))
        .map(|(_, text)| text)
        .collect();
    let lines = || {
        texts
            .iter()
            .flat_map(|t| t.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty())
    };
    let found = lines().find_map(|line| find_ignoring_case(line, &word).map(|at| (line, at)));
    let (line, at) = match found {
        Some(hit) => hit,
        None => (lines().next().unwrap_or(""), 0),
    };
    cut_around(line, at, max)
}

/// The byte offset of `word` (lowercase) in `line`, ignoring ASCII case; for a word with other
/// letters, as written.
fn find_ignoring_case(line: &str, word: &str) -> Option<usize> {
    if word.is_empty() {
        return None;
    }
    if !word.is_ascii() {
        return line.find(word);
    }
    let (hay, needle) = (line.as_bytes(), word.as_bytes());
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
        .filter(|&at| line.is_char_boundary(at))
}

/// At most `max` characters of `line` around byte `at`, a third of them before it, with `…`
/// where it was cut.
fn cut_around(line: &str, at: usize, max: usize) -> String {
    let before = line[..at].chars().count();
    let total = line.chars().count();
    if total <= max {
        return line.to_owned();
    }
    let start = before.saturating_sub(max / 3).min(total - max);
    let text: String = line.chars().skip(start).take(max).collect();
    let lead = if start > 0 { "…" } else { "" };
    let tail = if start + max < total { "…" } else { "" };
    format!("{lead}{text}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::Role;

    fn w(text: &str) -> Vec<String> {
        let words = Words::of(text);
        (0..words.len())
            .map(|i| words.span(i, i + 1).to_owned())
            .collect()
    }

    #[test]
    fn words_fold_case_diacritics_and_punctuation() {
        assert_eq!(w("Café, CRÈME-brûlée!"), ["cafe", "creme", "brulee"]);
        assert_eq!(
            w("src/main.rs read_file"),
            ["src", "main", "rs", "read", "file"]
        );
        assert_eq!(w("ﬁle ２"), ["file", "2"]);
        assert_eq!(w("Straße İstanbul"), ["straße", "istanbul"]);
        assert_eq!(w("ΟΔΟΣ'Α οδος"), ["οδοσ", "α", "οδοσ"], "final sigma folds");
        assert_eq!(w("naïve-café½x"), ["naive", "cafe1", "2x"]);
        assert_eq!(
            w("Hello—World"),
            ["hello", "world"],
            "a non-ASCII dash separates"
        );
        assert_eq!(w("  !!! \"\" "), Vec::<String>::new());
        let long = "é".repeat(300);
        let cut = &w(&long)[0];
        assert_eq!(cut.len(), MAX_WORD_BYTES);
        assert!(cut.chars().all(|c| c == 'e'));
        let wide = "ж".repeat(200); // 2 bytes each: cut at a char boundary
        assert_eq!(w(&wide)[0].len(), 254);
    }

    #[test]
    fn texts_by_kind() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Thinking {
                    thinking: "plan".into(),
                    signature: None,
                },
                ContentBlock::Text { text: "go".into() },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "grep".into(),
                    input: serde_json::json!({"pattern": "a\nb \"q\"", "n": 3, "flags": [true, null]}),
                },
                ContentBlock::ToolResult {
                    tool_use_id: "t0".into(),
                    content: vec![
                        ContentBlock::Text { text: "out".into() },
                        ContentBlock::RedactedThinking { data: "x".into() },
                    ],
                    is_error: false,
                },
                ContentBlock::RedactedThinking {
                    data: "secret".into(),
                },
            ],
        };
        let texts = search_texts(&m);
        assert_eq!(texts[0], (SearchKind::Text, "plan\ngo".into()));
        assert_eq!(texts[1].0, SearchKind::ToolUse);
        let mut tool_words = w(&texts[1].1);
        assert_eq!(tool_words[0], "grep");
        tool_words.sort();
        assert_eq!(
            tool_words,
            ["3", "a", "b", "flags", "grep", "n", "pattern", "q", "true"]
        );
        assert_eq!(texts[2], (SearchKind::ToolResult, "out".into()));
        assert!(search_texts(&Message::text(Role::User, "")).is_empty());
        // Text without words has no row.
        assert!(search_rows(&Message::text(Role::User, "--- ...")).is_empty());
    }

    #[test]
    fn every_short_phrase_lies_inside_one_part() {
        let all: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
        for n in 0..all.len() {
            let words = &all[..n];
            let bodies = parts(Words::of(&words.join(" ")), 8, 3);
            assert_eq!(bodies.is_empty(), n == 0);
            for len in 1..=3 {
                for start in 0..n.saturating_sub(len - 1) {
                    let phrase = words[start..start + len].join(" ");
                    assert!(
                        bodies
                            .iter()
                            .any(|b| format!(" {b} ").contains(&format!(" {phrase} "))),
                        "n={n}: {phrase} is split across parts {bodies:?}"
                    );
                }
            }
            assert!(bodies.iter().all(|b| b.split(' ').count() <= 8));
        }
    }

    #[test]
    fn long_texts_become_overlapping_rows() {
        let text: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
        let rows = search_rows(&Message::text(Role::User, text.join(" ")));
        assert_eq!(rows.len(), 3);
        assert_eq!(rows.iter().map(|r| r.part).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(
            rows[1]
                .body
                .starts_with(&format!("w{} ", PART_WORDS - MAX_PHRASE_WORDS))
        );
    }

    #[test]
    fn queries_are_checked() {
        let words = |pattern: &str| phrase(&SearchQuery::new(pattern, 1)).unwrap().words;
        let whole = |w: &[&str]| w.iter().map(|w| (w.to_string(), false)).collect::<Vec<_>>();
        assert_eq!(
            words("  Read   the \"FILE\" "),
            whole(&["read", "the", "file"])
        );
        assert_eq!(
            words("src/Mai* ru*st *x * Café*"),
            [
                ("src", false),
                ("mai", true),
                ("ru", true),
                ("st", false),
                ("x", false),
                ("cafe", true)
            ]
            .map(|(w, p)| (w.to_string(), p))
        );
        let none = phrase(&SearchQuery::new("?!*", 5)).unwrap_err();
        assert_eq!(none.to_string(), "search: pattern \"?!*\" has no words");
        let zero = phrase(&SearchQuery::new("x", 0)).unwrap_err();
        assert!(matches!(zero, Error::InvalidQuery { .. }), "{zero}");
        let long = phrase(&SearchQuery::new("a ".repeat(MAX_PHRASE_WORDS + 1), 5));
        assert!(matches!(long, Err(Error::InvalidQuery { .. })));
        assert_eq!(SearchKind::parse("tool_use"), Some(SearchKind::ToolUse));
        assert_eq!(SearchKind::parse("tool"), None);
    }
}
