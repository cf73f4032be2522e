//! The `baton` binary: parses the command line, runs the command, prints
//! `baton: error: …` on one line and exits with the documented code (see `exit`); with `--json`
//! an error is also printed on stdout as `{"error": {"kind", "code", "message"}}`, the one
//! object the command prints.

mod ahead;
mod args;
mod call;
mod chat;
mod check;
mod compaction;
mod context;
mod database;
mod demo;
mod demo_session;
mod dispatch;
mod duplicates;
mod env;
mod exit;
mod history;
mod import;
mod keys;
mod ops;
mod pins;
mod runs;
mod serve;
mod settings;
mod summary;
mod supervise;
mod usage;
mod watch;

use std::io::{IsTerminal as _, Write};
use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: a gateway request allocates and frees many small
/// buffers on threads that hand them to each other, where glibc's arenas spent a fifth of a
/// cache hit's CPU (see ARCHITECTURE.md, "Dependencies, and why").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    if let Some(code) = supervise::from_args() {
        return code;
    }
    let parsed = match settings::parse() {
        Ok(parsed) => parsed,
        Err(err) => {
            // The configuration file is invalid: with --json, also the one object on stdout.
            if json_asked()
                && let Some(view) = exit::json(&err)
            {
                print_error_json(&serde_json::to_value(view).unwrap_or_default());
            }
            return fail(&err);
        }
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            if !err.use_stderr() {
                // --help, --version: not errors.
                let _ = err.print();
                return ExitCode::from(exit::OK);
            }
            if json_asked() {
                // clap's message up to its usage line, on one line.
                let text = err.to_string();
                let message = text
                    .lines()
                    .take_while(|l| !l.starts_with("Usage:"))
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                let view = exit::usage_json(message.trim_start_matches("error: "));
                print_error_json(&serde_json::to_value(view).unwrap_or_default());
            }
            let _ = err.print();
            return ExitCode::from(exit::USAGE);
        }
    };
    let json = cli.json;
    init_tracing(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&anyhow::Error::new(err).context("starting the async runtime")),
    };
    if matches!(cli.command, args::Command::Mcp(_)) {
        // `baton mcp` owns stdout for its protocol frames (written by the MCP transport, which
        // takes stdout's lock per write): nothing else may write there, nor hold the lock.
        return match runtime.block_on(dispatch::execute(cli, &mut std::io::sink())) {
            Ok(()) => ExitCode::from(exit::OK),
            Err(err) => fail(&err),
        };
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = runtime.block_on(dispatch::execute(cli, &mut out));
    let flushed = out.flush().map_err(anyhow::Error::new);
    match result.and(flushed) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(err) if exit::is_broken_pipe(&err) => ExitCode::from(exit::OK),
        Err(err) => {
            if json && let Some(view) = exit::json(&err) {
                print_error_json(&serde_json::to_value(view).unwrap_or_default());
            }
            fail(&err)
        }
    }
}

#[allow(clippy::print_stderr)] // the one place the binary reports an error
fn fail(err: &anyhow::Error) -> ExitCode {
    eprintln!("baton: error: {err:#}");
    ExitCode::from(exit::code(err))
}

/// With `--json`, an error is also the one object on stdout (its line on stderr stays).
fn print_error_json(value: &serde_json::Value) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{value}");
    let _ = stdout.flush();
}

/// Whether the command line asks for `--json`, read before it parses (for a usage error's
/// JSON). Words after `--` belong to a command `baton ops run` starts, not to baton.
fn json_asked() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
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
