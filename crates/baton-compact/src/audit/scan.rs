//! Finding facts in messages: file paths, URLs, shell commands and numbers with units.
//!
//! One detector, used by the retention audit ([`super::facts`]) and by the offline extractor's
//! artifact claims, so what the audit counts and what the extractor keeps can never drift
//! apart.
//!
//! Scope: what the user and the agent *wrote and did* — text and thinking blocks, and the
//! inputs of tool calls (path fields, URL fields, commands, and prose fields such as a
//! sub-agent prompt). What tools *printed* (tool results) is not scanned: a directory listing
//! or a file's contents would otherwise turn every import line into an "artifact", and recall
//! reaches tool output by seq anyway. A path the agent cares about shows up again in what it
//! writes or runs next.
//!
//! What counts:
//! - **URL**: `http://` or `https://` up to whitespace, a quote, a backtick or `<>`; trailing
//!   punctuation and unbalanced closing brackets are trimmed.
//! - **path** in prose and commands: a run of path characters (letters, digits, `_-./~@+%`)
//!   that is `./x`, `../x` or `~/x`; absolute with at least two segments (`/etc/hosts`) or a
//!   known file extension (`/run.sh`); relative with a known extension (`src/main.rs`) or at
//!   least three segments (`crates/core/src`); or a bare file name with a known extension
//!   (`Cargo.toml`). `src/main.rs:42` yields `src/main.rs`; `@CLAUDE.md` yields `CLAUDE.md`.
//!   Two-segment words without an extension (`and/or`, `client/server`) and globs are not
//!   paths. A tool input's path field (`path`, `file_path`, `filename`, `dir`, `workdir`…)
//!   counts as given.
//! - **command**: the `command` or `cmd` input of any tool whose name does not mention `edit`
//!   (editor tools use `command` for `view`/`create`); an argv list is joined, and
//!   `["bash", "-lc", X]` is `X`. A command is kept as its first non-empty line, trimmed, at
//!   most [`COMMAND_CHARS`] characters.
//! - **number** with a unit: `12 ms`, `3.5s`, `200 MB`, `42%`, `1,024 tokens`, `5x`, `$0.02`,
//!   and versions `v1.2.3` / `1.2.3`.

use baton_core::{ContentBlock, Message};
use serde_json::Value;

/// What kind of fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fact {
    /// A file or directory path.
    Path,
    /// A shell command run.
    Command,
    /// A URL.
    Url,
    /// A number with a unit, or a version.
    Number,
}

/// The most characters of a command kept (its first line).
pub(crate) const COMMAND_CHARS: usize = 200;

/// Tool-input fields holding a path.
const PATH_KEYS: &[&str] = &[
    "path",
    "paths",
    "file_path",
    "filepath",
    "filename",
    "file_name",
    "notebook_path",
    "target_file",
    "dir",
    "directory",
    "workdir",
    "cwd",
];

/// Tool-input fields holding a shell command.
const COMMAND_KEYS: &[&str] = &["command", "cmd"];

/// Tool-input fields holding a URL.
const URL_KEYS: &[&str] = &["url", "uri"];

/// Tool-input fields holding prose the agent wrote (scanned like text).
const PROSE_KEYS: &[&str] = &["description", "prompt", "query", "justification"];

/// File extensions that make a word a file name.
const EXTENSIONS: &[&str] = &[
    "rs", "toml", "md", "markdown", "mdx", "txt", "json", "jsonl", "yaml", "yml", "lock", "py",
    "pyi", "ipynb", "js", "mjs", "cjs", "ts", "mts", "tsx", "jsx", "vue", "svelte", "css", "scss",
    "sass", "less", "html", "htm", "xml", "svg", "png", "jpg", "jpeg", "gif", "webp", "ico", "pdf",
    "csv", "tsv", "sql", "sh", "bash", "zsh", "fish", "ps1", "bat", "c", "h", "cc", "cpp", "cxx",
    "hpp", "hh", "go", "java", "kt", "kts", "scala", "rb", "php", "pl", "lua", "dart", "swift",
    "ex", "exs", "eex", "heex", "leex", "erl", "hrl", "hs", "ml", "zig", "nix", "proto", "gradle",
    "cmake", "mk", "ini", "cfg", "conf", "env", "log", "diff", "patch", "tar", "gz", "tgz", "zip",
    "bz2", "xz", "wasm", "dylib", "dll", "exe", "jar", "db", "sqlite", "sqlite3", "pem", "crt",
    "pub", "vtt", "srt", "mp3", "mp4", "wav", "mov", "traj", "tex", "rst", "adoc", "docx", "xlsx",
    "pptx", "tf", "hcl", "gql", "graphql", "prisma", "snap", "pcap", "elf", "bin", "out",
];

