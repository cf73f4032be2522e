//! What each subcommand does: one parsed command line, dispatched to the module of its noun.
//! Handlers write data to `out` and return errors; `main` prints the errors and picks the exit
//! code.

use std::io::Write;

use anyhow::Context as _;
use baton_core::TenantId;
use baton_tokens::TokenizerChoice;

use crate::args::{
    Cli, Command, KeysCommand, OpsCommand, ReportCommand, RunsCommand, SummaryCommand,
};
use crate::env::{Backend, Env, open_backend};
use crate::exit::{InvalidInput, Usage};

/// [`execute`], boxed: how `baton demo --race` runs its command lines through this same
/// dispatcher without importing it.
fn boxed(cli: Cli, out: &mut dyn Write) -> crate::demo::Running<'_> {
    Box::pin(execute(cli, out))
}

/// Whether `command` may create the store `--db` names when nothing is there yet: only a
/// command that can succeed on an empty store does. Every other one (`runs list`, `history`,
/// `doctor`, …) fails, naming the path, instead of leaving a new database at a mistyped one.
pub fn creates_store(command: &Command) -> bool {
    matches!(
        command,
        Command::Runs(RunsCommand::Create(_))
            | Command::Import(_)
            | Command::Watch(_)
            | Command::Chat(_)
            | Command::Call(_)
            | Command::Ops(OpsCommand::Begin(_) | OpsCommand::Run(_))
            | Command::Keys(KeysCommand::Create(_))
            | Command::Demo(_)
            | Command::Serve(_)
            | Command::Mcp(_)
            | Command::Migrate
    )
}

/// How many pages of write-ahead log `baton import` lets grow between checkpoints (40 MB;
/// [`baton_sqlite::SqliteStore::checkpoint_every`]).
const IMPORT_CHECKPOINT_PAGES: u32 = 10_000;

/// Runs one parsed command line.
pub async fn execute(cli: Cli, out: &mut dyn Write) -> anyhow::Result<()> {
    let create = creates_store(&cli.command);
    match cli.command {
        Command::Chat(_) | Command::Serve(_) | Command::Mcp(_) if cli.json => {
            return Err(Usage(
                "--json: chat, serve and mcp print no JSON (a chat's run is read back with `baton --json history RUN`)"
                    .to_owned(),
            )
            .into());
        }
        // The demo runs its command lines through this same function (boxed, so the futures
        // do not contain each other).
        Command::Demo(args) if args.race => {
            let demo = crate::demo::Demo {
                db: cli.db.as_deref(),
                tenant: &cli.tenant,
                json: cli.json,
            };
            return crate::demo::run(&demo, out, boxed).await;
        }
        Command::Migrate => {
            return crate::database::migrate(cli.db.as_deref(), cli.json, out).await;
        }
        Command::Doctor => return crate::database::doctor(cli.db.as_deref(), cli.json, out).await,
        Command::Completions(args) => return crate::settings::completions(args.shell, out),
        _ => {}
    }
    let tenant = TenantId::new(cli.tenant.as_str()).context("--tenant")?;
    let tokenizer =
        TokenizerChoice::parse(&cli.tokenizer).map_err(|e| InvalidInput(e.to_string()))?;
    if matches!(cli.command, Command::Import(_) | Command::Watch(_)) {
        // The vocabularies load while the store opens, not while the first file waits.
        baton_tokens::preload_for(tokenizer);
    }
    let backend = open_backend(cli.db.as_deref(), create).await?;
    if let (Command::Import(_), Backend::Sqlite(store)) = (&cli.command, &backend) {
        // A bulk write: fewer checkpoints (and their fsyncs) on the import's critical path.
        store.checkpoint_every(IMPORT_CHECKPOINT_PAGES).await?;
    }
    let store = backend.into_store();
    let env = Env {
        store,
        tenant,
        json: cli.json,
        tokenizer,
    };
    match cli.command {
        Command::Runs(RunsCommand::Create(args)) => crate::runs::create_run(&env, args, out).await,
        Command::Runs(RunsCommand::List(args)) => crate::runs::list_runs(&env, args, out).await,
        Command::Runs(RunsCommand::Delete(args)) => crate::runs::delete_run(&env, args, out).await,
        Command::Runs(RunsCommand::Show(arg)) => crate::runs::show_run(&env, &arg.run, out).await,
        Command::Runs(RunsCommand::Cancel(arg)) => {
            crate::runs::cancel_run(&env, &arg.run, out).await
        }
        Command::Append(args) => crate::history::append(&env, args, out).await,
        Command::History(args) => crate::history::history(&env, args, out).await,
        Command::Recall(args) => crate::history::recall(&env, args, out).await,
        Command::Import(args) => crate::import::run(&env, args, out).await,
        Command::Watch(args) => crate::watch::run(&env, cli.db.as_deref(), args, out).await,
        Command::Summary(SummaryCommand::Install(args)) => {
            crate::summary::install(&env, args, out).await
        }
        Command::Summary(SummaryCommand::List(arg)) => {
            crate::summary::list_summaries(&env, &arg.run, out).await
        }
        Command::Summary(SummaryCommand::Show(arg)) => {
            crate::summary::show_summary(&env, arg.id, out).await
        }
        Command::Summary(SummaryCommand::Diff(args)) => {
            crate::summary::diff_summaries(&env, args, out).await
        }
        Command::Summary(SummaryCommand::Activate(args)) => {
            crate::summary::activate(&env, args, out).await
        }
        Command::Chat(args) => crate::chat::run(&env, args, out).await,
        Command::Compact(args) => crate::compaction::compact(&env, args, out).await,
        Command::Replay(args) => crate::compaction::replay_run(&env, args, out).await,
        Command::Report(ReportCommand::Growth(args)) => {
            crate::compaction::growth(&env, args, out).await
        }
        Command::Report(ReportCommand::Duplicates(args)) => {
            crate::duplicates::run(&env, args, out).await
        }
        Command::Report(ReportCommand::Usage(args)) => crate::usage::run(&env, args, out).await,
        Command::Call(args) => crate::call::run(&env, args, out).await,
        Command::Ops(command) => crate::ops::run(&env, command, out).await,
        Command::Pin(args) => crate::pins::pin(&env, args, out).await,
        Command::Unpin(args) => crate::pins::unpin(&env, args, out).await,
        Command::Context(args) => crate::context::context(&env, &args, out).await,
        Command::Demo(_) => {
            let shown = crate::demo::Demo {
                db: cli.db.as_deref(),
                tenant: &cli.tenant,
                json: cli.json,
            };
            Box::pin(crate::demo_session::run(&env, &shown, out)).await
        }
        Command::Serve(args) => crate::serve::run(&env, args, out).await,
        Command::Keys(command) => crate::keys::run(&env, command, out).await,
        Command::Mcp(args) => crate::watch::mcp(&env, cli.db.as_deref(), args).await,
        Command::Migrate | Command::Doctor | Command::Completions(_) => Ok(()),
    }
}
