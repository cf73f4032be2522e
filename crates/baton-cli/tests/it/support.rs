//! Running the binary.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

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

    pub fn file(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path
    }

    pub fn command(&self, args: &[&str]) -> Command {
        command(&self.db, args)
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
