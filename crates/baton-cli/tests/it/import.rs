//! `baton import` and what `runs show` learns from it (issue 4), through the real binary, on
//! both backends: the whole corpus against SOURCES.md, idempotence and growth, subagent links,
//! all-or-nothing files, redaction, bad input and concurrent importers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Ran, Sandbox, age, corpus, ran};

fn import_json(sb: &Sandbox, args: &[&str]) -> (Ran, Value) {
    let mut all = vec!["import", "--json"];
    all.extend_from_slice(args);
    let ran = sb.run(&all);
    let json = ran.json();
    (ran, json)
}

fn runs(report: &Value) -> &[Value] {
    report["runs"].as_array().unwrap()
}

fn file_of(run: &Value) -> String {
    PathBuf::from(run["source"].as_str().unwrap())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// SOURCES.md's table rows: file → (transcripts, messages, tool calls).
fn sources_table(corpus: &std::path::Path) -> BTreeMap<String, (u64, u64, u64)> {
    let text = std::fs::read_to_string(corpus.join("SOURCES.md")).unwrap();
    let mut rows = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | file | repo | path | commit | licence | transcripts | messages | tool calls | bytes | notes |
        if cells.len() < 11 || !cells[1].contains("__") {
            continue;
        }
        let num = |i: usize| cells[i].parse::<u64>().unwrap();
        rows.insert(cells[1].to_owned(), (num(6), num(7), num(8)));
    }
    rows
}

/// Where baton's counts differ from SOURCES.md's, and why. The readers' own tests
/// (`crates/baton-import/tests/it/*.rs`) pin these figures file by file against hand-checked
/// transcripts; here they are the import's end-to-end totals.
///
/// - Claude Code: SOURCES.md counts user+assistant *lines*; baton counts messages on the main
///   branch after merging the streamed pieces of one response (several lines, one `message.id`)
///   and turning the `isCompactSummary` line into a compaction event. A subagent run written
///   inline (the `d-kimuson` 1.0.x sessions' Task runs, `tomjnsn…subagent`'s one) is a run of
///   its own, so those files hold more transcripts, and their tool calls add up to SOURCES.md's
///   over the file's runs.
/// - Codex: SOURCES.md counts `response_item` messages; baton also makes the reasoning items
///   and the tool outputs messages (an assistant turn carries its calls, a tool message their
///   output), as the Responses API pairs them.
/// - OpenHands: SOURCES.md counts events; baton counts the conversation they make (actions
///   with their observations paired as tool calls and results; state changes are not
///   messages).
/// - SWE-agent: the same messages; `BabyEncryption` has 15 tool calls, not 16, because one
///   trajectory step has no entry in `history`.
/// - aider: SOURCES.md counts user prompt blocks; baton counts user, assistant and tool
///   messages, and the chat history holds 1,129 sessions, not 1,128 (the file opens with the
///   tail of a session whose header was cut off), of which 150 hold no message and are no run.
fn differs_from_sources(format: &str) -> bool {
    matches!(format, "claude-code" | "codex" | "openhands" | "aider")
}

