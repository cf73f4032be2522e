//! `baton watch` as a user runs it: the real binary following a temp folder while a real Claude
//! Code session (from the shared corpus, copied at test time) is written into it line by line,
//! stopped by a signal and started again; and `baton import --history` on a prompt history
//! written in Claude Code's format. Issue 17, item 5.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Sandbox, age};

/// The session written into the watched folder: 53 lines, 125 KB.
const SESSION: &str = "d-kimuson-claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl";
const SESSION_ID: &str = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7";

/// A liveness bound, not a speed target (the bench measures that).
const PATIENCE: Duration = Duration::from_secs(60);

fn corpus_file(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/claude-code-jsonl"
    ))
    .join(name);
    if path.exists() {
        return Some(path);
    }
    println!("skipping: corpus not found at {}", path.display());
    None
}

/// A running `baton --json watch`, its stdout read line by line as JSON events.
struct Watcher {
    child: Child,
    events: mpsc::Receiver<Value>,
}

impl Watcher {
    fn start(sb: &Sandbox, tree: &Path, settings: &Path) -> Watcher {
        let state = sb.dir.path().join("watch-state.json");
        let mut child = sb
            .command(&[
                "--json",
                "watch",
                tree.to_str().unwrap(),
                "--state",
                state.to_str().unwrap(),
                "--claude-settings",
                settings.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("watch printed a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Watcher { child, events }
    }

    /// The next event, within [`PATIENCE`].
    #[track_caller]
    fn next(&self) -> Value {
        self.events
            .recv_timeout(PATIENCE)
            .expect("the watcher printed nothing in time")
    }

    /// Events until one of `kind` arrives; returns it and those before it.
    #[track_caller]
    fn until(&self, kind: &str) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let Ok(event) = self.events.recv_timeout(PATIENCE) else {
                panic!("no {kind:?} event in time; the watcher printed {before:?}");
            };
            if event["event"] == kind {
                return (event, before);
            }
            before.push(event);
        }
    }

    /// Stops the watcher with `signal` and returns what it printed after, the last line being
    /// its stats; it must exit 0.
    fn stop(mut self, signal: &str) -> (Value, Vec<Value>) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let (stopped, before) = self.until("stopped");
        let code = self.child.wait().unwrap();
        assert!(code.success(), "watch exits 0 on {signal}: {code:?}");
        (stopped["stats"].clone(), before)
    }
}

impl Drop for Watcher {
    /// A failed test leaves no watcher behind (nor its hold on the test's output).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The messages of `run`, as stored (without seqs or times).
fn messages(sb: &Sandbox, run: &str) -> Vec<Value> {
    let shown = sb.run(&["--json", "history", run]).ok().json();
    shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| serde_json::json!({ "role": m["role"], "content": m["content"] }))
        .collect()
}

fn runs(sb: &Sandbox) -> Vec<Value> {
    let listed = sb.run(&["--json", "runs", "list"]).ok().json();
    match listed {
        Value::Array(runs) => runs,
        other => other["runs"].as_array().cloned().unwrap_or_default(),
    }
}

fn append(path: &Path, lines: &[&str]) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    for line in lines {
        writeln!(file, "{line}").unwrap();
    }
}

fn set_age(path: &Path, days: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(days * 86_400))
        .unwrap();
}

/// A one-shot import of `full` into a fresh store, as a finished file (dated an hour back) or
/// as a live one (just written: its settled part): the main run's messages, and how many runs
/// the file made (its inline subagents have their own).
fn one_shot(full: &str, finished: bool) -> (Vec<Value>, usize) {
    let sb = Sandbox::new();
    let name = format!("{SESSION_ID}.jsonl");
    let path = if finished {
        sb.finished_file(&name, full)
    } else {
        sb.file(&name, full)
    };
    let imported = sb
        .run(&["--json", "import", path.to_str().unwrap()])
        .ok()
        .json();
    let run = imported["runs"][0]["id"].as_str().unwrap().to_owned();
    (messages(&sb, &run), runs(&sb).len())
}

/// `file` in `dir` as the watcher names it (the folder's canonical path).
fn path_in(dir: &Path, file: &Path) -> String {
    dir.canonicalize()
        .unwrap()
        .join(file.file_name().unwrap())
        .display()
        .to_string()
}

/// Waits until `run` holds `expected`.
#[track_caller]
fn wait_for(sb: &Sandbox, run: &str, expected: &[Value]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let now = messages(sb, run);
        if now == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} holds {} messages, expected {}",
            now.len(),
            expected.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// On both backends: a live session followed burst by burst, restarts that read only what
