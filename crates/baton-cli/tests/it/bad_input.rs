//! Bad input gets one clear line, the documented exit code, and leaves the store as it was.

use crate::support::Sandbox;

fn with_run() -> Sandbox {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "r"]).ok();
    sb.run_with_stdin(
        &["append", "r"],
        "{\"role\":\"user\",\"content\":\"one\"}\n{\"role\":\"assistant\",\"content\":\"two\"}\n",
    )
    .ok();
    sb
}

fn count(sb: &Sandbox) -> usize {
    sb.run(&["--json", "history", "r"]).ok().json()["messages"]
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_malformed_line_rejects_the_whole_batch_naming_the_line() {
    let sb = with_run();
    let batch = "{\"role\":\"user\",\"content\":\"fine\"}\n{\"role\":\"user\",\"content\":\n";
    sb.run_with_stdin(&["append", "r"], batch)
        .fails(4, "line 2: not valid JSON");
    assert_eq!(count(&sb), 2);
}

#[test]
fn an_unknown_block_type_is_named() {
    let sb = with_run();
    let batch = "{\"role\":\"user\",\"content\":\"fine\"}\n{\"role\":\"user\",\"content\":[{\"type\":\"hologram\",\"x\":1}]}\n";
    sb.run_with_stdin(&["append", "r"], batch)
        .fails(4, "line 2")
        .stderr
        .contains("hologram");
    let err = sb.run_with_stdin(&["append", "r"], batch);
    assert!(err.stderr.contains("hologram"), "{}", err.stderr);
    assert_eq!(count(&sb), 2);
}

#[test]
fn an_orphan_tool_result_is_stored_but_flagged_by_history_check() {
    let sb = with_run();
    sb.run(&["history", "r", "--check"]).ok();
    let orphan =
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"ghost","content":"?"}]}"#;
    sb.run_with_stdin(&["append", "r"], orphan).ok();
    assert_eq!(count(&sb), 3, "history records what happened");
    let check = sb.run(&["history", "r", "--check"]);
    assert_eq!(check.code, 1);
    assert!(
        check
            .stdout
            .contains("seq 3: tool_result for ghost has no tool_use"),
        "{}",
        check.stdout
    );
    let json = sb.run(&["history", "r", "--check", "--json"]).json();
    assert_eq!(json["problems"][0]["kind"], "orphan_result");
    // And no cut may keep it on the kept side.
    let empty = sb.file("empty.json", "[]");
    sb.run(&[
        "summary",
        "install",
        "r",
        "--base",
        "none",
        "--cut",
        "2",
        "--file",
        empty.to_str().unwrap(),
    ])
    .fails(4, "not a safe cut point");
}

