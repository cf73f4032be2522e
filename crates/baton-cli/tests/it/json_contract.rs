//! The `--json` output is a contract (README, "JSON output"): these tests pin its shape.

use crate::support::Sandbox;

#[test]
fn every_command_prints_one_object_with_named_lists() {
    for sb in Sandbox::each() {
        contract_on(&sb);
    }
}

fn contract_on(sb: &Sandbox) {
    let rules = sb.file("rules.md", "Never write to production.\n");
    let run = sb
        .run(&[
            "--json",
            "runs",
            "create",
            "--id",
            "j",
            "--goal",
            "find the bug",
            "--rules",
            rules.to_str().unwrap(),
        ])
        .ok()
        .json();
    assert_eq!(run["id"], "j");
    assert_eq!(run["tenant"], "default");
    assert_eq!(run["status"], "active");
    assert_eq!(run["rules"], "Never write to production.\n");
    assert!(run["created_at"].as_str().unwrap().ends_with('Z'));

    let listed = sb.run(&["--json", "runs", "list"]).ok().json();
    assert_eq!(listed["runs"][0]["id"], "j");
    assert_eq!(listed["runs"][0]["status"], "active");

    // Both vendor shapes go in; one model comes out.
    let anthropic = r#"{"role":"assistant","content":[{"type":"text","text":"listing"},{"type":"tool_use","id":"toolu_1","name":"ls","input":{"path":"."}}]}"#;
    let result = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.txt"}]}"#;
    let openai = r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_2","type":"function","function":{"name":"cat","arguments":"{\"path\":\"a.txt\"}"}}]}"#;
    let tool = r#"{"role":"tool","tool_call_id":"call_2","content":"hello"}"#;
    let input = format!("{anthropic}\n{result}\n{openai}\n{tool}\n");
    let seqs = sb
        .run_with_stdin(&["--json", "append", "j"], &input)
        .ok()
        .json();
    assert_eq!(seqs, serde_json::json!({"seqs": [1, 2, 3, 4]}));

    let history = sb
        .run(&["--json", "history", "j", "--from", "2", "--to", "3"])
        .ok()
        .json();
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["seq"], 2);
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"][0]["type"], "tool_result");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[1]["content"][0]["input"]["path"], "a.txt");
    assert_eq!(
        sb.run(&["--json", "history", "j"]).ok().json()["messages"][3]["role"],
        "tool"
    );

    let candidate = sb.file(
        "c.json",
        r#"[{"kind":"artifact","text":"a.txt","source_seq":2}]"#,
    );
    let installed = sb
        .run(&[
            "--json",
            "summary",
            "install",
            "j",
            "--base",
            "none",
            "--cut",
            "2",
            "--file",
            candidate.to_str().unwrap(),
        ])
        .ok()
        .json();
    let id = installed["id"].as_u64().unwrap();
    assert_eq!(installed.as_object().unwrap().len(), 1);

    let summaries = sb.run(&["--json", "summary", "list", "j"]).ok().json();
    assert_eq!(summaries["summaries"][0]["id"], id);
    assert_eq!(summaries["summaries"][0]["coverage"], 2);
    assert!(summaries["summaries"][0]["previous_id"].is_null());

    let shown = sb
        .run(&["--json", "summary", "show", &id.to_string()])
        .ok()
        .json();
    assert_eq!(shown["claims"][0]["kind"], "artifact");
    assert_eq!(shown["claims"][0]["source_seq"], 2);

    let ctx = sb.run(&["--json", "context", "j"]).ok().json();
    assert_eq!(ctx["rules"], "Never write to production.\n");
    assert_eq!(ctx["goal"], "find the bug");
    assert_eq!(ctx["summary"]["id"], id);
    assert_eq!(ctx["summary"]["claims"][0]["text"], "a.txt");
    assert_eq!(ctx["messages"].as_array().unwrap().len(), 2);
    assert_eq!(ctx["messages"][0]["seq"], 3);
    assert!(ctx["tokens"].as_u64().unwrap() > 0);
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// The shapes of the compaction commands (README, "JSON output").
#[test]
fn compaction_commands_print_their_documented_shapes() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create", "--id", "c"]).ok();
    let mut lines = vec![serde_json::json!({"role": "user", "content": "Keep it read-only."})];
    for i in 0..12 {
        lines.push(serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{i}"), "name": "bash", "input": {"command": format!("ls dir_{i}")}}]}));
        lines.push(serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "entry\n".repeat(300)}]}));
    }
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    sb.run_with_stdin(&["append", "c"], &body).ok();

    let kept = sb
        .run(&["compact", "c", "--strategy", "none", "--json"])
        .ok()
        .json();
    assert_eq!(keys(&kept), ["outcome", "reason", "strategy"]);
    assert_eq!(
        (kept["outcome"].as_str(), kept["reason"].as_str()),
        (Some("kept"), Some("baseline"))
    );
    let compaction = [
        "cut",
        "duration",
        "messages_after",
        "messages_before",
        "outcome",
        "plan",
        "retention",
        "run",
        "strategy",
        "summarizer_tokens",
        "summary_id",
        "summary_tokens",
        "tokens_after",
        "tokens_before",
    ];
    let planned = sb
        .run(&[
            "compact",
            "c",
            "--strategy",
            "sliding",
            "--keep-last",
            "4",
            "--dry-run",
            "--json",
        ])
        .ok()
        .json();
    let mut with_claims: Vec<&str> = compaction.to_vec();
    with_claims.push("claims");
    with_claims.sort();
    assert_eq!(keys(&planned), with_claims);
    let done = sb
        .run(&[
            "compact",
            "c",
            "--strategy",
            "sliding",
            "--keep-last",
            "4",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(keys(&done), compaction);
    assert_eq!(
        keys(&done["retention"]),
        ["commands", "numbers", "paths", "urls"]
    );
    assert_eq!(keys(&done["retention"]["paths"]), ["kept", "total"]);
    let refused = sb
        .run(&[
            "compact",
            "c",
            "--strategy",
            "sliding",
            "--keep-last",
            "2",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(refused["outcome"], "refused");
    assert_eq!(refused["reason"], "loop_guard");
    assert!(refused.get("after_last").is_some(), "{refused}");

    let replay = sb
        .run(&["replay", "c", "--budget", "2000", "--json"])
        .ok()
        .json();
    assert_eq!(
        keys(&replay),
        ["budget", "every", "messages", "run", "strategies"]
    );
    assert_eq!(
        keys(&replay["strategies"][0]),
        [
            "compactions",
            "constraint_probes",
            "duration_ms",
            "finding_probes",
            "full_input_tokens",
            "peak_context_tokens",
            "reduction",
            "refused",
            "retention",
            "source_probes",
            "steps",
            "strategy",
            "summary_tokens",
            "total_input_tokens"
        ]
    );
    let growth = sb.run(&["report", "growth", "c", "--json"]).ok().json();
    assert_eq!(
        keys(&growth),
        ["context_total", "full_total", "ratio", "steps", "strategy"]
    );
    assert_eq!(
        keys(&growth["steps"][0]),
        ["compacted", "context_tokens", "full_tokens", "seq"]
    );

    let pins = sb.run(&["pin", "c", "1", "--json"]).ok().json();
    assert_eq!(pins, serde_json::json!({"pins": [1]}));
    let first = done["summary_id"].as_u64().unwrap().to_string();
    let forward = sb
        .run(&[
            "compact",
            "c",
            "--strategy",
            "clear-tool-results",
            "--keep-recent",
            "1",
            "--min-tokens",
            "10",
            "--force",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(forward["plan"], "clear_tool_results");
    let activated = sb
        .run(&[
            "summary", "activate", "c", &first, "--base", &first, "--json",
        ])
        .ok()
        .json();
    assert_eq!(keys(&activated), ["coverage", "id"]);
    let diff = sb
        .run(&["summary", "diff", &first, &first, "--json"])
        .ok()
        .json();
    assert_eq!(
        keys(&diff),
        ["a", "added", "b", "changed", "dropped", "run"]
    );
}
