//! `baton report usage` through the real binary, on both backends: the usage records imports
//! store, counted once per response whatever files and imports brought them, against the
//! reports `baton-usage` makes from the same files read directly; a live session imported part
//! by part; bad options.
// issue 17: usage reports like ccusage's, without its double counting.

use std::path::PathBuf;

use baton_core::prices::PriceTable;
use baton_import::Format;
use baton_usage::{Entry, Options, Period, dedupe, root_session};
use serde_json::Value;

use crate::support::{Sandbox, age, corpus};

/// What the import should have kept: every response of every Claude Code and Codex file of
/// `dirs` read by `baton-import`, one record per response. A file changed lately counts whole
/// too: its last response, still streaming for all the importer knows, was paid for.
fn expected(dirs: &[(PathBuf, Format)]) -> Vec<Entry> {
    let mut out = Vec::new();
    for (dir, format) in dirs {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        paths.sort();
        for path in paths {
            out.extend(entries_of(&std::fs::read(path).unwrap(), *format));
        }
    }
    dedupe(out)
}

fn entries_of(bytes: &[u8], format: Format) -> Vec<Entry> {
    let mut out = Vec::new();
    for t in baton_import::parse(format, bytes).unwrap() {
        let session = root_session(t.source_session_id.as_deref().unwrap_or("")).to_owned();
        for u in &t.usage {
            out.push(Entry {
                record: u.record.clone(),
                session: session.clone(),
                project: t.project.clone(),
                agent: format.name().to_owned(),
            });
        }
    }
    out
}

fn report(sb: &Sandbox, args: &[&str]) -> Value {
    let mut all = vec!["--json", "report", "usage"];
    all.extend_from_slice(args);
    sb.run(&all).ok().json()
}

/// `got` equals `want`, costs (floats summed in another order) to 1e-9 of their size.
#[track_caller]
fn assert_same(got: &Value, want: &Value) {
    if let Some(why) = differs(got, want, "") {
        panic!("{why}\ngot:  {got}\nwant: {want}");
    }
}

fn differs(got: &Value, want: &Value, at: &str) -> Option<String> {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            ((a - b).abs() > 1e-9 * a.abs().max(b.abs()).max(1.0))
                .then(|| format!("{at}: {a} != {b}"))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| differs(x, y, &format!("{at}[{i}]"))),
        (Value::Object(a), Value::Object(b)) if a.len() == b.len() => {
            a.iter().find_map(|(k, x)| match b.get(k) {
                Some(y) => differs(x, y, &format!("{at}.{k}")),
                None => Some(format!("{at}.{k} missing")),
            })
        }
        (a, b) => (a != b).then(|| format!("{at}: {a} != {b}")),
    }
}

fn options() -> Options {
    Options::new(PriceTable::defaults())
}

