//! The dashboard (issue 21) in a real browser: Debian's Chromium, headless, driven by
//! Playwright for Python (`tests/python/ui_browser.py`) against the real `baton serve` on a
//! store with the whole shared corpus imported, a run compacted and a second summary version
//! installed. Screenshots of every step are kept in `target/ui-artifacts/`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{Sandbox, corpus, create_key, python_venv, serve};

/// Playwright for Python, pinned; it drives the system's Chromium (no browser download).
const PACKAGES: &[&str] = &["playwright==1.64.1"];

/// Debian's Chromium, or `None` (a failure in CI, where `cargo xtask test` installs it).
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI: chromium is not installed (cargo xtask test installs it)"
        );
        println!("skipping: no chromium (apt-get install chromium)");
    }
    found
}

#[test]
fn the_dashboard_works_in_a_real_browser_on_the_corpus() {
    let Some(corpus) = corpus() else { return };
    let Some(chromium) = chromium() else { return };
    let Some(python) = python_venv("test-venv-ui", PACKAGES) else {
        return;
    };
    let sb = Sandbox::new();
    sb.run(&["import", corpus.to_str().unwrap()]).ok();
    // The longest run, compacted, then a second version through its last seq that drops a
    // claim and adds one.
    let listed = sb
        .run(&[
            "--json", "runs", "list", "--sort", "messages", "--limit", "1",
        ])
        .ok()
        .json();
    let run = listed["runs"][0]["id"].as_str().unwrap().to_owned();
    let last = listed["runs"][0]["last_seq"].as_u64().unwrap();
    sb.run(&["compact", &run, "--strategy", "structured"]).ok();
    let v1 = sb.run(&["--json", "summary", "list", &run]).ok().json();
    let first: &Value = &v1["summaries"][0];
    let v1_id = first["id"].as_u64().unwrap();
    let shown = sb
        .run(&["--json", "summary", "show", &v1_id.to_string()])
        .ok()
        .json();
    let coverage = shown["coverage"].as_u64().unwrap();
    let mut claims = shown["claims"].as_array().unwrap().clone();
    claims.remove(0);
    claims
        .push(json!({"kind": "next_step", "text": "review the dashboard", "source_seq": coverage}));
    let file = sb.file("v2.json", &Value::Array(claims).to_string());
    let v2 = sb
        .run(&[
            "--json",
            "summary",
            "install",
            &run,
            "--base",
            &v1_id.to_string(),
            "--cut",
            &last.to_string(),
            "--file",
            file.to_str().unwrap(),
        ])
        .ok()
        .json();
    let v2_id = v2["id"].as_u64().unwrap();
    let key = create_key(&sb, "default");

    let served = serve(&sb, &[]);
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/ui_browser.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{}", served.addr))
        .arg(&run)
        .arg(v1_id.to_string())
        .arg(v2_id.to_string())
        .arg(&key)
        .arg(&artifacts)
        .arg(&chromium)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "the browser test failed (screenshots in {}):\n{stdout}\n{stderr}",
        artifacts.display()
    );
}
