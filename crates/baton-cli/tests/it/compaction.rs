//! `baton compact`, `baton replay` and `baton report growth` (issue 5), through the real binary
//! on both backends: each strategy's effect, dry runs, the guards, the logging decorator, real
//! processes racing to compact one run, and bad input.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::{Sandbox, ran};

/// A run that looks like agent work: a read-only constraint, then `turns` rounds of a tool call
/// (a command on a file) with a large result and a short assistant conclusion.
fn agent_run(sb: &Sandbox, id: &str, turns: usize) {
    sb.run(&["runs", "create", "--id", id]).ok();
    let mut lines = vec![
        json!({"role": "user", "content": "Find why the build fails. Never push to main; keep it read-only."}),
    ];
    for i in 0..turns {
        let call = format!("t{i}");
        lines.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Let me check src/module_{i}.rs.")},
            {"type": "tool_use", "id": call, "name": "bash", "input": {"command": format!("cargo test -p module_{i}")}}
        ]}));
        lines.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": format!("test output {i}\n").repeat(120)}
        ]}));
        lines.push(json!({"role": "assistant", "content": format!("Confirmed: module {i} passes in 12 ms.")}));
    }
    lines.push(json!({"role": "user", "content": "Go on."}));
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    sb.run_with_stdin(&["append", id, "--tokenizer", "bytes"], &body)
        .ok();
}

fn tokens(sb: &Sandbox, run: &str) -> u64 {
    sb.run(&["context", run, "--json"]).ok().json()["tokens"]
        .as_u64()
        .unwrap()
}

#[test]
fn structured_compaction_installs_a_working_state_and_shrinks_the_context() {
    for sb in Sandbox::each() {
        agent_run(&sb, "r", 30);
        let before = tokens(&sb, "r");
        // A dry run shows the plan and its claims, and installs nothing.
        let dry = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "structured",
                "--threshold",
                "5000",
                "--dry-run",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(dry["outcome"], "planned");
        assert_eq!(dry["summary_id"], Value::Null);
        let claims = dry["claims"].as_array().unwrap();
        assert!(
            claims.iter().any(|c| c["kind"] == "instruction"
                && c["text"].as_str().unwrap().contains("Never push to main")),
            "the user's instruction, verbatim: {claims:?}"
        );
        assert!(claims.iter().any(|c| c["kind"] == "command"));
        assert_eq!(
            sb.run(&["summary", "list", "r", "--json"]).ok().json()["summaries"],
            json!([])
        );

        let done = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "structured",
                "--threshold",
                "5000",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(done["outcome"], "compacted");
        assert_eq!(done["plan"], "update_state");
        let id = done["summary_id"].as_u64().unwrap();
        let after = tokens(&sb, "r");
        assert!(after * 3 < before, "{before} → {after}");
        assert_eq!(done["tokens_before"], before);
        // Every command of the dropped part stays reachable (paths only mentioned in prose,
        // never touched by a tool, may go: the state is bounded and keeps the files a tool
        // touched).
        assert_eq!(
            done["retention"]["commands"]["kept"],
            done["retention"]["commands"]["total"]
        );
        assert!(done["retention"]["commands"]["total"].as_u64().unwrap() > 10);
        // The version keeps what made it.
        let shown = sb
            .run(&["summary", "show", &id.to_string(), "--json"])
            .ok()
            .json();
        assert_eq!(shown["meta"]["strategy"], "structured");
        assert_eq!(shown["meta"]["tokens_after"], done["tokens_after"]);
        // The context now carries the working state and the recent tail; history is whole.
        let ctx = sb.run(&["context", "r"]).ok().stdout;
        assert!(
            ctx.contains("## User instructions (verbatim, newest first)\n- Find why the build fails. Never push to main; keep it read-only. [seq 1]"),
            "{ctx}"
        );
        let history = sb.run(&["history", "r", "--json"]).ok().json();
        assert_eq!(history["messages"].as_array().unwrap().len(), 92);

        // Right after, the loop guard waits; --force does not skip the checks on the summary.
        let again = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "structured",
                "--threshold",
                "1000",
            ])
            .ok()
            .stdout;
        assert!(
            again.contains("nothing to compact") || again.contains("but did not: loop guard"),
            "{again}"
        );
    }
}

