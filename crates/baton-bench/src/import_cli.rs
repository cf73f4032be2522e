//! `baton import` as a user runs it: the real binary, timed and measured from outside.
//!
//! Section 6 (`import.rs`) times the import pipeline in-process, file after file. This module
//! runs the `baton` binary that sits beside the bench's own executable (build both with
//! `cargo build --release -p baton-bench -p baton-cli`), so the figures include what the binary
//! adds: its read-ahead over all cores, process start, the vocabularies' first load.
//!
//! - [`binary_rounds`]: the corpus into a fresh database, the same rounds as section 6, each
//!   checked against the in-process pipeline's message count, taking turns with the binary of
//!   the commit issue 17 measured ([`issue_binary`]) when [`ISSUE_BINARY_VAR`] names it: the
//!   issue's bar is today's import against that code, on the same machine in the same run.
//! - [`tree_section`] (section `import_tree`, issue 17's memory bar): a synthetic tree of
//!   1 GiB made of the corpus copied with fresh session ids, imported by the binary while its
//!   peak resident memory (`VmHWM`) is read from `/proc` every few milliseconds.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use crate::import::{CORPUS, walk};
use crate::{Report, Target, Unit, list, median};

/// The `baton` binary beside this executable, if it was built.
pub(crate) fn binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.join("baton");
    path.is_file().then_some(path)
}

/// What one run of `baton import` did.
pub(crate) struct Run {
    pub(crate) seconds: f64,
    /// Peak resident memory, bytes (the last `VmHWM` read before it exited).
    pub(crate) peak_rss: u64,
    /// `totals` of its `--json` report.
    pub(crate) totals: Value,
}

/// Runs `baton --db DB import SOURCE --json` and waits for it, reading its peak memory.
pub(crate) fn import(baton: &Path, db: &Path, source: &Path) -> anyhow::Result<Run> {
    let started = Instant::now();
    let mut child = Command::new(baton)
        .arg("--db")
        .arg(db)
        .arg("--json")
        .arg("import")
        .arg(source)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", baton.display()))?;
    let status_file = format!("/proc/{}/status", child.id());
    // The report is read on its own thread, so a large one cannot fill the pipe and stall it.
    let stdout = child.stdout.take().context("the child's stdout")?;
    let reader = std::thread::spawn(move || -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut { stdout }, &mut bytes)?;
        Ok(bytes)
    });
    let mut peak_rss = 0;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some(hwm) = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|s| vm_hwm(&s))
        {
            peak_rss = peak_rss.max(hwm);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stdout = match reader.join() {
        Ok(bytes) => bytes?,
        Err(_) => bail!("reading baton import's report panicked"),
    };
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        std::io::Read::read_to_string(&mut err, &mut stderr)?;
    }
    let report: Value = serde_json::from_slice(&stdout).with_context(|| {
        format!(
            "baton import exited with {status} without a JSON report; stderr: {}",
            stderr.trim()
        )
    })?;
    ensure!(
        report["totals"]["failed"] == 0,
        "baton import failed {} file(s) ({status}): {}",
        report["totals"]["failed"],
        report["failed"]
    );
    ensure!(
        status.success(),
        "baton import exited with {status}: {}",
        stderr.trim()
    );
    Ok(Run {
        seconds,
        peak_rss,
        totals: report["totals"].clone(),
    })
}

/// `VmHWM` of a `/proc/PID/status`, in bytes.
fn vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The environment variable naming the `baton` binary built from the commit issue 17 measured
/// (see [`issue_binary`]).
pub(crate) const ISSUE_BINARY_VAR: &str = "BATON_BENCH_ISSUE17_BIN";

/// The commit issue 17's 2.20 s was measured on: main when the issue was filed.
pub(crate) const ISSUE_COMMIT: &str = "65f10f4";

/// The `baton` binary of [`ISSUE_COMMIT`], when [`ISSUE_BINARY_VAR`] names one: the import as
/// it was when the issue measured it, timed in the same run as today's. Build it with
/// `git worktree add /tmp/base17 65f10f4 && (cd /tmp/base17 && cargo build --release --bin baton)`.
pub(crate) fn issue_binary() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os(ISSUE_BINARY_VAR)?);
    path.is_file().then_some(path)
}

