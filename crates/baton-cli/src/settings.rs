//! What the command line gets besides its arguments: the version with the commit it was built
//! from, shell completions, and defaults from a configuration file.
//!
//! The file is `$XDG_CONFIG_HOME/baton/config.toml` (`~/.config/baton/config.toml`), or the
//! one `BATON_CONFIG_FILE` names. It gives defaults to options, which the environment and the
//! command line override (flags, then `BATON_*` variables, then the file, then baton's own
//! defaults):
//!
//! ```toml
//! db = "postgres://baton@db.internal/baton"   # --db
//! tenant = "acme"                             # --tenant
//! tokenizer = "o200k_base"                    # --tokenizer
//!
//! [serve]                                     # any `baton serve` option, by its long name
//! addr = "0.0.0.0:8700"
//! log_format = "json"
//! gateway_tenant = "acme"
//! max_connections = 256
//! ```
//!
//! An unknown key is an error naming it, so a typo is not silently ignored.

use std::io::Write;
use std::path::PathBuf;

use clap::{ArgMatches, Command, CommandFactory, FromArgMatches};

use crate::args::Cli;
use crate::exit::InvalidInput;

/// `VERSION (commit HASH)`, the commit `build.rs` read from git.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BATON_COMMIT"),
    ")"
);

/// The top-level keys the file may set: the global options.
const GLOBAL_KEYS: &[&str] = &["db", "tenant", "tokenizer"];

/// The configuration file: `BATON_CONFIG_FILE`, else `$XDG_CONFIG_HOME/baton/config.toml`.
pub fn config_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BATON_CONFIG_FILE") {
        return Some(PathBuf::from(path));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("baton").join("config.toml"))
}

/// The command line, with the configuration file's values as defaults. A missing file is no
/// error; an unreadable or invalid one is (exit 4), naming the file and the key.
pub fn parse() -> Result<Result<Cli, clap::Error>, anyhow::Error> {
    let command = with_file_defaults(Cli::command())?;
    let matches: ArgMatches = match command.try_get_matches() {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Cli::from_arg_matches(&matches))
}

fn with_file_defaults(mut command: Command) -> anyhow::Result<Command> {
    let Some(path) = config_path() else {
        return Ok(command);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(command),
        Err(e) => return Err(InvalidInput(format!("{}: {e}", path.display())).into()),
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| InvalidInput(format!("{}: {e}", path.display())))?;
    for (key, value) in table {
        if key == "serve" {
            let toml::Value::Table(serve) = value else {
                return Err(
                    InvalidInput(format!("{}: [serve] must be a table", path.display())).into(),
                );
            };
            let known: Vec<String> = command
                .find_subcommand("serve")
                .map(|s| s.get_arguments().map(|a| a.get_id().to_string()).collect())
                .unwrap_or_default();
            for (key, value) in serve {
                if !known.contains(&key) || GLOBAL_KEYS.contains(&key.as_str()) {
                    return Err(InvalidInput(format!(
                        "{}: [serve] {key}: not an option of baton serve (known: {})",
                        path.display(),
                        known.join(", ")
                    ))
                    .into());
                }
                let value = scalar(&path, &format!("serve.{key}"), &value)?;
                command = command.mut_subcommand("serve", |s| {
                    s.mut_arg(key.as_str(), |a| a.default_value(value))
                });
            }
            continue;
        }
        if !GLOBAL_KEYS.contains(&key.as_str()) {
            return Err(InvalidInput(format!(
                "{}: {key}: unknown key (known: {}, [serve])",
                path.display(),
                GLOBAL_KEYS.join(", ")
            ))
            .into());
        }
        let value = scalar(&path, &key, &value)?;
        command = command.mut_arg(key.as_str(), |a| a.default_value(value));
    }
    Ok(command)
}

fn scalar(path: &std::path::Path, key: &str, value: &toml::Value) -> anyhow::Result<String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(InvalidInput(format!(
            "{}: {key} = {other}: expected a string, a number or true/false",
            path.display()
        ))
        .into()),
    }
}

/// `baton completions SHELL`: the completion script on stdout.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "baton", out);
    Ok(())
}
