//! `baton demo`: a real agent session, offline. The scripted provider (a real HTTP server on
//! loopback, speaking the Anthropic wire format and checking every request's tool pairing)
//! plays the model from `demo_session.json`; the tools work on a small project in a temporary
//! directory; the run is read-only, so the executor refuses the model's command and its edit;
//! `structured` compaction runs mid-session with `/verbose on`. Everything goes through
//! `baton chat`'s own code, and the run stays in the database for `runs show`, `history`,
//! `context` and `summary list`.

use std::io::Write;

use anyhow::Context as _;

use crate::args::{ChatArgs, ProviderKind, StrategyOpts, WireKind};
use crate::demo::Demo;
use crate::env::{Env, print_json};

const SCRIPT: &str = include_str!("demo_session.json");

const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# retrier\n\nRetries a failing call up to `max_attempts` times (config/retry.toml).\n",
    ),
    (
        "src/retry.rs",
        "pub fn call_with_retries<T, E>(max_attempts: u32, mut call: impl FnMut() -> Result<T, E>) -> Result<T, E> {\n    let mut attempt = 0;\n    loop {\n        match call() {\n            Ok(v) => return Ok(v),\n            Err(e) if attempt < max_attempts - 1 => { attempt += 1; let _ = e; }\n            Err(e) => return Err(e),\n        }\n    }\n}\n",
    ),
    (
        "tests/retry_test.rs",
        "#[test]\nfn three_attempts() {\n    let mut n = 0;\n    let _ = retrier::call_with_retries(3, || { n += 1; Err::<(), ()>(()) });\n    assert_eq!(n, 3);\n}\n",
    ),
    ("config/retry.toml", "max_attempts = 3\nbackoff_ms = 200\n"),
];

/// Runs the demo session on `env`'s store.
/// With `--json`, the session's transcript is not printed, and one object says what it left.
pub async fn run(env: &Env, demo: &Demo<'_>, stdout: &mut dyn Write) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("creating the demo's project directory")?;
    for (path, body) in FILES {
        let full = dir.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        // Long enough that the session's context grows past the compaction threshold.
        let padding = "// (more of the project)\n".repeat(30);
        std::fs::write(&full, format!("{body}{padding}"))?;
    }
    let script = dir.path().join("session.json");
    std::fs::write(&script, SCRIPT)?;
    let run = format!("demo-{}", baton_store::generate_run_id()?);
    let shown_db = demo.shown_db()?;
    let mut sink = std::io::sink();
    let out: &mut dyn Write = if demo.json { &mut sink } else { &mut *stdout };
    writeln!(
        out,
        "A scripted agent session, offline: the model is the scripted provider on 127.0.0.1, the tools work on a project in {}.\nStore: {shown_db}\n",
        dir.path().display()
    )?;
    out.flush()?;
    let args = ChatArgs {
        run: Some(run.clone()),
        provider: Some(ProviderKind::Scripted),
        model: Some("scripted-demo".to_owned()),
        base_url: None,
        script: Some(script),
        wire: WireKind::Anthropic,
        read_only: false,
        strategy: Some("structured".to_owned()),
        summarizer: None,
        opts: StrategyOpts {
            threshold: Some(1_500),
            keep_recent: Some(4),
            ..StrategyOpts::default()
        },
        workdir: Some(dir.path().to_path_buf()),
        message: vec![
            "/verbose on".to_owned(),
            "/constraint Keep this run read-only: do not change any file.".to_owned(),
            "Find why the retries stop one attempt early.".to_owned(),
            "/status".to_owned(),
        ],
        verbose: true,
        reply_tokens: 1024,
        no_cache: false,
    };
    if demo.json {
        crate::chat::quiet();
    }
    crate::chat::run(env, args, out).await?;
    let retry = std::fs::read_to_string(dir.path().join("src/retry.rs"))?;
    if !retry.contains("max_attempts - 1") {
        return Err(anyhow::anyhow!(
            "demo: src/retry.rs was changed on a read-only run; that is a bug in baton (run {run})"
        ));
    }
    let follow_up = ["runs show", "history", "context", "summary list"];
    if demo.json {
        return print_json(stdout, &demo.view("session", &run, &follow_up)?);
    }
    writeln!(
        out,
        "\nsrc/retry.rs is unchanged: the bug is still there, as the read-only run requires. The run stays in the store; look at it with:"
    )?;
    for words in follow_up {
        writeln!(out, "  {}", demo.command(&format!("{words} {run}")))?;
    }
    Ok(())
}
