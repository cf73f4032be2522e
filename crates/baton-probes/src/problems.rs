//! Failed tool results, and whether each is still unresolved at a cut (the rules are in the
//! crate documentation).

use std::collections::HashSet;

use baton_core::Seq;
use serde_json::Value;

use crate::calls::{Call, Outcome, shell_command, target, written_paths};
use crate::text::{clip_chars, normalize, same_file};

/// Programs whose failure to find something is exploration, not a problem.
const EXPLORERS: [&str; 12] = [
    "ls", "find", "grep", "rg", "cat", "head", "tail", "stat", "which", "test", "wc", "file",
];

/// How a failed call is named in a context.
pub struct Problem {
    /// The seq of the failed result.
    pub seq: Seq,
    /// The failing command's first line (at most 80 characters), or the non-shell call's
    /// target.
    pub key: String,
    /// Whether `key` is a file path (matched by the path rules).
    pub is_path: bool,
}

/// The failures among `calls` (read to the cut) still unresolved at the cut, one per key (the
/// latest failure's seq).
pub fn unresolved(calls: &[Call<'_>]) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let Some(result) = &call.result else {
            continue;
        };
        let command = shell_command(call.name, call.input);
        if !failed(call, result) || is_exploration(command.as_deref(), result) {
            continue;
        }
        if resolved(calls, i, result.seq, command.as_deref()) {
            continue;
        }
        let (key, is_path) = match &command {
            Some(cmd) => {
                let first = cmd
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("");
                (clip_chars(&normalize(first), 80).to_owned(), false)
            }
            None => target(call.name, call.input),
        };
        out.retain(|p| p.key != key);
        out.push(Problem {
            seq: result.seq,
            key,
            is_path,
        });
    }
    out
}

/// Whether a result reports failure: the error flag, or a non-zero exit code (status lines are
/// read in shell output only; the `exit_code` of output JSON in any tool's).
pub fn failed(call: &Call<'_>, result: &Outcome) -> bool {
    let shell = shell_command(call.name, call.input).is_some();
    if result.is_error {
        return true;
    }
    let code = json_exit_code(&result.text)
        .or_else(|| shell.then(|| status_exit_code(&result.text)).flatten());
    code.is_some_and(|c| c != 0)
}

/// Whether a call succeeded (it has a result that does not report failure).
fn succeeded(call: &Call<'_>) -> bool {
    call.result.as_ref().is_some_and(|r| !failed(call, r))
}

/// The `exit_code` of an output that is a JSON object (at the top or under `metadata`).
fn json_exit_code(text: &str) -> Option<i64> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let value: Value = serde_json::from_str(trimmed).ok()?;
    value
        .get("exit_code")
        .or_else(|| value.get("metadata")?.get("exit_code"))
        .and_then(Value::as_i64)
}

/// The exit code a shell output's status line reports, read in its first five and last three
/// lines: `Exit code N`, `Exit code: N`, `Process exited with code N`, `… exited with code N`,
/// `… exit status N`, and OpenHands' `[… exit code N …]`.
pub fn status_exit_code(text: &str) -> Option<i64> {
    let lines: Vec<&str> = text.lines().collect();
    let tail_from = lines.len().saturating_sub(3).max(5.min(lines.len()));
    lines[..5.min(lines.len())]
        .iter()
        .chain(&lines[tail_from..])
        .find_map(|line| line_exit_code(line.trim()))
}

fn line_exit_code(line: &str) -> Option<i64> {
    let number = |rest: &str| -> Option<i64> {
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        let tail = rest.trim_start()[digits.len()..].trim();
        if !tail.is_empty() && !matches!(tail, "." | "]" | ".]") {
            return None;
        }
        digits.parse().ok()
    };
    if let Some(rest) = line.strip_prefix("Exit code") {
        return number(rest.strip_prefix(':').unwrap_or(rest));
    }
    for marker in ["exited with code", "exit status"] {
        if let Some(at) = line.find(marker) {
            return number(&line[at + marker.len()..]);
        }
    }
    if line.starts_with('[') && line.ends_with(']') {
        let at = line.find("exit code")?;
        return number(&line[at + "exit code".len()..]);
    }
    None
}