#[test]
fn the_whole_corpus_imports_and_matches_sources_md() {
    let Some(corpus) = corpus() else { return };
    let table = sources_table(&corpus);
    assert_eq!(table.len(), 71, "SOURCES.md lists 71 files");
    for sb in Sandbox::each() {
        let (ran, report) = import_json(&sb, &[corpus.to_str().unwrap()]);
        let ran = ran.ok();
        assert!(ran.stderr.is_empty(), "{}", ran.stderr);
        assert_eq!(report["failed"], serde_json::json!([]));
        // SOURCES.md itself is the one file that is not a transcript.
        let skipped: Vec<_> = report["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["path"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].ends_with("SOURCES.md"));

        let mut per_file: BTreeMap<String, (u64, u64, u64, String)> = BTreeMap::new();
        for run in runs(&report) {
            let entry = per_file.entry(file_of(run)).or_insert((
                0,
                0,
                0,
                run["format"].as_str().unwrap().to_owned(),
            ));
            entry.0 += 1;
            entry.1 += run["messages"].as_u64().unwrap();
            entry.2 += run["tool_calls"].as_u64().unwrap();
        }
        assert_eq!(
            per_file.keys().collect::<Vec<_>>(),
            table.keys().collect::<Vec<_>>(),
            "every file of SOURCES.md, and no other, is imported"
        );
        for (file, (transcripts, messages, calls, format)) in &per_file {
            let (t, m, c) = table[file];
            if differs_from_sources(format) {
                continue;
            }
            let expected = if file.contains("BabyEncryption") {
                (t, m, c - 1)
            } else {
                (t, m, c)
            };
            assert_eq!((*transcripts, *messages, *calls), expected, "{file}");
        }
        // The formats whose counting rules differ still agree on which files hold how many
        // sessions (aider's history: one more, see above) and on tool calls where they can.
        // Inline subagent runs are runs of their own (issue 17).
        let inline_runs = |file: &str| match file {
            f if f.contains("5c0375b4") => 2,
            f if f.contains("fe5e1c67") => 5,
            "tomjnsn-agentlogs__claudecode__subagent.jsonl" => 1,
            _ => 0,
        };
        for (file, (transcripts, _, calls, format)) in &per_file {
            let (t, _, c) = table[file];
            match format.as_str() {
                "aider" if file.contains("chat-history") => assert_eq!(*transcripts, t + 1 - 150),
                _ => assert_eq!(*transcripts, t + inline_runs(file), "{file}"),
            }
            if format == "codex" || format == "claude-code" {
                assert_eq!(*calls, c, "{file}");
            }
        }

        let totals = &report["totals"];
        assert_eq!(totals["failed"], 0);
        assert_eq!(totals["skipped"], 1);
        // turn-2 is the same session as turn-1, grown: reported, not a second run.
        assert_eq!(totals["grown"], 1);
        let runs_created = totals["created"].as_u64().unwrap();
        // Subagent runs (their own files, and the 8 inline in their parents' files) and
        // queued messages are counted (issue 17).
        let created: Vec<&Value> = runs(&report)
            .iter()
            .filter(|r| r["status"] == "created")
            .collect();
        let subagents = created.iter().filter(|r| r["subagent"] == true).count();
        assert!(subagents >= 8, "{subagents}");
        assert_eq!(totals["subagents"], subagents);
        let queued: u64 = created
            .iter()
            .map(|r| r["queued_messages"].as_u64().unwrap())
            .sum();
        assert!(queued > 0);
        assert_eq!(totals["queued_messages"], queued);
        assert_eq!(runs_created as usize + 1, runs(&report).len());

        // Every imported run passes the protocol check, except where the source itself stopped
        // with a tool call open: a session snapshot taken while a tool ran, a SWE-agent
        // trajectory's final `submit`, an OpenHands run's final action. Those are reported
        // (as the one call without a result, on the last message), not silently fixed.
        let mut open_at_end = Vec::new();
        for run in runs(&report) {
            for problem in run["problems"].as_array().unwrap() {
                assert_eq!(
                    problem["kind"],
                    "dangling_use",
                    "{} {problem}",
                    file_of(run)
                );
                assert_eq!(
                    problem["seq"],
                    run["messages"],
                    "{} {problem}",
                    file_of(run)
                );
                open_at_end.push(file_of(run));
            }
        }
        let by_format = |prefix: &str| open_at_end.iter().filter(|f| f.starts_with(prefix)).count();
        assert_eq!(
            (
                by_format("codemie"),
                by_format("openhands"),
                by_format("swe-agent"),
                open_at_end.len()
            ),
            (1, 5, 16, 22),
            "{open_at_end:#?}"
        );
        // The store agrees run by run (the aider history's 979 runs sampled).
        let created = runs(&report).iter().filter(|r| r["status"] == "created");
        let (history, others): (Vec<_>, Vec<_>) =
            created.partition(|r| file_of(r).contains("chat-history"));
        for run in others.into_iter().chain(history.into_iter().take(10)) {
            let id = run["id"].as_str().unwrap();
            let check = sb.run(&["history", id, "--check", "--json"]);
            let problems = check.json()["problems"].as_array().unwrap().len();
            assert_eq!(problems, run["problems"].as_array().unwrap().len(), "{id}");
        }

        // A second import of the corpus finds every run again and stores nothing.
        let before = sb.run(&["runs", "list", "--json"]).ok().json();
        let (again, second) = import_json(&sb, &[corpus.to_str().unwrap()]);
        again.ok();
        assert_eq!(second["totals"]["created"], 0);
        assert_eq!(second["totals"]["messages"], 0);
        assert_eq!(
            second["totals"]["up_to_date"].as_u64().unwrap() + 1,
            runs(&second).len() as u64
        );
        assert_eq!(sb.run(&["runs", "list", "--json"]).ok().json(), before);
    }
}

/// The `codemie-code__incremental-subagents` pair: turn-2 is the same session as turn-1 after
/// it went on. Importing turn-2 over turn-1 reports it; `--reimport` appends only the new
/// messages; the subagent of turn-2 links to the session's run.
#[test]
fn a_grown_session_is_extended_once_and_its_subagent_linked() {
    let Some(corpus) = corpus() else { return };
    let dir = corpus.join("claude-code-jsonl");
    let turn1 = dir.join("codemie-code__incremental-subagents__turn-1.jsonl");
    let turn2 = dir.join("codemie-code__incremental-subagents__turn-2.jsonl");
    let agent =
        dir.join("codemie-code__incremental-subagents__turn-2__subagents__agent-a485154.jsonl");
    for sb in Sandbox::each() {
        // The subagent first: its parent is not there yet.
        let (_, sub) = import_json(&sb, &[agent.to_str().unwrap()]);
        let sub_id = runs(&sub)[0]["id"].as_str().unwrap().to_owned();
        let (_, first) = import_json(&sb, &["--run", "session", turn1.to_str().unwrap()]);
        assert_eq!(runs(&first)[0]["id"], "session");
        assert_eq!(runs(&first)[0]["status"], "created");
        assert_eq!(runs(&first)[0]["messages"], 14);

        let (_, grown) = import_json(&sb, &[turn2.to_str().unwrap()]);
        let line = &runs(&grown)[0];
        assert_eq!(
            (line["id"].as_str(), line["status"].as_str()),
            (Some("session"), Some("grown"))
        );
        assert_eq!(line["not_appended"], 12);
        let text = sb.run(&["import", turn2.to_str().unwrap()]).ok().stdout;
        assert!(
            text.contains("already imported as run session; the source has 12 new messages (--reimport appends them)"),
            "{text}"
        );

        let (_, extended) = import_json(&sb, &["--reimport", turn2.to_str().unwrap()]);
        let line = &runs(&extended)[0];
        assert_eq!(line["status"], "extended");
        assert_eq!(line["appended"], 12);
        assert_eq!(extended["totals"]["messages"], 12);
        let (_, again) = import_json(&sb, &["--reimport", turn2.to_str().unwrap()]);
        assert_eq!(runs(&again)[0]["status"], "up_to_date");

        let show = sb.run(&["runs", "show", "session", "--json"]).ok().json();
        assert_eq!(show["last_seq"], 26);
        assert_eq!(show["counts"]["messages"], 26);
        assert_eq!(
            show["counts"]["dangling_tool_calls"], 0,
            "turn-2 answered turn-1's call"
        );
        assert_eq!(show["origin"]["format"], "claude-code");
        assert_eq!(
            show["origin"]["source_session_id"],
            "e9fb405b-169f-40eb-9396-7e75076f045d"
        );
        assert!(
            show["origin"]["path"]
                .as_str()
                .unwrap()
                .ends_with("turn-2.jsonl")
        );
        // The subagent imported before its parent is linked now.
        let sub = sb.run(&["runs", "show", &sub_id, "--json"]).ok().json();
        assert_eq!(sub["origin"]["parent_run"], "session");
        assert_eq!(show["origin"]["parent_run"], Value::Null);
        // The history is turn-2's main branch, each message once.
        let history = sb.run(&["history", "session", "--json"]).ok().json();
        assert_eq!(history["messages"].as_array().unwrap().len(), 26);
    }
}

#[test]
fn runs_show_reports_origin_counts_and_compactions() {
    let Some(corpus) = corpus() else { return };
    let file = corpus.join("claude-code-jsonl/tomjnsn-agentlogs__claudecode__compact.jsonl");
    for sb in Sandbox::each() {
        sb.run(&["import", "--run", "compacted", file.to_str().unwrap()])
            .ok();
        let show = sb.run(&["runs", "show", "compacted", "--json"]).ok().json();
        let keys: Vec<&str> = show
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "active_summary_id",
                "compactions",
                "counts",
                "created_at",
                "first_message_at",
                "goal",
                "id",
                "last_message_at",
                "last_seq",
                "origin",
                "rules",
                "status",
                "tenant",
                "usage"
            ]
        );
        // The responses' recorded usage, as the file holds it (issue 17).
        let mut want: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut prompts = 0;
        for t in baton_import::parse(
            baton_import::Format::ClaudeCode,
            &std::fs::read(&file).unwrap(),
        )
        .unwrap()
        {
            for u in t.usage.iter().map(|u| &u.record) {
                let w = want.entry(u.model.clone().unwrap()).or_default();
                w.0 += 1;
                w.1 += u.usage.output;
                w.2 += u.usage.cache_read;
                prompts += u.usage.context();
            }
        }
        // The growth report sets what it estimates beside what the provider reported.
        let growth = sb
            .run(&["report", "growth", "compacted", "--json"])
            .ok()
            .json();
        assert_eq!(growth["reported_input_total"], prompts);
        let text = sb.run(&["report", "growth", "compacted"]).ok().stdout;
        assert!(
            text.contains(&format!("the provider reported {prompts} input tokens")),
            "{text}"
        );
        let got: BTreeMap<String, (u64, u64, u64)> = show["usage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| {
                assert_eq!(u["estimated"], false);
                assert!(u["cost"].as_f64().unwrap() > 0.0);
                let n = |k: &str| u[k].as_u64().unwrap();
                (
                    u["model"].as_str().unwrap().to_owned(),
                    (n("responses"), n("output_tokens"), n("cache_read_tokens")),
                )
            })
            .collect();
        assert!(!got.is_empty());
        assert_eq!(got, want);
        let text = sb.run(&["runs", "show", "compacted"]).ok().stdout;
        assert!(text.contains("usage     claude-"), "{text}");
        let origin = show["origin"].as_object().unwrap();
        let keys: Vec<&str> = origin.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "first_at",
                "format",
                "imported_at",
                "last_at",
                "models",
                "parent_run",
                "path",
                "side_branch_messages",
                "side_branches",
                "skipped_lines",
                "source_session_id",
                "updated_at"
            ]
        );
        assert_eq!(
            origin["models"],
            serde_json::json!(["claude-sonnet-4-5-20250929"])
        );
        assert_eq!(
            origin["source_session_id"],
            "0e26ec2f-937e-482c-b889-bc126f996913"
        );
        assert!(origin["first_at"].as_str().unwrap().starts_with("20"));
        let counts = &show["counts"];
        assert_eq!(counts["messages"], 8);
        assert_eq!(counts["tool_calls"], 0);
        assert_eq!(counts["orphan_tool_results"], 0);
        assert_eq!(counts["compaction_events"], 1);
        assert_eq!(counts["redactions"], 0);
        assert!(counts["bytes"].as_u64().unwrap() > 1000);
        assert!(counts["tokens"].as_u64().unwrap() > 100);
        assert_eq!(show["compactions"][0]["after_seq"], 5);
        assert!(show["compactions"][0]["summary"].as_str().unwrap().len() > 100);
        let text = sb.run(&["runs", "show", "compacted"]).ok().stdout;
        for line in [
            "origin    ",
            "models    claude-sonnet-4-5-20250929",
            "compacted after seq 5",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        // A run made by hand has no origin, and counts all the same.
        sb.run(&["runs", "create", "--id", "native"]).ok();
        let native = sb.run(&["runs", "show", "native", "--json"]).ok().json();
        assert_eq!(native["origin"], Value::Null);
        assert_eq!(native["counts"]["messages"], 0);
        assert_eq!(native["first_message_at"], Value::Null);
    }
}

