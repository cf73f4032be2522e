//! `baton mcp` (issue 19) through the real binary: the official MCP Python SDK (`mcp` on PyPI,
//! pinned) drives it over stdio on a store with corpus sessions imported
//! (`tests/python/mcp_client.py`: every tool, recall byte-identical to the stored rows, bad
//! arguments as tool errors, another tenant seeing nothing); and raw JSON-RPC frames check that
//! stdout carries nothing but protocol frames, even with every log on.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::{Sandbox, corpus, create_key, serve};

/// The Python packages the MCP client test uses, pinned.
const MCP_PACKAGES: &[&str] = &["mcp==2.3.0"];

/// The MCP test's environment (`target/test-venv-mcp`).
fn python_venv() -> Option<PathBuf> {
    crate::support::python_venv("test-venv-mcp", MCP_PACKAGES)
}

/// A SQLite sandbox with a Claude Code and a Codex session of the corpus imported.
fn imported() -> Option<Sandbox> {
    let corpus = corpus()?;
    let sb = Sandbox::new();
    let claude = corpus.join("claude-code-jsonl/codemie-code__session-624a4a58.jsonl");
    let codex = corpus.join("codex-rollout-jsonl/lanegrid-agtrace__codex_session.jsonl");
    sb.run(&["import", claude.to_str().unwrap(), codex.to_str().unwrap()])
        .ok();
    Some(sb)
}

/// Issue 19: the official Python SDK calls every tool of `baton mcp` over stdio.
#[test]
fn the_python_sdk_drives_every_tool_over_stdio() {
    let Some(sb) = imported() else { return };
    let Some(python) = python_venv() else { return };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_baton"))
        .arg(sb.db())
        .env_remove("BATON_DB")
        .env_remove("BATON_TENANT")
        .env_remove("BATON_TOKENIZER")
        .env("BATON_CONFIG_FILE", "/nonexistent/baton-tests/config.toml")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP client failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("mcp client: all checks passed"), "{stdout}");
    println!("{stdout}");
}

