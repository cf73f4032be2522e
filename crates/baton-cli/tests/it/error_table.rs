//! One error table (issue 16, item 4): every variant of the store's `Error`, provoked for real
//! through the command line and through `baton serve`'s HTTP API, on both backends, exits with
//! the code and answers with the status of its kind. The kinds, codes and statuses are written
//! out here, not read from the code under test.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{
    Ran, Sandbox, command, create_key, http, install_first, pg_execute, pg_url, ran, serve,
    serve_on,
};

/// Each kind: its exit code and its HTTP status.
const KINDS: [(&str, i32, u16); 5] = [
    ("not_found", 1, 404),
    ("conflict", 3, 409),
    ("invalid", 4, 422),
    ("unavailable", 1, 503),
    ("internal", 1, 500),
];

/// Every variant of `baton_store::Error`, by its code (the variant's name in snake case), with
/// its kind.
const VARIANTS: [(&str, &str); 19] = [
    ("unknown_tenant", "not_found"),
    ("run_not_found", "not_found"),
    ("summary_not_found", "not_found"),
    ("seq_not_found", "not_found"),
    ("run_exists", "conflict"),
    ("run_not_active", "conflict"),
    ("import_rejected", "conflict"),
    ("not_a_baton_database", "invalid"),
    ("invalid_url", "invalid"),
    ("invalid_query", "invalid"),
    ("invalid_cache", "invalid"),
    ("invalid_ledger", "invalid"),
    ("invalid_key", "invalid"),
    ("invalid_text", "invalid"),
    ("unavailable", "unavailable"),
    ("schema_too_new", "internal"),
    ("corrupt", "internal"),
    ("invalid_id", "internal"),
    ("backend", "internal"),
];

/// Variants no command and no route can surface, and why. The walk checks that this list and
/// the provoked ones together are every variant.
const UNREACHABLE: [(&str, &str); 4] = [
    (
        "unknown_tenant",
        "only list_runs returns it, and `runs list` and GET /v1/runs answer an empty list",
    ),
    (
        "invalid_cache",
        "a zero TTL or lease: `baton call --ttl 0` and `baton serve --cache-ttl 0` refuse it first",
    ),
    (
        "invalid_key",
        "a random key id that collides, or no random source: neither can be arranged",
    ),
    (
        "import_rejected",
        "`baton import` reports it per file in its report (exit 1 for the batch); no route imports",
    ),
];

/// Variants that arise only when a store is opened: `baton serve` on such a store exits with
/// the code before it listens, so over HTTP too the command line's table answers.
const AT_OPEN: [&str; 4] = [
    "not_a_baton_database",
    "invalid_url",
    "schema_too_new",
    "unavailable",
];

fn kind_of(code: &str) -> &'static str {
    VARIANTS
        .iter()
        .find(|(c, _)| *c == code)
        .unwrap_or_else(|| panic!("{code} is not a store error variant"))
        .1
}

fn exit_of(kind: &str) -> i32 {
    KINDS.iter().find(|(k, ..)| *k == kind).unwrap().1
}

fn status_of(kind: &str) -> u16 {
    KINDS.iter().find(|(k, ..)| *k == kind).unwrap().2
}

/// What the walk saw: the variants provoked through each interface.
#[derive(Default)]
struct Walk {
    cli: BTreeSet<&'static str>,
    http: BTreeSet<&'static str>,
}

impl Walk {
    /// A command failed with `code`: its exit code is its kind's, and its `--json` object names
    /// the kind and the code.
    #[track_caller]
    fn cli(&mut self, code: &'static str, ran: Ran) {
        let kind = kind_of(code);
        assert_eq!(
            ran.code,
            exit_of(kind),
            "{code}: stdout {} stderr {}",
            ran.stdout,
            ran.stderr
        );
        let json = ran.json();
        assert_eq!(json["error"]["kind"], kind, "{code}: {json}");
        assert_eq!(json["error"]["code"], code, "{code}: {json}");
        assert!(ran.stderr.starts_with("baton: error: "), "{}", ran.stderr);
        self.cli.insert(code);
    }

    /// A request was answered for `code`: its status is its kind's.
    #[track_caller]
    fn http(&mut self, code: &'static str, (status, body): (u16, String)) {
        assert_eq!(status, status_of(kind_of(code)), "{code}: {body}");
        let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(problem["status"], status, "{code}: {body}");
        self.http.insert(code);
    }

    /// A store that fails at open: the command and `baton serve` both exit with its kind's code.
    #[track_caller]
    fn at_open(&mut self, code: &'static str, db: &str) {
        assert!(AT_OPEN.contains(&code), "{code} does not arise at open");
        self.cli(
            code,
            ran(command(db, &["--json", "history", "r"]).output().unwrap()),
        );
        let serve = ran(command(db, &["serve", "--addr", "127.0.0.1:0"])
            .output()
            .unwrap());
        assert_eq!(
            serve.code,
            exit_of(kind_of(code)),
            "{code}: {}",
            serve.stderr
        );
        assert!(!serve.stdout.contains("listening"), "{}", serve.stdout);
        self.http.insert(code);
    }
}