/// A directory with a good transcript, a transcript corrupted half-way and a file that is not
/// a transcript: the good one is imported, the corrupted one stores nothing and is named with
/// its line, the stranger is skipped; the exit code says something failed.
#[test]
fn a_broken_file_stores_nothing_and_the_others_go_on() {
    for sb in Sandbox::each() {
        let dir = sb.dir.path().join("logs");
        std::fs::create_dir_all(dir.join("nested")).unwrap();
        let good = [
            r#"{"role":"user","content":"list the files"}"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"a.txt"}"#,
            r#"{"role":"assistant","content":"one file"}"#,
        ];
        std::fs::write(dir.join("good.jsonl"), good.join("\n")).unwrap();
        let cc = |uuid: &str, parent: &str, role: &str, text: &str| {
            serde_json::json!({"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": "s-broken",
                "timestamp": "2026-01-01T00:00:00Z", "message": {"role": role, "content": text}})
            .to_string()
        };
        let broken = [
            cc("u1", "", "user", "first"),
            cc("u2", "u1", "assistant", "second"),
            "{\"type\":\"user\",\"uuid\":\"u3\",\"parentUuid\":\"u2\",\"message\":{".to_owned(),
            cc("u4", "u3", "assistant", "fourth"),
        ];
        std::fs::write(
            dir.join("nested/broken.jsonl"),
            broken
                .join("\n")
                .replace(r#""parentUuid":"""#, r#""parentUuid":null"#),
        )
        .unwrap();
        std::fs::write(dir.join("nested/notes.txt"), "just some notes\n").unwrap();

        let (ran, report) = import_json(&sb, &[dir.to_str().unwrap()]);
        assert_eq!(ran.code, 1, "{}", ran.stderr);
        assert!(
            ran.stderr.contains("import: 1 file(s) failed"),
            "{}",
            ran.stderr
        );
        let failed = report["failed"].as_array().unwrap();
        assert_eq!(failed.len(), 1);
        assert!(
            failed[0]["path"]
                .as_str()
                .unwrap()
                .ends_with("broken.jsonl")
        );
        assert!(
            failed[0]["error"].as_str().unwrap().starts_with("line 3: "),
            "{}",
            failed[0]
        );
        let skipped = report["skipped"][0]["path"].as_str().unwrap();
        assert!(skipped.ends_with("notes.txt"), "{skipped}");
        assert_eq!(runs(&report).len(), 1);
        assert_eq!(runs(&report)[0]["format"], "openai");
        assert_eq!(runs(&report)[0]["tool_calls"], 1);
        let list = sb.run(&["runs", "list", "--json"]).ok().json();
        assert_eq!(
            list["runs"].as_array().unwrap().len(),
            1,
            "nothing of the broken file"
        );

        // Text output: the failure on stderr, one line per failed file plus the error.
        let text = sb.run(&["import", dir.to_str().unwrap()]);
        assert_eq!(text.code, 1);
        assert!(
            text.stderr.contains("broken.jsonl: line 3: "),
            "{}",
            text.stderr
        );
        assert!(
            text.stdout.contains("1 already imported"),
            "{}",
            text.stdout
        );

        // Named on the command line, a file that is not a transcript fails rather than skips.
        let notes = dir.join("nested/notes.txt");
        let named = sb.run(&["import", notes.to_str().unwrap()]);
        assert_eq!(named.code, 1);
        assert!(
            named
                .stderr
                .contains("notes.txt: not a recognized transcript format"),
            "{}",
            named.stderr
        );
        // A format named by hand that does not fit fails the file with the reader's reason.
        let good_path = dir.join("good.jsonl");
        let wrong = sb.run(&[
            "import",
            "--format",
            "swe-agent",
            good_path.to_str().unwrap(),
        ]);
        assert_eq!(wrong.code, 1);
        assert!(wrong.stderr.contains("good.jsonl: "), "{}", wrong.stderr);
        // A file named by hand that holds no transcript fails, saying so.
        let empty = sb.file("empty.jsonl", "");
        let none = sb.run(&["import", "--format", "openai", empty.to_str().unwrap()]);
        assert_eq!(none.code, 1);
        assert!(
            none.stderr.contains("empty.jsonl: no messages"),
            "{}",
            none.stderr
        );
        let summary_only = sb.file(
            "summary.jsonl",
            "{\"type\":\"summary\",\"summary\":\"x\",\"leafUuid\":\"u\"}\n",
        );
        let summary_args = [
            "import",
            "--format",
            "claude-code",
            summary_only.to_str().unwrap(),
        ];
        // Just written, its messages may come next: early, not failed.
        let early = sb.run(&summary_args).ok();
        assert!(
            early
                .stdout
                .contains("summary.jsonl: skipped: nothing complete"),
            "{}",
            early.stdout
        );
        age(&summary_only);
        let none = sb.run(&summary_args);
        assert_eq!(none.code, 1, "{}", none.stdout);
        assert!(
            none.stderr
                .contains("summary.jsonl: no claude-code transcript in it"),
            "{}",
            none.stderr
        );
        let missing = sb.run(&["import", "/no/such/dir"]);
        assert_eq!(missing.code, 1);
        assert!(
            missing
                .stderr
                .contains("/no/such/dir: no such file or directory"),
            "{}",
            missing.stderr
        );
        assert_eq!(
            sb.run(&["runs", "list", "--json"]).ok().json(),
            list,
            "nothing else stored"
        );
    }
}

#[test]
fn secrets_are_redacted_before_they_are_stored_and_counted() {
    let key = "sk-ant-api03-Zq8xY7wV6uT5sR4qP3oN2mL1kJ0iH9gF8eD7cB6aA5";
    let sb = Sandbox::new();
    let lines = [
        serde_json::json!({"role": "user", "content": format!("my key is {key}, and my token is ghp_abcdefghijklmnopqrstuvwxyz0123456789")}),
        serde_json::json!({"role": "assistant", "content": "I will not repeat it."}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let file = sb.file("secret.jsonl", &body);
    let (ran, report) = import_json(&sb, &["--run", "s", file.to_str().unwrap()]);
    ran.ok();
    assert_eq!(runs(&report)[0]["redactions"], 2);
    assert_eq!(report["totals"]["redactions"], 2);
    let history = sb.run(&["history", "s", "--json"]).ok().stdout;
    assert!(
        history.contains("[REDACTED:anthropic]") && history.contains("[REDACTED:github]"),
        "{history}"
    );
    let show = sb.run(&["runs", "show", "s", "--json"]).ok().json();
    assert_eq!(show["counts"]["redactions"], 2);
    // Not in the database file, its WAL, nor anything baton printed.
    drop(sb.run(&["runs", "list"]).ok());
    for entry in std::fs::read_dir(sb.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("baton.db")
        {
            let bytes = std::fs::read(&path).unwrap();
            let found = bytes.windows(key.len()).any(|w| w == key.as_bytes());
            assert!(!found, "the key is in {}", path.display());
        }
    }
    assert!(!history.contains(key));
}

#[test]
fn flags_and_output_modes() {
    let sb = Sandbox::new();
    let file = sb.file("a.jsonl", "{\"role\":\"user\",\"content\":\"hi\"}\n");
    let dir = sb.dir.path().to_str().unwrap().to_owned();
    // --run takes one transcript file, and a valid id.
    sb.run(&["import", "--run", "x", &dir])
        .fails(4, "--run names one run");
    sb.run(&["import", "--run", "bad id!", file.to_str().unwrap()])
        .fails(4, "--run");
    // The JSON report's shape is a contract (docs/cli.md, "JSON output").
    let other = sb.file("b.jsonl", "{\"role\":\"user\",\"content\":\"hello\"}\n");
    let (_, report) = import_json(&sb, &[other.to_str().unwrap()]);
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&report), ["failed", "runs", "skipped", "totals"]);
    assert_eq!(
        keys(&runs(&report)[0]),
        [
            "appended",
            "appended_tool_calls",
            "compactions",
            "format",
            "id",
            "messages",
            "not_appended",
            "problems",
            "queued_messages",
            "redactions",
            "source",
            "source_session_id",
            "status",
            "still_being_written",
            "subagent",
            "tool_calls"
        ]
    );
    assert_eq!(
        keys(&report["totals"]),
        [
            "created",
            "deleted",
            "extended",
            "failed",
            "files",
            "grown",
            "messages",
            "queued_messages",
            "redactions",
            "skipped",
            "still_being_written",
            "subagents",
            "tool_calls",
            "up_to_date"
        ]
    );
    assert_eq!(
        runs(&report)[0]["source"],
        other.canonicalize().unwrap().to_str().unwrap()
    );
    // --quiet prints nothing on success.
    let quiet = sb.run(&["import", "--quiet", file.to_str().unwrap()]).ok();
    assert_eq!((quiet.stdout.as_str(), quiet.stderr.as_str()), ("", ""));
    // The text report: one line per file, then the totals.
    let again = sb.run(&["import", file.to_str().unwrap()]).ok().stdout;
    assert!(
        again.contains("a.jsonl: already imported as run "),
        "{again}"
    );
    assert!(
        again.ends_with("imported 0 runs (0 messages, 0 tool calls) from 1 file; 1 already imported; 0 secrets redacted\n"),
        "{again}"
    );
    // An unknown format name is a usage error.
    let usage = sb.run(&["import", "--format", "chatgpt", file.to_str().unwrap()]);
    assert_eq!(usage.code, 2);
    assert!(
        usage
            .stderr
            .contains("invalid value 'chatgpt' for '--format"),
        "{}",
        usage.stderr
    );
    // Without paths: usage.
    assert_eq!(sb.run(&["import"]).code, 2);
}

/// Several `baton import` processes on one file at once make one run, on both backends.
#[test]
fn concurrent_importers_make_one_run() {
    for sb in Sandbox::each() {
        let lines: String = (0..200)
            .map(|i| format!("{{\"role\":\"user\",\"content\":\"message {i}\"}}\n"))
            .collect();
        let file = sb.file("shared.jsonl", &lines);
        let children: Vec<_> = (0..6)
            .map(|_| {
                sb.command(&["import", "--json", file.to_str().unwrap()])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut statuses = Vec::new();
        for child in children {
            let out = ran(child.wait_with_output().unwrap()).ok();
            statuses.push(out.json()["runs"][0]["status"].as_str().unwrap().to_owned());
        }
        statuses.sort();
        assert_eq!(
            statuses.iter().filter(|s| *s == "created").count(),
            1,
            "{statuses:?}"
        );
        assert_eq!(
            statuses.iter().filter(|s| *s == "up_to_date").count(),
            5,
            "{statuses:?}"
        );
        let list = sb.run(&["runs", "list", "--json"]).ok().json();
        let all = list["runs"].as_array().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0]["last_seq"], 200);
    }
}

/// A tree imported in one command (its files prepared on every core, ahead of the store)
/// stores what importing its files one by one, in path order, stores: the same report lines in
/// the same order, the same runs. The Claude Code and Codex folders hold the order-sensitive
/// cases: a session grown in a later file, subagents in their own files and inline.
#[test]
fn a_tree_imported_at_once_equals_its_files_imported_one_by_one() {
    let Some(corpus) = corpus() else { return };
    let pairs = [
        [Sandbox::new(), Sandbox::new()],
        [Sandbox::postgres(), Sandbox::postgres()],
    ];
    let line = |run: &Value| {
        (
            file_of(run),
            run["status"].as_str().unwrap().to_owned(),
            run["messages"].as_u64().unwrap(),
            run["appended"].as_u64().unwrap(),
            run["subagent"].as_bool().unwrap(),
            run["source_session_id"].clone(),
        )
    };
    let listed = |sb: &Sandbox| {
        let list = sb.run(&["runs", "list", "--all", "--json"]).ok().json();
        let mut runs: Vec<String> = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {} {}",
                    r["agent"],
                    r["messages"],
                    r["tokens"],
                    r["usage_tokens"],
                    r["title"],
                    r["parent_run"].is_null(),
                    r["subagents"]
                )
            })
            .collect();
        runs.sort();
        runs
    };
    for [at_once, one_by_one] in pairs {
        let dirs = ["claude-code-jsonl", "codex-rollout-jsonl"].map(|d| corpus.join(d));
        let (_, report) = import_json(
            &at_once,
            &[dirs[0].to_str().unwrap(), dirs[1].to_str().unwrap()],
        );
        let together: Vec<_> = runs(&report).iter().map(line).collect();

        let mut separately = Vec::new();
        for dir in &dirs {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            for file in files {
                let (_, report) = import_json(&one_by_one, &[file.to_str().unwrap()]);
                separately.extend(runs(&report).iter().map(line));
            }
        }
        assert!(together.len() > 30, "{} runs", together.len());
        assert_eq!(together, separately);
        assert_eq!(listed(&at_once), listed(&one_by_one));
    }
}

