//! Many `baton` processes install summaries on one base at once: exactly one wins (issue 2,
//! item 8), and appends racing beside them lose nothing.

use std::process::Stdio;

use crate::support::{Sandbox, command, ran};

#[test]
fn many_processes_installing_on_one_base_have_exactly_one_winner() {
    let sb = Sandbox::new();
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

    let contenders = 12;
    let children: Vec<_> = (0..contenders)
        .map(|i| {
            let candidate = sb.file(
                &format!("c{i}.json"),
                &format!(
                    r#"[{{"kind":"note","text":"contender {i}","source_seq":{}}}]"#,
                    i + 1
                ),
            );
            let cut = (i + 2).to_string();
            command(
                &sb.db(),
                &[
                    "summary",
                    "install",
                    "race",
                    "--base",
                    &base,
                    "--cut",
                    &cut,
                    "--file",
                    candidate.to_str().unwrap(),
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    // Appenders race beside the installers.
    let appenders: Vec<_> = (0..4)
        .map(|i| {
            let mut child = command(&sb.db(), &["append", "race"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            let body = format!("{{\"role\":\"user\",\"content\":\"late {i}\"}}\n");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.as_bytes())
                .unwrap();
            child
        })
        .collect();

    let outcomes: Vec<_> = children
        .into_iter()
        .map(|c| ran(c.wait_with_output().unwrap()))
        .collect();
    for a in appenders {
        ran(a.wait_with_output().unwrap()).ok();
    }
    let winners = outcomes.iter().filter(|o| o.code == 0).count();
    assert_eq!(
        winners,
        1,
        "exactly one winner: {:?}",
        outcomes
            .iter()
            .map(|o| (o.code, &o.stderr))
            .collect::<Vec<_>>()
    );
    for loser in outcomes.iter().filter(|o| o.code != 0) {
        assert_eq!(loser.code, 3, "losers exit 3: {}", loser.stderr);
        assert!(loser.stderr.contains("stale base"), "{}", loser.stderr);
    }
    let history = sb.run(&["--json", "history", "race"]).ok().json();
    let seqs: Vec<_> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=24).collect::<Vec<_>>(),
        "no history row lost or duplicated"
    );
    let summaries = sb.run(&["--json", "summary", "list", "race"]).ok().json();
    assert_eq!(
        summaries["summaries"].as_array().unwrap().len(),
        2,
        "losers left no rows"
    );
}
