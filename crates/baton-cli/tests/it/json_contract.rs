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
