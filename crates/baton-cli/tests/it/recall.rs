//! `baton recall`: originals by seq, range or search, whatever has been compacted (issue 4,
//! item 2), on both backends.

use crate::support::Sandbox;

fn seeded(sb: &Sandbox) {
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let long = format!(
        "the deploy failed with connection refused on port 5432 {}",
        "and more detail ".repeat(20)
    );
    let lines = [
        serde_json::json!({"role": "user", "content": "Keep it read-only. Find why the deploy failed."}),
        serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_logs", "input": {"service": "payments-api"}}]}),
        serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": long}]}),
        serde_json::json!({"role": "assistant", "content": "The database refused the connection."}),
        serde_json::json!({"role": "user", "content": "Check the firewall next."}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    sb.run_with_stdin(&["append", "r"], &body).ok();
    // Summarize 1..3: recall must still return the originals.
    let candidate = sb.file(
        "c.json",
        r#"[{"kind":"constraint","text":"read-only","source_seq":1}]"#,
    );
    sb.run(&[
        "summary",
        "install",
        "r",
        "--base",
        "none",
        "--cut",
        "3",
        "--file",
        candidate.to_str().unwrap(),
    ])
    .ok();
}

#[test]
fn seq_and_ranges_return_whole_originals_even_when_summarized() {
    for sb in Sandbox::each() {
        seeded(&sb);
        let one = sb.run(&["recall", "r", "3"]).ok().stdout;
        assert!(one.contains("── seq 3 · user"), "{one}");
        assert!(
            one.contains(&"and more detail ".repeat(20).trim_end().to_owned()),
            "recall prints the whole original: {one}"
        );
        let range = sb.run(&["recall", "r", "2..4", "--json"]).ok().json();
        let seqs: Vec<_> = range["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [2, 3, 4]);
        assert_eq!(
            range["messages"][0]["content"][0]["input"]["service"],
            "payments-api"
        );
        let tail = sb.run(&["recall", "r", "4..", "--json"]).ok().json();
        assert_eq!(tail["messages"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn grep_finds_phrases_in_every_kind_of_block() {
    for sb in Sandbox::each() {
        seeded(&sb);
        let hits = |args: &[&str]| -> Vec<u64> {
            let mut full = vec!["recall", "r", "--json"];
            full.extend_from_slice(args);
            sb.run(&full).ok().json()["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["seq"].as_u64().unwrap())
                .collect()
        };
        assert_eq!(
            hits(&["--grep", "connection refused"]),
            [3],
            "{}",
            sb.db_arg()
        );
        assert_eq!(hits(&["--grep", "CONNECTION"]), [3, 4]);
        assert_eq!(hits(&["--grep", "connection", "--kind", "text"]), [4]);
        assert_eq!(hits(&["--grep", "payments", "--kind", "tool_use"]), [2]);
        assert_eq!(
            hits(&["--grep", "read-only"]),
            [1],
            "text a summary covers is still found"
        );
        assert_eq!(hits(&["--grep", "connection", "--limit", "1"]), [3]);
        assert!(hits(&["--grep", "kubernetes"]).is_empty());
        let human = sb
            .run(&["recall", "r", "--grep", "firewall", "--full"])
            .ok()
            .stdout;
        assert!(
            human.contains("── seq 5") && human.contains("Check the firewall next."),
            "{human}"
        );
        // Another tenant sees nothing, even by the run's exact id.
        sb.run(&["--tenant", "other", "runs", "create", "--id", "mine"])
            .ok();
        sb.run(&["--tenant", "other", "recall", "r", "--grep", "firewall"])
            .fails(1, "run \"r\" not found");
    }
}

#[test]
fn bad_recalls_are_named() {
    let sb = Sandbox::new();
    seeded(&sb);
    sb.run(&["recall", "r", "abc"]).fails(4, "expected a seq");
    sb.run(&["recall", "r", "5..2"])
        .fails(4, "ends before it starts");
    sb.run(&["recall", "r", "9"]).fails(4, "has seqs 1..5");
    sb.run(&["recall", "r", "--grep", "!!!"])
        .fails(4, "no words");
    sb.run(&["recall", "nope", "1"])
        .fails(1, "run \"nope\" not found");
    assert_eq!(
        sb.run(&["recall", "r", "--kind", "text"]).code,
        2,
        "--kind needs --grep"
    );
    assert_eq!(
        sb.run(&["recall", "r"]).code,
        2,
        "a seq, a range or --grep is required"
    );
}

/// Issue 20 item 16: `recall --grep` prints one line per hit around the match (`--full` for
/// whole messages), takes `word*` as a prefix, and says when a search had no whole-word match
/// but its prefix form has, naming the command that finds them; on both backends.
#[test]
fn grep_prints_a_line_per_hit_takes_prefixes_and_suggests_them() {
    for sb in Sandbox::each() {
        seeded(&sb);
        let human = sb.run(&["recall", "r", "--grep", "refused"]).ok().stdout;
        let lines: Vec<&str> = human.lines().collect();
        assert_eq!(lines.len(), 2, "{human}");
        assert!(
            lines[0].starts_with("seq 3 · user: the deploy failed with connection refused"),
            "{human}"
        );
        assert!(lines[0].ends_with('…'), "a long line is cut: {human}");
        assert!(lines[0].chars().count() <= 200, "{human}");
        assert_eq!(
            lines[1],
            "seq 4 · assistant: The database refused the connection."
        );
        assert!(!human.contains("and more detail and more detail and more detail and more detail and more detail and more detail and more detail and more detail and more detail"), "{human}");

        // No whole word `fire`: the prefix form is suggested, and finds it.
        let none = sb.run(&["recall", "r", "--grep", "fire"]).ok().stdout;
        assert_eq!(
            none.trim(),
            format!(
                "no whole-word match for \"fire\" in run r; words starting with it match: try --grep 'fire*'"
            ),
            "{}",
            sb.db_arg()
        );
        let prefixed = sb.run(&["recall", "r", "--grep", "fire*"]).ok().stdout;
        assert_eq!(prefixed.trim(), "seq 5 · user: Check the firewall next.");
        let json = sb
            .run(&["--json", "recall", "r", "--grep", "conn*"])
            .ok()
            .json();
        let seqs: Vec<_> = json["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, [3, 4]);
        // Nothing even as a prefix: said plainly.
        let nothing = sb.run(&["recall", "r", "--grep", "kubern"]).ok().stdout;
        assert_eq!(nothing.trim(), "no message of run r matches \"kubern\"");
        sb.run(&["recall", "r", "3", "--full"])
            .fails(2, "--full goes with --grep");
    }
}
