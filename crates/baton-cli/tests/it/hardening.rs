//! Issue 20: the CLI's defects found by a newcomer's trial and an attack on the service, each
//! pinned by a test that failed before its fix (the items' numbers are the issue's).

use crate::support::Sandbox;

/// Items 4 and 7 from the command line: an id past the databases' range is invalid input
/// (exit 4), on both backends; `.` and `..` are no run id and no operation key.
#[test]
fn r20_4_7_out_of_range_and_dot_ids_are_invalid_input() {
    for sb in Sandbox::each() {
        sb.run(&["runs", "create", "--id", "r"]).ok();
        sb.run_with_stdin(
            &["append", "r"],
            "{\"role\":\"user\",\"content\":\"one\"}\n{\"role\":\"assistant\",\"content\":\"two\"}\n",
        )
        .ok();
        let candidate = sb.file("c.json", "[]");
        let candidate = candidate.to_str().unwrap();
        let id = sb
            .run(&[
                "--json", "summary", "install", "r", "--base", "none", "--cut", "1", "--file",
                candidate,
            ])
            .ok()
            .json()["id"]
            .as_u64()
            .unwrap()
            .to_string();
        let big = (i64::MAX as u64 + 1).to_string();
        sb.run(&["summary", "activate", "r", &id, "--base", &big])
            .fails(4, &format!("{big} is out of range"));
        sb.run(&["summary", "activate", "r", &big, "--base", &id])
            .fails(4, &big);
        sb.run(&[
            "summary", "install", "r", "--base", &big, "--cut", "2", "--file", candidate,
        ])
        .fails(4, &big);
        for dots in [".", ".."] {
            sb.run(&["runs", "create", "--id", dots])
                .fails(4, "other than '.' and '..'");
            sb.run(&[
                "ops",
                "begin",
                dots,
                "--request-hash",
                &"a".repeat(64),
                "--owner",
                "w",
                "--lease",
                "10s",
            ])
            .fails(4, "other than '.' and '..'");
        }
    }
}

/// Items 11 and 18: `baton serve` configured by environment variables alone (`BATON_ADDR`,
/// `BATON_LOG_FORMAT`, `BATON_GATEWAY_TENANT`), and its JSON log lines carry each request's
/// latency as a number, its route, tenant, cache outcome and model.
#[test]
fn r20_11_18_serve_from_the_environment_logs_request_fields() {
    use std::io::BufRead as _;

    use crate::serve::{Served, create_key, http, slow_upstream, terminate, wait};

    let sb = Sandbox::new();
    let key = create_key(&sb, "acme");
    let upstream = slow_upstream(std::time::Duration::from_millis(10));
    let mut child = sb
        .command(&["serve"])
        .env("BATON_ADDR", "127.0.0.1:0")
        .env("BATON_LOG_FORMAT", "json")
        .env("BATON_GATEWAY_TENANT", "acme")
        .env("BATON_UPSTREAM_OPENAI", format!("http://{upstream}/v1"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .to_owned();
    let mut served = Served { child, addr };
    let (status, body) = http(
        &served.addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Authorization", "Bearer sk-caller-own-key"),
            ("Content-Type", "application/json"),
        ],
        r#"{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let auth = format!("Bearer {key}");
    let (status, body) = http(
        &served.addr,
        "GET",
        "/v1/runs",
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    terminate(&mut served);
    let (code, _, err) = wait(served);
    assert_eq!(code, 0, "{err}");
    let finished: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["message"] == "finished processing request")
        .collect();
    let gateway = finished
        .iter()
        .find(|l| l["span"]["route"] == "/v1/chat/completions")
        .unwrap_or_else(|| panic!("no gateway line in {err}"));
    assert!(gateway["latency_ms"].is_f64(), "{gateway}");
    assert_eq!(gateway["status"], 200, "{gateway}");
    assert_eq!(gateway["span"]["tenant"], "acme", "{gateway}");
    assert_eq!(gateway["span"]["cache"], "miss", "{gateway}");
    assert_eq!(gateway["span"]["model"], "mock-gpt", "{gateway}");
    let api = finished
        .iter()
        .find(|l| l["span"]["route"] == "/v1/runs")
        .unwrap_or_else(|| panic!("no API line in {err}"));
    assert!(api["latency_ms"].is_f64(), "{api}");
    assert_eq!(api["span"]["tenant"], "acme", "{api}");
    assert!(
        !err.contains("sk-caller-own-key"),
        "a provider key in the log"
    );
}
