//! Choosing a strategy with one line of configuration, and building it: the `[compaction]`
//! section of `baton.toml` (parsed by the binary; this crate only defines its shape).
//!
//! ```toml
//! [compaction]
//! strategy = "sliding"          # any name of the registry (`baton_compact::strategies::REGISTRY`)
//! log = "compactions.jsonl"     # optional: wrap the executor in `Logged`
//! clear_layer = true            # clear old tool results under strategies that hold a limit
//!
//! [compaction.sliding]
//! keep_last = 20
//!
//! [compaction.state]            # the working state's cap
//! share = 0.2                   # of the strategy's limit; or max_tokens = 4000
//! ```
//!
//! Each strategy's own table is optional and takes only that strategy's fields; every field has
//! a default, so any subset loads (`[compaction.structured] threshold = 16000` alone). A table
//! named after no strategy is refused, naming the ones there are.
//!
//! ```
//! use baton_compact::config::CompactionConfig;
//! let config: CompactionConfig = serde_json::from_str(r#"{"strategy": "budget", "budget": {"max_tokens": 8000}}"#)?;
//! assert_eq!(config.build()?.limit(), Some(8000));
//! let err = serde_json::from_str::<CompactionConfig>(r#"{"strategy": "slidng"}"#)?.build().err().unwrap();
//! assert_eq!(err.to_string(), r#"compaction.strategy = "slidng": expected one of none, sliding, budget, clear-tool-results, summarize, structured"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::Strategy;
use crate::executor::{Settings, StateCap};
use crate::strategies::{ClearToolResults, REGISTRY, Registered};
use crate::trigger::Trigger;

/// The `[compaction]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionConfig {
    /// Which strategy: a name of the registry. Default `none`.
    pub strategy: String,
    /// The settings every strategy shares (trigger, clearing layer, state cap, log).
    pub settings: Settings,
    /// Each strategy's own table, by name, as written (missing fields take the defaults).
    pub tables: BTreeMap<String, Value>,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig::named("none")
    }
}

/// The section as written: the shared keys, and every other key a strategy's table.
#[derive(Deserialize)]
struct Raw {
    #[serde(default = "default_strategy")]
    strategy: String,
    #[serde(default)]
    log: Option<PathBuf>,
    #[serde(default = "yes")]
    clear_layer: bool,
    #[serde(default)]
    state: StateCap,
    #[serde(default)]
    trigger: Trigger,
    #[serde(flatten)]
    tables: BTreeMap<String, Value>,
}

fn default_strategy() -> String {
    "none".to_owned()
}

fn yes() -> bool {
    true
}

impl<'de> Deserialize<'de> for CompactionConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Raw::deserialize(d)?;
        for key in raw.tables.keys() {
            if !REGISTRY.iter().any(|r| r.name == key) {
                let mut known: Vec<&str> =
                    vec!["strategy", "log", "clear_layer", "state", "trigger"];
                known.extend(REGISTRY.iter().map(|r| r.name));
                return Err(serde::de::Error::custom(format!(
                    "unknown key compaction.{key}: expected one of {}",
                    known.join(", ")
                )));
            }
        }
        Ok(CompactionConfig {
            strategy: raw.strategy,
            settings: Settings {
                trigger: raw.trigger,
                clear_layer: raw.clear_layer,
                state: raw.state,
                log: raw.log,
            },
            tables: raw.tables,
        })
    }
}

impl Serialize for CompactionConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = serde_json::Map::new();
        map.insert("strategy".into(), Value::String(self.strategy.clone()));
        if let Some(log) = &self.settings.log {
            map.insert("log".into(), Value::String(log.display().to_string()));
        }
        map.insert("clear_layer".into(), Value::Bool(self.settings.clear_layer));
        map.insert(
            "state".into(),
            serde_json::to_value(self.settings.state).map_err(serde::ser::Error::custom)?,
        );
        map.insert(
            "trigger".into(),
            serde_json::to_value(&self.settings.trigger).map_err(serde::ser::Error::custom)?,
        );
        for (name, table) in &self.tables {
            map.insert(name.clone(), table.clone());
        }
        Value::Object(map).serialize(s)
    }
}

