//! The working state's vocabulary: how a sentence is recognized as a user constraint, a
//! verified finding, a hypothesis, a plan, or a refutation, and how a tool's output reports a
//! failure. Shared by the offline extractor, the merge and the continuity probes, so the probes
//! look for exactly what the extractor keeps.
//!
//! Markers are matched case-insensitively as whole words or phrases (`only` matches "Only
//! read" but not "commonly"; `’` counts as `'`). English, plus a few Spanish markers.

use baton_core::{ContentBlock, Message, Role};

/// Sentences longer than this are pasted material, not something a person said: they are not
/// classified.
pub(crate) const MAX_SENTENCE_CHARS: usize = 500;

/// Imperative markers that make a user's sentence a constraint. `no <word>` is checked apart.
const CONSTRAINT: &[&str] = &[
    "never",
    "don't",
    "dont",
    "do not",
    "must",
    "must not",
    "mustn't",
    "only",
    "read-only",
    "read only",
    "without",
    "avoid",
    "always",
    "solo lectura",
    "sólo lectura",
    "no escribas",
    "nunca",
    "siempre",
    "sin",
    "solo",
    "sólo",
    "únicamente",
];

/// Markers of a checked result.
const VERIFIED: &[&str] = &[
    "confirmed",
    "confirms",
    "verified",
    "root cause",
    "the fix works",
    "fix works",
    "tests pass",
    "tests passed",
    "tests now pass",
    "is not the cause",
    "isn't the cause",
    "was not the cause",
    "wasn't the cause",
    "ruled out",
    "turned out",
    "turns out",
    "confirmado",
    "verificado",
    "causa raíz",
];

/// Hedges: a sentence with one states a belief, not a fact.
const HEDGE: &[&str] = &[
    "probably",
    "maybe",
    "might",
    "may be",
    "i think",
    "i suspect",
    "suspect",
    "likely",
    "hypothesis",
    "could be",
    "perhaps",
    "possibly",
    "seems",
    "probablemente",
    "quizás",
    "quizá",
    "tal vez",
    "creo que",
    "sospecho",
    "hipótesis",
    "puede que",
];

/// Markers of a plan: what the agent announces it will do.
const PLAN: &[&str] = &[
    "next",
    "i will",
    "i'll",
    "let me",
    "then",
    "i'm going to",
    "voy a",
    "a continuación",
];

/// Markers that make a would-be finding conditional or an intention, not a result.
const UNSETTLED: &[&str] = &[
    "if",
    "whether",
    "once",
    "until",
    "unless",
    "make sure",
    "ensure",
    "to confirm",
    "to verify",
    "need to",
    "needs to",
    "should",
    "let me",
    "i will",
    "i'll",
    "i'm going to",
    "next",
];

/// Markers of a negation or a refutation, for [`refutes`].
const REFUTATION: &[&str] = &[
    "not",
    "isn't",
    "wasn't",
    "aren't",
    "weren't",
    "doesn't",
    "didn't",
    "ruled out",
    "no longer",
    "refuted",
    "disproved",
    "instead",
    "no es",
    "no era",
    "descartado",
    "descartada",
];

/// Words too common to tie a refutation to a hypothesis.
const STOP_WORDS: &[&str] = &[
    "about",
    "after",
    "also",
    "another",
    "because",
    "been",
    "before",
    "being",
    "bug",
    "cause",
    "caused",
    "causes",
    "could",
    "does",
    "done",
    "each",
    "from",
    "have",
    "here",
    "instead",
    "into",
    "issue",
    "just",
    "likely",
    "longer",
    "maybe",
    "might",
    "more",
    "most",
    "must",
    "only",
    "probably",
    "problem",
    "refuted",
    "root",
    "ruled",
    "seems",
    "should",
    "some",
    "still",
    "such",
    "than",
    "that",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "think",
    "this",
    "those",
    "turned",
    "very",
    "verified",
    "confirmed",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "with",
    "would",
    "your",
    "hypothesis",
    "suspect",
    "perhaps",
    "possibly",
    "isn't",
    "wasn't",
    "there's",
    "it's",
    "what's",
];

