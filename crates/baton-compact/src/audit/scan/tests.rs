//! What the scanner takes for a path, a URL, a command and a number, one case a line.

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use super::*;

/// The facts of one kind in `text`, in order.
#[track_caller]
fn found(text: &str, kind: Fact) -> Vec<String> {
    let mut out = Vec::new();
    text_facts(text, true, &mut |fact, s| {
        if fact == kind {
            out.push(s.to_owned());
        }
    });
    out
}

#[track_caller]
fn paths(text: &str, expect: &[&str]) {
    assert_eq!(found(text, Fact::Path), expect, "paths in {text:?}");
}

#[track_caller]
fn urls(text: &str, expect: &[&str]) {
    assert_eq!(found(text, Fact::Url), expect, "urls in {text:?}");
}

#[track_caller]
fn numbers(text: &str, expect: &[&str]) {
    assert_eq!(found(text, Fact::Number), expect, "numbers in {text:?}");
}

fn call(name: &str, input: serde_json::Value) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: "t1".into(),
            name: name.into(),
            input,
        }],
    }
}

/// Every fact of a message, as `kind text`.
fn all(message: &Message) -> Vec<String> {
    let mut out = Vec::new();
    message_facts(message, &mut |fact, s| out.push(format!("{fact:?} {s}")));
    out
}

#[test]
fn paths_in_prose() {
    paths("edit src/main.rs now", &["src/main.rs"]);
    paths("see `/etc/hosts`.", &["/etc/hosts"]);
    paths("run ./a/b.py and ../x", &["./a/b.py", "../x"]);
    paths(
        "Cargo.toml, README.md and main.rs:42",
        &["Cargo.toml", "README.md", "main.rs"],
    );
    paths(
        "at src/lib.rs:10:5 (crates/core/src)",
        &["src/lib.rs", "crates/core/src"],
    );
    paths("read @CLAUDE.md and ~/.bashrc", &["CLAUDE.md", "~/.bashrc"]);
    paths(
        "--manifest-path=crates/x/Cargo.toml",
        &["crates/x/Cargo.toml"],
    );
    paths("the end is src/main.rs.", &["src/main.rs"]);
    paths("/run.sh and /usr/bin", &["/run.sh", "/usr/bin"]);
}

#[test]
fn words_that_are_not_paths() {
    paths("and/or, client/server, read/write, TCP/IP", &[]);
    paths("e.g. i.e. 3.5s v1.2.3 example.com self.value", &[]);
    paths(
        "/compact and /clear are slash commands; /etc alone too",
        &[],
    );
    paths("glob **/*.md and 1/2 and 24/7", &[]);
    paths("built with Next.js and Node.js", &[]);
    paths("a URL https://example.com/a/b.html is no path", &[]);
    paths("-Isrc/include is a flag", &[]);
}

#[test]
fn urls_in_prose() {
    urls("see https://example.com/a.", &["https://example.com/a"]);
    urls(
        "[docs](https://docs.rs/x/1.0/x/)",
        &["https://docs.rs/x/1.0/x/"],
    );
    urls(
        "https://en.wikipedia.org/wiki/Rust_(language) works",
        &["https://en.wikipedia.org/wiki/Rust_(language)"],
    );
    urls(
        "\"http://localhost:8080/api?x=1\"",
        &["http://localhost:8080/api?x=1"],
    );
    urls("no scheme: example.com, http:// alone, xhttps://a.b", &[]);
}

#[test]
fn numbers_with_units() {
    numbers(
        "took 12 ms, then 3.5s; used 200 MB and 42% of 1,024 tokens",
        &["12 ms", "3.5s", "200 MB", "42%", "1,024 tokens"],
    );
    numbers("v1.2.3 and 15.5.2 but not 127.0.0.1", &["v1.2.3", "15.5.2"]);
    numbers(
        "5x faster, cost $0.02, 30 MB/s",
        &["5x", "$0.02", "30 MB/s"],
    );
    numbers("x86 0x1F 3rd 1m30s 2024-01-02 step 7", &[]);
    numbers("5 s is not spaced right; 5 x 3 neither", &[]);
}