/// A file its agent is still writing that holds no complete unit yet (its first line half
/// written, a JSON document before its end, or only the lines before its first message) is
/// early, not broken: skipped, saying so, with exit 0 and nothing stored. The same bytes in a
/// file nobody has written for an hour are broken or empty, and fail, naming why.
#[test]
fn a_file_cut_inside_its_first_unit_is_early_while_written_and_broken_once_old() {
    let line = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s-early","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}"#;
    let document =
        r#"[{"role":"user","content":"hello there"},{"role":"assistant","content":"hi"}]"#;
    // A Codex rollout holds its `session_meta` line before any message.
    let meta = r#"{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s-meta","timestamp":"2026-01-01T00:00:00Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.1.0"}}
"#;
    let unknown = "not a recognized transcript format";
    let cases = [
        ("first-line.jsonl", &line[..line.len() / 2], unknown),
        ("document.json", &document[..document.len() - 12], unknown),
        ("meta.jsonl", meta, "no codex transcript in it"),
    ];
    for sb in Sandbox::each() {
        for (name, body, old_why) in cases {
            let path = sb.file(name, body);
            let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
            ran.ok();
            assert_eq!(report["totals"]["skipped"], 1, "{name}: {report}");
            let reason = report["skipped"][0]["error"].as_str().unwrap();
            assert!(reason.contains("still being written"), "{name}: {reason}");

            age(&path);
            let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
            assert_eq!(ran.code, 1, "{name}: {}", ran.stderr);
            let why = report["failed"][0]["error"].as_str().unwrap();
            assert!(why.contains(old_why), "{name}: {why}");
        }
        // A wrong --format on a file just written is no early file: the bytes are another
        // reader's, and the import fails, naming why.
        let codex = sb.file("codex.jsonl", meta);
        let wrong = sb.run(&["import", "--format", "claude-code", codex.to_str().unwrap()]);
        assert_eq!(wrong.code, 1, "{}", wrong.stdout);
        assert!(
            wrong
                .stderr
                .contains("codex.jsonl: no claude-code transcript in it"),
            "{}",
            wrong.stderr
        );
        let listed = sb.run(&["--json", "runs", "list"]).ok().json();
        assert_eq!(listed["total"], 0, "{listed}");
    }
}