#[test]
fn every_store_error_has_the_exit_code_and_the_status_of_its_kind() {
    let listed: BTreeSet<_> = VARIANTS.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        listed,
        declared_variants(),
        "VARIANTS must list every store error"
    );
    for sb in Sandbox::each() {
        let walk = walk(&sb);
        let unreachable: BTreeSet<_> = UNREACHABLE.iter().map(|(c, _)| *c).collect();
        let postgres_only: BTreeSet<_> = ["unavailable", "invalid_url"].into();
        for (code, _) in VARIANTS {
            if unreachable.contains(code)
                || (sb.pg_schema().is_none() && postgres_only.contains(code))
            {
                assert!(!walk.cli.contains(code), "{code} was reached after all");
                continue;
            }
            assert!(
                walk.cli.contains(code),
                "{code} not walked through the command line"
            );
            assert!(
                walk.http.contains(code) || code == "invalid_ledger",
                "{code} not walked through HTTP"
            );
        }
    }
}

/// The variants `baton_store::Error` declares, read from its source: a new variant fails the
/// walk until it is listed (and provoked) here.
fn declared_variants() -> BTreeSet<&'static str> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../baton-store/src");
    let mut names = BTreeSet::new();
    let mut found = false;
    for entry in walk_rs(&dir) {
        let text = std::fs::read_to_string(&entry).unwrap();
        let Some(start) = text.find("pub enum Error {") else {
            continue;
        };
        found = true;
        let body = &text[start..];
        let end = body.find("\n}").unwrap();
        for line in body[..end].lines().skip(1) {
            let Some(name) = line.strip_prefix("    ") else {
                continue;
            };
            let ident: String = name
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if ident.starts_with(|c: char| c.is_ascii_uppercase()) {
                names.insert(&*snake(&ident).leak());
            }
        }
    }
    assert!(found, "no `pub enum Error` in baton-store");
    names
}