/// The sentences of `text` that a person or the model wrote: lines split after `.`, `!` or
/// `?` followed by whitespace, each trimmed of list markers (`- `, `* `, `1. `, `> `, `# `),
/// skipping fenced code blocks and `<system-reminder>` blocks a harness injected. Every
/// sentence is a slice of `text`, so a claim made of one quotes it verbatim.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut fence = false;
    let mut reminder = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        if trimmed.contains("<system-reminder>") {
            reminder = true;
        }
        if reminder {
            if trimmed.contains("</system-reminder>") {
                reminder = false;
            }
            continue;
        }
        split_line(line, &mut out);
    }
    out
}

fn split_line<'a>(line: &'a str, out: &mut Vec<&'a str>) {
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let at_break = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
        if !at_break || (c == '.' && abbreviation(&line[start..i])) {
            continue;
        }
        let end = i + c.len_utf8();
        push_sentence(&line[start..end], out);
        start = end;
    }
    push_sentence(&line[start..], out);
}

/// Whether the word before a `.` makes it no sentence end (`e.g.`, `1.`, `vs.`).
fn abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or_default();
    word.is_empty()
        || word.chars().all(|c| c.is_ascii_digit())
        // `e.g`, `i.e`, `U.S`: letters between dots (a path such as `src/main.rs` is not).
        || (word.contains('.') && word.split('.').all(|p| p.chars().count() == 1))
        || ["eg", "ie", "etc", "vs", "cf", "mr", "mrs", "dr", "approx", "incl"]
            .contains(&word.to_lowercase().as_str())
}

fn push_sentence<'a>(s: &'a str, out: &mut Vec<&'a str>) {
    let mut s = s.trim();
    loop {
        let before = s;
        for marker in ["- ", "* ", "+ ", "> ", "• "] {
            if let Some(rest) = s.strip_prefix(marker) {
                s = rest.trim_start();
            }
        }
        let hashes = s.trim_start_matches('#');
        if hashes.len() < s.len() && hashes.starts_with(' ') {
            s = hashes.trim_start();
        }
        let digits = s.trim_start_matches(|c: char| c.is_ascii_digit());
        if digits.len() < s.len() && (digits.starts_with(". ") || digits.starts_with(") ")) {
            s = digits[2..].trim_start();
        }
        if s == before {
            break;
        }
    }
    if s.chars().any(char::is_alphabetic) {
        out.push(s);
    }
}

/// The lowercased sentence markers are matched against.
fn lower(s: &str) -> String {
    s.to_lowercase().replace('’', "'")
}

/// Whether `phrase` occurs in `lower` as whole words.
pub(crate) fn has_phrase(lower: &str, phrase: &str) -> bool {
    lower.match_indices(phrase).any(|(i, m)| {
        let before = lower[..i].chars().next_back();
        let after = lower[i + m.len()..].chars().next();
        before.is_none_or(|c| !word_char(c)) && after.is_none_or(|c| !word_char(c))
    })
}

/// Letters, digits and `_` make words (`subtree_only` holds no `only`).
fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn has_any(lower: &str, phrases: &[&str]) -> bool {
    phrases.iter().any(|p| has_phrase(lower, p))
}

fn classifiable(s: &str) -> bool {
    s.chars().count() <= MAX_SENTENCE_CHARS
}

/// Whether a user's sentence sets a constraint: it holds an imperative marker (`never`,
/// `don't`, `must`, `only`, `read-only`, `without`, `avoid`, `always`, `solo lectura`,
/// `nunca`…) or `no` followed by a word (`no writes`, `no escribas`).
pub(crate) fn is_constraint(sentence: &str) -> bool {
    if !classifiable(sentence) {
        return false;
    }
    let l = lower(sentence);
    has_any(&l, CONSTRAINT) || no_word(&l)
}

