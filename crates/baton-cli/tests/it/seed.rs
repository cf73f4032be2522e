//! Seed 000, "Un caso completo", end to end through the CLI (issue 2, item 8).

use crate::support::Sandbox;

const MESSAGES: &str = r#"{"role":"user","content":"La ejecución es de solo lectura."}
{"role":"user","content":"Empieza la investigación de red."}
{"role":"user","content":"La API resuelve el nombre db."}
{"role":"user","content":"Falta comprobar el puerto configurado."}
"#;

#[test]
fn two_candidates_race_and_the_stale_one_is_rejected() {
    for sb in Sandbox::each() {
        two_candidates_race_on(&sb);
    }
}

fn two_candidates_race_on(sb: &Sandbox) {
    sb.run(&["runs", "create", "--id", "r-1"]).ok();
    let seqs = sb
        .run_with_stdin(&["--json", "append", "r-1"], MESSAGES)
        .ok()
        .json();
    assert_eq!(seqs["seqs"], serde_json::json!([1, 2, 3, 4]));
    let initial = sb.file(
        "initial.json",
        r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1}]"#,
    );
    let base = sb
        .run(&[
            "summary",
            "install",
            "r-1",
            "--base",
            "none",
            "--cut",
            "2",
            "--file",
            initial.to_str().unwrap(),
            "--json",
        ])
        .ok()
        .json()["id"]
        .as_u64()
        .unwrap()
        .to_string();
    let a = sb.file(
        "a.json",
        r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1},{"kind":"verified","text":"El nombre db se resuelve","source_seq":3}]"#,
    );
    let b = sb.file(
        "b.json",
        r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1},{"kind":"next_step","text":"Continuar diagnóstico DNS","source_seq":2}]"#,
    );
    // Message 5 arrives while A and B are being prepared.
    sb.run_with_stdin(
        &["append", "r-1"],
        r#"{"role":"user","content":"El usuario pide revisar TLS."}"#,
    )
    .ok();
    let a_id = sb
        .run(&[
            "summary",
            "install",
            "r-1",
            "--base",
            &base,
            "--cut",
            "4",
            "--file",
            a.to_str().unwrap(),
        ])
        .ok()
        .stdout
        .trim()
        .to_owned();
    sb.run(&[
        "summary",
        "install",
        "r-1",
        "--base",
        &base,
        "--cut",
        "3",
        "--file",
        b.to_str().unwrap(),
    ])
    .fails(3, "stale base");

    // Every command is a new process: what follows was read back from the file.
    let ctx = sb.run(&["context", "r-1", "--json"]).ok().json();
    assert_eq!(ctx["summary"]["id"].to_string(), a_id);
    assert_eq!(ctx["summary"]["coverage"], 4);
    let claims = ctx["summary"]["claims"].as_array().unwrap();
    assert!(
        claims
            .iter()
            .any(|c| c["source_seq"] == 1 && c["text"] == "Solo lectura"),
        "{claims:?}"
    );
    let tail: Vec<_> = ctx["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(tail, [5]);
    assert_eq!(
        ctx["messages"][0]["content"][0]["text"],
        "El usuario pide revisar TLS."
    );
    let history = sb.run(&["--json", "history", "r-1"]).ok().json();
    assert_eq!(history["messages"].as_array().unwrap().len(), 5);
    let summaries = sb.run(&["summary", "list", "r-1", "--json"]).ok().json();
    assert_eq!(summaries["summaries"].as_array().unwrap().len(), 2);
    assert_eq!(summaries["summaries"][1]["previous_id"].to_string(), base);
}

#[test]
fn the_race_demo_runs_the_seed_scenario_on_the_given_database() {
    let sb = Sandbox::new();
    let out = sb.run(&["demo", "--race"]).ok().stdout;
    assert!(out.contains("stale base"), "{out}");
    assert!(out.contains("- Solo lectura [seq 1]"), "{out}");
    let runs = sb.run(&["runs", "list", "--json"]).ok().json();
    let run = runs["runs"][0]["id"].as_str().unwrap().to_owned();
    let ctx = sb.run(&["context", &run, "--json"]).ok().json();
    assert_eq!(ctx["summary"]["coverage"], 4);
    // Running it again starts another run instead of failing.
    sb.run(&["demo", "--race"]).ok();
    assert_eq!(
        sb.run(&["runs", "list", "--json"]).ok().json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn the_demo_is_an_agent_session_that_compacts_and_keeps_the_read_only_constraint() {
    let sb = Sandbox::new();
    let out = sb.run(&["demo"]).ok().stdout;
    assert!(out.contains("[compaction: structured"), "{out}");
    assert!(out.contains("refused: this run is read-only"), "{out}");
    // Printed only when the file is untouched (the demo fails otherwise).
    assert!(
        out.contains("src/retry.rs is unchanged: the bug is still there"),
        "{out}"
    );
    let runs = sb.run(&["runs", "list", "--json"]).ok().json();
    let run = runs["runs"][0]["id"].as_str().unwrap().to_owned();
    let history = sb.run(&["--json", "history", &run]).ok().json();
    let messages = history["messages"].as_array().unwrap();
    assert!(messages.len() > 10, "{history}");
    // The constraint is the first message and pinned; the context still carries it whole.
    let ctx = sb.run(&["context", &run, "--json"]).ok().json();
    assert!(ctx["summary"]["coverage"].as_u64().unwrap() > 1, "{ctx}");
    assert!(ctx.to_string().contains("Keep this run read-only"), "{ctx}");
    let summaries = sb.run(&["summary", "list", &run, "--json"]).ok().json();
    assert!(
        summaries["summaries"].as_array().unwrap().len() >= 2,
        "{summaries}"
    );
    // The protocol holds in what was stored: every tool call has its result.
    sb.run(&["history", &run, "--check"]).ok();
}

#[test]
fn without_db_the_store_is_created_in_the_xdg_data_dir() {
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("demo")
        .env_remove("BATON_DB")
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", &data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let db = data.join("baton").join("baton.db");
    assert!(
        db.is_file(),
        "expected the default database at {}",
        db.display()
    );
    assert!(stdout.contains(&db.display().to_string()), "{stdout}");
}
