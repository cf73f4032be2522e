//! Summary history you can diff and roll back (`summary diff`, `summary activate`) and pins
//! (`pin`, `unpin`), on both backends (issue 5, items 3 and 5).

use crate::support::Sandbox;

fn seeded(sb: &Sandbox) {
    sb.run(&["runs", "create", "--id", "r"]).ok();
    let lines = [
        serde_json::json!({"role": "user", "content": "Keep it read-only. Find why the deploy failed."}),
        serde_json::json!({"role": "assistant", "content": "The cache layer is probably stale."}),
        serde_json::json!({"role": "user", "content": "Check the logs."}),
        serde_json::json!({"role": "assistant", "content": "Confirmed: the serializer is the root cause."}),
        serde_json::json!({"role": "user", "content": "Fix it."}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    sb.run_with_stdin(&["append", "r"], &body).ok();
}

fn install(sb: &Sandbox, base: &str, cut: &str, claims: &str) -> String {
    let file = sb.file(&format!("c{cut}.json"), claims);
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
    .ok()
    .stdout
    .trim()
    .to_owned()
}

#[test]
fn versions_diff_and_roll_back_through_the_compare_and_swap() {
    for sb in Sandbox::each() {
        seeded(&sb);
        let v1 = install(
            &sb,
            "none",
            "2",
            r#"[{"kind":"constraint","text":"read-only","source_seq":1},
                {"kind":"hypothesis","text":"the cache layer is stale","source_seq":2}]"#,
        );
        let v2 = install(
            &sb,
            &v1,
            "4",
            r#"[{"kind":"constraint","text":"read-only","source_seq":1},
                {"kind":"hypothesis","text":"the cache layer is stale (refuted at 4)","source_seq":2},
                {"kind":"verified","text":"the serializer is the root cause","source_seq":4}]"#,
        );
        let diff = sb.run(&["summary", "diff", &v1, &v2]).ok().stdout;
        assert!(
            diff.contains(&format!(
                "summary {v1} (through seq 2) → {v2} (through seq 4), run r"
            )),
            "{diff}"
        );
        assert!(
            diff.contains("+ verified        [seq 4] the serializer is the root cause"),
            "{diff}"
        );
        assert!(
            diff.contains("~ hypothesis      [seq 2] the cache layer is stale → the cache layer is stale (refuted at 4)"),
            "{diff}"
        );
        assert!(
            !diff.contains("read-only"),
            "unchanged claims are not listed: {diff}"
        );
        let json = sb.run(&["summary", "diff", &v1, &v2, "--json"]).ok().json();
        assert_eq!(json["added"][0]["kind"], "verified");
        assert_eq!(json["changed"][0]["from"], "the cache layer is stale");
        assert_eq!(json["dropped"], serde_json::json!([]));

        // Roll back to v1: the messages after seq 2 are in the context again.
        let back = sb
            .run(&["summary", "activate", "r", &v1, "--base", &v2])
            .ok()
            .stdout;
        assert!(
            back.contains(&format!("summary {v1} is active (covers through seq 2)")),
            "{back}"
        );
        let ctx = sb.run(&["context", "r", "--json"]).ok().json();
        assert_eq!(ctx["messages"][0]["seq"], 3);
        // The same activation again has a stale base: conflict, nothing written.
        sb.run(&["summary", "activate", "r", &v1, "--base", &v2])
            .fails(3, "stale base");
        let list = sb.run(&["summary", "list", "r", "--json"]).ok().json();
        let active: Vec<_> = list["summaries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["active"] == true)
            .map(|s| s["id"].to_string())
            .collect();
        assert_eq!(active, std::slice::from_ref(&v1));
        // Forward again.
        sb.run(&["summary", "activate", "r", &v2, "--base", &v1])
            .ok();
        // Bad inputs.
        sb.run(&["summary", "activate", "r", &v1, "--base", "latest"])
            .fails(4, "--base \"latest\"");
        sb.run(&["runs", "create", "--id", "other"]).ok();
        sb.run_with_stdin(
            &["append", "other"],
            "{\"role\":\"user\",\"content\":\"x\"}\n",
        )
        .ok();
        sb.run(&["summary", "activate", "other", &v1, "--base", "none"])
            .fails(4, &format!("summary {v1} is not a version of this run"));
        let foreign = {
            let file = sb.file("o.json", "[]");
            sb.run(&[
                "summary",
                "install",
                "other",
                "--base",
                "none",
                "--cut",
                "1",
                "--file",
                file.to_str().unwrap(),
            ])
            .ok()
            .stdout
            .trim()
            .to_owned()
        };
        sb.run(&["summary", "diff", &v1, &foreign])
            .fails(4, "compare versions of one run");
    }
}

#[test]
fn pinned_messages_survive_summaries_and_can_be_unpinned() {
    for sb in Sandbox::each() {
        seeded(&sb);
        let pinned = sb.run(&["pin", "r", "1", "--json"]).ok().json();
        assert_eq!(pinned, serde_json::json!({"pins": [1], "changed": true}));
        let text = sb.run(&["pin", "r"]).ok().stdout;
        assert_eq!(text, "run r: pinned 1\n");
        install(&sb, "none", "4", "[]");
        let ctx = sb.run(&["context", "r"]).ok().stdout;
        assert!(ctx.contains("# Pinned messages (kept whole)"), "{ctx}");
        assert!(
            ctx.contains("Keep it read-only. Find why the deploy failed."),
            "{ctx}"
        );
        let json = sb.run(&["context", "r", "--json"]).ok().json();
        assert_eq!(json["pinned"][0]["seq"], 1);
        // A seq the run does not have is not found (exit 1, as over HTTP it is 404).
        sb.run(&["pin", "r", "9"])
            .fails(1, "run \"r\" has no message 9 (its messages are 1..=5)");
        // A bad seq among good ones pins none of them.
        sb.run(&["pin", "r", "2", "9"]).fails(1, "has no message 9");
        assert_eq!(sb.run(&["pin", "r"]).ok().stdout, "run r: pinned 1\n");
        let not = sb.run(&["unpin", "r", "3"]).ok().stdout;
        assert_eq!(not, "run r: 3 was not pinned\nrun r: pinned 1\n");
        let after = sb.run(&["unpin", "r", "1"]).ok().stdout;
        assert_eq!(after, "run r: pinned nothing\n");
        let ctx = sb.run(&["context", "r"]).ok().stdout;
        assert!(!ctx.contains("Keep it read-only."), "{ctx}");
    }
}
