//! Running the binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A temp directory with a database path in it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
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
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("baton.db")
    }

    pub fn file(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path
    }

    pub fn command(&self, args: &[&str]) -> Command {
        command(&self.db(), args)
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

pub fn command(db: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("BATON_DB")
        .env_remove("BATON_TENANT");
    cmd
}

pub fn ran(output: Output) -> Ran {
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}
