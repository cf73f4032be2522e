//! Issue 20: the CLI's defects found by a newcomer's trial and an attack on the service, each
//! pinned by a test that failed before its fix (the items' numbers are the issue's).

use crate::support::Sandbox;

/// Items 4 and 7 from the command line: an id past the databases' range is invalid input
/// (exit 4), on both backends; `.` and `..` are no run id and no operation key.
#[test]
fn r20_4_7_out_of_range_and_dot_ids_are_invalid_input() {
    for sb in Sandbox::each() {
        sb.run(&["runs", "create", "--id", "r"]).ok();
        sb.run_with_stdin(
            &["append", "r"],
            "{\"role\":\"user\",\"content\":\"one\"}\n{\"role\":\"assistant\",\"content\":\"two\"}\n",
        )
        .ok();
        let candidate = sb.file("c.json", "[]");
        let candidate = candidate.to_str().unwrap();
        let id = sb
            .run(&[
                "--json", "summary", "install", "r", "--base", "none", "--cut", "1", "--file",
                candidate,
            ])
            .ok()
            .json()["id"]
            .as_u64()
            .unwrap()
            .to_string();
        let big = (i64::MAX as u64 + 1).to_string();
        sb.run(&["summary", "activate", "r", &id, "--base", &big])
            .fails(4, &format!("{big} is out of range"));
        sb.run(&["summary", "activate", "r", &big, "--base", &id])
            .fails(4, &big);
        sb.run(&[
            "summary", "install", "r", "--base", &big, "--cut", "2", "--file", candidate,
        ])
        .fails(4, &big);
        for dots in [".", ".."] {
            sb.run(&["runs", "create", "--id", dots])
                .fails(4, "other than '.' and '..'");
            sb.run(&[
                "ops",
                "begin",
                dots,
                "--request-hash",
                &"a".repeat(64),
                "--owner",
                "w",
                "--lease",
                "10s",
            ])
            .fails(4, "other than '.' and '..'");
        }
    }
}

/// Items 11 and 18: `baton serve` configured by environment variables alone (`BATON_ADDR`,
/// `BATON_LOG_FORMAT`, `BATON_GATEWAY_TENANT`), and its JSON log lines carry each request's
/// latency as a number, its route, tenant, cache outcome and model.
#[test]
fn r20_11_18_serve_from_the_environment_logs_request_fields() {
    use crate::serve::slow_upstream;
    use crate::support::{Served, create_key, http, terminate, wait};

    let sb = Sandbox::new();
    let key = create_key(&sb, "acme");
    let upstream = slow_upstream(std::time::Duration::from_millis(10));
    let child = sb
        .command(&["serve"])
        .env("BATON_ADDR", "127.0.0.1:0")
        .env("BATON_LOG_FORMAT", "json")
        .env("BATON_GATEWAY_TENANT", "acme")
        .env("BATON_UPSTREAM_OPENAI", format!("http://{upstream}/v1"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut served = Served::from_child(child);
    let (status, body) = http(
        &served.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Authorization", "Bearer sk-caller-own-key"),
            ("Content-Type", "application/json"),
        ],
        r#"{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let auth = format!("Bearer {key}");
    let (status, body) = http(
        &served.addr,
        "GET",
        "/v1/runs",
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    terminate(&mut served);
    let (code, _, err) = wait(served);
    assert_eq!(code, 0, "{err}");
    let finished: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["message"] == "finished processing request")
        .collect();
    let gateway = finished
        .iter()
        .find(|l| l["span"]["route"] == "/v1/chat/completions")
        .unwrap_or_else(|| panic!("no gateway line in {err}"));
    assert!(gateway["latency_ms"].is_f64(), "{gateway}");
    assert_eq!(gateway["status"], 200, "{gateway}");
    assert_eq!(gateway["span"]["tenant"], "acme", "{gateway}");
    assert_eq!(gateway["span"]["cache"], "miss", "{gateway}");
    assert_eq!(gateway["span"]["model"], "mock-gpt", "{gateway}");
    let api = finished
        .iter()
        .find(|l| l["span"]["route"] == "/v1/runs")
        .unwrap_or_else(|| panic!("no API line in {err}"));
    assert!(api["latency_ms"].is_f64(), "{api}");
    assert_eq!(api["span"]["tenant"], "acme", "{api}");
    assert!(
        !err.contains("sk-caller-own-key"),
        "a provider key in the log"
    );
}

/// Item 13: `baton chat --run` on a cancelled run refuses before any model call (the scripted
/// provider would answer; nothing reaches it and the call log stays empty).
#[test]
fn r20_13_chat_refuses_a_cancelled_run_before_calling_the_model() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "done"]).ok();
    sb.run_with_stdin(
        &["append", "done"],
        "{\"role\":\"user\",\"content\":\"waiting for a reply\"}\n",
    )
    .ok();
    sb.run(&["runs", "cancel", "done"]).ok();
    let script = sb.file(
        "script.json",
        &serde_json::json!({"turns": [{"reply": {"text": "a paid answer"}}, {"reply": {"text": "another"}}]}).to_string(),
    );
    let work = sb.dir.path().display().to_string();
    sb.run(&[
        "chat",
        "--run",
        "done",
        "--provider",
        "scripted",
        "--script",
        script.to_str().unwrap(),
        "--workdir",
        &work,
        "--strategy",
        "none",
        "-m",
        "and now?",
    ])
    .fails(3, "run \"done\" is cancelled");
    let log = sb.run(&["--json", "report", "duplicates"]).ok().json();
    assert_eq!(
        log["rows"],
        serde_json::json!([]),
        "a model call was made: {log}"
    );
    let history = sb.run(&["--json", "history", "done"]).ok().json();
    assert_eq!(history["messages"].as_array().unwrap().len(), 1);
}