#[test]
fn commands_from_tool_inputs() {
    let cmd = |name: &str, input| command_of(name, &input);
    assert_eq!(
        cmd(
            "Bash",
            json!({"command": "cargo test -p x", "description": "run"})
        ),
        Some("cargo test -p x".to_owned())
    );
    assert_eq!(
        cmd("bash", json!({"command": "\n  ls -F\n"})),
        Some("ls -F".to_owned())
    );
    assert_eq!(
        cmd("exec_command", json!({"cmd": "rg -n foo"})),
        Some("rg -n foo".to_owned())
    );
    assert_eq!(
        cmd("shell", json!({"command": ["bash", "-lc", "git status"]})),
        Some("git status".to_owned())
    );
    assert_eq!(
        cmd("shell", json!({"command": ["ls", "-la"]})),
        Some("ls -la".to_owned())
    );
    assert_eq!(
        cmd(
            "Bash",
            json!({"command": "cat > a.txt <<'EOF'\nhello\nEOF"})
        ),
        Some("cat > a.txt <<'EOF'".to_owned())
    );
    // Editor tools use `command` for their subcommand.
    assert_eq!(
        cmd(
            "str_replace_editor",
            json!({"command": "view", "path": "a.rs"})
        ),
        None
    );
    assert_eq!(cmd("Read", json!({"file_path": "a.rs"})), None);
    let long = "x".repeat(300);
    assert_eq!(
        cmd("Bash", json!({ "command": long })).map(|c| c.chars().count()),
        Some(COMMAND_CHARS)
    );
}

#[test]
fn facts_of_tool_calls() {
    assert_eq!(
        all(&call(
            "Read",
            json!({"file_path": "/repo/src/lib.rs", "limit": 10})
        )),
        ["Path /repo/src/lib.rs"]
    );
    assert_eq!(
        all(&call(
            "find_file",
            json!({"file_name": "fields.py", "dir": "src"})
        )),
        ["Path src", "Path fields.py"]
    );
    assert_eq!(
        all(&call(
            "Bash",
            json!({"command": "cat src/a.rs | head -5\ngrep x lib/b.py"})
        )),
        [
            "Command cat src/a.rs | head -5",
            "Path src/a.rs",
            "Path lib/b.py"
        ]
    );
    assert_eq!(
        all(&call(
            "WebFetch",
            json!({"url": "https://a.io/x", "prompt": "read docs/x.md"})
        )),
        ["Path docs/x.md", "Url https://a.io/x"]
    );
    assert_eq!(
        all(&call(
            "apply_patch",
            json!("*** Begin Patch\n*** Update File: web/src/a.tsx\n@@\n-x\n+y\n*** End Patch")
        )),
        ["Path web/src/a.tsx"]
    );
    assert_eq!(
        all(&call("read", json!({"path": "."}))),
        Vec::<String>::new()
    );
}

#[test]
fn tool_output_is_not_scanned() {
    let result = Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "t1".into(),
            content: vec![ContentBlock::Text {
                text: "src/a.rs\nsrc/b.rs 12 ms https://x.io".into(),
            }],
            is_error: false,
        }],
    };
    assert!(all(&result).is_empty());
    let mut text = String::new();
    visible_text(&result, &mut text);
    assert!(text.contains("src/b.rs 12 ms"));
}

#[test]
fn calls_are_described_briefly() {
    assert_eq!(describe_call("Bash", &json!({"command": "ls"})), "Bash ls");
    assert_eq!(
        describe_call("Read", &json!({"file_path": "a.rs"})),
        "Read a.rs"
    );
    assert_eq!(
        describe_call("Grep", &json!({"pattern": "fn main"})),
        "Grep fn main"
    );
    assert_eq!(describe_call("submit", &json!({})), "submit");
    assert_eq!(describe_call("x", &json!({"n": 1})), "x {\"n\":1}");
    let long = describe_call("Bash", &json!({ "command": "y".repeat(500) }));
    assert_eq!(long.chars().count(), "Bash ".len() + 80);
}

#[test]
fn truncation_respects_characters() {
    assert_eq!(truncate("añb", 2), "añ");
    assert_eq!(truncate("ab", 5), "ab");
}
