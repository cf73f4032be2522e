//! The peers' Python: one virtual environment outside the repo (`$BATON_BENCH_PEERS_VENV`,
//! else `$XDG_CACHE_HOME/baton-peers-venv`, else `/tmp/baton-peers-venv`), shared by every
//! section that runs a script of `../shared/peers`, each installing what it needs once.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
