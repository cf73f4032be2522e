//! Running the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A temp directory, and the store the commands use: a SQLite file in the directory, or a
/// fresh schema on the test PostgreSQL (`BATON_TEST_PG`).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    db: String,
    pg_schema: Option<String>,
}

/// What a run of the binary produced.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "expected success; stderr: {}", self.stderr);
        self
    }

    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {:?}", self.stdout))
    }

    #[track_caller]
    pub fn fails(self, code: i32, stderr_has: &str) -> Self {
        assert_eq!(
            self.code, code,
            "stdout: {} stderr: {}",
            self.stdout, self.stderr
        );
        assert!(
            self.stderr.contains(stderr_has),
            "expected {stderr_has:?} in stderr: {}",
            self.stderr
        );
        assert!(
            self.stderr.starts_with("baton: error: ") || code == 2,
            "one-line error: {}",
            self.stderr
        );
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "one line: {}",
            self.stderr
        );
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        self
    }
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("baton.db").display().to_string();
        Sandbox {
            dir,
            db,
            pg_schema: None,
        }
    }

    /// A sandbox whose store is a new schema on the test PostgreSQL server.
    pub fn postgres() -> Self {
        let schema = format!("baton_cli_{}", uuid::Uuid::now_v7().simple());
        let url = pg_url();
        let sep = if url.contains('?') { '&' } else { '?' };
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
            db: format!("{url}{sep}schema={schema}"),
            pg_schema: Some(schema),
        }
    }

    /// Both stores, for tests that must hold on each.
    pub fn each() -> [Sandbox; 2] {
        [Sandbox::new(), Sandbox::postgres()]
    }

    /// The SQLite file (for SQLite-only tests).
    pub fn db(&self) -> PathBuf {
        assert!(self.pg_schema.is_none(), "db() is for SQLite sandboxes");
        PathBuf::from(&self.db)
    }

    /// The `--db` value.
    pub fn db_arg(&self) -> &str {
        &self.db
    }

    /// The PostgreSQL schema, for a PostgreSQL sandbox.
    pub fn pg_schema(&self) -> Option<&str> {
        self.pg_schema.as_deref()
    }

    /// Runs SQL on the store directly, behind baton's back (to break it on purpose): on the
    /// SQLite file, or in the sandbox's schema.
    pub fn execute_sql(&self, sql: &str) {
        match &self.pg_schema {
            None => rusqlite::Connection::open(self.db())
                .unwrap()
                .execute_batch(sql)
                .unwrap(),
            Some(schema) => pg_execute(&format!("SET search_path TO \"{schema}\"; {sql}")),
        }
    }

    /// Writes `name`, dated an hour back: a session file its agent stopped writing, which
    /// `baton import` reads whole (a file changed in the last ten minutes is read only up to
    /// its last complete unit).
    pub fn finished_file(&self, name: &str, body: &str) -> PathBuf {
        let path = self.file(name, body);
        age(&path);
        path
    }

    pub fn file(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path
    }

    pub fn command(&self, args: &[&str]) -> Command {
        command(&self.db, args)
    }

    /// The messages of `run`'s history (`baton history RUN --json`), which must exist.
    pub fn messages(&self, run: &str) -> Vec<serde_json::Value> {
        let history = self.run(&["--json", "history", run]).ok().json();
        history["messages"].as_array().unwrap().clone()
    }

    pub fn run(&self, args: &[&str]) -> Ran {
        self.run_with_stdin(args, "")
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Ran {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        ran(child.wait_with_output().unwrap())
    }
}

pub fn command(db: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("BATON_DB")
        .env_remove("BATON_TENANT")
        .env_remove("BATON_TOKENIZER")
        // A person's own configuration file must not change what the tests see.
        .env("BATON_CONFIG_FILE", "/nonexistent/baton-tests/config.toml");
    cmd
}

pub fn ran(output: Output) -> Ran {
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// Installs a summary of `claims` (JSON) on `run` with no base, cut at `cut`; its id.
pub fn install_first(sb: &Sandbox, run: &str, cut: &str, claims: &str) -> String {
    let file = sb.file(&format!("claims-{run}.json"), claims);
    let args = [
        "--json", "summary", "install", run, "--base", "none", "--cut", cut,
    ];
    let mut args = args.to_vec();
    args.extend(["--file", file.to_str().unwrap()]);
    sb.run(&args).ok().json()["id"].to_string()
}

/// Runs SQL on the test PostgreSQL server.
pub fn pg_execute(sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
    });
}