/// `rounds` imports of the corpus by the binary, each into a fresh database, and as many by
/// `issue`'s binary when given, the two taking turns so both see the same machine; `messages`
/// is what the in-process pipeline stored, which each round of today's binary must store too
/// (the older one imports less: no inline subagents, no queued messages).
pub(crate) fn binary_rounds(
    baton: &Path,
    issue: Option<&Path>,
    dir: &Path,
    corpus: &Path,
    (rounds, messages): (usize, u64),
) -> anyhow::Result<(Vec<Run>, Vec<Run>)> {
    let (mut runs, mut issue_runs) = (Vec::new(), Vec::new());
    let fresh = |name: &str| {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}{suffix}")));
        }
        dir.join(name)
    };
    for round in 0..rounds {
        if let Some(issue) = issue {
            let db = fresh(&format!("import-issue-{round}.db"));
            issue_runs.push(import(issue, &db, corpus)?);
            fresh(&format!("import-issue-{round}.db"));
        }
        let db = fresh(&format!("import-binary-{round}.db"));
        let run = import(baton, &db, corpus)?;
        // A corpus copied in the last ten minutes is live to the binary, which leaves each
        // file's unsettled tail for a later import; the in-process pipeline reads files whole.
        let (stored, held) = (&run.totals["messages"], &run.totals["still_being_written"]);
        ensure!(
            stored.as_u64().zip(held.as_u64()).map(|(s, h)| s + h) == Some(messages),
            "baton import stored {stored} messages and left {held} still being written; the in-process pipeline stored {messages}"
        );
        fresh(&format!("import-binary-{round}.db"));
        runs.push(run);
    }
    Ok((runs, issue_runs))
}

/// Section `import_tree`: a 1 GiB tree (32 MiB with `--quick`) imported by the binary, with
/// its peak memory against the bar of 500 MB.
pub(crate) fn tree_section(
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let Ok(corpus) = std::fs::canonicalize(CORPUS) else {
        writeln!(out, "\nimport_tree: skipped (corpus not found at {CORPUS})")?;
        return Ok(());
    };
    let Some(baton) = binary() else {
        writeln!(
            out,
            "\nimport_tree: skipped (no `baton` binary beside the bench: build it with `cargo build --release -p baton-cli`)"
        )?;
        return Ok(());
    };
    let want: u64 = if quick { 32 << 20 } else { 1 << 30 };
    writeln!(
        out,
        "\n[6b] import_tree: the corpus copied into a tree of {} MiB with fresh session ids, imported by {}",
        want >> 20,
        baton.display()
    )?;
    out.flush()?;
    let tree = dir.join("tree");
    let made = Instant::now();
    let (files, bytes) = make_tree(&corpus, &tree, want)?;
    writeln!(
        out,
        "    made {files} files, {:.0} MiB in {:.1} s",
        bytes as f64 / f64::from(1 << 20),
        made.elapsed().as_secs_f64()
    )?;
    out.flush()?;
    let run = import(&baton, &dir.join("tree.db"), &tree)?;
    let peak_mb = run.peak_rss as f64 / 1e6;
    writeln!(
        out,
        "    imported in {:.1} s ({:.1} MiB/s): {} runs created, {} messages; peak resident memory {peak_mb:.0} MB (VmHWM; bar 500 MB)",
        run.seconds,
        bytes as f64 / f64::from(1 << 20) / run.seconds,
        run.totals["created"],
        run.totals["messages"],
    )?;
    let _ = std::fs::remove_dir_all(&tree);
    report.figure(
        "import_tree_peak_mb",
        format!("6b import of a {} MiB tree: peak memory", want >> 20),
        peak_mb,
        Unit::Count("MB"),
        Some(Target::AtMost(500.0)),
    );
    report.details.insert(
        "import_tree".into(),
        json!({
            "files": files,
            "bytes": bytes,
            "seconds": run.seconds,
            "peak_rss_bytes": run.peak_rss,
            "totals": run.totals,
        }),
    );
    Ok(())
}

