//! `baton ops`: the ledger through the command line, its conflicts and their exit codes, and a
//! chaos test with real worker processes killed and paused past their leases.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Sandbox;

const HASH_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const HASH_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn begin(sb: &Sandbox, key: &str, hash: &str, owner: &str, lease: &str) -> crate::support::Ran {
    sb.run(&[
        "--json",
        "ops",
        "begin",
        key,
        "--request-hash",
        hash,
        "--owner",
        owner,
        "--lease",
        lease,
    ])
}

#[test]
fn begin_complete_and_the_conflicts_with_their_codes() {
    let sb = Sandbox::new();
    let first = begin(&sb, "charge-1", HASH_A, "w1", "30s").ok().json();
    assert_eq!(
        (first["outcome"].as_str(), first["fence"].as_u64()),
        (Some("acquired"), Some(1))
    );
    assert!(
        first["downstream_key"]
            .as_str()
            .unwrap()
            .starts_with("baton-")
    );

    // Another worker while the lease is live: in progress, exit 3, code in_progress.
    let busy =
        begin(&sb, "charge-1", HASH_A, "w2", "30s").fails(3, "is in progress: w1 holds fence 1");
    assert_eq!(busy.json()["error"]["code"], "in_progress");
    // The same key with another request: mismatch.
    let other = begin(&sb, "charge-1", HASH_B, "w2", "30s").fails(3, "use a new idempotency key");
    assert_eq!(other.json()["error"]["code"], "mismatch");
    // A wrong fence cannot publish.
    let late = sb
        .run(&[
            "--json", "ops", "complete", "charge-1", "--fence", "2", "--result", "{}",
        ])
        .fails(3, "fenced out: fence 2 is not the current one");
    assert_eq!(late.json()["error"]["code"], "fenced_out");
    sb.run(&[
        "ops",
        "heartbeat",
        "charge-1",
        "--fence",
        "1",
        "--lease",
        "30s",
    ])
    .ok();
    let done = sb
        .run(&[
            "--json",
            "ops",
            "complete",
            "charge-1",
            "--fence",
            "1",
            "--result",
            r#"{"id":"ch_9"}"#,
            "--paid",
        ])
        .ok()
        .json();
    assert_eq!(
        (done["status"].as_str(), done["result"]["id"].as_str()),
        (Some("completed"), Some("ch_9"))
    );
    // Begin again: the stored result, no execution.
    let again = begin(&sb, "charge-1", HASH_A, "w3", "30s").ok().json();
    assert_eq!(
        (again["outcome"].as_str(), again["result"]["id"].as_str()),
        (Some("completed"), Some("ch_9"))
    );
    let shown = sb.run(&["--json", "ops", "show", "charge-1"]).ok().json();
    assert_eq!(shown["attempts"].as_array().unwrap().len(), 1);
    assert_eq!(shown["attempts"][0]["paid"], true);
    let text = sb.run(&["ops", "show", "charge-1"]).ok().stdout;
    assert!(
        text.contains("attempt fence 1 by w1") && text.contains("paid call made"),
        "{text}"
    );

    // A non-retryable failure is answered, a retryable one taken over.
    begin(&sb, "b", HASH_A, "w1", "30s").ok();
    sb.run(&[
        "ops",
        "fail",
        "b",
        "--fence",
        "1",
        "--error",
        "HTTP 503",
        "--retryable",
    ])
    .ok();
    let retried = begin(&sb, "b", HASH_A, "w2", "30s").ok().json();
    assert_eq!(
        (retried["outcome"].as_str(), retried["fence"].as_u64()),
        (Some("took_over"), Some(2))
    );
    sb.run(&[
        "ops",
        "fail",
        "b",
        "--fence",
        "2",
        "--error",
        "card declined",
    ])
    .ok();
    let failed = begin(&sb, "b", HASH_A, "w3", "30s")
        .fails(3, "failed and may not be retried: card declined");
    assert_eq!(failed.json()["error"]["code"], "failed");

    let listed = sb
        .run(&["--json", "ops", "list", "--status", "completed"])
        .ok()
        .json();
    assert_eq!(listed["operations"].as_array().unwrap().len(), 1);
    assert_eq!(sb.run(&["--json", "ops", "prune"]).ok().json()["pruned"], 0);
}