/// An aider chat just written (or just copied: nothing tells the two apart) keeps what can no
/// longer change: the prompt, closed by the lines after it, is stored at once; its reply, which
/// aider may still be writing, waits and is counted as still being written. Once the file has
/// been quiet, `--reimport` brings the reply, and the run is what one import of the quiet file
/// makes.
#[test]
fn an_aider_chat_just_written_keeps_its_prompt_and_its_reply_comes_later() {
    let chat = "\
# aider chat started at 2024-08-05 19:33:02

#### change hello to goodbye  

Here is the change to hello.py.

> Applied edit to hello.py  
";
    for sb in Sandbox::each() {
        let path = sb.file("chat.md", chat);
        let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        let run = &runs(&report)[0];
        assert_eq!(run["status"], "created", "{report}");
        assert_eq!(
            (&run["messages"], &run["still_being_written"]),
            (&1.into(), &2.into())
        );
        assert_eq!(report["totals"]["still_being_written"], 2, "{report}");
        let id = run["id"].as_str().unwrap().to_owned();

        age(&path);
        let (ran, report) = import_json(&sb, &["--reimport", path.to_str().unwrap()]);
        ran.ok();
        let run = &runs(&report)[0];
        assert_eq!(
            (&run["status"], &run["id"]),
            (&"extended".into(), &id.clone().into())
        );

        let once = Sandbox::new();
        let copy = once.file("chat.md", chat);
        age(&copy);
        let (_, one) = import_json(&once, &[copy.to_str().unwrap()]);
        let one_id = runs(&one)[0]["id"].as_str().unwrap().to_owned();
        let history = |sb: &Sandbox, run: &str| {
            let messages = sb.messages(run);
            messages
                .iter()
                .map(|e| (e["role"].clone(), e["content"].clone()))
                .collect::<Vec<_>>()
        };
        let whole = history(&once, &one_id);
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert_eq!(history(&sb, &id), whole);
    }
}

