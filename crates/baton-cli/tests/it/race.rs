//! Many `baton` processes, each with its own connections, race on one run: installers on one
//! base (exactly one wins, issue 2 item 8) and appenders beside them (seqs stay 1..N with no
//! gap or duplicate and every message is stored once, issue 3). On SQLite and on PostgreSQL.

use std::io::Write;
use std::process::{Child, Stdio};

use crate::support::{Sandbox, command, ran};

const INSTALLERS: usize = 8;
const APPENDERS: usize = 8;
const BATCH: usize = 25;

#[test]
fn processes_racing_on_one_run_keep_one_winner_and_every_message() {
    for sb in Sandbox::each() {
        race_on(&sb);
    }
}

fn spawn(sb: &Sandbox, args: &[&str], stdin: Option<String>) -> Child {
    let mut child = command(sb.db_arg(), args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(body) = stdin {
        pipe.write_all(body.as_bytes()).unwrap();
    }
    drop(pipe);
    child
}

fn race_on(sb: &Sandbox) {
    sb.run(&["runs", "create", "--id", "race"]).ok();
    let lines: String = (1..=20)
        .map(|i| format!("{{\"role\":\"user\",\"content\":\"m{i}\"}}\n"))
        .collect();
    sb.run_with_stdin(&["append", "race"], &lines).ok();
    let first = sb.file("first.json", "[]");
    let base = sb
        .run(&[
            "summary",
            "install",
            "race",
            "--base",
            "none",
            "--cut",
            "1",
            "--file",
            first.to_str().unwrap(),
        ])
        .ok()
        .stdout
        .trim()
        .to_owned();

    let mut installers = Vec::new();
    for i in 0..INSTALLERS {
        let candidate = sb.file(
            &format!("c{i}.json"),
            &format!(
                r#"[{{"kind":"note","text":"contender {i}","source_seq":{}}}]"#,
                i + 1
            ),
        );
        let cut = (i + 2).to_string();
        let args = [
            "summary",
            "install",
            "race",
            "--base",
            &base,
            "--cut",
            &cut,
            "--file",
            candidate.to_str().unwrap(),
        ];
        installers.push(spawn(sb, &args, None));
    }
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|w| {
            let body: String = (0..BATCH)
                .map(|m| format!("{{\"role\":\"user\",\"content\":\"w{w} m{m}\"}}\n"))
                .collect();
            spawn(sb, &["append", "race"], Some(body))
        })
        .collect();

    let outcomes: Vec<_> = installers
        .into_iter()
        .map(|c| ran(c.wait_with_output().unwrap()))
        .collect();
    for a in appenders {
        ran(a.wait_with_output().unwrap()).ok();
    }
    let winners = outcomes.iter().filter(|o| o.code == 0).count();
    let seen: Vec<_> = outcomes
        .iter()
        .map(|o| (o.code, o.stderr.clone()))
        .collect();
    assert_eq!(winners, 1, "{}: exactly one winner: {seen:?}", sb.db_arg());
    for loser in outcomes.iter().filter(|o| o.code != 0) {
        assert_eq!(loser.code, 3, "losers exit 3: {}", loser.stderr);
        assert!(loser.stderr.contains("stale base"), "{}", loser.stderr);
    }

    let history = sb.run(&["--json", "history", "race"]).ok().json();
    let messages = history["messages"].as_array().unwrap();
    let seqs: Vec<_> = messages
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    let n = (20 + APPENDERS * BATCH) as u64;
    assert_eq!(
        seqs,
        (1..=n).collect::<Vec<_>>(),
        "no history row lost, duplicated or skipped"
    );
    let mut texts: Vec<_> = messages
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    texts.sort();
    texts.dedup();
    assert_eq!(
        texts.len() as u64,
        n,
        "every appended message is present exactly once"
    );
    // Each batch landed contiguously: one transaction, one run of seqs.
    for w in 0..APPENDERS {
        let mine: Vec<_> = messages
            .iter()
            .filter(|m| {
                m["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("w{w} "))
            })
            .map(|m| m["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(mine.len(), BATCH);
        assert_eq!(
            mine[BATCH - 1] - mine[0],
            (BATCH - 1) as u64,
            "batch of writer {w} is contiguous"
        );
    }
    let summaries = sb.run(&["--json", "summary", "list", "race"]).ok().json();
    assert_eq!(
        summaries["summaries"].as_array().unwrap().len(),
        2,
        "losers left no rows"
    );
}