/// The output of a shell result without its status lines: what follows an `Output:` line in
/// the first six, else the lines that report no exit code.
fn body(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if let Some(at) = lines.iter().take(6).position(|l| l.trim() == "Output:") {
        return lines[at + 1..].join("\n");
    }
    lines
        .iter()
        .filter(|l| line_exit_code(l.trim()).is_none())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a failed shell command was exploration that found nothing.
fn is_exploration(command: Option<&str>, result: &Outcome) -> bool {
    let Some(program) = command.and_then(first_program) else {
        return false;
    };
    if !EXPLORERS.contains(&program) {
        return false;
    }
    let code = json_exit_code(&result.text).or_else(|| status_exit_code(&result.text));
    if matches!(program, "grep" | "rg") && code == Some(1) {
        return true;
    }
    let body = body(&result.text);
    let lower = body.to_lowercase();
    body.trim().is_empty()
        || lower.contains("no such file or directory")
        || lower.contains("no matches found")
}

/// The first program a command runs, after `cd … &&` (or `;`) prefixes and a `bash -lc`
/// wrapper.
fn first_program(command: &str) -> Option<&str> {
    let mut rest = command.trim();
    for wrapper in [
        "bash -lc ",
        "bash -c ",
        "sh -c ",
        "sh -lc ",
        "zsh -lc ",
        "zsh -c ",
    ] {
        if let Some(r) = rest.strip_prefix(wrapper) {
            rest = r.trim().trim_matches(|c| c == '\'' || c == '"');
            break;
        }
    }
    loop {
        rest = rest.trim_start();
        if !rest.starts_with("cd ") {
            break;
        }
        match rest
            .find("&&")
            .map(|i| (i, 2))
            .or_else(|| rest.find(';').map(|i| (i, 1)))
        {
            Some((at, len)) => rest = &rest[at + len..],
            None => return Some("cd"),
        }
    }
    rest.split_whitespace().next()
}

/// Whether the failure of `calls[at]` (its result at `failed_at`) is resolved by the calls
/// after it: the same check succeeds, or a file the failure names (or its own target) is
/// written successfully and then any shell command succeeds.
fn resolved(calls: &[Call<'_>], at: usize, failed_at: Seq, command: Option<&str>) -> bool {
    let failure = &calls[at];
    let later: Vec<&Call<'_>> = calls[at + 1..]
        .iter()
        .filter(|c| c.seq > failed_at && succeeded(c))
        .collect();
    if later.is_empty() {
        return false;
    }
    let command = command.map(normalize);
    let same = |c: &&Call<'_>| {
        c.name == failure.name
            && match &command {
                Some(cmd) => {
                    shell_command(c.name, c.input).map(|s| normalize(&s)) == Some(cmd.clone())
                }
                None => c.input == failure.input,
            }
    };
    if later.iter().any(same) {
        return true;
    }
    // Writes after the failure, then the files the failure names (read only when there are
    // writes: an output can be megabytes).
    let writes: Vec<(usize, Vec<String>)> = later
        .iter()
        .enumerate()
        .map(|(i, c)| (i, written_paths(c.name, c.input)))
        .filter(|(_, w)| !w.is_empty())
        .collect();
    if writes.is_empty() {
        return false;
    }
    let mut targets = written_paths(failure.name, failure.input);
    if let Some(result) = &failure.result {
        targets.extend(named_files(&result.text));
    }
    let fixed = writes.iter().find_map(|(i, written)| {
        written
            .iter()
            .any(|w| targets.iter().any(|t| names_file(t, w)))
            .then_some(*i)
    });
    fixed.is_some_and(|i| {
        let fixed_at = later[i].result.as_ref().map_or(later[i].seq, |r| r.seq);
        later[i + 1..]
            .iter()
            .any(|c| c.seq > fixed_at && shell_command(c.name, c.input).is_some())
    })
}

/// Whether a file named in an output (`token`, a path or a bare file name) is the written
/// path `written`.
fn names_file(token: &str, written: &str) -> bool {
    if token.contains('/') {
        same_file(token, written)
    } else {
        written.rsplit('/').next() == Some(token)
    }
}

/// The file names and paths an output mentions: tokens holding a `/` or ending in a `.ext`
/// (letters), without a `:line:col` suffix or surrounding punctuation.
fn named_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for raw in text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '`' | '(' | ')' | '[' | ']' | '<' | '>' | ','
            )
    }) {
        let mut token = raw.trim_end_matches(['.', ':', ';']);
        // A `:line`, `:line:col` or `:line:col:message` suffix (compilers write
        // `lib/a.ex:94:7:pattern_match_cov`): the path ends before the first `:digit`.
        if let Some(at) = token
            .match_indices(':')
            .map(|(i, _)| i)
            .find(|&i| token[i + 1..].starts_with(|c: char| c.is_ascii_digit()))
        {
            token = &token[..at];
        }
        let named = token.contains('/')
            || token.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty() && !ext.is_empty() && ext.chars().all(|c| c.is_ascii_alphabetic())
            });
        if named && token.len() > 2 && seen.insert(token) {
            out.push(token.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests;