/// A Codex rollout written before the `{timestamp, type, payload}` envelope (Codex CLI of mid
/// 2025; such files stay in `~/.codex/sessions`) is found by content and imported like a current
/// one: its messages and tool pair stored, its header's session id, start and working
/// directory on the run; a second import finds it up to date.
#[test]
fn a_codex_rollout_from_before_the_envelope_imports_like_a_current_one() {
    let rollout = [
        r#"{"id":"0197c1d2-legacy","timestamp":"2025-07-01T10:00:00.000Z","instructions":null,"git":{"branch":"main"}}"#,
        r#"{"record_type":"state"}"#,
        r#"{"type":"message","id":null,"role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/home/u/app</cwd>\n</environment_context>"}]}"#,
        r#"{"type":"message","id":null,"role":"user","content":[{"type":"input_text","text":"run the tests and fix what fails"}]}"#,
        r#"{"record_type":"state"}"#,
        r#"{"type":"function_call","id":"fc_1","name":"shell","arguments":"{\"command\":[\"cargo\",\"test\"]}","call_id":"call_1"}"#,
        r#"{"type":"function_call_output","call_id":"call_1","output":"{\"output\":\"test result: ok\",\"metadata\":{\"exit_code\":0}}"}"#,
        r#"{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"All tests pass."}]}"#,
    ]
    .join("\n")
        + "\n";
    for sb in Sandbox::each() {
        let path = sb.file(
            "rollout-2025-07-01T10-00-00-0197c1d2-legacy.jsonl",
            &rollout,
        );
        age(&path);
        let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        let run = &runs(&report)[0];
        assert_eq!(
            (&run["status"], &run["format"], &run["messages"]),
            (&"created".into(), &"codex".into(), &5.into()),
            "{report}"
        );
        let id = run["id"].as_str().unwrap().to_owned();
        let roles: Vec<Value> = sb.messages(&id).iter().map(|m| m["role"].clone()).collect();
        assert_eq!(roles, ["user", "user", "assistant", "tool", "assistant"]);

        let listed = sb.run(&["runs", "list", "--format", "json"]).ok().json();
        let listed = &listed["runs"][0];
        assert_eq!(
            listed["title"], "run the tests and fix what fails",
            "{listed}"
        );
        assert_eq!(listed["agent"], "codex", "{listed}");
        assert_eq!(listed["project"], "/home/u/app", "{listed}");
        assert!(
            listed["first_activity"]
                .as_str()
                .is_some_and(|t| t.starts_with("2025-07-01")),
            "{listed}"
        );

        let (ran, again) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        assert_eq!(runs(&again)[0]["status"], "up_to_date", "{again}");
    }
}