#[test]
fn bad_inputs_exit_4_and_write_nothing() {
    let sb = Sandbox::new();
    begin(&sb, "k", "not-hex", "w", "30s").fails(4, "--request-hash");
    begin(&sb, "k", HASH_A, "w", "0s").fails(4, "a lease must be at least 1 ms");
    begin(&sb, "", HASH_A, "w", "30s").fails(4, "idempotency key");
    sb.run(&["ops", "list", "--status", "done"])
        .fails(4, "--status \"done\"");
    begin(&sb, "k", HASH_A, "w", "30s").ok();
    sb.run(&[
        "ops",
        "complete",
        "k",
        "--fence",
        "1",
        "--result",
        "{not json",
    ])
    .fails(4, "--result is not JSON");
    sb.run(&["ops", "heartbeat", "nope", "--fence", "1", "--lease", "1s"])
        .fails(1, "operation \"nope\" not found");
    let ops = sb.run(&["--json", "ops", "list"]).ok().json();
    assert_eq!(ops["operations"].as_array().unwrap().len(), 1);
    assert_eq!(ops["operations"][0]["status"], "running");
}

/// The store the workers use: on PostgreSQL, with small pools, so twenty processes fit the
/// server's connections beside the other tests.
fn worker_db(sb: &Sandbox) -> String {
    match sb.db_arg() {
        pg if pg.starts_with("postgres") => format!("{pg}&pool_size=2"),
        file => file.to_owned(),
    }
}