/// `<name>.js` words that name a framework, not a file.
const JS_PRODUCTS: &[&str] = &[
    "node", "next", "vue", "react", "express", "three", "d3", "chart", "nuxt", "ember", "backbone",
    "angular", "alpine", "solid", "moment", "p5",
];

/// Units a number may carry. Single-letter units must follow the number directly (`3s`).
const UNITS: &[&str] = &[
    "ns", "us", "µs", "μs", "ms", "s", "sec", "secs", "second", "seconds", "min", "mins", "minute",
    "minutes", "h", "hr", "hrs", "hour", "hours", "day", "days", "B", "KB", "kB", "MB", "GB", "TB",
    "KiB", "MiB", "GiB", "TiB", "kb", "mb", "gb", "bytes", "byte", "%", "tokens", "token", "lines",
    "files", "tests", "passed", "failed", "errors", "warnings", "x", "×", "k", "K", "fps", "Hz",
    "kHz", "MHz", "GHz", "rps", "qps",
];

/// Calls `found` with every fact of `message` in scope (see the module docs), in order.
pub(crate) fn message_facts(message: &Message, found: &mut dyn FnMut(Fact, &str)) {
    for block in &message.content {
        match block {
            ContentBlock::Text { text } => text_facts(text, true, found),
            ContentBlock::Thinking { thinking, .. } => text_facts(thinking, true, found),
            ContentBlock::ToolUse { name, input, .. } => input_facts(name, input, found),
            _ => {}
        }
    }
}

/// Calls `found` with the URLs, paths and (when `numbers`) numbers with units in `text`.
pub(crate) fn text_facts(text: &str, numbers: bool, found: &mut dyn FnMut(Fact, &str)) {
    let urls = url_spans(text);
    for &(start, end) in &urls {
        found(Fact::Url, &text[start..end]);
    }
    let in_url = |i: usize| urls.iter().any(|&(s, e)| s <= i && i < e);
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        if is_path_char(c) {
            start.get_or_insert(i);
            continue;
        }
        if let Some(s) = start.take()
            && !in_url(s)
            && let Some(path) = path_token(&text[s..i])
        {
            found(Fact::Path, path);
        }
    }
    if numbers {
        number_facts(text, &in_url, found);
    }
}

/// Calls `found` with the facts of one tool call's input.
fn input_facts(name: &str, input: &Value, found: &mut dyn FnMut(Fact, &str)) {
    match input {
        Value::Object(map) => {
            for (key, value) in map {
                let key = key.as_str();
                if PATH_KEYS.contains(&key) {
                    for path in strings(value) {
                        if let Some(path) = path_value(path) {
                            found(Fact::Path, path);
                        }
                    }
                } else if URL_KEYS.contains(&key) {
                    for url in strings(value) {
                        text_facts(url, false, found);
                    }
                } else if PROSE_KEYS.contains(&key) {
                    for text in strings(value) {
                        text_facts(text, true, found);
                    }
                }
            }
            if let Some(script) = command_script(name, input) {
                if let Some(command) = first_line(&script) {
                    found(Fact::Command, command);
                }
                text_facts(&script, false, found);
            }
        }
        // Codex's `apply_patch` takes the patch as a bare string.
        Value::String(patch) => {
            for line in patch.lines() {
                let file = [
                    "*** Add File: ",
                    "*** Update File: ",
                    "*** Delete File: ",
                    "*** Move to: ",
                ]
                .iter()
                .find_map(|p| line.strip_prefix(p));
                if let Some(path) = file.and_then(path_value) {
                    found(Fact::Path, path);
                }
            }
        }
        _ => {}
    }
}

/// The shell command a tool call runs, normalized (see the module docs), if it runs one.
pub(crate) fn command_of(name: &str, input: &Value) -> Option<String> {
    command_script(name, input)
        .as_deref()
        .and_then(first_line)
        .map(str::to_owned)
}

/// The whole script a tool call runs, if it runs one.
pub(crate) fn command_script(name: &str, input: &Value) -> Option<String> {
    if name.to_ascii_lowercase().contains("edit") {
        return None;
    }
    match COMMAND_KEYS.iter().find_map(|k| input.get(*k))? {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let argv: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            Some(match argv.as_slice() {
                [shell, flag, script]
                    if ["bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"]
                        .contains(shell)
                        && flag.starts_with('-')
                        && flag.ends_with('c') =>
                {
                    (*script).to_owned()
                }
                _ => argv.join(" "),
            })
        }
        _ => None,
    }
}

