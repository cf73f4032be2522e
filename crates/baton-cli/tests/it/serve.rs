//! `baton keys` and `baton serve` as processes: a key is shown once and stored only as a hash,
//! the server answers over a real socket, logs JSON lines without keys, and on SIGTERM lets a
//! request in flight finish before it exits.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use crate::support::{Sandbox, create_key, http, serve, terminate, wait};

#[test]
fn keys_are_shown_once_stored_as_hashes_and_revoked() {
    let sb = Sandbox::new();
    let key = create_key(&sb, "acme");
    let secret = key.rsplit('_').next().unwrap().to_owned();
    let id = key.split('_').nth(1).unwrap().to_owned();
    let listed = sb.run(&["--tenant", "acme", "keys", "list"]).ok();
    assert!(
        listed.stdout.contains(&id) && listed.stdout.contains("live"),
        "{}",
        listed.stdout
    );
    assert!(!listed.stdout.contains(&secret));
    let json = sb.run(&["--json", "keys", "list", "--all"]).ok().json();
    assert_eq!(json["keys"][0]["tenant"], "acme");
    assert!(!json.to_string().contains(&secret));
    // Nothing of the secret is in the database file.
    let bytes = std::fs::read(sb.db()).unwrap();
    let wal = std::fs::read(sb.db().with_extension("db-wal")).unwrap_or_default();
    for file in [&bytes, &wal] {
        assert!(!file.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }
    sb.run(&["keys", "revoke", &id]).ok();
    sb.run(&["keys", "revoke", &id]).fails(1, "no live key");
    assert!(
        sb.run(&["keys", "list", "--all"])
            .ok()
            .stdout
            .contains("revoked")
    );
    assert_eq!(
        sb.run(&["keys", "revoke"]).code,
        2,
        "revoke needs an id or --all-of-tenant"
    );
}

#[test]
fn serve_answers_over_a_socket_logs_json_and_stops_on_sigterm() {
    for sb in Sandbox::each() {
        let key = create_key(&sb, "acme");
        let mut served = serve(&sb, &[]);
        let auth = format!("Bearer {key}");
        let (status, body) = http(
            &served.addr,
            "POST",
            "/v1/runs",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            r#"{"id":"r1","goal":"ship"}"#,
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = http(&served.addr, "GET", "/v1/runs/r1", &[], "");
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("urn:baton:problem:unauthorized"));
        sb.run(&["--tenant", "acme", "keys", "revoke", "--all-of-tenant"])
            .ok();
        let (status, _) = http(
            &served.addr,
            "GET",
            "/v1/runs/r1",
            &[("Authorization", &auth)],
            "",
        );
        assert_eq!(status, 401, "a revoked tenant's key still worked");
        terminate(&mut served);
        let (code, out, err) = wait(served);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("stopped"), "{out}");
        let mut lines = 0;
        for line in err.lines() {
            let parsed: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
            assert!(parsed["level"].is_string(), "{line}");
            lines += 1;
        }
        assert!(lines >= 3, "{err}");
        assert!(err.contains("request_id"), "{err}");
        assert!(!err.contains(&key[3..]), "a key in the log");
    }
}

/// A mock OpenAI upstream that answers every request after `delay`, once per connection.
pub fn slow_upstream(delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                std::thread::sleep(delay);
                let reply = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"mock-gpt","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"slow hello"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    addr
}

#[test]
fn sigterm_lets_a_gateway_request_in_flight_finish() {
    let sb = Sandbox::new();
    let upstream = slow_upstream(Duration::from_millis(1500));
    let mut served = serve(
        &sb,
        &[
            "--upstream-openai",
            &format!("http://{upstream}/v1"),
            "--gateway-tenant",
            "acme",
        ],
    );
    let addr = served.addr.clone();
    let in_flight = std::thread::spawn(move || {
        http(
            &addr,
            "POST",
            "/v1/chat/completions",
            &[
                ("Authorization", "Bearer sk-caller-own-key"),
                ("Content-Type", "application/json"),
            ],
            r#"{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}"#,
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    terminate(&mut served);
    let (status, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("slow hello"), "{body}");
    let (code, _, err) = wait(served);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("sk-caller-own-key"),
        "the provider key was logged"
    );
    // The answer was stored whole before the server stopped: the call log has it.
    let log = sb
        .run(&["--tenant", "acme", "--json", "report", "duplicates"])
        .ok()
        .json();
    assert!(log.to_string().contains("openai.chat_completions"), "{log}");
}