/// What `claude -p --output-format stream-json --verbose` prints (saved from a CI run, say) is
/// read as the session it stands for, not as one message with the rest taken for abandoned
/// branches: every message is stored, the subagent becomes its own run linked to its parent,
/// and the usage of each response is kept once.
#[test]
fn claude_code_stream_json_output_imports_as_its_session_and_subagent() {
    let said = |id: &str, content: &str, output: u64| {
        format!(
            r#"{{"model":"claude-sonnet-4-5-20250929","id":"{id}","type":"message","role":"assistant","content":{content},"stop_reason":null,"usage":{{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":0,"output_tokens":{output}}}}}"#
        )
    };
    let line = |kind: &str, uuid: &str, parent: &str, message: &str| {
        format!(
            r#"{{"type":"{kind}","message":{message},"parent_tool_use_id":{parent},"session_id":"sj-cli","uuid":"{uuid}"}}"#
        )
    };
    let task = r#"[{"type":"tool_use","id":"toolu_t","name":"Task","input":{"description":"d","prompt":"count the files"}}]"#;
    let output = [
        r#"{"type":"system","subtype":"init","cwd":"/home/u/app","session_id":"sj-cli","model":"claude-sonnet-4-5-20250929","claude_code_version":"2.0.14","uuid":"u0"}"#.to_owned(),
        line("assistant", "u1", "null", &said("m1", r#"[{"type":"text","text":"Delegating."}]"#, 2)),
        line("assistant", "u2", "null", &said("m1", task, 20)),
        line("user", "u3", r#""toolu_t""#, r#"{"role":"user","content":[{"type":"text","text":"count the files"}]}"#),
        line("assistant", "u4", r#""toolu_t""#, &said("m2", r#"[{"type":"text","text":"3 files"}]"#, 5)),
        line("user", "u5", "null", r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_t","content":"3 files"}]}"#),
        line("assistant", "u6", "null", &said("m3", r#"[{"type":"text","text":"There are 3 files."}]"#, 8)),
        r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"There are 3 files.","session_id":"sj-cli","total_cost_usd":0.01,"uuid":"u7"}"#.to_owned(),
    ]
    .join("\n")
        + "\n";
    for sb in Sandbox::each() {
        let path = sb.file("claude-p.jsonl", &output);
        let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        assert_eq!(report["totals"]["created"], 2, "{report}");
        assert_eq!(report["totals"]["messages"], 5, "{report}");
        assert_eq!(report["totals"]["still_being_written"], 0, "{report}");
        let main = runs(&report)
            .iter()
            .find(|r| r["subagent"] == false)
            .unwrap();
        let sub = runs(&report)
            .iter()
            .find(|r| r["subagent"] == true)
            .unwrap();
        assert_eq!(main["source_session_id"], "sj-cli", "{report}");
        let main_id = main["id"].as_str().unwrap();
        let roles: Vec<Value> = sb
            .messages(main_id)
            .iter()
            .map(|m| m["role"].clone())
            .collect();
        assert_eq!(roles, ["assistant", "user", "assistant"]);
        let show = sb
            .run(&["runs", "show", sub["id"].as_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_eq!(show["origin"]["parent_run"], main_id, "{show}");

        let usage = sb
            .run(&["report", "usage", "session", "--json"])
            .ok()
            .json();
        let text = usage.to_string();
        assert!(text.contains("\"outputTokens\":33"), "{usage}");
    }
}

/// Claude Code 2.1 loads MCP tools on demand: `ToolSearch` answers with `tool_reference` blocks
/// naming the tools it made available. A session that used it imports whole (before, the
/// block's type was unknown and the whole file failed), and the history shows what was loaded.
#[test]
fn a_claude_code_session_that_searched_for_tools_imports_whole() {
    let session = [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s-tools","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"echo hello through the MCP server"}}"#,
        r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","sessionId":"s-tools","timestamp":"2026-01-01T00:00:01Z","message":{"id":"m1","role":"assistant","model":"claude-opus-4-6","content":[{"type":"tool_use","id":"toolu_1","name":"ToolSearch","input":{"query":"select:mcp__echo__echo","max_results":1}}],"stop_reason":"tool_use"}}"#,
        r#"{"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s-tools","timestamp":"2026-01-01T00:00:02Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"mcp__echo__echo"}]}]},"toolUseResult":{"matches":["mcp__echo__echo"],"query":"select:mcp__echo__echo","total_deferred_tools":117}}"#,
        r#"{"type":"assistant","uuid":"u4","parentUuid":"u3","sessionId":"s-tools","timestamp":"2026-01-01T00:00:03Z","message":{"id":"m2","role":"assistant","model":"claude-opus-4-6","content":[{"type":"tool_use","id":"toolu_2","name":"mcp__echo__echo","input":{"text":"hello"}}],"stop_reason":"tool_use"}}"#,
        r#"{"type":"user","uuid":"u5","parentUuid":"u4","sessionId":"s-tools","timestamp":"2026-01-01T00:00:04Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"hello"}]}}"#,
        r#"{"type":"assistant","uuid":"u6","parentUuid":"u5","sessionId":"s-tools","timestamp":"2026-01-01T00:00:05Z","message":{"id":"m3","role":"assistant","model":"claude-opus-4-6","content":[{"type":"text","text":"It echoed hello."}],"stop_reason":"end_turn"}}"#,
    ]
    .join("\n")
        + "\n";
    for sb in Sandbox::each() {
        let path = sb.file("tools.jsonl", &session);
        age(&path);
        let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        let run = &runs(&report)[0];
        assert_eq!(
            (&run["status"], &run["messages"], &run["tool_calls"]),
            (&"created".into(), &6.into(), &2.into()),
            "{report}"
        );
        let id = run["id"].as_str().unwrap();
        let stored = sb.messages(id);
        assert_eq!(
            stored[2]["content"][0]["content"][0],
            serde_json::json!({"type": "tool_reference", "tool_name": "mcp__echo__echo"})
        );
        let history = sb.run(&["history", id]).ok().stdout;
        assert!(
            history.contains("(tool mcp__echo__echo made available)"),
            "{history}"
        );
    }
}

/// What `codex exec --json` prints (saved from a CI run, say) imports as a Codex run: each
/// command a call answered by its output, each turn's usage kept once.
#[test]
fn codex_exec_json_output_imports_as_a_run_with_its_usage() {
    let events = [
        r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Running the tests**"}}"#,
        r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cargo test'","aggregated_output":"test result: FAILED. 1 failed","exit_code":101,"status":"failed"}}"#,
        r#"{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"One test fails: parse_empty."}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":5000,"cached_input_tokens":3000,"output_tokens":120}}"#,
    ]
    .join("\n")
        + "\n";
    for sb in Sandbox::each() {
        let path = sb.file("codex-exec.jsonl", &events);
        let (ran, report) = import_json(&sb, &[path.to_str().unwrap()]);
        ran.ok();
        let run = &runs(&report)[0];
        assert_eq!(
            (&run["format"], &run["messages"], &run["tool_calls"]),
            (&"codex".into(), &3.into(), &1.into()),
            "{report}"
        );
        let id = run["id"].as_str().unwrap();
        let stored = sb.messages(id);
        assert_eq!(stored[1]["content"][0]["is_error"], true, "{stored:?}");

        let usage = sb
            .run(&["report", "usage", "session", "--json"])
            .ok()
            .json();
        let text = usage.to_string();
        assert!(text.contains("\"cacheReadTokens\":3000"), "{usage}");
        assert!(text.contains("\"outputTokens\":120"), "{usage}");
    }
}