#[test]
fn each_strategy_through_the_command_line() {
    for sb in Sandbox::each() {
        agent_run(&sb, "r", 20);
        let before = tokens(&sb, "r");
        let none = sb.run(&["compact", "r", "--strategy", "none"]).ok().stdout;
        assert_eq!(
            none,
            "run r: nothing to compact with none: the strategy never compacts\n"
        );

        let out = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "clear-tool-results",
                "--keep-recent",
                "6",
                "--min-tokens",
                "100",
            ])
            .ok()
            .stdout;
        assert!(
            out.contains("compacted old tool results with clear-tool-results"),
            "{out}"
        );
        let ctx = sb.run(&["context", "r", "--json"]).ok().json();
        let cleared = ctx["cleared"].as_array().unwrap().len();
        assert!(cleared >= 15, "{cleared}");
        assert_eq!(ctx["problems"], json!([]), "stubs keep the pairing");
        let stub = ctx["messages"][2]["content"][0]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert!(
            stub.starts_with("[cleared to save context: the result of bash at seq 3"),
            "{stub}"
        );
        let show = sb.run(&["runs", "show", "r", "--json"]).ok().json();
        assert_eq!(
            show["counts"]["messages"], 62,
            "history keeps every original"
        );
        let after_clear = tokens(&sb, "r");
        assert!(after_clear * 2 < before, "{before} → {after_clear}");

        let out = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "sliding",
                "--keep-last",
                "10",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(out["plan"], "drop");
        assert!(out["cut"].as_u64().unwrap() >= 52);
        let ctx = sb.run(&["context", "r", "--json"]).ok().json();
        assert!(ctx["messages"].as_array().unwrap().len() >= 10);
        assert_eq!(ctx["problems"], json!([]));

        // budget on a fresh run: under its maximum afterwards.
        agent_run(&sb, "b", 20);
        let out = sb
            .run(&[
                "compact",
                "b",
                "--strategy",
                "budget",
                "--max-tokens",
                "3000",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(out["outcome"], "compacted");
        assert!(out["tokens_after"].as_u64().unwrap() <= 2250, "{out}");
        assert!(tokens(&sb, "b") <= 3000);

        // summarize needs a model: offline it refuses, names why, and installs nothing.
        agent_run(&sb, "s", 20);
        sb.run(&[
            "compact",
            "s",
            "--strategy",
            "summarize",
            "--threshold",
            "2000",
        ])
        .fails(4, "strategy summarize needs a model to write its summary");
        assert_eq!(
            sb.run(&["summary", "list", "s", "--json"]).ok().json()["summaries"],
            json!([])
        );
    }
}

#[test]
fn the_logging_decorator_writes_one_line_per_compaction() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 20);
    let log = sb.dir.path().join("compactions.jsonl");
    let log_arg = log.to_str().unwrap();
    sb.run(&["compact", "r", "--strategy", "none", "--log", log_arg])
        .ok();
    assert!(!log.exists(), "a plan that changes nothing is not logged");
    sb.run(&[
        "compact",
        "r",
        "--strategy",
        "sliding",
        "--keep-last",
        "8",
        "--log",
        log_arg,
    ])
    .ok();
    // Right after a compaction the loop guard holds the next one back; --force skips it.
    let held = sb
        .run(&[
            "compact",
            "r",
            "--strategy",
            "clear-tool-results",
            "--keep-recent",
            "2",
            "--min-tokens",
            "100",
            "--log",
            log_arg,
        ])
        .ok()
        .stdout;
    assert!(held.contains("but did not: loop guard"), "{held}");
    sb.run(&[
        "compact",
        "r",
        "--strategy",
        "clear-tool-results",
        "--keep-recent",
        "2",
        "--min-tokens",
        "100",
        "--force",
        "--log",
        log_arg,
    ])
    .ok();
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["strategy"], "sliding");
    assert_eq!(lines[0]["run"], "r");
    assert!(lines[0]["summary_id"].as_u64().is_some());
    assert!(lines[0]["tokens_after"].as_u64() < lines[0]["tokens_before"].as_u64());
    assert!(lines[0]["duration"].as_f64().unwrap() >= 0.0);
    assert_eq!(lines[1]["plan"], "clear_tool_results");
}

