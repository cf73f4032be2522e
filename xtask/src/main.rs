//! `cargo xtask`: the project's own tasks, in Rust (the xtask convention; the alias is in
//! `.cargo/config.toml`).
//!
//! - `cargo xtask test [ARGS…]`: the whole test suite on a machine with only the Rust toolchain
//!   and the distribution's packages. It checks for what the suite needs (PostgreSQL's server
//!   binaries `initdb` and `pg_ctl`, python3 with `venv` for the HTTP contract and SDK tests,
//!   tmux for the REPL test, promtool for the metrics format test, Chromium for the dashboard's
//!   browser test) and installs what is missing with apt-get when it runs as root, or prints
//!   the one command that would. Unless
//!   `BATON_TEST_PG` names a server, it starts a private PostgreSQL cluster (`initdb` and
//!   `pg_ctl` in a temporary directory, on a free port), exports `BATON_TEST_PG` for it, runs
//!   `cargo test --workspace --locked ARGS…`, and stops and removes the cluster at the end,
//!   also when the tests fail or on Ctrl-C/SIGTERM. It exits with cargo's code.
//! - `cargo xtask fuzz [--inputs N]`: the fuzzing campaign (`baton-fuzz`), in release mode.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a task runner talks to its user

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The packages the suite needs, by the program that tells whether each is there.
const NEEDS: &[Need] = &[
    Need {
        what: "PostgreSQL server binaries (initdb, pg_ctl)",
        package: "postgresql",
        present: has_postgres,
        only_for_private_cluster: true,
    },
    Need {
        what: "python3 with venv and pip (HTTP contract, SDK and MCP client tests)",
        package: "python3-venv python3-pip",
        present: has_python_venv,
        only_for_private_cluster: false,
    },
    Need {
        what: "tmux (the REPL test)",
        package: "tmux",
        present: || on_path("tmux"),
        only_for_private_cluster: false,
    },
    Need {
        what: "Chromium (the dashboard's browser test)",
        package: "chromium",
        present: || on_path("chromium"),
        only_for_private_cluster: false,
    },
    Need {
        what: "promtool (the metrics format test)",
        package: "prometheus",
        present: || on_path("promtool"),
        only_for_private_cluster: false,
    },
];

struct Need {
    what: &'static str,
    package: &'static str,
    present: fn() -> bool,
    only_for_private_cluster: bool,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((task, rest)) if task == "test" => test(rest),
        Some((task, rest)) if task == "fuzz" => fuzz(rest),
        _ => {
            Err("usage: cargo xtask test [CARGO TEST ARGS…] | cargo xtask fuzz [--inputs N]".into())
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::from(1)
        }
    }
}

type Result<T> = std::result::Result<T, String>;