/// `no` followed by a space and a letter (`no secrets`), as whole words.
fn no_word(lower: &str) -> bool {
    lower.match_indices("no ").any(|(i, _)| {
        let before = lower[..i].chars().next_back();
        let after = lower[i + 3..].chars().next();
        before.is_none_or(|c| !word_char(c)) && after.is_some_and(char::is_alphabetic)
    })
}

/// Whether an assistant's sentence states a checked result: a verification marker
/// (`confirmed`, `root cause`, `tests pass`, `ruled out`…), no hedge, not a question, and
/// nothing that makes it conditional or an intention (`if`, `should`, `let me`, `next`…).
pub(crate) fn is_verified(sentence: &str) -> bool {
    if !classifiable(sentence) || sentence.trim_end().ends_with('?') {
        return false;
    }
    let l = lower(sentence);
    has_any(&l, VERIFIED) && !has_any(&l, HEDGE) && !has_any(&l, UNSETTLED)
}

/// Whether an assistant's sentence states a belief: a hedge (`probably`, `maybe`, `might`,
/// `I suspect`, `likely`, `could be`…).
pub(crate) fn is_hypothesis(sentence: &str) -> bool {
    classifiable(sentence) && has_any(&lower(sentence), HEDGE)
}

/// Whether an assistant's sentence announces a plan (`next`, `I will`, `I'll`, `let me`,
/// `then`), and is not a question.
pub(crate) fn is_plan(sentence: &str) -> bool {
    classifiable(sentence) && !sentence.trim_end().ends_with('?') && has_any(&lower(sentence), PLAN)
}

/// Whether `claim` refutes `hypothesis`: it shares at least two significant words with it
/// (four letters or more, not a stop word) and holds a negation or refutation marker (`not`,
/// `isn't`, `ruled out`, `no longer`, `refuted`, `disproved`, `instead`…).
pub(crate) fn refutes(claim: &str, hypothesis: &str) -> bool {
    let l = lower(claim);
    if !has_any(&l, REFUTATION) {
        return false;
    }
    let theirs = significant_words(hypothesis);
    let ours = significant_words(claim);
    theirs.iter().filter(|w| ours.contains(w)).count() >= 2
}

/// The distinct significant words of `text`, lowercased, in order.
fn significant_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in lower(text).split(|c: char| !c.is_alphanumeric()) {
        if word.chars().count() >= 4
            && !STOP_WORDS.contains(&word)
            && !words.iter().any(|w| w == word)
        {
            words.push(word.to_owned());
        }
    }
    words
}

/// The line of a tool's output that reports a failure, if one does: a line starting with
/// `error:`/`error[`/`fatal:`/`ERROR`/`npm ERR!`, one holding `FAILED`, `command not found`,
/// `No such file or directory`, `panicked at`, or a non-zero exit code (`Exit code 1`,
/// `exited with code 2`, `exit status 1`). For a Python traceback, the exception line.
pub(crate) fn failure_line(output: &str) -> Option<&str> {
    const TRACEBACK: &str = "Traceback (most recent call last)";
    if let Some(at) = output.find(TRACEBACK) {
        // The exception is the first line after the frames that is not indented.
        let exception = output[at..]
            .lines()
            .skip(1)
            .find(|l| !l.trim().is_empty() && !l.starts_with(char::is_whitespace));
        return Some(exception.map_or(TRACEBACK, str::trim));
    }
    // An exit code says that it failed; another failure line says why, so it is preferred.
    let mut failures = output.lines().map(str::trim).filter(|l| is_failure_line(l));
    let first = failures.next()?;
    if !nonzero_exit(&first.to_lowercase()) {
        return Some(first);
    }
    Some(
        failures
            .find(|l| !nonzero_exit(&l.to_lowercase()))
            .unwrap_or(first),
    )
}

fn is_failure_line(line: &str) -> bool {
    let l = line.to_lowercase();
    l.starts_with("error:")
        || l.starts_with("error[")
        || l.starts_with("fatal:")
        || line.starts_with("ERROR")
        || line.starts_with("npm ERR!")
        || has_phrase(line, "FAILED")
        || l.contains("command not found")
        || l.contains("no such file or directory")
        || l.contains("panicked at")
        || nonzero_exit(&l)
}

