//! `baton runs list` for people and `baton runs delete` (issue 17, items 6 and 1), through the
//! real binary on both backends, on the shared corpus.

use serde_json::Value;

use crate::support::{Sandbox, corpus};

fn list(sb: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["runs", "list", "--format", "json"];
    all.extend_from_slice(args);
    sb.run(&all).ok().json()
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

const ORCHESTRATOR: &str =
    "claude-code-jsonl/d-kimuson-claude-code-viewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl";

// issue 17, item 6: `runs list` is usable after a real import.
#[test]
fn runs_list_shows_project_title_agent_model_activity_and_cost() {
    let Some(corpus) = corpus() else { return };
    for sb in Sandbox::each() {
        let dir = |d: &str| corpus.join(d).display().to_string();
        sb.run(&[
            "import",
            "-q",
            &dir("claude-code-jsonl"),
            &dir("aider-chat-md"),
            &dir("swe-agent-traj"),
        ])
        .ok();
        let all = list(&sb, &["--all"]);
        let runs = all["runs"].as_array().unwrap();
        assert_eq!(all["total"].as_u64().unwrap(), runs.len() as u64);
        assert_eq!(all["next_cursor"], Value::Null);
        // aider files with no message make no run (150 empty runs before).
        assert!(
            runs.iter().all(|r| r["messages"].as_u64().unwrap() > 0),
            "an empty run was made"
        );
        // The orchestrator session: its project, title, model, source times and cost.
        let top = runs
            .iter()
            .find(|r| {
                r["title"] == "/orchestrator create TODO app by Next.js"
                    && r["parent_run"].is_null()
            })
            .expect("the orchestrator session is listed by its first instruction");
        assert_eq!(top["agent"], "claude-code");
        assert!(top["project"].as_str().unwrap().starts_with('/'), "{top}");
        assert!(!top["models"].as_array().unwrap().is_empty(), "{top}");
        assert_eq!(top["subagents"], 5);
        assert!(top["first_activity"].as_str().unwrap() < top["last_activity"].as_str().unwrap());
        assert!(
            !top["last_activity"]
                .as_str()
                .unwrap()
                .starts_with(&top["created_at"].as_str().unwrap()[..10]),
            "activity is the source's, not the import's: {top}"
        );
        assert!(top["cost"].as_f64().unwrap() > 0.0, "{top}");
        assert!(top["usage_tokens"].as_u64().unwrap() > top["tokens"].as_u64().unwrap());
        let children: Vec<&Value> = runs
            .iter()
            .filter(|r| r["parent_run"] == top["id"])
            .collect();
        assert_eq!(children.len(), 5);

        // Most recent activity first (the default); a source without times comes last.
        let by_last = list(&sb, &["--all", "--sort", "last"]);
        let times: Vec<Option<&str>> = by_last["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["last_activity"].as_str())
            .collect();
        let known: Vec<&str> = times.iter().flatten().copied().collect();
        assert!(known.windows(2).all(|w| w[0] >= w[1]), "newest first");
        let first_unknown = times
            .iter()
            .position(Option::is_none)
            .unwrap_or(times.len());
        assert!(
            times[first_unknown..].iter().all(Option::is_none),
            "unknown times last"
        );
        // By cost, highest first.
        let by_cost = list(&sb, &["--sort", "cost", "--limit", "5"]);
        let costs: Vec<f64> = by_cost["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["cost"].as_f64().unwrap())
            .collect();
        assert!(costs.windows(2).all(|w| w[0] >= w[1]), "{costs:?}");
        assert_eq!(by_cost["runs"].as_array().unwrap().len(), 5);

        // --project by the path's last component, --since a day.
        let project = top["project"].as_str().unwrap();
        let last = project.rsplit('/').next().unwrap();
        let mine = list(&sb, &["--all", "--project", last]);
        assert!(ids(&mine).contains(&top["id"].as_str().unwrap().to_owned()));
        assert!(
            mine["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["project"] == project),
            "{mine}"
        );
        let day = &top["last_activity"].as_str().unwrap()[..10];
        let since = list(&sb, &["--all", "--since", day]);
        assert!(
            since["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| { r["last_activity"].as_str().is_some_and(|t| &t[..10] >= day) })
        );
        assert!(ids(&since).contains(&top["id"].as_str().unwrap().to_owned()));

        // Pages by cursor give every run once, in order.
        let mut paged = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut args = vec!["--limit", "400"];
            if let Some(c) = &cursor {
                args.extend(["--cursor", c.as_str()]);
            }
            let page = list(&sb, &args);
            paged.extend(ids(&page));
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        assert_eq!(paged, ids(&by_last));

        // The table: a header, one line per run, and how to see more.
        let table = sb.run(&["runs", "list", "--limit", "3"]).ok();
        let lines: Vec<&str> = table.stdout.lines().collect();
        assert!(
            lines[0].starts_with("id ")
                && lines[0].contains("last activity")
                && lines[0].ends_with("title")
        );
        assert_eq!(lines.len(), 5, "{}", table.stdout);
        assert!(
            lines[4].starts_with(&format!("3 of {} runs shown", runs.len())),
            "{}",
            table.stdout
        );
        let orchestrator = sb
            .run(&[
                "runs",
                "list",
                "--project",
                last,
                "--sort",
                "cost",
                "--limit",
                "1",
            ])
            .ok();
        assert!(
            orchestrator.stdout.contains("claude-code") && orchestrator.stdout.contains('$'),
            "{}",
            orchestrator.stdout
        );

        // Bad input names what was wrong.
        sb.run(&["runs", "list", "--since", "yesterday"])
            .fails(4, "--since \"yesterday\": expected a day");
        sb.run(&["runs", "list", "--cursor", "nope"])
            .fails(4, "not a cursor of this listing");
        let next = list(&sb, &["--limit", "1"])["next_cursor"]
            .as_str()
            .unwrap()
            .to_owned();
        sb.run(&["runs", "list", "--sort", "cost", "--cursor", &next])
            .fails(4, "sorted by last, not by cost");
        for (args, wanted) in [
            (["runs", "list", "--sort", "size"], "invalid value 'size'"),
            (["runs", "list", "--limit", "0"], "--limit"),
        ] {
            let ran = sb.run(&args);
            assert_eq!(ran.code, 2, "{}", ran.stderr);
            assert!(ran.stderr.contains(wanted), "{}", ran.stderr);
        }
        let none = sb
            .run(&["runs", "list", "--project", "no-such-project"])
            .ok();
        assert_eq!(none.stdout, "no runs match\n");
    }
}

// issue 17, item 1: `runs delete ID --yes` removes a run whole, for a secret imported by mistake.
#[test]
fn runs_delete_removes_a_run_and_its_subagents_after_yes() {
    let Some(corpus) = corpus() else { return };
    for sb in Sandbox::each() {
        let orchestrator = corpus.join(ORCHESTRATOR).display().to_string();
        let other = corpus
            .join("claude-code-jsonl/marot-spotter__short.jsonl")
            .display()
            .to_string();
        let imported = sb
            .run(&["--json", "import", &orchestrator, &other])
            .ok()
            .json();
        let top = imported["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["source"] == orchestrator.as_str() && !r["subagent"].as_bool().unwrap())
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let before = list(&sb, &["--all"]);
        assert_eq!(before["total"], 7);
        let kept: Vec<String> = ids(&before)
            .into_iter()
            .filter(|id| {
                let r = &before["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["id"] == id.as_str())
                    .unwrap();
                r["id"] != top.as_str() && r["parent_run"] != top.as_str()
            })
            .collect();
        assert_eq!(kept.len(), 1);
        let kept_history = sb.run(&["--json", "history", &kept[0]]).ok().stdout;
        let usage_before = sb.run(&["report", "usage", "daily", "--json"]).ok().json();

        // Without --yes: refused, saying what would go; nothing deleted.
        sb.run(&["runs", "delete", &top])
            .fails(2, "pass --yes")
            .stderr
            .contains("and its 5 subagent runs")
            .then_some(())
            .expect("the refusal counts the subagent runs");
        assert_eq!(list(&sb, &["--all"])["total"], 7);
        // An unknown run: not found, exit 1, with or without --yes.
        sb.run(&["runs", "delete", "no-such-run", "--yes"])
            .fails(1, "run \"no-such-run\" not found");
        sb.run(&["runs", "delete", "no-such-run"])
            .fails(1, "run \"no-such-run\" not found");
        sb.run(&["runs", "delete", "bad id!", "--yes"])
            .fails(4, "run id");
        // Another tenant cannot reach it.
        sb.run(&["--tenant", "other", "runs", "delete", &top, "--yes"])
            .fails(1, "not found");

        let deleted = sb
            .run(&["--json", "runs", "delete", &top, "--yes"])
            .ok()
            .json();
        assert_eq!(deleted["deleted"], top.as_str());
        assert_eq!(deleted["subagents"].as_array().unwrap().len(), 5);
        assert!(deleted["messages"].as_u64().unwrap() > 100, "{deleted}");
        let after = list(&sb, &["--all"]);
        assert_eq!(ids(&after), kept);
        sb.run(&["runs", "show", &top]).fails(1, "not found");
        for child in deleted["subagents"].as_array().unwrap() {
            sb.run(&["history", child.as_str().unwrap()])
                .fails(1, "not found");
        }
        // The other run is as it was, and the deleted session's usage is gone from reports.
        assert_eq!(
            sb.run(&["--json", "history", &kept[0]]).ok().stdout,
            kept_history
        );
        let usage_after = sb.run(&["report", "usage", "daily", "--json"]).ok().json();
        assert!(
            usage_after["totals"]["outputTokens"].as_u64()
                < usage_before["totals"]["outputTokens"].as_u64(),
            "{usage_after}"
        );
        // Deleted for good: importing the file again, with or without --reimport, stores
        // nothing and names the deleted runs; the plain report says how to bring them back.
        for flags in [&[][..], &["--reimport"][..]] {
            let mut args = vec!["--json", "import"];
            args.extend_from_slice(flags);
            args.push(&orchestrator);
            let again = sb.run(&args).ok().json();
            let runs = again["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 6, "{again}");
            assert!(runs.iter().all(|r| r["status"] == "deleted"), "{again}");
            assert!(runs.iter().any(|r| r["id"] == top.as_str()), "{again}");
            assert_eq!(again["totals"]["deleted"], 6);
            assert_eq!(again["totals"]["messages"], 0);
        }
        let said = sb.run(&["import", &orchestrator]).ok().stdout;
        assert!(
            said.contains(&format!("its run {top} was deleted; nothing stored")),
            "{said}"
        );
        assert!(said.contains("6 sources whose run was deleted"), "{said}");
        assert_eq!(list(&sb, &["--all"])["total"], 1);
        // --restore imports them again, as new runs; --restore and --as-new conflict.
        let conflict = sb.run(&["import", "--restore", "--as-new", &orchestrator]);
        assert_eq!(conflict.code, 2, "{}", conflict.stderr);
        assert!(
            conflict.stderr.contains("'--as-new'"),
            "{}",
            conflict.stderr
        );
        let again = sb
            .run(&["--json", "import", "--restore", &orchestrator])
            .ok()
            .json();
        let runs = again["runs"].as_array().unwrap();
        assert!(runs.iter().all(|r| r["status"] == "created"), "{again}");
        assert!(runs.iter().all(|r| r["id"] != top.as_str()), "{again}");
        assert_eq!(list(&sb, &["--all"])["total"], 7);
        // The table form says what went.
        let said = sb.run(&["runs", "delete", &kept[0], "--yes"]).ok().stdout;
        assert!(
            said.starts_with(&format!("deleted run {} (", kept[0])),
            "{said}"
        );
    }
}