#[test]
fn the_corpus_reports_match_the_files_read_directly_and_importing_again_counts_nothing_twice() {
    let Some(corpus) = corpus() else { return };
    let dirs = [
        (corpus.join("claude-code-jsonl"), Format::ClaudeCode),
        (corpus.join("codex-rollout-jsonl"), Format::Codex),
    ];
    let entries = expected(&dirs);
    assert!(entries.len() > 500, "{} responses", entries.len());
    let daily =
        serde_json::to_value(baton_usage::report(&entries, Period::Daily, &options())).unwrap();
    let monthly =
        serde_json::to_value(baton_usage::report(&entries, Period::Monthly, &options())).unwrap();
    let session = serde_json::to_value(baton_usage::sessions(&entries, &options())).unwrap();
    for sb in Sandbox::each() {
        for (dir, _) in &dirs {
            sb.run(&["import", "--quiet", "--reimport", dir.to_str().unwrap()])
                .ok();
        }
        assert_same(&report(&sb, &["daily"]), &daily);
        assert_same(&report(&sb, &["monthly"]), &monthly);
        assert_same(&report(&sb, &["session"]), &session);
        // Every file again, and the whole corpus (other formats too): nothing counted twice,
        // and the other formats' estimates stay out unless asked for.
        sb.run(&["import", "--quiet", "--reimport", corpus.to_str().unwrap()])
            .ok();
        assert_same(&report(&sb, &["daily"]), &daily);
        let with_estimates = report(&sb, &["daily", "--estimated"]);
        assert!(
            with_estimates["totals"]["totalTokens"].as_u64()
                > daily["totals"]["totalTokens"].as_u64()
        );
        // The text table has ccusage's columns and the same total.
        let table = sb.run(&["report", "usage", "daily"]).ok().stdout;
        for column in [
            "Date",
            "Models",
            "Input",
            "Output",
            "Cache Create",
            "Cache Read",
        ] {
            assert!(table.contains(column), "{column}: {table}");
        }
        let total = daily["totals"]["totalTokens"].as_u64().unwrap();
        assert!(table.contains(&thousands(total)), "{total}: {table}");
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn filters_order_and_breakdown_select_what_the_library_selects() {
    let Some(corpus) = corpus() else { return };
    let dir = corpus.join("claude-code-jsonl");
    let entries = expected(&[(dir.clone(), Format::ClaudeCode)]);
    let project = entries
        .iter()
        .find_map(|e| e.project.clone())
        .expect("a project");
    let mut days: Vec<String> = entries
        .iter()
        .filter_map(|e| e.record.at)
        .map(|t| t.to_string()[..10].to_owned())
        .collect();
    days.sort();
    days.dedup();
    let (since, until) = (&days[1], &days[days.len() - 2]);
    let mut options = options();
    options.project = Some(project.clone());
    options.since = Some(baton_usage::Day::parse(since).unwrap());
    options.until = Some(baton_usage::Day::parse(until).unwrap());
    options.order = baton_usage::Order::Desc;
    let want =
        serde_json::to_value(baton_usage::report(&entries, Period::Weekly, &options)).unwrap();
    assert!(!want["weekly"].as_array().unwrap().is_empty());
    let sb = Sandbox::new();
    sb.run(&["import", "--quiet", "--reimport", dir.to_str().unwrap()])
        .ok();
    let got = report(
        &sb,
        &[
            "weekly",
            "--project",
            &project,
            "--since",
            &since.replace('-', ""),
            "--until",
            until,
            "--order",
            "desc",
            "--breakdown",
        ],
    );
    assert_same(&got, &want);
    assert!(
        !got["weekly"][0]["modelBreakdowns"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let blocks = report(&sb, &["blocks"]);
    assert!(!blocks["blocks"].as_array().unwrap().is_empty());
}

/// A Claude Code session imported while it is written, at several points, ends as the run and
/// the usage one import of the finished file gives.
#[test]
fn a_live_session_imported_part_by_part_ends_as_one_import_of_the_whole() {
    let Some(corpus) = corpus() else { return };
    let full = corpus
        .join("claude-code-jsonl")
        .join("marot-spotter__ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl");
    let text = std::fs::read_to_string(&full).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for sb in Sandbox::each() {
        let live = sb.dir.path().join("live.jsonl");
        // The cut (after line 1005), and one inside line 1401 (a line still being
        // written).
        for (cut, half_line) in [(1005, false), (1400, true)] {
            let mut part: String = lines[..cut].concat();
            if half_line {
                part.push_str(&lines[cut][..lines[cut].len() / 2]);
            }
            std::fs::write(&live, &part).unwrap();
            let imported = sb
                .run(&["--json", "import", "--reimport", live.to_str().unwrap()])
                .ok()
                .json();
            // The response still streaming is held back from the run, not from the report:
            // what it cost so far is counted now, as ccusage counts it.
            assert!(
                imported["runs"][0]["still_being_written"].as_u64() > Some(0),
                "{imported}"
            );
            let so_far = dedupe(entries_of(part.as_bytes(), Format::ClaudeCode));
            let want = serde_json::to_value(baton_usage::sessions(&so_far, &options())).unwrap();
            assert_same(&report(&sb, &["session"]), &want);
        }
        // The session ends; an hour later the file is imported again.
        std::fs::write(&live, &text).unwrap();
        age(&live);
        let last = sb
            .run(&["--json", "import", "--reimport", live.to_str().unwrap()])
            .ok()
            .json();
        assert_eq!(last["runs"][0]["status"], "extended", "{last}");
        let run = last["runs"][0]["id"].as_str().unwrap().to_owned();

        let once = Sandbox::new();
        let copy = once.dir.path().join("whole.jsonl");
        std::fs::write(&copy, &text).unwrap();
        age(&copy);
        let one = once
            .run(&["--json", "import", copy.to_str().unwrap()])
            .ok()
            .json();
        let one_run = one["runs"][0]["id"].as_str().unwrap().to_owned();
        let history = |sb: &Sandbox, run: &str| {
            let messages = sb.messages(run);
            messages
                .iter()
                .map(|e| {
                    let (seq, role) = (e["seq"].clone(), e["role"].clone());
                    (seq, role, e["content"].clone(), e["tokens"].clone())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(history(&sb, &run), history(&once, &one_run));
        assert_same(&report(&sb, &["session"]), &report(&once, &["session"]));
        assert_same(&report(&sb, &["daily"]), &report(&once, &["daily"]));
    }
}

#[test]
fn bad_options_are_refused_naming_the_option() {
    let sb = Sandbox::new();
    sb.run(&["runs", "create"]).ok();
    sb.run(&["report", "usage", "daily", "--since", "2026-13-01"])
        .fails(4, "--since");
    sb.run(&["report", "usage", "daily", "--until", "yesterday"])
        .fails(4, "--until");
    sb.run(&[
        "report",
        "usage",
        "daily",
        "--since",
        "2026-02-02",
        "--until",
        "2026-02-01",
    ])
    .fails(4, "--until: 2026-02-01 is before since 2026-02-02");
    sb.run(&["report", "usage", "session", "--timezone", "Mars"])
        .fails(4, "--timezone");
    let prices = sb.file("prices.toml", "[models.x]\ninput = -1\n");
    sb.run(&[
        "report",
        "usage",
        "daily",
        "--prices",
        prices.to_str().unwrap(),
    ])
    .fails(4, "prices.toml");
    let hourly = sb.run(&["report", "usage", "hourly"]);
    assert_eq!(hourly.code, 2);
    assert!(
        hourly.stderr.contains("invalid value 'hourly'"),
        "{}",
        hourly.stderr
    );
    // An empty store reports nothing, not an error.
    let empty = report(&sb, &["daily"]);
    assert_eq!(empty["daily"], serde_json::json!([]));
    let missing = Sandbox::new();
    missing
        .run(&["report", "usage", "daily"])
        .fails(1, "no baton database");
}

/// A source edited since it was imported is refused, naming the way out; `--as-new` imports
/// it as a run of its own, and its usage is still counted once.
// issue 17: only a source that truly diverges is refused, and `--as-new` is offered.
#[test]
fn an_edited_source_is_refused_naming_as_new_which_imports_it_as_a_new_run() {
    let Some(corpus) = corpus() else { return };
    let text = std::fs::read_to_string(corpus.join("claude-code-jsonl/marot-spotter__short.jsonl"))
        .unwrap();
    assert!(text.contains("mix phx.server doesnt seem to start"));
    for sb in Sandbox::each() {
        let file = sb.dir.path().join("s.jsonl");
        std::fs::write(&file, &text).unwrap();
        age(&file);
        let path = file.to_str().unwrap();
        let first = sb.run(&["--json", "import", path]).ok().json();
        let run = first["runs"][0]["id"].as_str().unwrap().to_owned();
        let daily = report(&sb, &["daily"]);
        assert!(daily["totals"]["outputTokens"].as_u64().unwrap() > 0);
        // The first prompt edited.
        let edited = text.replace(
            "mix phx.server doesnt seem to start",
            "mix phx.server does start",
        );
        std::fs::write(&file, edited).unwrap();
        age(&file);
        let refused = sb.run(&["import", "--reimport", path]);
        assert_eq!(refused.code, 1, "{}", refused.stderr);
        assert!(
            refused.stderr.contains("edited or replaced since")
                && refused
                    .stderr
                    .contains("`baton import --as-new` imports it as a new run"),
            "{}",
            refused.stderr
        );
        // It names the first message that differs, with both sides (issue 17, item 1).
        let stderr = &refused.stderr;
        let named = stderr.find("message ").and_then(|at| {
            let rest = &stderr[at + "message ".len()..];
            rest.split_once(" differs (stored: ")
                .and_then(|(seq, _)| seq.parse::<u64>().ok())
        });
        let seq = named.unwrap_or_else(|| panic!("no message named: {stderr}"));
        // And the line of the file it is on: the line that holds the edited words.
        let line = text
            .lines()
            .position(|l| l.contains("mix phx.server doesnt seem to start"))
            .unwrap()
            + 1;
        assert!(
            stderr.contains(&format!("(message {seq} is on line {line} of the file)")),
            "line {line}: {stderr}"
        );
        assert!(
            stderr.contains("doesnt seem to start")
                && stderr.contains("source now: \"")
                && stderr.contains("does start"),
            "{stderr}"
        );
        let stored = sb
            .run(&[
                "--json",
                "history",
                &run,
                "--from",
                &seq.to_string(),
                "--to",
                &seq.to_string(),
            ])
            .ok();
        assert!(
            stored.stdout.contains("doesnt seem to start"),
            "{}",
            stored.stdout
        );
        // Nothing changed: the run, its history, the usage.
        let history = sb.run(&["--json", "history", &run]).ok().json();
        assert!(history.to_string().contains("doesnt seem to start"));
        assert_same(&report(&sb, &["daily"]), &daily);
        let again = sb.run(&["--json", "import", "--as-new", path]).ok().json();
        assert_eq!(again["runs"][0]["status"], "created");
        let new_run = again["runs"][0]["id"].as_str().unwrap();
        assert_ne!(new_run, run);
        let history = sb.run(&["--json", "history", new_run]).ok().json();
        assert!(history.to_string().contains("does start"));
        // The same responses: counted once.
        assert_same(&report(&sb, &["daily"]), &daily);
        let both = sb.run(&["import", "--as-new", "--reimport", path]);
        assert_eq!(both.code, 2);
        assert!(
            both.stderr
                .contains("'--as-new' cannot be used with '--reimport'")
        );
    }
}
