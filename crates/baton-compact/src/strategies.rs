//! The strategies, one file each, and [`REGISTRY`], the one list of them.
//!
//! A new strategy is one new file (its settings type, with `Default`, serde and a
//! [`Configured`] impl naming it) plus one line in [`REGISTRY`]. Configuration, the CLI's
//! `--strategy` and the API read the registry; a test holds the CLI's help, the API's enum and
//! the command-line reference's table (`docs/cli.md`) against it.

mod budget;
mod clear_tool_results;
mod none;
mod sliding;
mod structured;
mod summarize;

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use budget::Budget;
pub use clear_tool_results::ClearToolResults;
pub use none::NoCompaction;
pub use sliding::Sliding;
pub use structured::Structured;
pub use summarize::Summarize;

use crate::Strategy;
use crate::config::Error;

/// A strategy as configuration knows it: its name, what it does, its settings.
pub trait Configured: Strategy + Default + Serialize + DeserializeOwned + 'static {
    /// The name configuration, the CLI and the API use.
    const NAME: &'static str;
    /// What it does, in one line (the CLI's help and the command-line reference's table (`docs/cli.md`) say the same).
    const ABOUT: &'static str;

    /// Checks the settings' ranges; the message names the field.
    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        Ok(())
    }
}

/// A registered strategy.
pub struct Registered {
    /// Its name.
    pub name: &'static str,
    /// What it does.
    pub about: &'static str,
    /// Its default settings, as JSON (their keys are its fields).
    pub defaults: fn() -> Value,
    /// Builds it from its table.
    pub build: fn(Value) -> Result<Arc<dyn Strategy>, Error>,
    /// Checks its table.
    pub check: fn(Value) -> Result<(), Error>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.name)
            .finish()
    }
}

/// Every strategy, in the order errors and help list them.
pub const REGISTRY: &[Registered] = &[
    register::<NoCompaction>(),
    register::<Sliding>(),
    register::<Budget>(),
    register::<ClearToolResults>(),
    register::<Summarize>(),
    register::<Structured>(),
];

/// The registry's names, in order.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|r| r.name).collect()
}

const fn register<S: Configured>() -> Registered {
    Registered {
        name: S::NAME,
        about: S::ABOUT,
        defaults: defaults::<S>,
        build: build::<S>,
        check: check::<S>,
    }
}

fn defaults<S: Configured>() -> Value {
    serde_json::to_value(S::default()).unwrap_or(Value::Null)
}

fn parse<S: Configured>(table: Value) -> Result<S, Error> {
    let settings: S = serde_json::from_value(table).map_err(|e| Error::Table {
        name: S::NAME,
        detail: e.to_string(),
    })?;
    settings
        .check()
        .map_err(|(field, value, expected)| Error::OutOfRange {
            key: format!("{}.{field}", S::NAME),
            value,
            expected,
        })?;
    Ok(settings)
}

fn build<S: Configured>(table: Value) -> Result<Arc<dyn Strategy>, Error> {
    Ok(Arc::new(parse::<S>(table)?))
}

fn check<S: Configured>(table: Value) -> Result<(), Error> {
    parse::<S>(table).map(|_| ())
}