/// changed, and a deleted run that its file's growth does not bring back.
#[test]
fn watch_follows_a_session_as_it_is_written_and_a_restart_reads_nothing_unchanged() {
    let Some(source) = corpus_file(SESSION) else {
        return;
    };
    for sb in Sandbox::each() {
        follow(&sb, &source);
    }
}

fn follow(sb: &Sandbox, source: &Path) {
    let full = std::fs::read_to_string(source).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let tree = sb.dir.path().join("projects");
    let project = tree.join("-path-to-Demo");
    std::fs::create_dir_all(&project).unwrap();
    // Claude Code keeps sessions 7 days here; one old session sits in the tree.
    let settings = sb.file("settings.json", r#"{"cleanupPeriodDays": 7}"#);
    let old = project.join("old-notes.jsonl");
    std::fs::write(&old, "").unwrap();
    set_age(&old, 10);
    std::fs::write(project.join("README.txt"), "not a transcript\n").unwrap();
    let live = project.join(format!("{SESSION_ID}.jsonl"));
    std::fs::write(&live, format!("{}\n", lines[..10].join("\n"))).unwrap();

    let w = Watcher::start(sb, &tree, &settings);
    let started = w.next();
    assert_eq!(started["event"], "started", "{started}");
    assert_eq!(started["files"], 3);
    assert_eq!(started["to_read"], 3);
    assert_eq!(
        started["retention"],
        serde_json::json!({"days": 7, "sessions": 2, "older": 1}),
        "two session files, one older than cleanupPeriodDays"
    );
    let (created, _) = w.until("imported");
    let run = created["runs"][0]["run"].as_str().unwrap().to_owned();
    assert_eq!(created["runs"][0]["status"], "created", "{created}");
    let stored = created["runs"][0]["appended"].as_u64().unwrap();
    assert!(stored > 0);
    assert_eq!(messages(sb, &run).len() as u64, stored);

    // The agent writes on, a few lines at a time; each burst is picked up as it comes.
    for chunk in lines[10..].chunks(9) {
        append(&live, chunk);
        std::thread::sleep(Duration::from_millis(300));
    }
    let (settled, n_runs) = one_shot(&full, false);
    wait_for(sb, &run, &settled);
    let mut extended = 0;
    while let Ok(event) = w.events.try_recv() {
        if event["event"] == "imported" {
            assert_eq!(event["runs"][0]["run"], run.as_str(), "one run: {event}");
            assert_ne!(event["runs"][0]["status"], "created", "one run: {event}");
            extended += usize::from(event["runs"][0]["status"] == "extended");
        }
    }
    assert!(
        extended >= 2,
        "the run grew burst by burst ({extended} extensions)"
    );
    let (stats, _) = w.stop("-TERM");
    assert_eq!(stats["runs_created"].as_u64(), Some(n_runs as u64));
    assert_eq!(stats["failed"], 0);
    assert_eq!(runs(sb).len(), n_runs, "nothing duplicated");

    // The session ended while nobody watched: the restart reads that file once, whole.
    age(&live);
    let w = Watcher::start(sb, &tree, &settings);
    let started = w.next();
    assert_eq!(
        (started["unchanged"].as_u64(), started["to_read"].as_u64()),
        (Some(2), Some(1)),
        "{started}"
    );
    let (finished, _) = one_shot(&full, true);
    wait_for(sb, &run, &finished);
    let (stats, _) = w.stop("-INT");
    assert_eq!(stats["files_read"], 1);
    assert_eq!(stats["runs_created"], 0);
    assert_eq!(runs(sb).len(), n_runs);
    assert_eq!(
        messages(sb, &run),
        finished,
        "followed line by line, the run is what a one-shot import of the finished file makes"
    );

    // A restart on an unchanged tree does no import work: every file is only stat'ed.
    let w = Watcher::start(sb, &tree, &settings);
    let started = w.next();
    assert_eq!(
        (started["unchanged"].as_u64(), started["to_read"].as_u64()),
        (Some(3), Some(0)),
        "{started}"
    );
    let (stats, printed) = w.stop("-TERM");
    assert_eq!(stats["files_read"], 0, "{printed:?}");
    assert_eq!(stats["messages"], 0);
    assert!(printed.is_empty(), "nothing to log: {printed:?}");
    assert_eq!(runs(sb).len(), n_runs);

    // The user deletes the run (a secret in it, say): the session going on while watched
    // brings nothing of it back.
    let deleted = sb
        .run(&["--json", "runs", "delete", &run, "--yes"])
        .ok()
        .json();
    let left = n_runs - 1 - deleted["subagents"].as_array().unwrap().len();
    assert_eq!(runs(sb).len(), left);
    let w = Watcher::start(sb, &tree, &settings);
    assert_eq!(w.next()["event"], "started");
    append(&live, &[lines[lines.len() - 1]]);
    std::thread::sleep(Duration::from_secs(3));
    let (stats, printed) = w.stop("-TERM");
    assert_eq!(stats["files_read"], 1, "{printed:?}");
    assert_eq!(
        (stats["runs_created"].as_u64(), stats["messages"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(printed.is_empty(), "a deleted run is not news: {printed:?}");
    assert_eq!(runs(sb).len(), left, "the deleted run stays deleted");
}

#[test]
fn deleted_truncated_and_rotated_files_lose_nothing_stored() {
    let Some(source) = corpus_file(SESSION) else {
        return;
    };
    let full = std::fs::read_to_string(&source).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let half: String = lines[..25].iter().map(|l| format!("{l}\n")).collect();
    let rest: Vec<&str> = lines[25..].to_vec();
    let sb = Sandbox::new();
    let tree = sb.dir.path().join("projects");
    std::fs::create_dir_all(&tree).unwrap();
    let settings = sb.dir.path().join("no-settings.json");
    let w = Watcher::start(&sb, &tree, &settings);
    assert_eq!(w.next()["event"], "started");

    // A session appears in a new folder.
    let project = tree.join("-new-project");
    std::fs::create_dir_all(&project).unwrap();
    let path = project.join(format!("{SESSION_ID}.jsonl"));
    std::fs::write(&path, &half).unwrap();
    let (created, _) = w.until("imported");
    let run = created["runs"][0]["run"].as_str().unwrap().to_owned();
    assert_eq!(created["runs"][0]["status"], "created");

    // Rotated: renamed, then written on under the new name. The old name is gone, and the
    // renamed file is the same session: it extends the same run.
    let rotated = project.join("rotated.jsonl.1");
    std::fs::rename(&path, &rotated).unwrap();
    let (gone, _) = w.until("gone");
    assert_eq!(gone["path"], path_in(&project, &path), "{gone}");
    assert_eq!(gone["runs"][0], run.as_str(), "{gone}");
    append(&rotated, &rest);
    let (extended, _) = w.until("imported");
    assert_eq!(extended["path"], path_in(&project, &rotated), "{extended}");
    assert_eq!(extended["runs"][0]["run"], run.as_str(), "{extended}");
    assert_eq!(extended["runs"][0]["status"], "extended", "{extended}");
    let (settled, n_runs) = one_shot(&full, false);
    wait_for(&sb, &run, &settled);

    // Truncated to its first lines: read again; a prefix of what is stored changes nothing.
    let start: String = lines[..10].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&rotated, &start).unwrap();
    let (shrank, _) = w.until("shrank");
    assert_eq!(shrank["path"], path_in(&project, &rotated), "{shrank}");

    // Deleted outright: reported with its runs, which stay.
    std::fs::remove_file(&rotated).unwrap();
    let (gone, _) = w.until("gone");
    assert_eq!(gone["path"], path_in(&project, &rotated), "{gone}");
    assert_eq!(gone["runs"][0], run.as_str(), "{gone}");

    // A file that is a broken transcript is reported, naming the line, and the watch goes on.
    let broken = project.join("broken.jsonl");
    let first = full.lines().next().unwrap();
    std::fs::write(&broken, format!("{first}\n{{not json\n{first}\n")).unwrap();
    let (failed, _) = w.until("failed");
    assert!(
        failed["reason"].as_str().unwrap().contains("line 2"),
        "{failed}"
    );

    let (stats, _) = w.stop("-TERM");
    assert_eq!(stats["runs_created"].as_u64(), Some(n_runs as u64));
    assert_eq!(stats["failed"], 1);
    assert_eq!(
        runs(&sb).len(),
        n_runs,
        "rotation and truncation made no second run"
    );
    assert_eq!(
        messages(&sb, &run),
        settled,
        "nothing stored was lost or changed"
    );
    sb.run(&["runs", "show", &run]).ok();
}

#[test]
fn watch_refuses_a_missing_folder_and_a_file_naming_them() {
    let sb = Sandbox::new();
    let missing = sb.dir.path().join("no-such-folder");
    sb.run(&["watch", missing.to_str().unwrap()])
        .fails(1, "no-such-folder: no such directory");
    let file = sb.file("session.jsonl", "{}\n");
    sb.run(&["watch", file.to_str().unwrap()])
        .fails(4, "session.jsonl: not a directory");
}

/// A prompt history in Claude Code's format (`~/.claude/history.jsonl`).
fn prompt(display: &str, ms: u64, project: &str, session: Option<&str>) -> String {
    let mut line = serde_json::json!({
        "display": display,
        "pastedContents": {},
        "timestamp": ms,
        "project": project,
    });
    if let Some(id) = session {
        line["sessionId"] = session.into();
        let _ = id;
    }
    line.to_string()
}

#[test]
fn import_history_recovers_the_prompts_of_deleted_sessions_once() {
    let Some(source) = corpus_file(SESSION) else {
        return;
    };
    let sb = Sandbox::new();
    let claude = sb.dir.path().join("dot-claude");
    let projects = claude.join("projects").join("-path-to-Demo");
    std::fs::create_dir_all(&projects).unwrap();
    // Imported from its own file already: its prompts are in its run.
    let imported = projects.join(format!("{SESSION_ID}.jsonl"));
    std::fs::copy(&source, &imported).unwrap();
    age(&imported);
    sb.run(&["import", imported.to_str().unwrap()]).ok();
    // Still on disk, not imported: counted, left for `baton import`.
    std::fs::write(projects.join("on-disk-session.jsonl"), "").unwrap();
    let history = claude.join("history.jsonl");
    let lines = [
        prompt(
            "an old prompt from before session ids",
            1_700_000_000_000,
            "/p/old",
            None,
        ),
        prompt(
            "fix the failing test",
            1_759_000_000_000,
            "/p/a",
            Some("gone-session"),
        ),
        prompt(
            "/orchestrator",
            1_759_000_001_000,
            "/path/to/Demo",
            Some(SESSION_ID),
        ),
        prompt(
            "now add docs",
            1_759_000_002_000,
            "/p/a",
            Some("gone-session"),
        ),
        prompt("hello", 1_759_000_003_000, "/p/b", Some("on-disk-session")),
    ];
    std::fs::write(&history, format!("{}\n", lines.join("\n"))).unwrap();
    let h = history.to_str().unwrap();

    let first = sb.run(&["--json", "import", "--history", h]).ok().json();
    let report = &first["history"];
    assert_eq!(report["prompts"], 5);
    assert_eq!(report["sessions"], 3);
    assert_eq!(report["imported"], 1);
    assert_eq!(report["on_disk"], 1);
    assert_eq!(
        report["recovered"], 2,
        "the deleted session, and the old prompts' project"
    );
    assert_eq!(report["created"], 2);
    assert_eq!(report["prompts_stored"], 3);
    assert_eq!(report["without_session"], 1);
    let recovered: Vec<String> = report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    let gone = recovered
        .iter()
        .find(|r| messages(&sb, r).len() == 2)
        .expect("the deleted session's run holds its two prompts")
        .clone();
    let texts: Vec<Value> = messages(&sb, &gone)
        .iter()
        .map(|m| m["content"][0]["text"].clone())
        .collect();
    assert_eq!(texts, ["fix the failing test", "now add docs"]);
    let shown = sb.run(&["--json", "runs", "show", &gone]).ok().json();
    let text = shown.to_string();
    assert!(
        text.contains("claude-code-history"),
        "marked as recovered from the history: {text}"
    );
    assert!(text.contains("gone-session"), "{text}");

    // Again: nothing new, nothing duplicated.
    let again = sb.run(&["--json", "import", "--history", h]).ok().json();
    assert_eq!(again["history"]["created"], 0);
    assert_eq!(again["history"]["up_to_date"], 2);
    assert_eq!(again["history"]["prompts_stored"], 0);
    let before = runs(&sb).len();

    // The user typed on in the same project afterwards: the history grew by one prompt.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&history)
        .unwrap();
    writeln!(
        file,
        "{}",
        prompt(
            "and a changelog",
            1_759_000_009_000,
            "/p/a",
            Some("gone-session")
        )
    )
    .unwrap();
    drop(file);
    let grown = sb.run(&["import", "--history", h]).ok();
    assert!(grown.stdout.contains("1 extended"), "{}", grown.stdout);
    assert_eq!(messages(&sb, &gone).len(), 3);
    assert_eq!(runs(&sb).len(), before);
}

#[test]
fn import_history_refuses_a_malformed_line_or_a_missing_file_and_stores_nothing() {
    let sb = Sandbox::new();
    let good = prompt("fine", 1_759_000_000_000, "/p", Some("s1"));
    let bad = sb.file(
        "history.jsonl",
        &format!("{good}\n{{\"display\": 42, \"timestamp\": 1}}\n{good}\n"),
    );
    sb.run(&["import", "--history", bad.to_str().unwrap()])
        .fails(4, "history.jsonl: line 2: `display` is not a string");
    let not_json = sb.file("h2.jsonl", &format!("{good}\nnot json at all\n"));
    sb.run(&["import", "--history", not_json.to_str().unwrap()])
        .fails(4, "h2.jsonl: line 2: not a JSON object");
    let missing = sb.dir.path().join("nope.jsonl");
    sb.run(&["import", "--history", missing.to_str().unwrap()])
        .fails(1, "nope.jsonl: no such file");
    assert!(runs(&sb).is_empty(), "nothing stored");
    // A last line still being written (no newline, cut mid-object) is left for later.
    let cut = sb.file("h3.jsonl", &format!("{good}\n{{\"display\": \"half"));
    let ok = sb
        .run(&["--json", "import", "--history", cut.to_str().unwrap()])
        .ok()
        .json();
    assert_eq!(ok["history"]["prompts"], 1);
}

#[test]
fn a_sessions_file_replaces_the_run_recovered_from_the_history_unless_it_was_worked_on() {
    let Some(source) = corpus_file(SESSION) else {
        return;
    };
    let sb = Sandbox::new();
    let claude = sb.dir.path().join("dot-claude");
    let projects = claude.join("projects").join("-p-a");
    std::fs::create_dir_all(&projects).unwrap();
    // Two sessions whose files are gone when the history is imported.
    let history = claude.join("history.jsonl");
    let lines = [
        prompt(
            "fix the failing test",
            1_759_000_000_000,
            "/p/a",
            Some("back-session"),
        ),
        prompt(
            "add a changelog",
            1_759_000_001_000,
            "/p/a",
            Some("pinned-session"),
        ),
    ];
    std::fs::write(&history, format!("{}\n", lines.join("\n"))).unwrap();
    let h = history.to_str().unwrap();
    let first = sb.run(&["--json", "import", "--history", h]).ok().json();
    assert_eq!(first["history"]["created"], 2, "{first}");
    let recovered = |prompt: &str| -> String {
        first["history"]["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_owned())
            .find(|id| messages(&sb, id)[0]["content"][0]["text"] == prompt)
            .unwrap_or_else(|| panic!("no run recovered for {prompt:?}"))
    };
    let back = recovered("fix the failing test");
    let pinned = recovered("add a changelog");
    // The user pins the one prompt of the second: that run was worked on.
    sb.run(&["pin", &pinned, "1"]).ok();

    // Both files come back (restored from a backup): the corpus session under each id.
    let text = std::fs::read_to_string(&source).unwrap();
    for session in ["back-session", "pinned-session"] {
        let file = projects.join(format!("{session}.jsonl"));
        std::fs::write(&file, text.replace(SESSION_ID, session)).unwrap();
        age(&file);
    }
    let before = runs(&sb).len();
    sb.run(&["import", projects.to_str().unwrap()]).ok();

    // The untouched stand-in is gone, its prompts in the file's run; the pinned one stays.
    let shown = sb.run(&["--json", "runs", "show", &back]);
    assert_ne!(
        shown.code, 0,
        "the stand-in is still there: {}",
        shown.stdout
    );
    assert_eq!(messages(&sb, &pinned).len(), 1);
    let after = runs(&sb);
    // Two file runs (and their subagents) were added; one stand-in went.
    let added_by_one_file = {
        let other = Sandbox::new();
        other.run(&["import", source.to_str().unwrap()]).ok();
        runs(&other).len()
    };
    assert_eq!(after.len(), before + 2 * added_by_one_file - 1);

    // The history again: the replaced session is imported from its file, nothing comes back.
    let again = sb.run(&["--json", "import", "--history", h]).ok().json();
    assert_eq!(again["history"]["created"], 0, "{again}");
    assert_eq!(again["history"]["imported"], 2, "{again}");
    assert_eq!(runs(&sb).len(), after.len());
}
