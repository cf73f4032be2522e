//! What a tool result says about its call: failed or not, the line that says why, and whether a
//! check's output says it passed.
//!
//! - **Failed**: the result's error flag, or an output that reports a non-zero exit code
//!   (`Exit code 1`, `exit status 2`, `Process exited with code 1`, `"exit_code": 1`).
//! - **The error line** names a failure: the first line that looks like an error (`error:`,
//!   `Error`, `FAILED`, `fatal:`, `panicked at`, a traceback's exception…), else the first
//!   non-empty line — never an `Exit code N` line alone, which says that it failed and not why.
//! - **Exploration that found nothing** is not a problem: a shell command whose first program
//!   is `ls find grep rg cat head tail stat which test wc file` failing with no output or with
//!   "No such file or directory" / "no matches found", and `grep`/`rg` exiting 1 (no match).
//! - **Passed**: a check command (tests, builds, linters, type checkers) whose output holds a
//!   line saying so (`test result: ok`, `12 passed`, `All tests passed`, `BUILD SUCCESSFUL`,
//!   `Finished `…` profile`, `0 errors`…). An exit code of 0 alone is not evidence enough.

use super::detect;
use super::shell;

/// Programs whose failure with nothing found is exploration, not a problem.
const EXPLORATION: &[&str] = &[
    "ls", "find", "grep", "rg", "cat", "head", "tail", "stat", "which", "test", "wc", "file",
];

/// The exit code `output` reports, if it reports one: a status line among its first five and
/// last three lines (`Exit code N`, `Exit code: N`, `Process exited with code N`, `… exited with
/// code N`, `… exit status N`, `[… exit code N …]`), or the `exit_code` of an output that is a
/// JSON object. Status lines are looked for only at the ends, so documentation that mentions
/// "exit code 2" in the middle of a fetched page is no failure.
pub(crate) fn exit_code(output: &str) -> Option<i64> {
    let trimmed = output.trim_start();
    if trimmed.starts_with('{')
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed)
        && let Some(code) = value
            .get("exit_code")
            .or_else(|| value.get("metadata").and_then(|m| m.get("exit_code")))
            .and_then(serde_json::Value::as_i64)
    {
        return Some(code);
    }
    let lines: Vec<&str> = output.lines().collect();
    let head = 5.min(lines.len());
    let tail = lines.len().saturating_sub(3).max(head);
    lines[..head]
        .iter()
        .chain(&lines[tail..])
        .find_map(|line| line_exit_code(line.trim()))
}

/// The exit code one status line reports.
fn line_exit_code(line: &str) -> Option<i64> {
    let number = |rest: &str| -> Option<i64> {
        let rest = rest
            .trim_start()
            .trim_start_matches([':', '='])
            .trim_start();
        let negative = rest.starts_with('-');
        let digits: String = rest
            .trim_start_matches('-')
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let after = rest.trim_start_matches('-')[digits.len()..].trim();
        if !after.is_empty() && !matches!(after, "." | "]" | ".]" | ")" | ",") {
            return None;
        }
        let code: i64 = digits.parse().ok()?;
        Some(if negative { -code } else { code })
    };
    let lower = line.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("exit code") {
        return number(rest);
    }
    for marker in ["exited with code", "exit status", "exit_code"] {
        if let Some(at) = lower.find(marker) {
            return number(&lower[at + marker.len()..]);
        }
    }
    if line.starts_with('[') && line.ends_with(']') {
        let at = lower.find("exit code")?;
        return number(&lower[at + "exit code".len()..]);
    }
    None
}

/// Whether a failed shell command was exploration that found nothing (see the module docs).
pub(crate) fn found_nothing(script: &str, output: &str, code: Option<i64>) -> bool {
    let programs: Vec<Vec<String>> = shell::programs(script)
        .into_iter()
        .filter(|argv| argv.first().is_some_and(|p| p != "cd"))
        .collect();
    let Some(first) = programs.first().and_then(|argv| argv.first()) else {
        return false;
    };
    let first = first.rsplit('/').next().unwrap_or(first);
    let searching = programs.iter().all(|argv| {
        argv.first()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .is_some_and(|p| EXPLORATION.contains(&p) || p == "echo" || p == "sort" || p == "xargs")
    });
    if (first == "grep" || first == "rg") && code == Some(1) {
        return true;
    }
    if !searching || !EXPLORATION.contains(&first) {
        return false;
    }
    let body: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && exit_code(l).is_none())
        .collect();
    body.is_empty()
        || body.iter().all(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("no such file or directory") || l.contains("no matches found")
        })
}

/// The line of `output` that says why a call failed (see the module docs), cut to about 200
/// characters; `None` when the output says nothing but an exit code.
pub(crate) fn error_line(output: &str) -> Option<String> {
    let output = output
        .trim()
        .trim_start_matches("<tool_use_error>")
        .trim_end_matches("</tool_use_error>");
    let meaningful = |l: &&str| !l.is_empty() && exit_code(l).is_none();
    let line = match detect::failure_line(output) {
        Some(line) if exit_code(line).is_none() => Some(line),
        _ => output.lines().map(str::trim).find(meaningful),
    }?;
    Some(clip(line, 200))
}