fn walk_rs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk_rs(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn snake(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    match out.as_str() {
        // The variant is `Import(ImportRejection)`; its code says what happened.
        "import" => "import_rejected".to_owned(),
        _ => out,
    }
}

/// The test server's URL with one more parameter.
fn pg_with(param: &str) -> String {
    let url = pg_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{param}")
}

const HASH: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn walk(sb: &Sandbox) -> Walk {
    let mut w = Walk::default();
    let postgres = sb.pg_schema().is_some();
    let two = "{\"role\":\"user\",\"content\":\"read the logs\"}\n{\"role\":\"assistant\",\"content\":\"reading\"}\n";
    sb.run(&["runs", "create", "--id", "r"]).ok();
    sb.run_with_stdin(&["append", "r"], two).ok();
    sb.run(&["runs", "create", "--id", "done"]).ok();
    sb.run(&["runs", "cancel", "done"]).ok();
    sb.run(&["runs", "create", "--id", "victim"]).ok();
    sb.run_with_stdin(&["append", "victim"], two).ok();
    let broken = install_first(
        sb,
        "victim",
        "2",
        r#"[{"kind":"note","text":"x","source_seq":1}]"#,
    );
    let key = create_key(sb, "default");
    let served = serve(sb, &[]);
    let bearer = format!("Bearer {key}");
    let auth = [
        ("authorization", bearer.as_str()),
        ("content-type", "application/json"),
    ];
    let get = |path: &str| http(&served.addr, "GET", path, &auth, "");
    let send = |method: &str, path: &str, body: &str| http(&served.addr, method, path, &auth, body);
    let cli = |args: &[&str]| {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        sb.run(&all)
    };

    // Not found.
    w.cli("run_not_found", cli(&["history", "nope"]));
    w.http("run_not_found", get("/v1/runs/nope"));
    w.cli("summary_not_found", cli(&["summary", "show", "999999"]));
    w.http("summary_not_found", get("/v1/summaries/999999"));
    w.cli("seq_not_found", cli(&["pin", "r", "9"]));
    w.http("seq_not_found", send("PUT", "/v1/runs/r/pins/9", ""));
    // A tenant that never stored anything has no runs: an empty list, not an error.
    assert_eq!(
        cli(&["--tenant", "ghost", "runs", "list"]).ok().json()["runs"],
        serde_json::json!([])
    );

    // Conflicts.
    w.cli("run_exists", cli(&["runs", "create", "--id", "r"]));
    w.http("run_exists", send("POST", "/v1/runs", r#"{"id":"r"}"#));
    w.cli(
        "run_not_active",
        sb.run_with_stdin(
            &["--json", "append", "done"],
            "{\"role\":\"user\",\"content\":\"more\"}\n",
        ),
    );
    w.http(
        "run_not_active",
        send(
            "POST",
            "/v1/runs/done/messages",
            r#"{"messages":[{"role":"user","content":"more"}]}"#,
        ),
    );

    // Invalid requests.
    w.cli("invalid_query", cli(&["recall", "r", "--grep", "!!!"]));
    w.http("invalid_query", get("/v1/runs/r/search?q=%21%21%21"));
    w.cli(
        "invalid_ledger",
        cli(&[
            "ops",
            "begin",
            "k",
            "--request-hash",
            HASH,
            "--owner",
            "w",
            "--lease",
            "0s",
        ]),
    );
    // Stored text with a NUL, which PostgreSQL cannot hold: refused on both backends.
    let rules = sb.file("rules-with-nul.md", "read\0only\n");
    w.cli(
        "invalid_text",
        cli(&[
            "runs",
            "create",
            "--id",
            "nul",
            "--rules",
            rules.to_str().unwrap(),
        ]),
    );
    w.http(
        "invalid_text",
        send("POST", "/v1/runs", r#"{"id":"nul","goal":"a\u0000b"}"#),
    );
    // Over HTTP the route checks a lease before the store does: a parameter it cannot use is
    // a 400, with no kind.
    let refused = send("POST", "/v1/operations", r#"{"request":1,"lease":0}"#);
    assert_eq!(refused.0, 400, "{}", refused.1);

    // Broken stores: a value no reader accepts, a table gone, an id no id may be.
    sb.execute_sql(&format!(
        "UPDATE summaries SET body = 'not json' WHERE id = {broken}"
    ));
    w.cli("corrupt", cli(&["summary", "show", &broken]));
    w.http("corrupt", get(&format!("/v1/summaries/{broken}")));
    sb.execute_sql("DROP TABLE pins");
    w.cli("backend", cli(&["pin", "r", "1"]));
    w.http("backend", send("PUT", "/v1/runs/r/pins/1", ""));
    sb.execute_sql("UPDATE runs SET id = 'no spaces allowed' WHERE id = 'victim'");
    w.cli("invalid_id", cli(&["runs", "list"]));
    w.http("invalid_id", get("/v1/runs"));
    drop(served);

    // Stores that fail when opened.
    let newer = if postgres {
        Sandbox::postgres()
    } else {
        Sandbox::new()
    };
    newer.run(&["runs", "create", "--id", "r"]).ok();
    if postgres {
        newer.execute_sql("INSERT INTO baton_schema (version, applied_at) VALUES (999, 0)");
        let foreign = format!("baton_cli_{}", uuid::Uuid::now_v7().simple());
        pg_execute(&format!(
            "CREATE SCHEMA {foreign}; CREATE TABLE {foreign}.notes (t TEXT)"
        ));
        w.at_open(
            "not_a_baton_database",
            &pg_with(&format!("schema={foreign}")),
        );
        pg_execute(&format!("DROP SCHEMA {foreign} CASCADE"));
        w.at_open("invalid_url", &pg_with("pool_size=0"));
        walk_unavailable(sb, &mut w);
    } else {
        newer.execute_sql("PRAGMA user_version = 999");
        let text = newer.file("notes.txt", &"not a database\n".repeat(100));
        w.at_open("not_a_baton_database", text.to_str().unwrap());
    }
    w.at_open("schema_too_new", newer.db_arg());
    w
}

/// PostgreSQL going away under a running server: a TCP relay stands between `baton serve` and
/// the database, and is cut. The next request finds no connection and none can be made.
fn walk_unavailable(sb: &Sandbox, w: &mut Walk) {
    let schema = sb.pg_schema().unwrap();
    // The relay stands in for the server's host and port, wherever the test server is (a
    // private cluster of `cargo xtask test` listens on a free port).
    let server = pg_url();
    let (scheme, rest) = server.split_once("://").unwrap();
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (user, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    let relay = Relay::start(if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    });
    let url = match user {
        "" => format!("{scheme}://{}{path}", relay.addr),
        user => format!("{scheme}://{user}@{}{path}", relay.addr),
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let through = format!("{url}{sep}schema={schema}&pool_size=1");
    let key = create_key(sb, "default");
    let served = serve_on(&through, &[]);
    let bearer = format!("Bearer {key}");
    let auth = [("authorization", bearer.as_str())];
    assert_eq!(http(&served.addr, "GET", "/v1/runs/r", &auth, "").0, 200);
    relay.cut();
    w.http(
        "unavailable",
        http(&served.addr, "GET", "/v1/runs/r", &auth, ""),
    );
    w.at_open("unavailable", &through);
}

/// A TCP relay to the test PostgreSQL server, which can be cut: every relayed connection is
/// shut down and no new one is accepted.
struct Relay {
    addr: String,
    cut: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(target: String) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop, kept) = (cut.clone(), streams.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let server = TcpStream::connect(&target).unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
                kept.lock().unwrap().extend([client, server]);
            }
            // The listener is dropped here: connecting is refused from now on.
        });
        Relay { addr, cut, streams }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().iter() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Let the accept loop drop the listener and the server notice its connection closed.
        std::thread::sleep(Duration::from_millis(300));
    }
}