fn worker(sb: &Sandbox, key: &str, owner: &str, effects: &std::path::Path) -> Child {
    worker_command(sb, key, owner, effects)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn worker_command(
    sb: &Sandbox,
    key: &str,
    owner: &str,
    effects: &std::path::Path,
) -> std::process::Command {
    let script = format!(
        "echo \"$BATON_OP_KEY $BATON_FENCE\" >> {}; sleep 1.5; printf '{{\"key\":\"%s\",\"fence\":%s}}' \"$BATON_OP_KEY\" \"$BATON_FENCE\"",
        effects.display()
    );
    crate::support::command(
        worker_db(sb),
        &[
            "--json", "ops", "run", key, "--owner", owner, "--lease", "1s", "--paid", "--", "sh",
            "-c", &script,
        ],
    )
}

/// A recovery worker, killed if it has not finished in 30 s, so a bug that blocks it fails
/// the test instead of hanging it.
fn rescuer(sb: &Sandbox, key: &str, owner: &str, effects: &std::path::Path) -> Child {
    let inner = worker_command(sb, key, owner, effects);
    let mut cmd = std::process::Command::new("timeout");
    cmd.arg("30")
        .arg(inner.get_program())
        .args(inner.get_args());
    for (name, value) in inner.get_envs() {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn chaos_workers_killed_and_paused_past_their_lease_publish_exactly_once_on_sqlite() {
    chaos(&Sandbox::new());
}

#[test]
fn chaos_workers_killed_and_paused_past_their_lease_publish_exactly_once_on_postgres() {
    chaos(&Sandbox::postgres());
}

fn chaos(sb: &Sandbox) {
    let effects = sb.dir.path().join("effects.log");
    let keys: Vec<String> = (0..10).map(|i| format!("op-{i}")).collect();
    // Two workers race for every operation.
    let mut first: BTreeMap<String, Vec<Child>> = BTreeMap::new();
    for key in &keys {
        for w in 0..2 {
            first.entry(key.clone()).or_default().push(worker(
                sb,
                key,
                &format!("{key}-w{w}"),
                &effects,
            ));
        }
    }
    // Strike while the chosen operations are mid-work: begun (running) and not yet done (the
    // work takes 1.5 s).
    // On a loaded machine one may already be done when it is seen: it is then not struck
    // mid-work, and only the invariants every operation keeps are checked on it.
    let started = Instant::now();
    let mut mid_work = std::collections::BTreeSet::new();
    for key in ["op-0", "op-1", "op-2", "op-3"] {
        loop {
            let shown = sb.run(&["--json", "ops", "show", key]);
            let status = if shown.code == 0 {
                shown.json()["status"].clone()
            } else {
                Value::Null
            };
            if status == "running" {
                mid_work.insert(key.to_owned());
                break;
            }
            if status == "completed" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{key} never began"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // op-0, op-1: SIGKILL every worker mid-operation. op-2, op-3: SIGSTOP them past the lease.
    let mut paused = Vec::new();
    for (key, children) in &mut first {
        match key.as_str() {
            "op-0" | "op-1" => children.iter().for_each(|c| signal(c, "-KILL")),
            "op-2" | "op-3" => {
                children.iter().for_each(|c| signal(c, "-STOP"));
            }
            _ => {}
        }
    }
    for key in ["op-2", "op-3"] {
        paused.extend(first.remove(key).unwrap());
    }
    std::thread::sleep(Duration::from_millis(1_500));
    // Recovery workers, until every operation is completed.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    loop {
        let pending: Vec<&String> = keys
            .iter()
            .filter(|k| {
                // An operation a killed worker never got to begin does not exist yet.
                let shown = sb.run(&["--json", "ops", "show", k]);
                shown.code != 0 || shown.json()["status"] != "completed"
            })
            .collect();
        if pending.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "not completed: {pending:?}");
        let rescuers: Vec<Child> = pending
            .iter()
            .map(|k| rescuer(sb, k, &format!("{k}-rescue{round}"), &effects))
            .collect();
        for r in rescuers {
            r.wait_with_output().unwrap();
        }
        round += 1;
    }
    // The paused workers wake: their late completions are fenced out (exit 3).
    for c in &paused {
        signal(c, "-CONT");
    }
    for c in paused {
        let out = crate::support::ran(c.wait_with_output().unwrap());
        match out.code {
            // It was paused before it began and woke to the recorded result (nothing ran), or,
            // on a loaded machine, it had finished before the pause (the invariants below
            // check that its result is the one published by the final fence).
            0 => {
                let v: Value = serde_json::from_str(&out.stdout).unwrap();
                assert!(
                    v["outcome"] == "completed" || !mid_work.contains(v["key"].as_str().unwrap()),
                    "{}",
                    out.stdout
                );
            }
            // Fenced out, or it lost the race to begin.
            3 => assert!(
                out.stderr.contains("fenced out") || out.stderr.contains("in progress"),
                "{}",
                out.stderr
            ),
            // PostgreSQL ended its session, idle inside a transaction while it was paused
            // (`idle_in_transaction_session_timeout`): its next call failed, publishing nothing.
            1 => assert!(out.stderr.contains("connection closed"), "{}", out.stderr),
            code => panic!("a paused worker exited {code}: {}", out.stderr),
        }
    }
    for (_, children) in first {
        for c in children {
            let _ = c.wait_with_output();
        }
    }

    let executions = std::fs::read_to_string(&effects).unwrap();
    for key in &keys {
        let shown: Value = sb.run(&["--json", "ops", "show", key]).ok().json();
        assert_eq!(shown["status"], "completed", "{shown}");
        let fence = shown["fence"].as_u64().unwrap();
        // The published result came from the holder of the final fence.
        assert_eq!(shown["result"]["fence"].as_u64(), Some(fence), "{shown}");
        let attempts = shown["attempts"].as_array().unwrap();
        let completed: Vec<&Value> = attempts
            .iter()
            .filter(|a| a["outcome"] == "completed")
            .collect();
        assert_eq!(completed.len(), 1, "completed exactly once: {shown}");
        assert_eq!(completed[0]["fence"].as_u64(), Some(fence));
        // Every execution the side-effect log saw has its attempt, with that fence.
        for line in executions
            .lines()
            .filter(|l| l.split(' ').next() == Some(key.as_str()))
        {
            let f: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
            assert!(
                attempts.iter().any(|a| a["fence"].as_u64() == Some(f)),
                "execution {line} has no attempt: {shown}"
            );
        }
        if !mid_work.contains(key.as_str()) {
            continue;
        }
        if (key == "op-2" || key == "op-3")
            && attempts[0]["owner"]
                .as_str()
                .is_some_and(|o| !o.contains("rescue"))
        {
            assert!(fence >= 2, "{shown}");
            let late = &attempts[0];
            assert_eq!(late["outcome"], "fenced_out", "{shown}");
            assert!(
                late["result"].is_object(),
                "its late result is kept for audit: {shown}"
            );
        }
        if (key == "op-0" || key == "op-1")
            && attempts[0]["owner"]
                .as_str()
                .is_some_and(|o| !o.contains("rescue"))
        {
            assert!(
                fence >= 2 && attempts[0]["outcome"] == "lease_lost",
                "{shown}"
            );
        }
    }
}