/// Whether a shell command is a check: it runs tests, a build, a linter or a type checker.
pub(crate) fn is_check(script: &str) -> bool {
    const WORDS: &[&str] = &[
        "test",
        "tests",
        "pytest",
        "jest",
        "vitest",
        "mocha",
        "check",
        "clippy",
        "build",
        "lint",
        "tsc",
        "eslint",
        "ruff",
        "mypy",
        "flake8",
        "pylint",
        "typecheck",
        "compile",
        "vet",
        "ctest",
        "phpunit",
        "rspec",
        "credo",
        "dialyzer",
        "verify",
    ];
    let lower = script.to_ascii_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| WORDS.contains(&w))
}

/// The line of a check's output that says it passed, if one does.
pub(crate) fn pass_line(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    let says_failed = lines.iter().any(|l| {
        let lower = l.to_ascii_lowercase();
        lower.contains(" failed")
            && !lower.contains(" 0 failed")
            && !lower.contains("0 failures")
            && lower.chars().any(|c| c.is_ascii_digit())
            && !lower.starts_with("test result: ok")
    });
    if says_failed {
        return None;
    }
    lines
        .iter()
        .rev()
        .find(|l| is_pass_line(l))
        .map(|l| clip(l, 160))
}

fn is_pass_line(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with("test result: ok")
        || lower.starts_with("all tests passed")
        || lower.contains("tests passed")
        || lower.starts_with("build successful")
        || lower.starts_with("ok (")
        || (lower.starts_with("finished ") && lower.contains("profile"))
        || lower.contains("found 0 errors")
        || lower.starts_with("no issues found")
        || lower.starts_with("success:")
        || lower.starts_with("all checks passed")
        || number_then(
            &lower,
            &["passed", "passing", "tests passed", "examples, 0 failures"],
        )
}

/// Whether `lower` holds a number followed by one of `words` (`12 passed`).
fn number_then(lower: &str, words: &[&str]) -> bool {
    let tokens: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '|'))
        .filter(|t| !t.is_empty())
        .collect();
    tokens.windows(2).any(|w| {
        w[0].chars().all(|c| c.is_ascii_digit())
            && w[0] != "0"
            && words
                .iter()
                .any(|word| w[1].starts_with(word.split(' ').next().unwrap_or(word)))
    })
}

/// `s` cut to at most `max` characters, at a character boundary, with `…` when cut.
pub(crate) fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_in_every_spelling() {
        assert_eq!(exit_code("Exit code 1\nboom"), Some(1));
        assert_eq!(exit_code("Process exited with code 2"), Some(2));
        assert_eq!(exit_code("{\"exit_code\": 0, \"output\": \"\"}"), Some(0));
        assert_eq!(
            exit_code("done (warnings were emitted)\nHalting VM with exit status 2"),
            Some(2)
        );
        assert_eq!(
            exit_code("a\nb\nc\nd\ne\nsee exit status 2 in the docs\nf\ng\nh"),
            None
        );
        assert_eq!(exit_code("Exit code: 127"), Some(127));
        assert_eq!(exit_code("the exit code is documented"), None);
        assert_eq!(exit_code("exit status 3"), Some(3));
    }

    #[test]
    fn error_lines_say_why() {
        assert_eq!(
            error_line("Exit code 1\nerror[E0308]: mismatched types\n --> src/a.rs:3:5").as_deref(),
            Some("error[E0308]: mismatched types")
        );
        assert_eq!(
            error_line("Exit code 2\nmake: *** [all] boom").as_deref(),
            Some("make: *** [all] boom")
        );
        assert_eq!(
            error_line("<tool_use_error>String to replace not found in file.</tool_use_error>")
                .as_deref(),
            Some("String to replace not found in file.")
        );
        assert_eq!(error_line("Exit code 1"), None);
        assert_eq!(error_line(""), None);
    }

    #[test]
    fn exploration_that_found_nothing() {
        assert!(found_nothing("ls ~/.claude/x* 2>/dev/null", "", Some(1)));
        assert!(found_nothing(
            "cd /repo && ls missing",
            "Exit code 1\nls: missing: No such file or directory",
            Some(1)
        ));
        assert!(found_nothing("grep -n foo src/a.rs", "", Some(1)));
        assert!(found_nothing("rg foo | head", "", Some(1)));
        assert!(!found_nothing("cargo test", "", Some(101)));
        assert!(!found_nothing(
            "cat a.txt | python3 x.py",
            "Traceback",
            Some(1)
        ));
        assert!(!found_nothing(
            "grep -n foo src/a.rs",
            "grep: bad regex",
            Some(2)
        ));
    }

    #[test]
    fn checks_and_passes() {
        assert!(is_check("cargo test -p baton-core"));
        assert!(is_check("npm run lint"));
        assert!(is_check("cd web && npx tsc --noEmit"));
        assert!(!is_check("git status"));
        assert_eq!(
            pass_line("running 3 tests\n...\ntest result: ok. 3 passed; 0 failed").as_deref(),
            Some("test result: ok. 3 passed; 0 failed")
        );
        assert_eq!(
            pass_line("===== 12 passed in 0.31s =====").as_deref(),
            Some("===== 12 passed in 0.31s =====")
        );
        assert_eq!(
            pass_line("Tests:       4 passed, 4 total").as_deref(),
            Some("Tests:       4 passed, 4 total")
        );
        assert_eq!(pass_line("Tests: 1 failed, 3 passed, 4 total"), None);
        assert_eq!(pass_line("VERIFIED ✅ all good"), None);
        assert_eq!(pass_line(""), None);
    }
}
