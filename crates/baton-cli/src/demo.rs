//! `baton demo`: seed 000's complete case, driven through baton's own command line.
//!
//! Every step is a real command line, parsed by the same clap definition and run by the same
//! handlers as when typed, against the store `--db` names (each step opens it anew, so what a
//! step shows was read back from the file). The run gets a fresh id, so the demo can be run
//! again on the same database.

use std::future::Future;
use std::io::Write;
use std::pin::Pin;

use anyhow::{Context as _, anyhow};
use clap::Parser;
use serde::Serialize;

use crate::args::Cli;
use crate::env::{self, print_json};

const MESSAGES: &str = r#"{"role":"user","content":"La ejecución es de solo lectura."}
{"role":"user","content":"Empieza la investigación de red."}
{"role":"user","content":"La API resuelve el nombre db."}
{"role":"user","content":"Falta comprobar el puerto configurado."}
"#;
const LATE: &str = r#"{"role":"user","content":"El usuario pide revisar TLS."}
"#;
const INITIAL: &str = r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1}]"#;
const CANDIDATE_A: &str = r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1},
 {"kind":"verified","text":"El nombre db se resuelve","source_seq":3}]"#;
const CANDIDATE_B: &str = r#"[{"kind":"constraint","text":"Solo lectura","source_seq":1},
 {"kind":"next_step","text":"Continuar diagnóstico DNS","source_seq":2}]"#;

/// A command line being run.
pub type Running<'a> = Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>>;

/// What runs a parsed command line: the dispatcher, handed in by it (so this module does not
/// import it back).
pub type Execute = for<'a> fn(Cli, &'a mut dyn Write) -> Running<'a>;

/// Where a demo runs, and how it reports.
pub struct Demo<'a> {
    /// `--db`, as given.
    pub db: Option<&'a str>,
    /// `--tenant`.
    pub tenant: &'a str,
    /// `--json`: the narration is not printed; one object says what was made.
    pub json: bool,
}

/// What `baton demo --json` prints: the run it left in the store and how to look at it.
#[derive(Serialize)]
pub struct DemoView {
    /// `session`, or `race` for `--race`.
    pub demo: &'static str,
    /// The run the demo made.
    pub run: String,
    /// The store it is in (a PostgreSQL password redacted).
    pub store: String,
    /// Command lines that show it, with `--db` and `--tenant` when they were given.
    pub follow_up: Vec<String>,
}

impl Demo<'_> {
    /// The store, for people.
    pub fn shown_db(&self) -> anyhow::Result<String> {
        Ok(match self.db {
            Some(db) => baton_postgres::redact(db),
            None => env::default_db()?.display().to_string(),
        })
    }

    /// `baton WORDS` with the `--db` and `--tenant` the demo was given, so it runs against the
    /// same store (a PostgreSQL password redacted).
    pub fn command(&self, words: &str) -> String {
        let mut line = "baton".to_owned();
        if let Some(db) = self.db {
            line.push_str(&format!(" --db {}", quoted(&baton_postgres::redact(db))));
        }
        if self.tenant != "default" {
            line.push_str(&format!(" --tenant {}", quoted(self.tenant)));
        }
        line.push(' ');
        line.push_str(words);
        line
    }

    /// The one object of `--json`.
    pub fn view(
        &self,
        demo: &'static str,
        run: &str,
        follow_up: &[&str],
    ) -> anyhow::Result<DemoView> {
        Ok(DemoView {
            demo,
            run: run.to_owned(),
            store: self.shown_db()?,
            follow_up: follow_up
                .iter()
                .map(|w| self.command(&format!("{w} {run}")))
                .collect(),
        })
    }
}

