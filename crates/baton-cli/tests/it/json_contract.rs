//! The `--json` output is a contract (docs/cli.md, "JSON output"): these tests pin its shape.

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
    assert_eq!(seqs["seqs"], serde_json::json!([1, 2, 3, 4]));
    assert_eq!(seqs["tokens"].as_array().unwrap().len(), 4);
    assert_eq!(keys(&seqs), ["seqs", "tokens"]);

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
    assert_eq!(keys(&installed), SUMMARY);
    assert_eq!(installed["active"], true);

    let summaries = sb.run(&["--json", "summary", "list", "j"]).ok().json();
    assert_eq!(summaries["active_id"], id);
    assert_eq!(summaries["summaries"][0]["id"], id);
    assert_eq!(summaries["summaries"][0]["coverage"], 2);
    assert!(summaries["summaries"][0]["previous_id"].is_null());

    let shown = sb
        .run(&["--json", "summary", "show", &id.to_string()])
        .ok()
        .json();
    assert_eq!(keys(&shown), SUMMARY);
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

/// `--json ops begin KEY` as worker `w`, with a 30 s lease.
fn begin_args(key: &str) -> Vec<String> {
    let hash = "a".repeat(64);
    [
        "--json",
        "ops",
        "begin",
        key,
        "--request-hash",
        &hash,
        "--owner",
        "w",
        "--lease",
        "30s",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A summary version's members (`summary install`, `show`, `activate`).
const SUMMARY: [&str; 8] = [
    "active",
    "claims",
    "coverage",
    "created_at",
    "id",
    "meta",
    "previous_id",
    "run",
];

/// The shapes of the compaction commands (docs/cli.md, "JSON output").
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
        "cleared",
        "cut",
        "duration",
        "messages_after",
        "messages_before",
        "outcome",
        "plan",
        "retention",
        "run",
        "state_tokens",
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
        [
            "budget",
            "every",
            "messages",
            "run",
            "strategies",
            "tokenizer"
        ]
    );
    assert_eq!(
        keys(&replay["strategies"][0]),
        [
            "budget",
            "compactions",
            "duration_ms",
            "full_input_tokens",
            "needs_model",
            "peak_context_tokens",
            "peak_state_tokens",
            "probes",
            "reduction",
            "refused",
            "refused_no_room",
            "retention",
            "source_probes",
            "state_cap",
            "state_tokens",
            "steps",
            "steps_over_budget",
            "strategy",
            "summary_tokens",
            "total_input_tokens",
            "vs_none"
        ]
    );
    let growth = sb.run(&["report", "growth", "c", "--json"]).ok().json();
    assert_eq!(
        keys(&growth),
        [
            "context_total",
            "full_total",
            "ratio",
            "run",
            "steps",
            "strategy"
        ]
    );
    assert_eq!(
        keys(&growth["steps"][0]),
        ["compacted", "context_tokens", "full_tokens", "seq"]
    );

    let pins = sb.run(&["pin", "c", "1", "--json"]).ok().json();
    assert_eq!(pins, serde_json::json!({"pins": [1], "changed": true}));
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
    assert_eq!(keys(&activated), SUMMARY);
    let diff = sb
        .run(&["summary", "diff", &first, &first, "--json"])
        .ok()
        .json();
    assert_eq!(
        keys(&diff),
        ["a", "added", "b", "changed", "dropped", "run"]
    );
}

