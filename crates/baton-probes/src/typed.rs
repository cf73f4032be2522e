//! The messages the user typed, and the key phrase each is probed by (the rules are in the
//! crate documentation).

use baton_core::{ContentBlock, Entry, Role, Seq};

use crate::text::first_words;

/// Text a harness writes into user messages, never typed by the user.
const HARNESS_PREFIXES: [&str; 6] = [
    "<",
    "Caveat:",
    "[Request interrupted",
    "# AGENTS.md instructions",
    "Base directory for this skill",
    "This session is being continued from a previous conversation",
];

/// The line after which Codex's IDE and desktop clients put what the user typed, below the
/// files and context they attached (`# Files mentioned by the user:`, `# Context from my IDE
/// setup:`).
const CODEX_REQUEST_MARKER: &str = "## My request for Codex:";

/// How many words a key phrase keeps.
const KEY_WORDS: usize = 12;

/// A sentence ends (at `.`, `!`, `?` before whitespace, or a line break) only once it has this
/// many words, so a list number or a one-word greeting does not make the whole key.
const MIN_SENTENCE_WORDS: usize = 3;

/// A message the user typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// The seq of the message.
    pub seq: Seq,
    /// What the user typed: the text block, or a slash command as `/name args`.
    pub text: String,
    /// Whether it is a slash command.
    pub command: bool,
}

impl Instruction {
    /// The phrase a context must hold for the instruction to count as present: its first
    /// sentence cut to its first 12 words (a slash command: `/name args` cut the same way).
    pub fn key(&self) -> String {
        if self.command {
            return first_words(&self.text, KEY_WORDS);
        }
        first_words(first_sentence(&self.text), KEY_WORDS)
    }
}

/// Every message the user typed at or before `through`, in order (the rules are in the crate
/// documentation).
pub fn instructions(history: &[Entry], through: Seq) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut after_command = false;
    for entry in history.iter().take_while(|e| e.seq <= through) {
        let message = &entry.message;
        if message.role != Role::User {
            after_command = false;
            continue;
        }
        let blocks: Vec<Block> = message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(classify(text)),
                _ => None,
            })
            .collect();
        let is_command = blocks.iter().any(|b| matches!(b, Block::Command(_)));
        let typed = blocks.iter().any(|b| matches!(b, Block::Typed(_)));
        // The text message right after a slash command is the command's expansion.
        let expansion = after_command && typed && !is_command;
        after_command = is_command;
        if expansion {
            continue;
        }
        for block in blocks {
            match block {
                Block::Command(text) => out.push(Instruction {
                    seq: entry.seq,
                    text,
                    command: true,
                }),
                Block::Typed(text) => out.push(Instruction {
                    seq: entry.seq,
                    text,
                    command: false,
                }),
                Block::Harness => {}
            }
        }
    }
    out
}

/// What one text block of a user message is.
enum Block {
    /// A slash command echo, as typed (`/name args`).
    Command(String),
    /// Text the user typed.
    Typed(String),
    /// Harness text, or nothing.
    Harness,
}

fn classify(raw: &str) -> Block {
    let text = without_reminders(raw);
    let text = text.trim();
    if let Some(command) = slash_command(text) {
        return Block::Command(command);
    }
    if text.is_empty() || HARNESS_PREFIXES.iter().any(|p| text.starts_with(p)) {
        return Block::Harness;
    }
    let text = match text.find(CODEX_REQUEST_MARKER) {
        Some(at) => text[at + CODEX_REQUEST_MARKER.len()..].trim(),
        None => text,
    };
    if text.is_empty() {
        return Block::Harness;
    }
    Block::Typed(text.to_owned())
}

/// `text` without its `<system-reminder>…</system-reminder>` segments (an unclosed one runs
/// to the end).
fn without_reminders(text: &str) -> std::borrow::Cow<'_, str> {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    if !text.contains(OPEN) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        match after.find(CLOSE) {
            Some(end) => rest = &after[end + CLOSE.len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out.into()
}

/// A slash command echo (`<command-name>/x</command-name>`, with `<command-message>` and
/// `<command-args>` in any order) as typed: `/x args`.
fn slash_command(text: &str) -> Option<String> {
    if !text.starts_with('<') {
        return None;
    }
    let name = tag(text, "command-name")?.trim();
    if name.is_empty() {
        return None;
    }
    let args = tag(text, "command-args").unwrap_or("").trim();
    let slash = if name.starts_with('/') { "" } else { "/" };
    Some(if args.is_empty() {
        format!("{slash}{name}")
    } else {
        format!("{slash}{name} {args}")
    })
}

/// The inside of the first `<name>…</name>` of `text`.
fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&close)?;
    Some(&text[start..start + len])
}

/// The first sentence of `text`: up to a `.`, `!` or `?` followed by whitespace (or the end),
/// or a line break, once it holds [`MIN_SENTENCE_WORDS`] words.
fn first_sentence(text: &str) -> &str {
    let text = text.trim_start();
    let mut words = 0;
    let mut in_word = false;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_whitespace() {
            if in_word {
                words += 1;
                in_word = false;
            }
            if c == '\n' && words >= MIN_SENTENCE_WORDS {
                return &text[..i];
            }
            continue;
        }
        in_word = true;
        if matches!(c, '.' | '!' | '?')
            && words + 1 >= MIN_SENTENCE_WORDS
            && chars.peek().is_none_or(|(_, next)| next.is_whitespace())
        {
            return &text[..i + c.len_utf8()];
        }
    }
    text
}

#[cfg(test)]
mod tests;