/// The test PostgreSQL server.
pub fn pg_url() -> String {
    std::env::var("BATON_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let Some(schema) = self.pg_schema.take() else {
            return;
        };
        if std::thread::panicking() {
            eprintln!("left schema {schema} behind for inspection");
            return;
        }
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    let sql = format!(
                        "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                    );
                    let _ = client.batch_execute(&sql).await;
                }
            });
        })
        .join();
    }
}

/// One HTTP/1.1 request on a new connection; the status and the body.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

/// A `baton serve` process and the address it listens on. Its stdout (after the first line)
/// and stderr are read as it writes them, so a server that logs a lot never blocks on a full
/// pipe; [`wait`] returns what they held.
pub struct Served {
    pub child: Child,
    pub addr: String,
    drained: Option<(
        std::thread::JoinHandle<String>,
        std::thread::JoinHandle<String>,
    )>,
}

impl Served {
    /// The server `child` (spawned with stdout and stderr piped) once it printed its address.
    pub fn from_child(mut child: Child) -> Served {
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("first line: {first:?}"))
            .to_owned();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Served {
            child,
            addr,
            drained: Some((out, err)),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `baton serve` on the sandbox's store, on a free port.
pub fn serve(sb: &Sandbox, extra: &[&str]) -> Served {
    serve_on(sb.db_arg(), extra)
}

/// `baton serve` on the store `db` names, on a free port.
pub fn serve_on(db: &str, extra: &[&str]) -> Served {
    let mut args = vec!["serve", "--addr", "127.0.0.1:0", "--log-format", "json"];
    args.extend_from_slice(extra);
    let child = command(db, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Served::from_child(child)
}

/// Sends SIGTERM.
pub fn terminate(served: &mut Served) {
    let pid = served.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// Waits for a server to exit; its code, stdout and stderr.
pub fn wait(mut served: Served) -> (i32, String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = served.child.try_wait().unwrap() {
            let (out, err) = served.drained.take().unwrap();
            return (
                status.code().unwrap_or(-1),
                out.join().unwrap(),
                err.join().unwrap(),
            );
        }
        assert!(Instant::now() < deadline, "baton serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A new key for `tenant` (printed once, on the last line).
pub fn create_key(sb: &Sandbox, tenant: &str) -> String {
    let made = sb
        .run(&["--tenant", tenant, "keys", "create", "--label", "test"])
        .ok();
    let last = made.stdout.trim_end().lines().last().unwrap().to_owned();
    assert!(
        last.starts_with("bk_") && !last.contains(' '),
        "{}",
        made.stdout
    );
    last
}

/// Dates `path` an hour back.
pub fn age(path: &std::path::Path) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

/// The shared corpus (`../shared/corpus` beside the project), or `None` with a message when
/// it is absent: tests read it in place and never copy it into the project.
pub fn corpus() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    if dir.join("SOURCES.md").is_file() {
        return Some(dir.canonicalize().unwrap());
    }
    println!("skipping: corpus not found at {}", dir.display());
    None
}

/// A Python virtual environment with `packages` (pinned), made on first use under the target
/// directory (`target/NAME`) and reused after (a stamp file lists what it holds). `None`, with
/// a message, when it cannot be made outside CI; in CI (`CI` set) that is a failure, since the
/// tests that use it must run there. Made once per test process and name, so tests running at
/// once never build one together.
pub fn python_venv(name: &'static str, packages: &'static [&'static str]) -> Option<PathBuf> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static MADE: OnceLock<Mutex<HashMap<&'static str, Option<PathBuf>>>> = OnceLock::new();
    let mut made = MADE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    made.entry(name)
        .or_insert_with(|| make_venv(name, packages))
        .clone()
}

fn make_venv(name: &str, packages: &[&str]) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .join(name);
    let python = dir.join("bin/python");
    let stamp = dir.join("baton-packages.txt");
    let wanted = packages.join("\n");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Some(python);
    }
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)))
        }
    };
    let made = (|| {
        if !python.exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
        }
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages))?;
        std::fs::write(&stamp, &wanted).map_err(|e| e.to_string())
    })();
    match made {
        Ok(()) => Some(python),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("CI: the Python environment {name} cannot be made: {e}")
        }
        Err(e) => {
            eprintln!("skipped: the Python environment {name} cannot be made ({e})");
            None
        }
    }
}