/// A word as a shell would need it: quoted when it holds anything but plain characters.
fn quoted(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Runs the demo; every step is a command line `execute` runs. It narrates on `out`, or with
/// `--json` prints only [`DemoView`].
pub async fn run(demo: &Demo<'_>, out: &mut dyn Write, execute: Execute) -> anyhow::Result<()> {
    let run = format!("demo-{}", baton_store::generate_run_id()?);
    if demo.json {
        narrate(demo, &run, &mut std::io::sink(), execute).await?;
        let view = demo.view("race", &run, &["history", "summary list", "context"])?;
        return print_json(out, &view);
    }
    narrate(demo, &run, out, execute).await
}

async fn narrate(
    demo: &Demo<'_>,
    run: &str,
    out: &mut dyn Write,
    execute: Execute,
) -> anyhow::Result<()> {
    let (db, tenant) = (demo.db, demo.tenant);
    let dir =
        tempfile::tempdir().context("creating a temporary directory for the demo's inputs")?;
    let file = |name: &str, body: &str| -> anyhow::Result<String> {
        let path = dir.path().join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        Ok(path.display().to_string())
    };
    let messages = file("messages.jsonl", MESSAGES)?;
    let late = file("late.jsonl", LATE)?;
    let initial = file("initial.json", INITIAL)?;
    let a = file("candidate-a.json", CANDIDATE_A)?;
    let b = file("candidate-b.json", CANDIDATE_B)?;
    let mut db_args: Vec<String> = vec!["--tenant".into(), tenant.into()];
    if let Some(db) = db {
        db_args.extend(["--db".to_owned(), db.to_owned()]);
    }
    let step = |words: &[&str]| -> Vec<String> {
        let mut args = vec!["baton".to_owned()];
        args.extend(db_args.iter().cloned());
        args.extend(words.iter().map(|w| (*w).to_owned()));
        args
    };

    writeln!(
        out,
        "Seed 000, \"Un caso completo\": two summaries race on one base while a message arrives."
    )?;
    let shown_db = demo.shown_db()?;
    writeln!(out, "Store: {shown_db} (every step below opens it anew).\n")?;
    let goal = "Diagnosticar el fallo de conexión sin modificar producción";
    say(
        execute,
        out,
        &step(&["runs", "create", "--id", run, "--goal", goal]),
    )
    .await?;
    say(execute, out, &step(&["append", run, "--file", &messages])).await?;
    let install_initial = step(&[
        "summary", "install", run, "--base", "none", "--cut", "2", "--file", &initial,
    ]);
    let base = capture(execute, &install_initial).await?;
    writeln!(out, "$ {}\n{base}\n", shown(&install_initial))?;
    writeln!(
        out,
        "# A (cut 4) and B (cut 3) both start from summary {base}; message 5 arrives meanwhile."
    )?;
    say(execute, out, &step(&["append", run, "--file", &late])).await?;
    say(
        execute,
        out,
        &step(&[
            "summary", "install", run, "--base", &base, "--cut", "4", "--file", &a,
        ]),
    )
    .await?;
    let install_b = step(&[
        "summary", "install", run, "--base", &base, "--cut", "3", "--file", &b,
    ]);
    writeln!(out, "$ {}", shown(&install_b))?;
    let cli = Cli::try_parse_from(install_b)?;
    match execute(cli, out).await {
        Err(err) if crate::exit::code(&err) == crate::exit::CONFLICT => {
            writeln!(out, "baton: error: {err:#}")?;
            writeln!(
                out,
                "(exit 3: B is rejected and nothing of it is written)\n"
            )?;
        }
        Err(err) => return Err(err),
        Ok(()) => return Err(anyhow!("demo: candidate B was installed on a stale base")),
    }
    say(execute, out, &step(&["summary", "list", run])).await?;
    say(execute, out, &step(&["context", run])).await?;
    writeln!(
        out,
        "\nHistory keeps all 5 messages: `{}`.",
        demo.command(&format!("history {run}"))
    )?;
    Ok(())
}

/// Prints a step as a person would type it (input files by name), then runs it.
async fn say(execute: Execute, out: &mut dyn Write, args: &[String]) -> anyhow::Result<()> {
    writeln!(out, "$ {}", shown(args))?;
    let cli = Cli::try_parse_from(args)?;
    execute(cli, out).await?;
    writeln!(out)?;
    Ok(())
}

/// The command line without `--db PATH`, with temporary input files shown by name.
fn shown(args: &[String]) -> String {
    let mut words = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--db" || arg == "--tenant" {
            iter.next();
            continue;
        }
        let word = match std::path::Path::new(arg).file_name() {
            Some(name) if arg.contains(std::path::MAIN_SEPARATOR) => {
                name.to_string_lossy().into_owned()
            }
            _ if arg.contains(' ') => format!("{arg:?}"),
            _ => arg.clone(),
        };
        words.push(word);
    }
    words.join(" ")
}

async fn capture(execute: Execute, args: &[String]) -> anyhow::Result<String> {
    let mut buffer = Vec::new();
    let cli = Cli::try_parse_from(args)?;
    execute(cli, &mut buffer).await?;
    Ok(String::from_utf8(buffer)?.trim().to_owned())
}
