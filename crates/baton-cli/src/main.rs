//! The `baton` binary: parses the command line, runs the command, prints
//! `baton: error: …` on one line and exits with the documented code (see `exit`).

mod args;
mod call;
mod chat;
mod check;
mod commands;
mod compaction;
mod demo;
mod demo_session;
mod duplicates;
mod exit;
mod import;
mod ops;
mod serve;
mod settings;
mod supervise;

use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(code) = supervise::from_args() {
        return code;
    }
    let parsed = match settings::parse() {
        Ok(parsed) => parsed,
        Err(err) => return fail(&err),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    init_tracing(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&anyhow::Error::new(err).context("starting the async runtime")),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = runtime.block_on(commands::execute(cli, &mut out));
    let flushed = out.flush().map_err(anyhow::Error::new);
    match result.and(flushed) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(err) if exit::is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => fail(&err),
    }
}

#[allow(clippy::print_stderr)] // the one place the binary reports an error
fn fail(err: &anyhow::Error) -> ExitCode {
    eprintln!("baton: error: {err:#}");
    ExitCode::from(exit::code(err))
}

/// Diagnostics go to stderr, filtered by `BATON_LOG` (else `RUST_LOG`): warnings by default,
/// and for `baton serve` also each request's line (`info`), as JSON with `--log-format json`.
fn init_tracing(cli: &args::Cli) {
    let (default, json) = match &cli.command {
        args::Command::Serve(serve) => (
            "info,tower_http=info,hyper=warn",
            serve.log_format == "json",
        ),
        _ => ("warn", false),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("BATON_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colours only for a person at a terminal, and never with NO_COLOR set.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .init();
    } else {
        builder.init();
    }
}