/// With `--json`, a failure prints one object too (issue 20, item 14):
/// `{"error": {"kind", "code", "message"}}` on stdout, its line on stderr, and the exit code of
/// its kind.
#[test]
fn errors_are_one_object_on_stdout() {
    let sb = Sandbox::new();
    let error = |ran: &crate::support::Ran, exit: i32, kind: &str, code: &str| {
        assert_eq!(ran.code, exit, "{} {}", ran.stdout, ran.stderr);
        let json = ran.json();
        assert_eq!(keys(&json["error"]), ["code", "kind", "message"], "{json}");
        assert_eq!(
            (
                json["error"]["kind"].as_str(),
                json["error"]["code"].as_str()
            ),
            (Some(kind), Some(code)),
            "{json}"
        );
        let message = json["error"]["message"].as_str().unwrap();
        assert_eq!(ran.stderr.trim_end(), format!("baton: error: {message}"));
        json
    };
    sb.run(&["runs", "create", "--id", "r"]).ok();
    error(
        &sb.run(&["--json", "history", "nope"]),
        1,
        "not_found",
        "run_not_found",
    );
    error(
        &sb.run(&["--json", "recall", "r", "abc"]),
        4,
        "invalid",
        "invalid_input",
    );
    error(
        &sb.run(&["--json", "runs", "create", "--id", "r"]),
        3,
        "conflict",
        "run_exists",
    );
    // A command line that does not parse: the object too, with clap's first line.
    let usage = sb.run(&["summary", "install", "r", "--json"]);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
    let json = usage.json();
    assert_eq!(json["error"]["kind"], "usage", "{json}");
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--base"),
        "{json}"
    );
    // Commands without a JSON form refuse --json rather than print something else.
    let chat = sb.run(&["--json", "chat", "-m", "hi"]);
    assert_eq!(chat.code, 2, "{}", chat.stderr);
    assert_eq!(chat.json()["error"]["kind"], "usage");
    // A ledger conflict carries the operation it met beside the error.
    let begin = begin_args("k");
    let begin: Vec<&str> = begin.iter().map(String::as_str).collect();
    sb.run(&begin).ok();
    let busy = error(&sb.run(&begin), 3, "conflict", "in_progress");
    assert_eq!(busy["operation"]["key"], "k");
    assert_eq!(busy["operation"]["status"], "running");
    // A history check that finds problems prints its report, once, and exits 1.
    let orphan =
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}"#;
    sb.run_with_stdin(&["append", "r"], orphan).ok();
    let check = sb.run(&["--json", "history", "r", "--check"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert_eq!(check.json()["problems"][0]["kind"], "orphan_result");
    // Keys: a list is an object, and a new key is shown once, in its object.
    let made = sb
        .run(&["--json", "keys", "create", "--label", "ci"])
        .ok()
        .json();
    assert_eq!(
        keys(&made),
        ["created_at", "id", "key", "label", "revoked_at", "tenant"]
    );
    let listed = sb.run(&["--json", "keys", "list"]).ok().json();
    assert_eq!(keys(&listed), ["keys"]);
    assert_eq!(listed["keys"][0]["id"], made["id"]);
    assert!(!listed.to_string().contains(made["key"].as_str().unwrap()));
}

/// `baton demo --json` prints one object: the run it left, the store, and command lines that
/// show it, with the `--db` it was given (issue 20, items 14 and 15).
#[test]
fn the_demo_prints_one_object_whose_follow_ups_name_its_store() {
    let sb = Sandbox::new();
    for (args, demo) in [
        (vec!["--json", "demo"], "session"),
        (vec!["--json", "demo", "--race"], "race"),
    ] {
        let ran = sb.run(&args).ok();
        let json = ran.json();
        assert_eq!(keys(&json), ["demo", "follow_up", "run", "store"], "{json}");
        assert_eq!(json["demo"], demo);
        assert_eq!(json["store"], sb.db_arg());
        let run = json["run"].as_str().unwrap();
        for line in json["follow_up"].as_array().unwrap() {
            let line = line.as_str().unwrap();
            assert!(
                line.starts_with(&format!("baton --db {} ", sb.db_arg())),
                "{line}"
            );
            assert!(line.ends_with(run), "{line}");
        }
        // The first follow-up runs as printed, against the demo's store.
        let first = json["follow_up"][0].as_str().unwrap();
        let words: Vec<&str> = first.split(' ').skip(3).collect();
        sb.run(&words).ok();
    }
    // Without --json the narration ends with the same command lines.
    let text = sb.run(&["demo"]).ok().stdout;
    assert!(
        text.contains(&format!("baton --db {} runs show demo-", sb.db_arg())),
        "{text}"
    );
}

/// One set of views (issue 16, item 4): what the command line prints with `--json` is what the
/// HTTP API answers for the same thing, member for member.
#[test]
fn the_command_line_and_the_api_answer_with_the_same_views() {
    for sb in Sandbox::each() {
        sb.run(&["runs", "create", "--id", "r", "--goal", "find the bug"])
            .ok();
        let body = "{\"role\":\"user\",\"content\":\"grep the database logs\"}\n{\"role\":\"assistant\",\"content\":\"the database is down\"}\n";
        sb.run_with_stdin(&["append", "r"], body).ok();
        let sid = crate::support::install_first(
            &sb,
            "r",
            "2",
            r#"[{"kind":"verified","text":"db down","source_seq":2}]"#,
        );
        sb.run(&["pin", "r", "1"]).ok();
        let begin = begin_args("op-1");
        sb.run(&begin.iter().map(String::as_str).collect::<Vec<_>>())
            .ok();
        let key = crate::support::create_key(&sb, "default");
        let served = crate::support::serve(&sb, &[]);
        let bearer = format!("Bearer {key}");
        let get = |path: &str| {
            let (status, body) =
                crate::support::http(&served.addr, "GET", path, &[("authorization", &bearer)], "");
            assert_eq!(status, 200, "{path}: {body}");
            serde_json::from_str::<serde_json::Value>(&body).unwrap()
        };
        let cli = |args: &[&str]| {
            let mut all = vec!["--json"];
            all.extend_from_slice(args);
            sb.run(&all).ok().json()
        };
        let pairs: [(&[&str], String); 8] = [
            (&["runs", "list"], "/v1/runs".into()),
            (&["summary", "show", &sid], format!("/v1/summaries/{sid}")),
            (&["summary", "list", "r"], "/v1/runs/r/summaries".into()),
            (
                &["history", "r", "--from", "1"],
                "/v1/runs/r/search?q=database".into(),
            ),
            (&["pin", "r"], "/v1/runs/r/pins".into()),
            (&["ops", "show", "op-1"], "/v1/operations/op-1".into()),
            (&["ops", "list"], "/v1/operations".into()),
            (
                &["report", "duplicates", "--tools"],
                "/v1/reports/duplicates?tools=true".into(),
            ),
        ];
        for (args, path) in pairs {
            assert_eq!(cli(args), get(&path), "{args:?} against {path}");
        }
        // A run, as created and as read.
        let created = cli(&["runs", "create", "--id", "s"]);
        assert_eq!(created, get("/v1/runs/s"));
        assert_eq!(created["tenant"], "default");
    }
}
