//! `baton chat` (issue 6) through the real binary against the scripted provider on loopback:
//! whole sessions in both wire formats with compaction mid-run, a process killed mid-run and
//! resumed with every step exactly once, bad provider output, and the REPL typed into through
//! tmux.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Sandbox, ran};

fn script(sb: &Sandbox, name: &str, turns: Value) -> PathBuf {
    sb.file(name, &json!({ "turns": turns }).to_string())
}

fn workdir(sb: &Sandbox) -> PathBuf {
    let dir = sb.dir.path().join("work");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a - b }\n",
    )
    .unwrap();
    let body = "Adds numbers, and explains how at length.\n".repeat(40);
    std::fs::write(dir.join("README.md"), format!("# calc\n{body}")).unwrap();
    dir
}

/// `baton chat` on run `run` against the scripted provider answering from `script`, with the
/// tools in `work` and no compaction, then `extra`.
fn scripted_chat<'a>(
    run: &'a str,
    script: &'a Path,
    work: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "chat",
        "--run",
        run,
        "--provider",
        "scripted",
        "--script",
        script.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
        "--strategy",
        "none",
    ];
    args.extend_from_slice(extra);
    args
}

fn history(sb: &Sandbox, run: &str) -> Vec<Value> {
    let out = sb.run(&["history", run, "--json"]);
    if out.code != 0 {
        return Vec::new();
    }
    out.json()["messages"].as_array().unwrap().clone()
}

/// Tool calls and tool results of a history, by id: each must appear exactly once.
fn calls_and_results(messages: &[Value]) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for m in messages {
        for b in m["content"].as_array().unwrap() {
            match b["type"].as_str() {
                Some("tool_use") => calls.push(b["id"].as_str().unwrap().to_owned()),
                Some("tool_result") => results.push(b["tool_use_id"].as_str().unwrap().to_owned()),
                _ => {}
            }
        }
    }
    (calls, results)
}