/// A configuration that names no strategy this build knows, or a setting out of its range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The strategy name is not in the registry.
    #[error("compaction.strategy = {name:?}: expected one of {}", .known.join(", "))]
    UnknownStrategy {
        /// The name given.
        name: String,
        /// The names known.
        known: Vec<&'static str>,
    },
    /// A setting out of its range.
    #[error("compaction.{key} = {value}: expected {expected}")]
    OutOfRange {
        /// The setting, as written in the file (`sliding.keep_last`).
        key: String,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// A strategy's table that does not read as its settings.
    #[error("compaction.{name}: {detail}")]
    Table {
        /// The strategy.
        name: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl CompactionConfig {
    /// A configuration of `strategy` with its defaults.
    pub fn named(strategy: &str) -> Self {
        CompactionConfig {
            strategy: strategy.to_owned(),
            settings: Settings::default(),
            tables: BTreeMap::new(),
        }
    }

    /// The registry's entry for the configured strategy.
    fn registered(&self) -> Result<&'static Registered, Error> {
        REGISTRY
            .iter()
            .find(|r| r.name == self.strategy)
            .ok_or_else(|| Error::UnknownStrategy {
                name: self.strategy.clone(),
                known: REGISTRY.iter().map(|r| r.name).collect(),
            })
    }

    /// The settings of strategy `name` (its table over its defaults), as `T`.
    pub fn table<T: Default + serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, Error> {
        match self.tables.get(name) {
            None => Ok(T::default()),
            Some(value) => serde_json::from_value(value.clone()).map_err(|e| Error::Table {
                name: REGISTRY
                    .iter()
                    .find(|r| r.name == name)
                    .map_or("?", |r| r.name),
                detail: e.to_string(),
            }),
        }
    }

    /// Sets field `key` of strategy `name`'s table.
    pub fn set(&mut self, name: &str, key: &str, value: Value) {
        let table = self
            .tables
            .entry(name.to_owned())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if !table.is_object() {
            *table = Value::Object(serde_json::Map::new());
        }
        if let Value::Object(map) = table {
            map.insert(key.to_owned(), value);
        }
    }

    /// Checks every setting's range: each configured strategy's table reads as its settings and
    /// passes its own checks; a trigger share must be a share; the state's cap must be positive.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, table) in &self.tables {
            if let Some(r) = REGISTRY.iter().find(|r| r.name == name) {
                (r.check)(table.clone()).map_err(|e| match e {
                    Error::Table { detail, .. } => Error::Table {
                        name: r.name,
                        detail,
                    },
                    other => other,
                })?;
            }
        }
        let out = |key: &str, value: String, expected| {
            Err(Error::OutOfRange {
                key: key.to_owned(),
                value,
                expected,
            })
        };
        let t = &self.settings.trigger;
        if !(0.0..1.0).contains(&t.min_reduction) {
            return out(
                "trigger.min_reduction",
                t.min_reduction.to_string(),
                "a share from 0 up to (not including) 1",
            );
        }
        if !(t.min_growth >= 0.0 && t.min_growth.is_finite()) {
            return out(
                "trigger.min_growth",
                t.min_growth.to_string(),
                "a share of 0 or more",
            );
        }
        if let Some(cost) = &t.cost
            && cost.remaining_steps == 0
        {
            return out("trigger.cost.remaining_steps", "0".into(), "1 or more");
        }
        let s = &self.settings.state;
        if !(s.share > 0.0 && s.share <= 1.0) {
            return out(
                "state.share",
                s.share.to_string(),
                "a share above 0, at most 1",
            );
        }
        if s.max_tokens == Some(0) {
            return out("state.max_tokens", "0".into(), "1 or more");
        }
        Ok(())
    }

    /// The configured strategy; checks the settings first ([`validate`](Self::validate)).
    pub fn build(&self) -> Result<Arc<dyn Strategy>, Error> {
        self.validate()?;
        let registered = self.registered()?;
        let table = self
            .tables
            .get(registered.name)
            .cloned()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        (registered.build)(table)
    }

    /// The clearing layer's settings: the `clear-tool-results` table.
    pub fn clear(&self) -> Result<ClearToolResults, Error> {
        self.table("clear-tool-results")
    }
}

/// Settings given on top of a configuration (command-line flags, an API request's fields), each
/// applied to every strategy that has a field of that name; `None` leaves the configuration's
/// value.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Overrides {
    /// `sliding`: how many recent messages to keep.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<usize>,
    /// `budget`: the most tokens the context may hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `budget`: what it cuts down to once over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_tokens: Option<u64>,
    /// `clear-tool-results`, `summarize`, `structured`: recent messages kept whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_recent: Option<usize>,
    /// `clear-tool-results`: the smallest result it clears.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// `summarize`, `structured`: the context size that triggers them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
    /// `summarize`, `structured`: the recent tokens kept whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_tokens: Option<u64>,
    /// `summarize`: instructions for the summarizer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

impl CompactionConfig {
    /// Applies `o` on top of this configuration: each given field to every strategy whose
    /// settings have a field of that name.
    pub fn apply(&mut self, o: &Overrides) {
        let Ok(Value::Object(given)) = serde_json::to_value(o) else {
            return;
        };
        for registered in REGISTRY {
            let Value::Object(defaults) = (registered.defaults)() else {
                continue;
            };
            for (key, value) in &given {
                if defaults.contains_key(key) {
                    self.set(registered.name, key, value.clone());
                }
            }
        }
    }

    /// The same configuration holding the context to `budget` tokens: every strategy's limit
    /// (`budget`'s maximum, the summarizing strategies' threshold) set to it.
    pub fn with_budget(mut self, budget: u64) -> Self {
        self.apply(&Overrides {
            max_tokens: Some(budget),
            threshold: Some(budget),
            ..Overrides::default()
        });
        self
    }
}