/// `cargo xtask test`.
fn test(extra: &[String]) -> Result<ExitCode> {
    let private = std::env::var_os("BATON_TEST_PG").is_none();
    let missing: Vec<&Need> = NEEDS
        .iter()
        .filter(|n| private || !n.only_for_private_cluster)
        .filter(|n| !(n.present)())
        .collect();
    if !missing.is_empty() {
        let packages: Vec<&str> = missing.iter().map(|n| n.package).collect();
        let install = format!(
            "apt-get update && apt-get install -y --no-install-recommends {}",
            packages.join(" ")
        );
        for n in &missing {
            eprintln!("xtask: missing: {} (Debian package {})", n.what, n.package);
        }
        if !is_root() {
            return Err(format!(
                "the test suite needs them; install them with:\n    sudo sh -c '{install}'"
            ));
        }
        eprintln!("xtask: installing: {install}");
        let status = Command::new("sh")
            .args(["-c", &install])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map_err(|e| format!("running apt-get: {e}"))?;
        if !status.success() {
            return Err(format!("`{install}` failed ({status})"));
        }
        if let Some(n) = missing.iter().find(|n| !(n.present)()) {
            return Err(format!("still missing after the install: {}", n.what));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting a runtime: {e}"))?;
    runtime.block_on(async {
        let cluster = match private {
            true => Some(Cluster::start()?),
            false => {
                eprintln!("xtask: BATON_TEST_PG is set: the PostgreSQL tests use that server");
                None
            }
        };
        let mut cargo = tokio::process::Command::new(cargo());
        cargo.args(["test", "--workspace", "--locked"]).args(extra);
        if let Some(cluster) = &cluster {
            cargo.env("BATON_TEST_PG", cluster.url());
        }
        let code = run_until_signal(cargo).await;
        // Stopped and removed whatever happened: tests failing, Ctrl-C, SIGTERM.
        drop(cluster);
        code
    })
}

/// `cargo xtask fuzz`: the campaign, built in release mode (its inputs per second need it).
fn fuzz(extra: &[String]) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting a runtime: {e}"))?;
    runtime.block_on(async {
        let mut cargo = tokio::process::Command::new(cargo());
        cargo
            .args(["run", "--locked", "--release", "-p", "baton-fuzz", "--"])
            .args(extra);
        run_until_signal(cargo).await
    })
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs `command` and returns its exit code; on Ctrl-C or SIGTERM waits for it to stop (the
/// terminal signals it too) and returns 130.
async fn run_until_signal(mut command: tokio::process::Command) -> Result<ExitCode> {
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting {command:?}: {e}"))?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("watching SIGTERM: {e}"))?;
    tokio::select! {
        status = child.wait() => {
            let status = status.map_err(|e| format!("waiting for cargo: {e}"))?;
            Ok(ExitCode::from(status.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)))
        }
        _ = tokio::signal::ctrl_c() => {
            eprintln!("xtask: interrupted; stopping");
            let _ = child.wait().await;
            Ok(ExitCode::from(130))
        }
        _ = term.recv() => {
            eprintln!("xtask: terminated; stopping");
            let _ = child.start_kill();
            let _ = child.wait().await;
            Ok(ExitCode::from(143))
        }
    }
}

/// A private PostgreSQL cluster in a temporary directory, stopped and removed when dropped.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
}

impl Cluster {
    fn start() -> Result<Cluster> {
        let bin = postgres_bin().ok_or("initdb and pg_ctl not found")?;
        let dir = tempfile::Builder::new()
            .prefix("baton-test-pg-")
            .tempdir()
            .map_err(|e| format!("making the cluster's directory: {e}"))?;
        // initdb refuses to run as root: the cluster then belongs to the `postgres` user.
        let as_postgres = is_root();
        if as_postgres {
            run(Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path()))?;
        }
        let port = free_port()?;
        let cluster = Cluster {
            bin,
            dir,
            port,
            as_postgres,
        };
        let data = cluster.data();
        run(cluster
            .pg("initdb")
            .args([
                "--auth=trust",
                "--username=postgres",
                "--encoding=UTF8",
                "--no-sync",
            ])
            .arg("-D")
            .arg(&data)
            .stdout(Stdio::null()))?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
            cluster.dir.path().display()
        );
        run(cluster
            .pg("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-o", &options, "-w", "-t", "60", "-l"])
            .arg(cluster.dir.path().join("server.log"))
            .arg("start")
            .stdout(Stdio::null()))?;
        run(cluster.pg("createdb").args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "test",
        ]))?;
        eprintln!(
            "xtask: a private PostgreSQL cluster serves the tests at {} (data in {})",
            cluster.url(),
            data.display()
        );
        Ok(cluster)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/test", self.port)
    }

    /// One of the server's programs, run as `postgres` when xtask runs as root.
    fn pg(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.as_postgres {
            true => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(path);
                c
            }
            false => Command::new(path),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let stopped = self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .status();
        if !stopped.is_ok_and(|s| s.success()) {
            eprintln!(
                "xtask: could not stop the private cluster in {}",
                self.dir.path().display()
            );
        }
        // The temporary directory is removed after this.
    }
}

fn run(command: &mut Command) -> Result<()> {
    let status = command.status().map_err(|e| format!("{command:?}: {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("{command:?} failed ({status})")),
    }
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("finding a free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// The directory of `initdb` and `pg_ctl`: on PATH, else Debian's newest
/// `/usr/lib/postgresql/VERSION/bin`.
fn postgres_bin() -> Option<PathBuf> {
    if let Some(initdb) = which("initdb") {
        let dir = initdb.parent()?.to_path_buf();
        if dir.join("pg_ctl").exists() && dir.join("createdb").exists() {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            let whole = ["initdb", "pg_ctl", "createdb"]
                .iter()
                .all(|p| bin.join(p).exists());
            whole.then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn has_postgres() -> bool {
    postgres_bin().is_some() && (!is_root() || user_exists("postgres"))
}

fn has_python_venv() -> bool {
    Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn on_path(program: &str) -> bool {
    which(program).is_some()
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn user_exists(name: &str) -> bool {
    std::fs::read_to_string("/etc/passwd")
        .is_ok_and(|p| p.lines().any(|l| l.split(':').next() == Some(name)))
}