/// Six processes compact one run at once: the compare-and-swap lets one install; the others
/// lose the race (exit 3, nothing written) or, planning after it, find nothing worth doing.
#[test]
fn processes_racing_to_compact_one_run_install_one_version() {
    for sb in Sandbox::each() {
        agent_run(&sb, "r", 30);
        let children: Vec<_> = (0..6)
            .map(|_| {
                sb.command(&[
                    "compact",
                    "r",
                    "--strategy",
                    "structured",
                    "--threshold",
                    "4000",
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        let mut compacted = 0;
        for child in children {
            let out = ran(child.wait_with_output().unwrap());
            match out.code {
                0 => {
                    let v = out.json();
                    if v["outcome"] == "compacted" {
                        compacted += 1;
                    } else {
                        assert!(
                            matches!(v["outcome"].as_str(), Some("kept" | "refused")),
                            "{v}"
                        );
                    }
                }
                3 => assert!(out.stderr.contains("stale base"), "{}", out.stderr),
                code => panic!("exit {code}: {}", out.stderr),
            }
        }
        assert_eq!(compacted, 1);
        let list = sb.run(&["summary", "list", "r", "--json"]).ok().json();
        assert_eq!(
            list["summaries"].as_array().unwrap().len(),
            1,
            "one version installed"
        );
    }
}

#[test]
fn replay_compares_strategies_on_a_run() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 40);
    let json = sb
        .run(&["replay", "r", "--budget", "4000", "--json"])
        .ok()
        .json();
    assert_eq!(json["run"], "r");
    let by: std::collections::BTreeMap<String, &Value> = json["strategies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["strategy"].as_str().unwrap().to_owned(), s))
        .collect();
    assert_eq!(
        by.keys().cloned().collect::<Vec<_>>(),
        [
            "budget",
            "clear-tool-results",
            "none",
            "sliding",
            "structured"
        ]
    );
    for s in by.values() {
        for key in [
            "total_input_tokens",
            "peak_context_tokens",
            "compactions",
            "summary_tokens",
            "probes",
            "retention",
            "duration_ms",
        ] {
            assert!(s.get(key).is_some(), "{key} in {s}");
        }
    }
    let none = by["none"]["total_input_tokens"].as_u64().unwrap();
    for name in ["budget", "structured"] {
        let total = by[name]["total_input_tokens"].as_u64().unwrap();
        assert!(total * 3 < none, "{name}: {total} vs none {none}");
        assert!(
            by[name]["peak_context_tokens"].as_u64().unwrap() <= 4000,
            "{name}"
        );
    }
    assert_eq!(by["none"]["compactions"], 0);
    let probes = &by["structured"]["probes"]["instructions"];
    assert!(probes["total"].as_u64().unwrap() > 0);
    assert_eq!(
        probes["kept"], probes["total"],
        "structured keeps every instruction the user typed"
    );
    assert_eq!(by["structured"]["retention"]["commands"], 1.0);
    // The table for people.
    let text = sb
        .run(&[
            "replay",
            "r",
            "--budget",
            "4000",
            "--strategies",
            "none,budget",
        ])
        .ok()
        .stdout;
    assert!(
        text.starts_with("run r: 122 messages, 80 model calls, budget 4000 tokens, counted with "),
        "{text}"
    );
    // Bad input.
    sb.run(&["replay", "r", "--strategies", "none,slidng"])
        .fails(4, "compaction.strategy = \"slidng\": expected one of none, sliding, budget, clear-tool-results, summarize, structured");
    sb.run(&["replay", "r", "--every", "0"])
        .fails(4, "--every 0");
    sb.run(&["replay", "nope"])
        .fails(1, "run \"nope\" not found");
}

#[test]
fn the_growth_report_and_its_chart() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 40);
    let svg = sb.dir.path().join("growth.svg");
    let text = sb
        .run(&[
            "report",
            "growth",
            "r",
            "--budget",
            "4000",
            "--svg",
            svg.to_str().unwrap(),
        ])
        .ok()
        .stdout;
    assert!(text.contains("← compacted"), "{text}");
    assert!(text.contains("fewer input tokens)"), "{text}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(
        chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{chart}"
    );
    assert_eq!(chart.matches("<polyline").count(), 2);
    let json = sb
        .run(&["report", "growth", "r", "--budget", "4000", "--json"])
        .ok()
        .json();
    let steps = json["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 80);
    let full: u64 = steps
        .iter()
        .map(|s| s["full_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(json["full_total"], full);
    assert!(json["ratio"].as_f64().unwrap() > 3.0);
    // The full transcript grows every step; the compacted context stays bounded.
    assert!(
        steps
            .windows(2)
            .all(|w| w[0]["full_tokens"].as_u64() <= w[1]["full_tokens"].as_u64())
    );
    assert!(
        steps
            .iter()
            .all(|s| s["context_tokens"].as_u64().unwrap() <= 4000)
    );
}

#[test]
fn bad_strategy_input_names_what_is_wrong() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 3);
    sb.run(&["compact", "r", "--strategy", "slidng"])
        .fails(4, "compaction.strategy = \"slidng\"");
    let config = sb.file(
        "baton.toml",
        "[compaction]\nstrategy = \"sliding\"\n[compaction.slidng]\nkeep_last = 3\n",
    );
    sb.run(&["compact", "r", "--config", config.to_str().unwrap()])
        .fails(4, "unknown key compaction.slidng: expected one of");
    let prices = sb.file(
        "prices.toml",
        "[models.x]\ninput = -1.0\ncached_input = 0.0\ncache_write = 0.0\noutput = 0.0\n",
    );
    sb.run(&[
        "compact",
        "r",
        "--strategy",
        "sliding",
        "--prices",
        prices.to_str().unwrap(),
    ])
    .fails(4, "models.\"x\".input = -1");
    // A config file picks the strategy with one line.
    let config = sb.file(
        "one.toml",
        "[compaction]\nstrategy = \"sliding\"\n\n[compaction.sliding]\nkeep_last = 4\n",
    );
    let out = sb
        .run(&[
            "compact",
            "r",
            "--config",
            config.to_str().unwrap(),
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(out["strategy"], "sliding");
    sb.run(&["compact", "nope", "--strategy", "sliding"])
        .fails(1, "run \"nope\" not found");
}

#[test]
fn runs_that_cannot_be_compacted_or_reported_say_why() {
    for sb in Sandbox::each() {
        agent_run(&sb, "r", 10);
        sb.run(&["runs", "cancel", "r"]).ok();
        sb.run(&["compact", "r", "--strategy", "sliding", "--keep-last", "2"])
            .fails(3, "run is cancelled, not active");
        sb.run(&["runs", "create", "--id", "quiet"]).ok();
        sb.run_with_stdin(
            &["append", "quiet"],
            "{\"role\":\"user\",\"content\":\"hello\"}\n",
        )
        .ok();
        let svg = sb.dir.path().join("none.svg");
        sb.run(&[
            "report",
            "growth",
            "quiet",
            "--svg",
            svg.to_str().unwrap(),
            "--json",
        ])
        .fails(4, "run quiet has no model calls");
        assert!(!svg.exists(), "no chart for a run without model calls");
        // Degenerate settings are refused before anything runs.
        agent_run(&sb, "d", 3);
        sb.run(&["compact", "d", "--strategy", "sliding", "--keep-last", "0"])
            .fails(4, "compaction.sliding.keep_last = 0: expected 1 or more");
        let bad = sb.file("bad.toml", "[compaction.trigger]\nmin_reduction = -5.0\n");
        sb.run(&[
            "compact",
            "d",
            "--strategy",
            "sliding",
            "--config",
            bad.to_str().unwrap(),
        ])
        .fails(4, "compaction.trigger.min_reduction = -5");
    }
}

#[test]
fn replay_takes_the_config_files_budget_when_no_flag_overrides_it() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 30);
    let config = sb.file("b.toml", "[compaction.budget]\nmax_tokens = 2000\n");
    let json = sb
        .run(&[
            "replay",
            "r",
            "--strategies",
            "budget",
            "--config",
            config.to_str().unwrap(),
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(json["budget"], 2000);
    assert!(
        json["strategies"][0]["peak_context_tokens"]
            .as_u64()
            .unwrap()
            <= 2000
    );
    let flag = sb
        .run(&[
            "replay",
            "r",
            "--strategies",
            "budget",
            "--config",
            config.to_str().unwrap(),
            "--budget",
            "3000",
            "--json",
        ])
        .ok()
        .json();
    assert_eq!(flag["budget"], 3000);
}

/// `--force` compacts a run under its strategy's threshold now; without it the trigger keeps
/// the context as it is and says why.
#[test]
fn force_compacts_a_run_under_its_threshold() {
    for sb in Sandbox::each() {
        agent_run(&sb, "r", 12);
        let before = tokens(&sb, "r");
        assert!(before < 32_000, "{before}");
        let kept = sb
            .run(&["compact", "r", "--strategy", "structured", "--json"])
            .ok()
            .json();
        assert_ne!(kept["outcome"], "compacted", "{kept}");
        assert_eq!(tokens(&sb, "r"), before);
        let forced = sb
            .run(&[
                "compact",
                "r",
                "--strategy",
                "structured",
                "--force",
                "--json",
            ])
            .ok()
            .json();
        assert_eq!(forced["outcome"], "compacted", "{forced}");
        assert!(tokens(&sb, "r") < before);
    }
}

/// `summarize` needs a model: offline, replay says so for it instead of printing another
/// strategy's figures, and `compact` refuses it naming the reason.
#[test]
fn summarize_offline_says_it_needs_a_model() {
    let sb = Sandbox::new();
    agent_run(&sb, "r", 40);
    let replay = sb
        .run(&[
            "replay",
            "r",
            "--strategies",
            "summarize,structured",
            "--budget",
            "8000",
            "--json",
        ])
        .ok()
        .json();
    let rows = replay["strategies"].as_array().unwrap();
    let summarize = rows.iter().find(|r| r["strategy"] == "summarize").unwrap();
    let structured = rows.iter().find(|r| r["strategy"] == "structured").unwrap();
    assert_eq!(summarize["needs_model"], true, "{summarize}");
    assert_eq!(structured["needs_model"], false, "{structured}");
    assert!(structured["compactions"].as_u64().unwrap() > 0);
    let text = sb
        .run(&[
            "replay",
            "r",
            "--strategies",
            "summarize",
            "--budget",
            "8000",
        ])
        .ok()
        .stdout;
    assert!(text.contains("needs a model"), "{text}");
}

/// `baton context --budget` fits the context as the agent does before a call: a message too
/// large for the budget is clipped, naming its seq, and the original stays whole in history;
/// a budget smaller than what cannot be clipped fails, naming what takes the room.
#[test]
fn context_budget_clips_the_largest_contents_and_refuses_what_cannot_fit() {
    for sb in Sandbox::each() {
        sb.run(&[
            "runs",
            "create",
            "--id",
            "r",
            "--goal",
            "Keep the parser fast.",
        ])
        .ok();
        // A 5 MB tool result: stored whole, and clipped in the context the model would get.
        let huge = "log line of the build\n".repeat(240_000);
        let lines = [
            json!({"role": "user", "content": "Why is the build slow?"}),
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "make 2>&1"}}
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": huge}
            ]}),
            json!({"role": "assistant", "content": "The log repeats one line."}),
        ];
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        sb.run_with_stdin(&["append", "r", "--tokenizer", "bytes"], &body)
            .ok();
        assert!(tokens(&sb, "r") > 1_000_000);

        let fitted = sb
            .run(&["context", "r", "--budget", "8000", "--json"])
            .ok()
            .json();
        assert!(
            fitted["tokens"].as_u64().unwrap() <= 8000,
            "{}",
            fitted["tokens"]
        );
        assert_eq!(fitted["clipped"], json!([3]));
        let text = sb.run(&["context", "r", "--budget", "8000"]).ok().stdout;
        assert!(
            text.contains("recall seq 3 for the original"),
            "{text:.2000}"
        );
        assert!(text.contains("clipped to fit the budget of 8000 tokens: seq 3"));
        // History keeps the original whole.
        let original = sb.run(&["recall", "r", "3", "--json"]).ok().json();
        assert!(original.to_string().len() > huge.len());

        // The goal alone is more than 5 tokens: nothing can be clipped enough.
        sb.run(&["context", "r", "--budget", "5"])
            .fails(4, "--budget 5: the context needs");
        sb.run(&["context", "r", "--budget", "5"]).fails(
            4,
            "the preamble (rules, goal, working state, pinned messages) takes",
        );
    }
}

/// The registry is the one list of strategies: `baton compact --help` and the command-line
/// reference's strategy table (`docs/cli.md`) name exactly its strategies, in its order.
#[test]
fn the_help_and_the_readme_name_the_registrys_strategies() {
    let names: Vec<&str> = baton_compact::strategies::REGISTRY
        .iter()
        .map(|r| r.name)
        .collect();
    let help = Sandbox::new().run(&["compact", "--help"]).ok().stdout;
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(help.contains(&names.join(", ")), "{help}");
    let reference = include_str!("../../../../docs/cli.md");
    let section = reference
        .split("## Compaction")
        .nth(1)
        .expect("docs/cli.md has a Compaction section");
    let table: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with("| strategy |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1))
        .collect();
    assert_eq!(table, names);
}