/// Whether a lowercased line reports a non-zero exit code: it starts with `exit code`,
/// `exit status`, `exited with code` or `process exited with code` (brackets aside), or says
/// `executed with exit code N` or `non-zero exit status` — so prose that merely mentions
/// exit codes does not count.
fn nonzero_exit(l: &str) -> bool {
    let line = l.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '[' | '(' | '<'));
    if line.contains("non-zero exit status") {
        return true;
    }
    let after = [
        "exit code",
        "exit status",
        "exited with code",
        "process exited with code",
        "exit_code",
    ]
    .iter()
    .find_map(|m| line.strip_prefix(m))
    .or_else(|| {
        line.find("executed with exit code")
            .map(|i| &line[i + "executed with exit code".len()..])
    });
    let Some(rest) = after else {
        return false;
    };
    let rest =
        rest.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '=' | '"' | '>'));
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    !digits.is_empty() && digits.chars().any(|c| c != '0')
}

/// The text blocks of a user message (not tool results, not the model's or a tool's text).
pub(crate) fn user_texts(message: &Message) -> impl Iterator<Item = &str> {
    let user = message.role == Role::User;
    message.content.iter().filter_map(move |b| match b {
        ContentBlock::Text { text } if user => Some(text.as_str()),
        _ => None,
    })
}

/// The text blocks of an assistant message (not its thinking).
pub(crate) fn assistant_texts(message: &Message) -> impl Iterator<Item = &str> {
    let assistant = message.role == Role::Assistant;
    message.content.iter().filter_map(move |b| match b {
        ContentBlock::Text { text } if assistant => Some(text.as_str()),
        _ => None,
    })
}

/// The user's constraint sentences in `message`, verbatim. Echoes the harness wrote (caveats,
/// command output, environment blocks) are skipped; instructions it injected on the user's
/// behalf (`AGENTS.md`, a skill's or a slash command's prompt) are the user's rules and count.
pub(crate) fn constraints(message: &Message) -> Vec<&str> {
    user_texts(message)
        .filter(|t| !is_echo(t))
        .flat_map(sentences)
        .filter(|s| is_constraint(s))
        .collect()
}

/// The assistant's verified-finding sentences in `message`, verbatim.
pub(crate) fn findings(message: &Message) -> Vec<&str> {
    assistant_texts(message)
        .flat_map(sentences)
        .filter(|s| is_verified(s))
        .collect()
}

/// The last sentence of an assistant message that announces a plan and is not part of a
/// heading (`## Next Steps`, a line of bold text, a short line ending in `:`), outside code.
pub(crate) fn last_plan_sentence(message: &Message) -> Option<&str> {
    let mut last = None;
    for text in assistant_texts(message) {
        let mut fence = false;
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                fence = !fence;
                continue;
            }
            if fence || is_heading(trimmed) {
                continue;
            }
            let mut found = Vec::new();
            split_line(line, &mut found);
            if let Some(plan) = found.into_iter().rfind(|s| is_plan(s)) {
                last = Some(plan);
            }
        }
    }
    last
}

/// Whether a line is a heading rather than a sentence.
fn is_heading(line: &str) -> bool {
    line.starts_with('#')
        || (line.starts_with("**") && line.ends_with("**"))
        || (line.ends_with(':') && line.chars().count() < 60)
        || (line.starts_with("**") && line.ends_with("**:"))
}

/// Whether a user text is an echo of the harness: a caveat, a command echo or its output, an
/// environment block, a notification, an interruption notice (all start with `<`, `Caveat:`
/// or `[Request interrupted`).
pub(crate) fn is_echo(text: &str) -> bool {
    let t = text.trim_start();
    t.is_empty()
        || t.starts_with('<')
        || t.starts_with("Caveat:")
        || t.starts_with("[Request interrupted")
}

#[cfg(test)]
mod tests;