/// A command as a fact: its first non-empty line, trimmed, cut to [`COMMAND_CHARS`].
fn first_line(script: &str) -> Option<&str> {
    let line = script.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(truncate(line, COMMAND_CHARS))
}

/// A short description of a tool call: its name and its command, path, URL or query, or its
/// input as compact JSON, cut to about 80 characters.
pub(crate) fn describe_call(name: &str, input: &Value) -> String {
    let short = command_of(name, input).or_else(|| {
        PATH_KEYS
            .iter()
            .chain(URL_KEYS)
            .chain(&["pattern", "query"])
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .map(str::to_owned)
    });
    let short = match short {
        Some(s) => s,
        None => match input {
            Value::Object(map) if map.is_empty() => String::new(),
            Value::Null => String::new(),
            Value::String(s) => s.lines().next().unwrap_or_default().to_owned(),
            other => other.to_string(),
        },
    };
    let short = truncate(short.lines().next().unwrap_or_default().trim(), 80);
    if short.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {short}")
    }
}

/// Appends everything of `message` a reader of the context sees, one piece a line: text,
/// thinking, each tool call's name and the strings of its input, and tool results' text.
pub(crate) fn visible_text(message: &Message, out: &mut String) {
    fn block(b: &ContentBlock, out: &mut String) {
        match b {
            ContentBlock::Text { text } => push_line(out, text),
            ContentBlock::Thinking { thinking, .. } => push_line(out, thinking),
            ContentBlock::ToolUse { name, input, .. } => {
                push_line(out, name);
                value_strings(input, out);
            }
            ContentBlock::ToolResult { content, .. } => {
                for b in content {
                    block(b, out);
                }
            }
            ContentBlock::Document {
                title: Some(title), ..
            } => push_line(out, title),
            _ => {}
        }
    }
    for b in &message.content {
        block(b, out);
    }
}

/// `s` cut to at most `max` characters, at a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn push_line(out: &mut String, s: &str) {
    out.push_str(s);
    out.push('\n');
}

fn value_strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => push_line(out, s),
        Value::Array(items) => items.iter().for_each(|i| value_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| value_strings(i, out)),
        _ => {}
    }
}

/// The strings of a value that is a string or a list of strings.
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A tool input's path field, when it names something (not `.`, `/`, empty or multi-line).
fn path_value(s: &str) -> Option<&str> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.chars().count() <= 300
        && !s.contains('\n')
        && !matches!(s, "." | ".." | "/" | "~" | "./")
        && s.chars().any(char::is_alphanumeric);
    ok.then_some(s)
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '~' | '@' | '+' | '%')
}

/// The path in a run of path characters, if it is one (see the module docs).
fn path_token(token: &str) -> Option<&str> {
    let t = token.trim_start_matches('@').trim_end_matches('.');
    if t.is_empty()
        || t.starts_with('-')
        || t.contains("//")
        || t.contains("...")
        || !t.chars().any(char::is_alphabetic)
    {
        return None;
    }
    let last = t.rsplit('/').next().unwrap_or(t);
    let ext = has_extension(last);
    if !t.contains('/') {
        return ext.then_some(t);
    }
    let segments = t
        .split('/')
        .filter(|s| !s.is_empty() && *s != "." && *s != ".." && *s != "~")
        .count();
    let ok = if t.starts_with("./") || t.starts_with("../") || t.starts_with("~/") {
        segments >= 1
    } else if t.starts_with('/') {
        segments >= 2 || ext
    } else {
        ext || segments >= 3
    };
    ok.then_some(t)
}

/// Whether a file name ends in a known extension after a stem with a letter or digit.
fn has_extension(name: &str) -> bool {
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    let ext = ext.to_ascii_lowercase();
    if !stem.chars().any(char::is_alphanumeric) || !EXTENSIONS.contains(&ext.as_str()) {
        return false;
    }
    !(ext == "js" && JS_PRODUCTS.contains(&stem.to_ascii_lowercase().as_str()))
}