/// Copies the corpus into `tree` until it holds `want` bytes: copy `n` in `tree/copy-n/`, each
/// UUID in a file's name and content rewritten the same way throughout the copy (its last
/// twelve digits made the copy's number), so every copy is a new session of the same shape.
fn make_tree(corpus: &Path, tree: &Path, want: u64) -> anyhow::Result<(usize, u64)> {
    let mut sources = Vec::new();
    walk(corpus, &mut sources)?;
    let originals: Vec<(PathBuf, Vec<u8>)> = sources
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()));
            bytes.map(|b| (path, b))
        })
        .collect::<anyhow::Result<_>>()?;
    let per_copy: u64 = originals.iter().map(|(_, b)| b.len() as u64).sum();
    ensure!(per_copy > 0, "the corpus at {} is empty", corpus.display());
    let copies = want.div_ceil(per_copy);
    let (mut files, mut bytes) = (0, 0);
    for copy in 0..copies {
        for (path, content) in &originals {
            let relative = path.strip_prefix(corpus).unwrap_or(path);
            let name = fresh_ids(relative.to_string_lossy().as_bytes(), copy);
            let target = tree
                .join(format!("copy-{copy}"))
                .join(String::from_utf8_lossy(&name).as_ref());
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let content = fresh_ids(content, copy);
            std::fs::write(&target, &content)
                .with_context(|| format!("writing {}", target.display()))?;
            files += 1;
            bytes += content.len() as u64;
        }
    }
    Ok((files, bytes))
}

/// `bytes` with the last twelve hex digits of each UUID replaced by `copy`'s.
fn fresh_ids(bytes: &[u8], copy: u64) -> Vec<u8> {
    let suffix = format!("{copy:012x}");
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i + 36 <= out.len() {
        if is_uuid(&out[i..i + 36]) {
            out[i + 24..i + 36].copy_from_slice(suffix.as_bytes());
            i += 36;
        } else {
            i += 1;
        }
    }
    out
}

fn is_uuid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// The binary's rounds, printed beside the issue's binary's (the bar), the in-process
/// baseline's and the in-process pipeline's medians.
pub(crate) fn print_rounds(
    out: &mut impl Write,
    report: &mut Report,
    (runs, issue_runs): (&[Run], &[Run]),
    baseline: f64,
    in_process: f64,
) -> anyhow::Result<f64> {
    let seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    let binary = median(&seconds);
    let peak = runs.iter().map(|r| r.peak_rss).max().unwrap_or(0) as f64 / 1e6;
    writeln!(
        out,
        "    `baton import` (the binary: files prepared on every core ahead of the store): rounds {} s; median {binary:.2} s, peak memory {peak:.0} MB = {:.2}x the baseline, {:.2}x the in-process pipeline",
        list(&seconds, |s| format!("{s:.2}")),
        baseline / binary,
        in_process / binary,
    )?;
    report.figure(
        "import_binary_speedup",
        "6 `baton import` of the corpus vs today's pipeline counting with tiktoken-rs, same run",
        baseline / binary,
        Unit::Ratio,
        None,
    );
    if issue_runs.is_empty() {
        writeln!(
            out,
            "    issue 17's bar (today's binary against the binary of {ISSUE_COMMIT}, the code the issue measured): skipped, {ISSUE_BINARY_VAR} names no binary"
        )?;
        return Ok(binary);
    }
    let issue_seconds: Vec<f64> = issue_runs.iter().map(|r| r.seconds).collect();
    let issue = median(&issue_seconds);
    writeln!(
        out,
        "    `baton import` of {ISSUE_COMMIT} (the code issue 17 measured at 2.20 s), same rounds, taking turns: {} s; median {issue:.2} s ({} messages) = {:.2}x today's binary",
        list(&issue_seconds, |s| format!("{s:.2}")),
        issue_runs[0].totals["messages"],
        issue / binary,
    )?;
    report.figure(
        "import_binary_vs_issue",
        "6 `baton import` of the corpus vs the binary issue 17 measured, same run",
        issue / binary,
        Unit::Ratio,
        Some(Target::AtLeast(4.0)),
    );
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_rewrite_every_uuid_the_same_way_and_nothing_else() {
        let text = b"{\"sessionId\":\"ae4a77f8-aedd-4bc1-888f-c94edc91af04\",\"n\":12345678,\"p\":\"ae4a77f8-aedd-4bc1-888f-c94edc91af04\"}";
        let out = String::from_utf8(fresh_ids(text, 7)).unwrap();
        assert_eq!(
            out,
            "{\"sessionId\":\"ae4a77f8-aedd-4bc1-888f-000000000007\",\"n\":12345678,\"p\":\"ae4a77f8-aedd-4bc1-888f-000000000007\"}"
        );
        assert_eq!(fresh_ids(b"no ids here", 3), b"no ids here");
    }

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status = "Name:\tbaton\nVmPeak:\t  900 kB\nVmHWM:\t  1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(vm_hwm(status), Some(1234 * 1024));
        assert_eq!(vm_hwm("Name:\tx\n"), None);
    }
}