#[test]
fn invalid_cuts_and_claims_exit_4_and_write_nothing() {
    let sb = with_run();
    sb.run(&["runs", "create", "--id", "other"]).ok();
    let lines: String = (1..=6)
        .map(|i| format!("{{\"role\":\"user\",\"content\":\"o{i}\"}}\n"))
        .collect();
    sb.run_with_stdin(&["append", "other"], &lines).ok();
    let ok = sb.file("ok.json", r#"[{"kind":"note","text":"x","source_seq":1}]"#);
    let after_cut = sb.file(
        "after.json",
        r#"[{"kind":"note","text":"x","source_seq":2}]"#,
    );
    let other_runs_seq = sb.file(
        "other.json",
        r#"[{"kind":"note","text":"x","source_seq":5}]"#,
    );
    let extra_field = sb.file(
        "extra.json",
        r#"[{"kind":"note","text":"x","source_seq":1,"confidence":0.9}]"#,
    );
    let bad_kind = sb.file(
        "kind.json",
        r#"[{"kind":"rumor","text":"x","source_seq":1}]"#,
    );
    let not_json = sb.file("broken.json", "[{");
    let install = |base: &str, cut: &str, file: &std::path::Path| {
        sb.run(&[
            "summary",
            "install",
            "r",
            "--base",
            base,
            "--cut",
            cut,
            "--file",
            file.to_str().unwrap(),
        ])
    };
    install("none", "9", &ok).fails(4, "cut 9 is not a message of this run");
    install("none", "1", &after_cut).fails(4, "source_seq 2 is after the cut 1");
    install("none", "2", &other_runs_seq).fails(4, "source_seq 5 is not a message of this run");
    install("none", "2", &extra_field).fails(4, "unknown field `confidence`");
    install("none", "2", &bad_kind).fails(4, "rumor");
    install("none", "2", &not_json).fails(4, "not valid JSON");
    install("seven", "2", &ok).fails(4, "--base \"seven\"");
    install("4242", "2", &ok).fails(4, "base summary 4242 does not belong to this run");
    assert!(
        sb.run(&["--json", "summary", "list", "r"]).ok().json()["summaries"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    install("none", "2", &ok).ok();
}

#[test]
fn unknown_runs_tenants_and_ids_are_named() {
    let sb = with_run();
    sb.run(&["history", "nope"])
        .fails(1, "run \"nope\" not found");
    // A tenant that never stored anything has no run of that name either (issue 20, item 15).
    sb.run(&["--tenant", "ghost", "history", "r"])
        .fails(1, "run \"r\" not found");
    sb.run(&["--tenant", "bad tenant", "runs", "list"])
        .fails(4, "invalid tenant id");
    sb.run(&["runs", "create", "--id", "has space"])
        .fails(4, "invalid run id");
    sb.run(&["runs", "create", "--id", "r"])
        .fails(3, "already exists");
    sb.run(&["summary", "show", "999"])
        .fails(1, "summary 999 not found");
    // Tenant b cannot see tenant default's run, even by its exact id.
    sb.run(&["--tenant", "b", "runs", "create", "--id", "mine"])
        .ok();
    sb.run(&["--tenant", "b", "history", "r"])
        .fails(1, "run \"r\" not found");
    sb.run(&["--tenant", "b", "context", "r"])
        .fails(1, "run \"r\" not found");
}

#[test]
fn a_cancelled_run_takes_no_summary_and_no_message() {
    let sb = with_run();
    sb.run(&["runs", "cancel", "r"]).ok();
    let ok = sb.file("ok.json", r#"[{"kind":"note","text":"x","source_seq":1}]"#);
    sb.run(&[
        "summary",
        "install",
        "r",
        "--base",
        "none",
        "--cut",
        "1",
        "--file",
        ok.to_str().unwrap(),
    ])
    .fails(3, "run is cancelled");
    sb.run_with_stdin(&["append", "r"], "{\"role\":\"user\",\"content\":\"more\"}")
        .fails(3, "is cancelled");
    assert_eq!(
        sb.run(&["--json", "runs", "show", "r"]).ok().json()["status"],
        "cancelled"
    );
    assert_eq!(count(&sb), 2);
}

#[test]
fn files_that_are_not_baton_databases_are_refused_untouched() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.db(),
        "just some text, certainly not SQLite\n".repeat(100),
    )
    .unwrap();
    // A --db that names something baton cannot use is invalid input: name another.
    sb.run(&["runs", "list"]).fails(4, "not a baton database");
    assert!(
        std::fs::read_to_string(sb.db())
            .unwrap()
            .starts_with("just some text")
    );
}

#[test]
fn a_database_from_a_newer_baton_is_refused() {
    let sb = with_run();
    let conn = rusqlite::Connection::open(sb.db()).unwrap();
    conn.execute_batch("PRAGMA user_version = 999").unwrap();
    drop(conn);
    sb.run(&["runs", "list"])
        .fails(1, "schema version 999 is newer");
}

#[test]
fn usage_errors_exit_2() {
    let sb = Sandbox::new();
    let ran = sb.run(&["summary", "install", "r"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("--base"), "{}", ran.stderr);
    assert_eq!(sb.run(&["frobnicate"]).code, 2);
    // Global options go before or after the subcommand.
    sb.run(&["runs", "create", "--id", "x", "--tenant", "t", "--json"])
        .ok()
        .json();
    sb.run(&["--tenant", "t", "--json", "runs", "show", "x"])
        .ok()
        .json();
}

#[test]
fn migrate_and_doctor_report_on_both_backends() {
    for sb in Sandbox::each() {
        let migrated = sb.run(&["migrate", "--json"]).ok().json();
        assert_eq!(migrated["schema_version"], baton_sqlite::SCHEMA_VERSION);
        sb.run(&["migrate"]).ok();
        let doctor = sb.run(&["doctor", "--json"]).ok().json();
        assert_eq!(doctor["ok"], true);
        let text = sb.run(&["doctor"]).ok().stdout;
        assert!(text.contains("ok: "), "{text}");
    }
}

#[test]
fn an_unreachable_postgres_is_one_clear_line_without_the_password() {
    let sb = Sandbox::new();
    let ran = crate::support::ran(
        crate::support::command(
            "postgres://bob:hunter2@127.0.0.1:1/x?connect_timeout=2",
            &["runs", "list"],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("database unavailable") && ran.stderr.contains("bob:***"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("hunter2"), "{}", ran.stderr);
    drop(sb);
}

#[test]
fn numbers_past_the_databases_range_are_not_found_not_corrupt() {
    for sb in Sandbox::each() {
        sb.run(&["runs", "create", "--id", "r"]).ok();
        sb.run_with_stdin(
            &["append", "r"],
            "{\"role\":\"user\",\"content\":\"one\"}\n",
        )
        .ok();
        let ok = sb.file("ok.json", "[]");
        let huge = "9223372036854775808";
        let install = |base: &str, cut: &str| {
            sb.run(&[
                "summary",
                "install",
                "r",
                "--base",
                base,
                "--cut",
                cut,
                "--file",
                ok.to_str().unwrap(),
            ])
        };
        install("none", huge).fails(4, "is not a message of this run");
        install(huge, "1").fails(4, "does not belong to this run");
        sb.run(&["summary", "show", huge]).fails(1, "not found");
        let all = sb
            .run(&["--json", "history", "r", "--to", "18446744073709551615"])
            .ok()
            .json();
        assert_eq!(all["messages"].as_array().unwrap().len(), 1);
        sb.run(&["recall", "r", huge]).fails(4, "has seqs 1..1");
    }
}

#[test]
fn input_that_is_not_utf8_is_invalid_input() {
    let sb = with_run();
    let path = sb.dir.path().join("latin1.jsonl");
    std::fs::write(&path, b"{\"role\":\"user\",\"content\":\"caf\xe9\"}\n").unwrap();
    sb.run(&["append", "r", "--file", path.to_str().unwrap()])
        .fails(4, "line 1: not valid UTF-8");
    let candidate = sb.dir.path().join("latin1.json");
    std::fs::write(
        &candidate,
        b"[{\"kind\":\"note\",\"text\":\"caf\xe9\",\"source_seq\":1}]",
    )
    .unwrap();
    sb.run(&[
        "summary",
        "install",
        "r",
        "--base",
        "none",
        "--cut",
        "1",
        "--file",
        candidate.to_str().unwrap(),
    ])
    .fails(4, "not valid UTF-8");
    assert_eq!(count(&sb), 2);
}

#[test]
fn the_demo_runs_in_the_named_tenant() {
    let sb = Sandbox::new();
    sb.run(&["--tenant", "acme", "demo"]).ok();
    let runs = sb
        .run(&["--tenant", "acme", "--json", "runs", "list"])
        .ok()
        .json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    assert!(
        sb.run(&["--json", "runs", "list"]).ok().json()["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Issue 20, item 15: a command that only reads never leaves a database at a mistyped path
/// (it names the path instead), and once there is one, a run it does not hold is "not found",
/// for a tenant that never stored anything too.
#[test]
fn reading_commands_never_create_a_database_and_missing_runs_are_not_found() {
    let sb = Sandbox::new();
    let typo = sb.dir.path().join("tpyo").join("baton.db");
    let reads: [&[&str]; 9] = [
        &["runs", "list"],
        &["runs", "show", "r"],
        &["history", "r"],
        &["context", "r"],
        &["summary", "list", "r"],
        &["ops", "list"],
        &["keys", "list"],
        &["report", "duplicates"],
        &["doctor"],
    ];
    for args in reads {
        crate::support::ran(crate::support::command(&typo, args).output().unwrap())
            .fails(1, &format!("no baton database at {}", typo.display()));
        assert!(!typo.parent().unwrap().exists(), "{args:?} created it");
    }
    crate::support::ran(
        crate::support::command(&typo, &["runs", "create", "--id", "a"])
            .output()
            .unwrap(),
    )
    .ok();
    for tenant in ["default", "ghost"] {
        crate::support::ran(
            crate::support::command(&typo, &["--tenant", tenant, "history", "r"])
                .output()
                .unwrap(),
        )
        .fails(1, "run \"r\" not found");
    }
}