/// The byte ranges of the URLs in `text`.
fn url_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("http") {
        let start = from + found;
        let rest = &text[start..];
        let scheme = if rest.starts_with("https://") {
            8
        } else if rest.starts_with("http://") {
            7
        } else {
            from = start + 4;
            continue;
        };
        let boundary = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let len = rest
            .char_indices()
            .find(|&(_, c)| {
                c.is_whitespace()
                    || c.is_control()
                    || matches!(
                        c,
                        '"' | '\'' | '`' | '<' | '>' | '{' | '}' | '|' | '\\' | '^'
                    )
            })
            .map_or(rest.len(), |(i, _)| i);
        let mut url = &rest[..len];
        while let Some(last) = url.chars().next_back() {
            let trim = match last {
                '.' | ',' | ';' | ':' | '!' | '?' | '*' => true,
                ')' => url.matches('(').count() < url.matches(')').count(),
                ']' => url.matches('[').count() < url.matches(']').count(),
                _ => false,
            };
            if !trim {
                break;
            }
            url = &url[..url.len() - last.len_utf8()];
        }
        if boundary && url[scheme..].chars().any(char::is_alphanumeric) {
            spans.push((start, start + url.len()));
        }
        from = start + len.max(scheme);
    }
    spans
}

/// Calls `found` with the numbers with units and the versions in `text`, outside URLs.
fn number_facts(text: &str, in_url: &dyn Fn(usize) -> bool, found: &mut dyn FnMut(Fact, &str)) {
    let bytes = text.as_bytes();
    let digit = |i: usize| i < bytes.len() && bytes[i].is_ascii_digit();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let prev = text[..i].chars().next_back();
        let before_prev = prev.and_then(|p| text[..i - p.len_utf8()].chars().next_back());
        let versioned =
            matches!(prev, Some('v' | 'V')) && before_prev.is_none_or(|c| !c.is_alphanumeric());
        let dollar = prev == Some('$');
        // Digits inside a word or after a separator (`x86`, `a.5`, `1/2`) are not a number.
        let inside = !versioned
            && (prev.is_some_and(char::is_alphanumeric)
                || matches!(prev, Some('.' | ',' | '_' | '/')));
        // The number: digits, then `,ddd` groups, then `.digits` groups.
        let mut end = i;
        while digit(end) {
            end += 1;
        }
        let mut grouped = false;
        while end < bytes.len()
            && bytes[end] == b','
            && digit(end + 1)
            && digit(end + 2)
            && digit(end + 3)
            && !digit(end + 4)
        {
            grouped = true;
            end += 4;
        }
        let mut dots = 0;
        while end < bytes.len() && bytes[end] == b'.' && digit(end + 1) {
            end += 1;
            while digit(end) {
                end += 1;
            }
            dots += 1;
        }
        let start = if versioned || dollar { i - 1 } else { i };
        i = end;
        if inside || grouped && dots > 1 || in_url(start) {
            continue;
        }
        if versioned {
            // `v1.2`, `v1.2.3`; a bare `v2` is a word.
            if dots >= 1 {
                found(Fact::Number, &text[start..end]);
            }
            continue;
        }
        if dots >= 2 {
            // `1.2.3` is a version; `127.0.0.1` is not a number with a unit.
            if dots == 2 {
                found(Fact::Number, &text[start..end]);
            }
            continue;
        }
        if dollar {
            found(Fact::Number, &text[start..end]);
            continue;
        }
        if let Some(unit_end) = unit_after(text, end) {
            found(Fact::Number, &text[start..unit_end]);
            i = unit_end;
        }
    }
}

/// Where the unit after a number at `end` ends, if a known unit follows (see [`UNITS`]).
fn unit_after(text: &str, end: usize) -> Option<usize> {
    let rest = &text[end..];
    let (spaced, rest, offset) = match rest.strip_prefix(' ') {
        Some(r) => (true, r, end + 1),
        None => (false, rest, end),
    };
    let first = rest.chars().next()?;
    let len = if matches!(first, '%' | '×') {
        first.len_utf8()
    } else {
        rest.char_indices()
            .find(|&(_, c)| !(c.is_alphabetic()))
            .map_or(rest.len(), |(i, _)| i)
    };
    let unit = &rest[..len];
    if len == 0 || !UNITS.contains(&unit) {
        return None;
    }
    if spaced && unit.chars().count() == 1 && unit != "%" {
        return None;
    }
    let mut unit_end = offset + len;
    // Rates: `req/s`-style suffix on a unit (`MB/s`, `tokens/s`).
    if text[unit_end..].starts_with("/s")
        && text[unit_end + 2..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_alphanumeric())
    {
        unit_end += 2;
    }
    let boundary = text[unit_end..]
        .chars()
        .next()
        .is_none_or(|c| !c.is_alphanumeric());
    boundary.then_some(unit_end)
}

#[cfg(test)]
mod tests;
