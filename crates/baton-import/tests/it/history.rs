//! Claude Code's prompt history (`~/.claude/history.jsonl`), written here in its real format
//! (the corpus has no sample): prompts grouped by session, pasted text kept, old prompts
//! without a session id grouped by project, a cut last line left out, bad lines named.

use baton_import::formats::history::{parse, sniff};
use baton_import::{Format, detect};

const HISTORY: &str = r#"{"display":"old prompt","pastedContents":{},"timestamp":1700000000000,"project":"/p/old"}
{"display":"fix the test [Pasted text #1 +2 lines]","pastedContents":{"1":{"id":1,"type":"text","content":"line one\nline two"}},"timestamp":1759105062139,"project":"/p/a","sessionId":"s-1"}
{"display":"other session","pastedContents":{},"timestamp":1759105063000,"project":"/p/b","sessionId":"s-2"}
{"display":"and docs","pastedContents":{},"timestamp":1759105064000,"project":"/p/a","sessionId":"s-1"}
{"display":"another old one","pastedContents":{},"timestamp":1700000001000,"project":"/p/old"}
{"display":"cut mid-wri"#;

#[test]
fn prompts_are_grouped_by_session_and_old_ones_by_project() {
    let ts = parse(HISTORY.as_bytes()).unwrap();
    let shape: Vec<(Option<&str>, Option<&str>, usize)> = ts
        .iter()
        .map(|t| {
            (
                t.source_session_id.as_deref(),
                t.project.as_deref(),
                t.messages.len(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (None, Some("/p/old"), 2),
            (Some("s-1"), Some("/p/a"), 2),
            (Some("s-2"), Some("/p/b"), 1),
        ]
    );
    let s1 = &ts[1];
    assert_eq!(s1.format, Format::ClaudeCodeHistory);
    assert_eq!(s1.settled, 2);
    assert_eq!(
        s1.messages[0].message.plain_text(),
        "fix the test [Pasted text #1 +2 lines]\n\nline one\nline two"
    );
    assert_eq!(
        s1.messages[0].timestamp.as_deref(),
        Some("2025-09-29T00:17:42.139Z")
    );
    assert_eq!(s1.source_key("/h/history.jsonl"), "claude-code-history:s-1");
    assert_eq!(
        ts[0].source_key("/h/history.jsonl"),
        "claude-code-history:project:/p/old"
    );
    assert!(s1.usage.is_empty() && s1.models.is_empty());
}

#[test]
fn a_history_is_named_not_detected() {
    assert!(sniff(HISTORY.as_bytes()));
    assert_eq!(detect(HISTORY.as_bytes()), None, "read only with --history");
}

#[test]
fn a_bad_line_is_named() {
    let bad = "{\"display\":\"ok\",\"timestamp\":1}\n[1,2]\n{\"display\":\"ok\",\"timestamp\":1}\n";
    assert_eq!(
        parse(bad.as_bytes()).unwrap_err().to_string(),
        "line 2: not a JSON object"
    );
    let ts = "{\"display\":\"ok\",\"timestamp\":-5}\n";
    assert!(
        parse(ts.as_bytes())
            .unwrap_err()
            .to_string()
            .starts_with("line 1: `timestamp` = -5")
    );
    let no_display = "{\"timestamp\":1}\n";
    assert_eq!(
        parse(no_display.as_bytes()).unwrap_err().to_string(),
        "line 1: no `display` (the prompt's text)"
    );
}