fn session_turns() -> Value {
    let mut turns = vec![
        json!({"reply": {"text": "Let me look.", "tool_calls": [
            {"name": "list_dir", "input": {"path": "."}},
            {"name": "read_file", "input": {"path": "src/lib.rs"}}
        ]}}),
        json!({"reply": {"text": "Found it: add subtracts.", "tool_calls": [
            {"name": "edit_file", "input": {"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}}
        ]}}),
    ];
    for i in 0..12 {
        turns.push(
            json!({"reply": {"text": format!("Checking again ({i})."), "tool_calls": [
                {"name": "grep", "input": {"pattern": "fn add"}}
            ]}}),
        );
    }
    turns.push(json!({"reply": {"text": "Fixed: add now adds."}}));
    json!(turns)
}

#[test]
fn a_whole_session_in_both_wire_formats_with_compaction_mid_run() {
    for wire in ["anthropic", "openai"] {
        for sb in Sandbox::each() {
            let work = workdir(&sb);
            let script = script(&sb, "s.json", session_turns());
            let out = sb
                .run(&[
                    "chat",
                    "--run",
                    "s",
                    "--provider",
                    "scripted",
                    "--wire",
                    wire,
                    "--script",
                    script.to_str().unwrap(),
                    "--workdir",
                    work.to_str().unwrap(),
                    "--strategy",
                    "structured",
                    "--threshold",
                    "600",
                    "--keep-recent",
                    "2",
                    "--verbose",
                    "-m",
                    "Fix the add function.",
                ])
                .ok();
            let text = out.stdout;
            assert!(text.contains("  → edit_file"), "{wire}: {text}");
            assert!(
                text.contains("[compaction: structured (update_state)"),
                "{wire}: {text}"
            );
            assert!(text.contains("still reachable: paths"), "{wire}: {text}");
            assert!(text.contains("Fixed: add now adds."), "{wire}: {text}");
            assert_eq!(
                std::fs::read_to_string(work.join("src/lib.rs")).unwrap(),
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"
            );
            let messages = history(&sb, "s");
            let (calls, results) = calls_and_results(&messages);
            assert_eq!(calls.len(), 15, "{wire}");
            assert_eq!(calls, results, "{wire}: every call answered once, in order");
            let list = sb.run(&["summary", "list", "s", "--json"]).ok().json();
            assert!(!list["summaries"].as_array().unwrap().is_empty(), "{wire}");
            assert_eq!(sb.run(&["history", "s", "--check"]).code, 0, "{wire}");
        }
    }
}

/// The process is killed while a model call is in flight; `baton chat --run` resumes, and the
/// run ends with every step exactly once.
#[test]
fn a_killed_session_resumes_with_every_step_once() {
    for sb in Sandbox::each() {
        let work = workdir(&sb);
        let first = script(
            &sb,
            "first.json",
            json!([
                {"reply": {"text": "Reading.", "tool_calls": [{"name": "read_file", "input": {"path": "README.md"}}]}},
                {"reply": {"text": "Noting it.", "tool_calls": [{"name": "run_command", "input": {"command": "echo ran >> log.txt"}}]}},
                {"reply": {"delay_ms": 60000, "text": "never sent"}}
            ]),
        );
        let mut child = sb
            .command(&scripted_chat(
                "k",
                &first,
                &work,
                &["-m", "Summarize the README."],
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the command's result is stored (the next model call then hangs), and kill.
        let deadline = Instant::now() + Duration::from_secs(30);
        while history(&sb, "k").len() < 5 {
            assert!(
                Instant::now() < deadline,
                "the session did not get far enough"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(history(&sb, "k").len(), 5, "killed before the third reply");

        let rest = script(
            &sb,
            "rest.json",
            json!([{"expect": {"contains": "Noting it."}, "reply": {"text": "The README says calc adds numbers."}}]),
        );
        let out = sb.run(&scripted_chat("k", &rest, &work, &[])).ok();
        assert!(
            out.stdout.contains("[resuming run k at seq 5]"),
            "{}",
            out.stdout
        );
        let messages = history(&sb, "k");
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant"
            ]
        );
        let (calls, results) = calls_and_results(&messages);
        assert_eq!(calls, results);
        assert_eq!(
            std::fs::read_to_string(work.join("log.txt")).unwrap(),
            "ran\n",
            "the command ran once"
        );
    }
}

#[test]
fn bad_provider_output_is_a_clear_error_and_the_run_stays_resumable() {
    let sb = Sandbox::new();
    let work = workdir(&sb);
    let bad = script(
        &sb,
        "bad.json",
        json!([{"reply": {"raw": "this is not json"}}]),
    );
    let out = sb.run(&[
        "chat",
        "--run",
        "b",
        "--provider",
        "scripted",
        "--script",
        bad.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
        "-m",
        "Hello?",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.contains("[error: anthropic: malformed response"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("resumes with `baton chat --run b`"),
        "{}",
        out.stderr
    );
    let truncated = script(
        &sb,
        "t.json",
        json!([{"reply": {"text": "cut", "truncate": true}}]),
    );
    let out = sb.run(&[
        "chat",
        "--run",
        "b",
        "--provider",
        "scripted",
        "--wire",
        "openai",
        "--script",
        truncated.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stdout
            .contains("the stream ended before the reply was complete"),
        "{}",
        out.stdout
    );
    assert_eq!(history(&sb, "b").len(), 1, "nothing half-written");
    let good = script(&sb, "g.json", json!([{"reply": {"text": "Hello."}}]));
    sb.run(&[
        "chat",
        "--run",
        "b",
        "--provider",
        "scripted",
        "--script",
        good.to_str().unwrap(),
        "--workdir",
        work.to_str().unwrap(),
    ])
    .ok();
    assert_eq!(history(&sb, "b").len(), 2);
    // Without a key or a provider, chat says what to set.
    let out = ran(Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["--db", sb.db().to_str().unwrap(), "chat", "-m", "hi"])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .output()
        .unwrap());
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("set ANTHROPIC_API_KEY"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("--provider openai --base-url"),
        "{}",
        out.stderr
    );
    // A script that does not parse names its file.
    let broken = sb.file("broken.json", "{\"turns\": [{\"reply\": {\"txt\": 1}}]}");
    sb.run(&[
        "chat",
        "--provider",
        "scripted",
        "--script",
        broken.to_str().unwrap(),
        "-m",
        "x",
    ])
    .fails(4, "broken.json: ");
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(session: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let screen = tmux(&["capture-pane", "-p", "-S", "-200", "-t", session]);
        if screen.contains(needle) {
            return screen;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} never appeared:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Types into the real REPL in a terminal: `/verbose on`, `/compact sliding`, `/context`,
/// Ctrl-C during a reply that takes long (the session survives), Ctrl-D.
#[test]
fn the_repl_in_a_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        panic!("tmux is not installed; .ci/run installs it");
    }
    let sb = Sandbox::new();
    let work = workdir(&sb);
    let script = script(
        &sb,
        "repl.json",
        json!([
            {"reply": {"text": "Reading.", "tool_calls": [{"name": "read_file", "input": {"path": "README.md"}}]}},
            {"reply": {"text": "It is a calculator."}},
            {"reply": {"delay_ms": 30000, "text": "too late"}},
            {"reply": {"text": "Still here."}}
        ]),
    );
    let session = format!("baton-test-{}", std::process::id());
    let command = format!(
        "{} --db {} chat --run r --provider scripted --script {} --workdir {} --strategy none --keep-last 1; sleep 30",
        env!("CARGO_BIN_EXE_baton"),
        sb.db().display(),
        script.display(),
        work.display()
    );
    let status = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "50",
            "-s",
            &session,
            &command,
        ])
        .env_remove("BATON_DB")
        .status()
        .unwrap();
    assert!(status.success());
    let keys = |text: &str| {
        tmux(&["send-keys", "-t", &session, "-l", text]);
        tmux(&["send-keys", "-t", &session, "Enter"]);
    };
    wait_for(&session, "you>");
    keys("What is this project?");
    wait_for(&session, "It is a calculator.");
    keys("/verbose on");
    wait_for(&session, "verbose on");
    keys("/compact sliding");
    wait_for(&session, "[compaction: sliding (drop)");
    keys("/context");
    wait_for(&session, "next call:");
    keys("And now?");
    std::thread::sleep(Duration::from_millis(800));
    tmux(&["send-keys", "-t", &session, "C-c"]);
    wait_for(&session, "[cancelled:");
    keys("Are you there?");
    let screen = wait_for(&session, "Still here.");
    tmux(&["send-keys", "-t", &session, "C-d"]);
    let screen_after = wait_for(&session, "bye");
    tmux(&["kill-session", "-t", &session]);
    assert!(screen.contains("  → read_file"), "{screen}");
    assert!(screen_after.contains("bye"));
    let messages = history(&sb, "r");
    let texts: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"][0]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        texts,
        ["What is this project?", "And now?", "Are you there?"]
    );
    assert!(Path::new(&sb.db()).exists());
}

/// Starts `baton chat --run RUN` on a parallel batch (a write, a long command, a read) and
/// kills it while the command runs, after the write's result is stored. Returns the working
/// directory.
fn killed_during_tools(sb: &Sandbox, run: &str) -> PathBuf {
    let work = workdir(sb);
    let first = script(
        sb,
        "batch.json",
        json!([
            {"reply": {"text": "Three things at once.", "tool_calls": [
                {"name": "write_file", "input": {"path": "notes.txt", "content": "a note"}},
                {"name": "run_command", "input": {"command": "echo $$ > command.pid; sleep 30"}},
                {"name": "read_file", "input": {"path": "src/lib.rs"}}
            ]}},
            {"reply": {"text": "never reached"}}
        ]),
    );
    let mut child = sb
        .command(&scripted_chat(
            run,
            &first,
            &work,
            &["-m", "Write a note, run the command, read the code."],
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !work.join("command.pid").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The killed process could not kill its command's group: do it here.
    let pgid = std::fs::read_to_string(work.join("command.pid")).unwrap();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", pgid.trim())])
        .status();
    work
}

fn result_texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Issue 6 review: the process is killed while `run_command` runs in a parallel batch, after
/// `write_file` finished. The write's result was stored when it finished, so the resumed run
/// keeps it (not "interrupted, may or may not have taken effect"); the started command is
/// answered "interrupted" and not run again; the read is run again. Every step appears
/// exactly once.
#[test]
fn a_kill_during_a_parallel_batch_keeps_every_finished_result() {
    for sb in Sandbox::each() {
        let work = killed_during_tools(&sb, "p");
        let stored = history(&sb, "p");
        assert_eq!(stored.len(), 3, "user, the calls, the write's result");
        assert_eq!(result_texts(&stored), ["wrote 6 bytes to notes.txt"]);
        let rest = script(
            &sb,
            "rest.json",
            json!([{"expect": {"contains": "interrupted"}, "reply": {"text": "The note is written; the command was cut short."}}]),
        );
        let out = sb.run(&scripted_chat("p", &rest, &work, &[])).ok();
        assert!(
            out.stdout.contains("[resuming run p at seq 3]"),
            "{}",
            out.stdout
        );
        let messages = history(&sb, "p");
        let (calls, results) = calls_and_results(&messages);
        assert_eq!(calls.len(), 3);
        assert_eq!(calls, results, "every call answered once, in order");
        let texts = result_texts(&messages);
        assert_eq!(texts[0], "wrote 6 bytes to notes.txt");
        assert!(texts[1].starts_with("interrupted: "), "{texts:?}");
        assert!(texts[2].contains("pub fn add"), "{texts:?}");
        assert_eq!(
            messages.last().unwrap()["content"][0]["text"],
            "The note is written; the command was cut short."
        );
        assert_eq!(
            std::fs::read_to_string(work.join("notes.txt")).unwrap(),
            "a note"
        );
        assert_eq!(sb.run(&["history", "p", "--check"]).code, 0);
    }
}

/// Issue 6 review: `baton chat --run ID --read-only` after a kill during tools added the
/// constraint between the model's calls and their results, and every request after was a
/// 400. Now the calls are answered first, then the constraint is set, then the turn goes on.
#[test]
fn read_only_after_a_kill_during_tools_answers_the_calls_first() {
    let sb = Sandbox::new();
    let work = killed_during_tools(&sb, "ro");
    let rest = script(
        &sb,
        "rest.json",
        json!([{"expect": {"contains": "read-only"}, "reply": {"text": "Read-only from here."}}]),
    );
    let out = sb
        .run(&scripted_chat("ro", &rest, &work, &["--read-only"]))
        .ok();
    assert!(
        out.stdout.contains("Read-only from here."),
        "{}",
        out.stdout
    );
    let messages = history(&sb, "ro");
    let (calls, results) = calls_and_results(&messages);
    assert_eq!(calls, results);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "user",
            "user",
            "user",
            "assistant"
        ],
        "the results, then the constraint, then the reply"
    );
    assert!(
        messages[5]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{}",
        messages[5]
    );
}
