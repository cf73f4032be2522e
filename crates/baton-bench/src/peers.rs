//! The peers' Python: one virtual environment outside the repo (`$BATON_BENCH_PEERS_VENV`,
//! else `$XDG_CACHE_HOME/baton-peers-venv`, else `/tmp/baton-peers-venv`), shared by every
//! section that runs a script of `../shared/peers`, each installing what it needs once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where the peers' virtual environment lives.
fn venv_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BATON_BENCH_PEERS_VENV").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(cache) => PathBuf::from(cache).join("baton-peers-venv"),
        None => PathBuf::from("/tmp/baton-peers-venv"),
    }
}

/// Runs `cmd`, its output captured; the error is its last line of stderr.
fn quietly(cmd: &mut Command, what: &str) -> Result<(), String> {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{what}: {}: {}", output.status, last.trim()))
}

/// The venv's Python, with `imports` (a comma-separated Python import list) importable:
/// the venv is made and `package` installed from PyPI, once, when they are missing.
pub(crate) fn python_with(imports: &str, package: &str) -> Result<PathBuf, String> {
    let venv = venv_dir();
    let python = venv.join("bin").join("python");
    let importable = |python: &Path| {
        quietly(
            Command::new(python).args(["-c", &format!("import {imports}")]),
            &format!("import {imports}"),
        )
    };
    if importable(&python).is_ok() {
        return Ok(python);
    }
    if !python.exists() {
        quietly(
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            &format!("python3 -m venv {}", venv.display()),
        )?;
    }
    quietly(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            package,
        ]),
        &format!("pip install {package}"),
    )?;
    importable(&python)?;
    Ok(python)
}

/// Runs a peer `script` with `python` and `args`, its output kept in `dir` as `name.json` and
/// `name.err`; the JSON object it prints, or why it could not (stopped after `timeout`).
pub(crate) fn run(
    python: &Path,
    script: &str,
    args: &[&str],
    dir: &Path,
    name: &str,
    timeout: Duration,
) -> Result<Value, String> {
    if !Path::new(script).is_file() {
        return Err(format!("peer script not found at {script}"));
    }
    let (stdout_path, stderr_path) = (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.err")),
    );
    let stdout = std::fs::File::create(&stdout_path).map_err(|e| e.to_string())?;
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| e.to_string())?;
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", python.display()))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the script ran over {} s", timeout.as_secs()));
            }
            Err(e) => return Err(format!("waiting for the script: {e}")),
        }
    };
    if !status.success() {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("the script failed ({status}): {}", last.trim()));
    }
    let text = std::fs::read_to_string(&stdout_path).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("the script's output is not JSON: {e}"))
}