/// Item 17: `history --check` reports a user message placed between a tool call and its
/// result, which every provider refuses.
#[test]
fn r20_17_history_check_reports_a_user_message_inside_a_tool_call() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let lines = [
        r#"{"role":"user","content":"list the files"}"#,
        r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]}"#,
        r#"{"role":"user","content":"actually, hurry"}"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"}]}"#,
    ];
    sb.run_with_stdin(&["append", "r"], &(lines.join("\n") + "\n"))
        .ok();
    let checked = sb.run(&["history", "r", "--check"]);
    assert_eq!(checked.code, 1, "{}", checked.stderr);
    assert!(
        checked
            .stdout
            .contains("seq 3: a user message between tool_use t1 and its tool_result"),
        "{}",
        checked.stdout
    );
    let json = sb.run(&["--json", "history", "r", "--check"]);
    assert_eq!(json.code, 1);
    assert_eq!(
        json.json()["problems"],
        serde_json::json!([{"kind": "user_between_use_and_result", "seq": 3, "tool_use_id": "t1"}])
    );
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet: it runs nothing).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Item 12: `ops run`'s command dies with baton (a SIGKILL included), with everything it
/// started; a command that cannot start is recorded failed at once; `ops run` exits with the
/// command's code; the stored output is capped.
#[test]
fn r20_12_ops_run_the_command_dies_with_baton() {
    let sb = Sandbox::new();
    let pids = sb.dir.path().join("pids");
    let script = format!(
        "echo $$ > {0}.sh; sleep 60 & echo $! > {0}.bg; wait",
        pids.display()
    );
    let mut baton = sb
        .command(&[
            "ops", "run", "long", "--lease", "30s", "--", "sh", "-c", &script,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let read = |ext: &str| std::fs::read_to_string(format!("{}.{ext}", pids.display()));
    while read("bg").map_or(true, |p| p.trim().is_empty()) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (shell, sleeper) = (read("sh").unwrap(), read("bg").unwrap());
    let (shell, sleeper) = (shell.trim(), sleeper.trim());
    assert!(!gone(shell) && !gone(sleeper));
    baton.kill().unwrap(); // SIGKILL: no handler of baton's runs
    baton.wait().unwrap();
    let killed = std::time::Instant::now();
    while !(gone(shell) && gone(sleeper)) {
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(5),
            "the command outlived baton: sh {shell} and sleep {sleeper} still run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // A command that cannot start: failed at once, not running until its lease ends.
    let started = std::time::Instant::now();
    let ran = sb.run(&[
        "ops",
        "run",
        "nope",
        "--lease",
        "1h",
        "--",
        "/nonexistent/tool",
        "x",
    ]);
    assert_eq!(ran.code, 127, "{}", ran.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let op = sb.run(&["--json", "ops", "show", "nope"]).ok().json();
    assert_eq!(op["status"], "failed", "{op}");
    assert!(
        op["error"].as_str().unwrap().contains("/nonexistent/tool"),
        "{op}"
    );

    // The command's own exit code.
    sb.run(&[
        "ops",
        "run",
        "seven",
        "--",
        "sh",
        "-c",
        "echo broke >&2; exit 7",
    ])
    .fails(7, "the command failed: broke (exit status 7)");

    // Output past the cap is stored cut, and says so.
    sb.run(&[
        "ops",
        "run",
        "big",
        "--",
        "sh",
        "-c",
        "head -c 300000 /dev/zero | tr '\\0' x",
    ])
    .ok();
    let op = sb.run(&["--json", "ops", "show", "big"]).ok().json();
    assert_eq!(
        op["result"]["truncated"], true,
        "{}",
        op["result"]["stdout_bytes"]
    );
    assert_eq!(op["result"]["stdout_bytes"], 300_000);
    assert_eq!(op["result"]["stdout"].as_str().unwrap().len(), 64 * 1024);
}

/// Item 18: shell completions, the commit in `--version`, a configuration file under
/// `$XDG_CONFIG_HOME` that flags and the environment override, and no ANSI colours in logs
/// that go to a pipe.
#[test]
fn r20_18_completions_version_config_file_and_no_colours_off_a_terminal() {
    let sb = Sandbox::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef baton"),
        ("fish", "complete -c baton"),
    ] {
        let script = sb.run(&["completions", shell]).ok().stdout;
        assert!(script.contains(marker), "{shell}: {script:.200}");
        assert!(
            script.contains("ops"),
            "{shell}: the subcommands are completed"
        );
    }
    let tcsh = sb.run(&["completions", "tcsh"]);
    assert_eq!(tcsh.code, 2, "{}", tcsh.stderr);
    assert!(
        tcsh.stderr.contains("invalid value 'tcsh'"),
        "{}",
        tcsh.stderr
    );

    let version = sb.run(&["--version"]).ok().stdout;
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(head.len(), 12, "the tests run in a git checkout");
    assert!(
        version.starts_with(&format!("baton 0.0.0 (commit {head}")),
        "{version}"
    );

    // The file gives defaults; BATON_* and flags override it.
    let home = sb.dir.path().join("xdg");
    std::fs::create_dir_all(home.join("baton")).unwrap();
    std::fs::write(
        home.join("baton/config.toml"),
        "tenant = \"from-file\"\n[serve]\nmax_connections = 0\n",
    )
    .unwrap();
    let with_file = |args: &[&str], tenant_env: Option<&str>| {
        let mut cmd = sb.command(args);
        cmd.env_remove("BATON_CONFIG_FILE")
            .env("XDG_CONFIG_HOME", &home);
        if let Some(t) = tenant_env {
            cmd.env("BATON_TENANT", t);
        }
        crate::support::ran(cmd.output().unwrap())
    };
    let run = with_file(&["--json", "runs", "create", "--id", "c1"], None)
        .ok()
        .json();
    assert_eq!(run["tenant"], "from-file");
    let run = with_file(
        &["--json", "runs", "create", "--id", "c2"],
        Some("from-env"),
    )
    .ok()
    .json();
    assert_eq!(run["tenant"], "from-env");
    let run = with_file(
        &[
            "--json",
            "--tenant",
            "from-flag",
            "runs",
            "create",
            "--id",
            "c3",
        ],
        Some("from-env"),
    )
    .ok()
    .json();
    assert_eq!(run["tenant"], "from-flag");
    // `[serve]` reaches serve's own options (0 connections is refused as a value).
    with_file(&["serve", "--addr", "127.0.0.1:0"], None).fails(4, "--max-connections");
    std::fs::write(home.join("baton/config.toml"), "tenatn = \"typo\"\n").unwrap();
    with_file(&["runs", "list"], None).fails(4, "tenatn: unknown key");
    std::fs::write(home.join("baton/config.toml"), "[serve]\nadr = \"x\"\n").unwrap();
    with_file(&["runs", "list"], None).fails(4, "[serve] adr: not an option of baton serve");

    // Text logs to a pipe carry no colour codes.
    let ran = sb.run(&[
        "--json",
        "ops",
        "run",
        "colour",
        "--lease",
        "3ms",
        "--",
        "sh",
        "-c",
        "sleep 0.05",
    ]);
    let mut served = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    served
        .args([
            "--db",
            sb.db().to_str().unwrap(),
            "serve",
            "--addr",
            "127.0.0.1:0",
        ])
        .env("BATON_CONFIG_FILE", "/nonexistent/baton-tests/config.toml")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = served.spawn().unwrap();
    let mut served = crate::support::Served::from_child(child);
    let (status, _) = crate::support::http(&served.addr, "GET", "/healthz", &[], "");
    assert_eq!(status, 200);
    crate::support::terminate(&mut served);
    let (code, _, err) = crate::support::wait(served);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("finished processing request"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "colour codes in a log going to a pipe: {err:?}"
    );
    assert!(!ran.stderr.contains('\u{1b}'), "{:?}", ran.stderr);
}