/// Issue 19: with every log on, stdout holds protocol frames only (one JSON-RPC message a
/// line, each answering a request by id), the logs go to stderr, and the server exits 0 when
/// the client closes stdin.
#[test]
fn stdout_carries_only_protocol_frames() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r1"]).ok();
    let message = r#"{"role":"user","content":"find the flaky test"}"#;
    sb.run_with_stdin(&["append", "r1"], &format!("{message}\n"))
        .ok();
    let mut child = sb
        .command(&["mcp"])
        .env("BATON_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "recall", "arguments": {"run": "r1", "seq": 1}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "flaky"}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "recall", "arguments": {"run": "r1"}}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "nope", "arguments": {}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = Vec::new();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        if request.get("id").is_some() {
            let line = lines.next().expect("an answer").unwrap();
            let frame: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON-RPC frame on stdout ({e}): {line:?}"));
            assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
            assert_eq!(frame["id"], request["id"], "{frame}");
            answers.push(frame);
        }
    }
    drop(stdin);
    assert!(lines.next().is_none(), "nothing after the answers");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit on EOF: {:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("initialized"),
        "logs go to stderr: {stderr}"
    );

    // The client asked for an older revision, which the server speaks.
    assert_eq!(answers[0]["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "baton");
    assert_eq!(answers[1]["result"]["tools"].as_array().unwrap().len(), 10);
    // recall: the stored message JSON, byte for byte, tagged with run and seq.
    let recalled = &answers[2]["result"];
    assert_eq!(recalled["isError"], false);
    let block = &recalled["content"][1];
    assert_eq!(block["_meta"]["baton/run"], "r1");
    assert_eq!(block["_meta"]["baton/seq"], 1);
    let stored: String = rusqlite::Connection::open(sb.db())
        .unwrap()
        .query_row(
            "SELECT message FROM history h JOIN runs r ON r.pk = h.run_pk WHERE r.id = 'r1' AND h.seq = 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(block["text"].as_str().unwrap(), stored);
    // search: an index with a snippet, not the message.
    let hits = &answers[3]["result"]["structuredContent"]["hits"];
    assert_eq!(hits[0]["seq"], 1, "{hits}");
    assert_eq!(hits[0]["snippet"], "find the flaky test");
    // A tool error names what was missing; an unknown tool is a protocol error.
    assert_eq!(answers[4]["result"]["isError"], true);
    let text = answers[4]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("seq"), "{text}");
    assert_eq!(answers[5]["error"]["code"], -32602, "{}", answers[5]);
}

/// Issue 19: the same service at `/mcp` of `baton serve`, over streamable HTTP with the
/// official Python SDK: each key acts for its tenant, another tenant's key sees nothing of the
/// first's through any tool, a request without a key is refused with 401.
#[test]
fn the_python_sdk_drives_mcp_over_streamable_http() {
    let Some(python) = python_venv() else { return };
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r1"]).ok();
    let messages = [
        r#"{"role":"user","content":"find the flaky test"}"#,
        r#"{"role":"assistant","content":"looking — «naïve» dates"}"#,
        r#"{"role":"user","content":"thanks"}"#,
    ];
    sb.run_with_stdin(&["append", "r1"], &format!("{}\n", messages.join("\n")))
        .ok();
    let key = create_key(&sb, "default");
    let other = create_key(&sb, "other");
    let served = serve(&sb, &[]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_http_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{}/mcp", served.addr))
        .args([&key, &other, "r1"])
        .arg(sb.db())
        .output()
        .unwrap();
    drop(served);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP HTTP client failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("mcp http client: all checks passed"),
        "{stdout}"
    );
}

/// `baton mcp` with `--json` is a usage error (it prints no JSON of its own).
#[test]
fn mcp_takes_no_json_flag() {
    let sb = Sandbox::new();
    let ran = sb.run(&["--json", "mcp"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("mcp"), "{}", ran.stderr);
}

/// Issue 19, item 3: `baton mcp --watch DIR` follows a session while it is written, in the
/// same process: half a Claude Code session appears in the folder and becomes a run the MCP
/// client lists; the rest is appended and the same run grows; stdout holds only frames; when
/// the client closes stdin the server and its watcher stop with exit 0. A folder that does not
/// exist is refused before any client connects.
#[test]
fn mcp_watch_follows_a_session_while_it_is_written() {
    let Some(corpus) = corpus() else { return };
    let session = corpus.join(
        "claude-code-jsonl/d-kimuson-claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    );
    let text = std::fs::read_to_string(&session).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let sb = Sandbox::new();
    let tree = sb.dir.path().join("projects");
    std::fs::create_dir_all(tree.join("p")).unwrap();

    let missing = sb.dir.path().join("nowhere");
    let ran = sb.run(&["mcp", "--watch", missing.to_str().unwrap()]);
    assert_eq!(ran.code, 1, "as `baton watch` answers it: {}", ran.stderr);
    assert!(ran.stderr.contains("no such directory"), "{}", ran.stderr);

    let state = sb.dir.path().join("state.json");
    let mut child = sb
        .command(&[
            "mcp",
            "--watch",
            tree.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines_out = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut id = 0;
    let mut ask = |method: &str, params: Value| -> Value {
        id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let line = lines_out.next().expect("an answer").unwrap();
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON-RPC frame on stdout ({e}): {line:?}"));
        assert_eq!(frame["id"], id, "{frame}");
        frame
    };
    ask(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "1"}}),
    );
    // (The `initialized` notification is sent with the first call below.)
    let file = tree.join("p/session.jsonl");
    let half = lines.len() / 2;
    std::fs::write(&file, format!("{}\n", lines[..half].join("\n"))).unwrap();
    let runs = |ask: &mut dyn FnMut(&str, Value) -> Value| -> Vec<Value> {
        let answer = ask("tools/call", json!({"name": "runs", "arguments": {}}));
        answer["result"]["structuredContent"]["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // What `baton import` stores of the whole file (the session and its inline subagents):
    // each run's message count, sorted.
    let other = Sandbox::new();
    other.run(&["import", session.to_str().unwrap()]).ok();
    let imported = other.run(&["--json", "runs", "list"]).ok().json();
    let mut expected: Vec<u64> = imported["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["last_seq"].as_u64().unwrap())
        .collect();
    expected.sort_unstable();
    let counts = |listed: &[Value]| -> Vec<u64> {
        let mut c: Vec<u64> = listed
            .iter()
            .map(|r| r["messages"].as_u64().unwrap())
            .collect();
        c.sort_unstable();
        c
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let first = loop {
        let listed = runs(&mut ask);
        if listed.iter().any(|r| r["messages"].as_u64() > Some(0)) {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the watcher imported nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let before: u64 = counts(&first).iter().sum();
    assert!(
        counts(&first) != expected,
        "half the file is not the whole session"
    );
    let mut appended = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(appended, "{}", lines[half..].join("\n")).unwrap();
    drop(appended);
    // A live file's last unit waits until the agent has been quiet for ten minutes (`baton
    // watch`'s rule, `baton_watch::LIVE_WITHIN`), so the runs reach a whole import of the file
    // but for at most its last message.
    let whole: u64 = expected.iter().sum();
    let after = loop {
        let listed = runs(&mut ask);
        let now = counts(&listed);
        let total: u64 = now.iter().sum();
        if now.len() == expected.len() && total + 1 >= whole {
            assert!(
                now.iter().zip(&expected).all(|(a, b)| a <= b),
                "more than an import stores: {now:?} against {expected:?}"
            );
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the runs never reached what an import of the whole file stores: {now:?} against {expected:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    // The runs seen half-way grew in place: none was replaced.
    for run in &first {
        assert!(
            after.iter().any(|r| r["id"] == run["id"]),
            "run {} of the half file is gone",
            run["id"]
        );
    }
    assert!(counts(&after).iter().sum::<u64>() > before);
    drop(stdin);
    assert!(lines_out.next().is_none(), "nothing after the answers");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit on EOF: {:?}", out.status);
}

/// Issue 19: 100 tool calls at once over `/mcp` of `baton serve` while `baton watch` imports,
/// with the official Python SDK: none fails. Then the server is killed (SIGKILL) in the middle
/// of more calls, and restarted: the SQLite file passes its integrity check, every run's tool
/// pairing is whole (a run may end in open calls only where its source does), and the same
/// calls give the same answers.
#[test]
fn a_hundred_calls_during_a_watch_then_kill_9_and_the_same_answers() {
    let Some(corpus) = corpus() else { return };
    let Some(python) = python_venv() else { return };
    let sb = Sandbox::new();
    sb.run(&["import", corpus.join("claude-code-jsonl").to_str().unwrap()])
        .ok();
    // The fixed runs: the first three whose pairing is whole and that have 3 messages or more.
    let listed = sb.run(&["--json", "runs", "list", "--all"]).ok().json();
    let fixed: Vec<String> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["last_seq"].as_u64() >= Some(3))
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .filter(|id| sb.run(&["history", id, "--check"]).code == 0)
        .take(3)
        .collect();
    assert_eq!(fixed.len(), 3, "three whole runs in the corpus");
    let key = create_key(&sb, "default");
    // The watcher follows a folder that Codex sessions are copied into during the load.
    let tree = sb.dir.path().join("sessions");
    std::fs::create_dir_all(&tree).unwrap();
    let state = sb.dir.path().join("watch-state.json");
    let mut watcher = sb
        .command(&[
            "watch",
            tree.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sources: Vec<PathBuf> = std::fs::read_dir(corpus.join("codex-rollout-jsonl"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let copier = {
        let tree = tree.clone();
        std::thread::spawn(move || {
            for (i, source) in sources.iter().enumerate() {
                std::fs::copy(source, tree.join(format!("rollout-{i}.jsonl"))).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        })
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_load.py");
    let runs_arg = fixed.join(",");
    let load = |mode: &str, addr: &str| {
        std::process::Command::new(&python)
            .arg(&script)
            .args([mode, &format!("http://{addr}/mcp"), &key, &runs_arg])
            .output()
            .unwrap()
    };
    let calls = |addr: &str| -> Value {
        let out = load("calls", addr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(answer["errors"], json!([]), "calls failed");
        answer["answers"].clone()
    };

    let served = serve(&sb, &[]);
    let first = calls(&served.addr);
    // Two fixed calls a run: one seq alone, and seqs 1 to 3.
    assert_eq!(first.as_object().unwrap().len(), 6, "{first}");
    // More calls, and the server killed in their middle.
    let addr = served.addr.clone();
    let mut served = served;
    let stormed = std::thread::scope(|scope| {
        let storm = scope.spawn(|| load("storm", &addr));
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        served.child.kill().unwrap(); // SIGKILL
        served.child.wait().unwrap();
        storm.join().unwrap()
    });
    assert!(
        stormed.status.success(),
        "{}",
        String::from_utf8_lossy(&stormed.stderr)
    );
    copier.join().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &watcher.id().to_string()])
        .status();
    watcher.wait().unwrap();

    // Nothing the watcher read was lost: every Codex session is a run, as an import makes.
    let agents = |sb: &Sandbox| -> usize {
        let all = sb.run(&["--json", "runs", "list", "--all"]).ok().json();
        all["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["agent"] == "codex")
            .count()
    };
    let fresh = Sandbox::new();
    fresh
        .run(&[
            "import",
            corpus.join("codex-rollout-jsonl").to_str().unwrap(),
        ])
        .ok();
    assert_eq!(agents(&sb), agents(&fresh), "the watcher lost a session");
    let integrity: String = rusqlite::Connection::open(sb.db())
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let all = sb.run(&["--json", "runs", "list", "--all"]).ok().json();
    for run in all["runs"].as_array().unwrap() {
        let id = run["id"].as_str().unwrap();
        let checked = sb.run(&["history", id, "--check"]);
        if checked.code != 0 {
            for line in checked.stdout.lines() {
                assert!(
                    line.contains("has no tool_result"),
                    "run {id}: {line} (only a source's open calls may fail the check)"
                );
            }
        }
    }
    let again = serve(&sb, &[]);
    assert_eq!(
        calls(&again.addr),
        first,
        "the same calls, the same answers"
    );
}

/// The MCP Inspector's command line, pinned, where node is present (issue 19): it starts
/// `baton mcp` itself over stdio, lists the tools, and calls `recall`, whose original is the
/// stored row byte for byte; a seq outside the run is a tool error, not a protocol failure.
#[test]
fn the_mcp_inspector_cli_lists_and_calls_the_tools() {
    const INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";
    if std::process::Command::new("npx")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipping: no npx (the MCP Inspector runs on node)");
        return;
    }
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r1"]).ok();
    sb.run_with_stdin(
        &["append", "r1"],
        "{\"role\":\"user\",\"content\":\"find the «flaky» test\"}\n",
    )
    .ok();
    // Its JSON answer, and whether it exited 0 (it exits 1 for a tool error).
    let inspect = |args: &[&str]| -> (bool, Value) {
        let out = std::process::Command::new("npx")
            .args([
                "--yes",
                INSPECTOR,
                "--cli",
                env!("CARGO_BIN_EXE_baton"),
                "--db",
            ])
            .arg(sb.db())
            .arg("mcp")
            .args(args)
            .env("npm_config_update_notifier", "false")
            .env_remove("BATON_DB")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let start = stdout
            .find('{')
            .unwrap_or_else(|| panic!("no JSON: {stdout}\n{stderr}"));
        let json = serde_json::from_str(&stdout[start..])
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
        (out.status.success(), json)
    };
    let (ok, listed) = inspect(&["--method", "tools/list"]);
    assert!(ok, "{listed}");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    assert!(
        names.contains(&"recall") && names.contains(&"search"),
        "{names:?}"
    );
    let (ok, recalled) = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "recall",
        "--tool-arg",
        "run=r1",
        "--tool-arg",
        "seq=1",
    ]);
    let stored: String = rusqlite::Connection::open(sb.db())
        .unwrap()
        .query_row(
            "SELECT message FROM history h JOIN runs r ON r.pk = h.run_pk WHERE r.id = 'r1' AND h.seq = 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(ok, "{recalled}");
    assert_eq!(
        recalled["content"][1]["text"].as_str(),
        Some(stored.as_str())
    );
    let (_, outside) = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "recall",
        "--tool-arg",
        "run=r1",
        "--tool-arg",
        "seq=9",
    ]);
    assert_eq!(outside["isError"], true, "{outside}");
    let text = outside["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("has seqs 1..1"), "{text}");
}
