//! Choosing a strategy with one line of configuration, and building it: the `[compaction]`
//! section of `baton.toml` (parsed by the binary; this crate only defines its shape).
//!
//! ```toml
//! [compaction]
//! strategy = "sliding"          # none | sliding | budget | clear-tool-results | summarize | structured
//! log = "compactions.jsonl"     # optional: wrap the strategy in `Logged`
//!
//! [compaction.sliding]
//! keep_last = 20
//! ```
//!
//! Each strategy's own table is optional and takes only that strategy's fields; a missing field
//! takes the strategy's default. [`CompactionConfig::build`] checks the name and returns the
//! strategy ready to use.
//!
//! ```
//! use baton_compact::config::CompactionConfig;
//! let config: CompactionConfig = serde_json::from_str(r#"{"strategy": "budget", "budget": {"max_tokens": 8000}}"#)?;
//! assert_eq!(config.build()?.name(), "budget");
//! let err = serde_json::from_str::<CompactionConfig>(r#"{"strategy": "slidng"}"#)?.build().err().unwrap();
//! assert_eq!(err.to_string(), r#"compaction.strategy = "slidng": expected one of none, sliding, budget, clear-tool-results, summarize, structured"#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::strategies::{Budget, ClearToolResults, NoCompaction, Sliding, Structured, Summarize};
use crate::trigger::Trigger;
use crate::{Logged, Strategy};

/// Every strategy name, in the order errors list them.
pub const STRATEGIES: [&str; 6] = [
    "none",
    "sliding",
    "budget",
    "clear-tool-results",
    "summarize",
    "structured",
];

/// The `[compaction]` section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionConfig {
    /// Which strategy: one of [`STRATEGIES`]. Default `none`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// When given, every compaction that changed something is logged to this file.
    #[serde(default)]
    pub log: Option<PathBuf>,
    /// `sliding`'s settings.
    #[serde(default)]
    pub sliding: Option<Sliding>,
    /// `budget`'s settings.
    #[serde(default)]
    pub budget: Option<Budget>,
    /// `clear-tool-results`' settings.
    #[serde(default, rename = "clear-tool-results")]
    pub clear_tool_results: Option<ClearToolResults>,
    /// `summarize`'s settings.
    #[serde(default)]
    pub summarize: Option<Summarize>,
    /// `structured`'s settings.
    #[serde(default)]
    pub structured: Option<Structured>,
    /// When compaction runs and when it is refused.
    #[serde(default)]
    pub trigger: Trigger,
}

fn default_strategy() -> String {
    "none".to_owned()
}

/// A configuration that names no strategy this build knows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The strategy name is not one of [`STRATEGIES`].
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
        key: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
}

impl CompactionConfig {
    /// A configuration of `strategy` with its defaults.
    pub fn named(strategy: &str) -> Self {
        CompactionConfig {
            strategy: strategy.to_owned(),
            ..CompactionConfig::default()
        }
    }

    /// Checks every setting's range: a sliding window or kept tail of 0 messages would send a
    /// context without the turn the model answers; a trigger share must be a share.
    pub fn validate(&self) -> Result<(), Error> {
        let out = |key, value: String, expected| {
            Err(Error::OutOfRange {
                key,
                value,
                expected,
            })
        };
        if let Some(s) = &self.sliding
            && s.keep_last == 0
        {
            return out("sliding.keep_last", "0".into(), "1 or more");
        }
        if let Some(c) = &self.clear_tool_results
            && c.keep_recent == 0
        {
            return out("clear-tool-results.keep_recent", "0".into(), "1 or more");
        }
        if let Some(s) = &self.summarize
            && s.keep_recent == 0
        {
            return out("summarize.keep_recent", "0".into(), "1 or more");
        }
        if let Some(s) = &self.structured
            && s.keep_recent == 0
        {
            return out("structured.keep_recent", "0".into(), "1 or more");
        }
        if let Some(b) = &self.budget {
            if b.max_tokens == 0 {
                return out("budget.max_tokens", "0".into(), "1 or more");
            }
            if let Some(t) = b.target_tokens
                && t > b.max_tokens
            {
                return out(
                    "budget.target_tokens",
                    t.to_string(),
                    "at most budget.max_tokens",
                );
            }
        }
        let t = &self.trigger;
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
        Ok(())
    }

    /// The configured strategy, wrapped in [`Logged`] when `log` is set; checks the settings
    /// first ([`validate`](Self::validate)).
    pub fn build(&self) -> Result<Arc<dyn Strategy>, Error> {
        self.validate()?;
        let strategy: Arc<dyn Strategy> = match self.strategy.as_str() {
            "none" => Arc::new(NoCompaction),
            "sliding" => Arc::new(self.sliding.unwrap_or_default()),
            "budget" => Arc::new(self.budget.unwrap_or_default()),
            "clear-tool-results" => Arc::new(self.clear_tool_results.unwrap_or_default()),
            "summarize" => Arc::new(self.summarize.clone().unwrap_or_default()),
            "structured" => Arc::new(self.structured.unwrap_or_default()),
            other => {
                return Err(Error::UnknownStrategy {
                    name: other.to_owned(),
                    known: STRATEGIES.to_vec(),
                });
            }
        };
        Ok(match &self.log {
            Some(path) => Arc::new(Logged::new(strategy, path.clone())),
            None => strategy,
        })
    }
}

/// Settings given on top of a configuration (command-line flags, an API request's fields), each
/// applied to every strategy it concerns; `None` leaves the configuration's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `sliding`: how many recent messages to keep.
    pub keep_last: Option<usize>,
    /// `budget`: the most tokens the context may hold.
    pub max_tokens: Option<u64>,
    /// `budget`: what it cuts down to once over.
    pub target_tokens: Option<u64>,
    /// `clear-tool-results`, `summarize`, `structured`: recent messages kept whole.
    pub keep_recent: Option<usize>,
    /// `clear-tool-results`: the smallest result it clears.
    pub min_tokens: Option<u32>,
    /// `summarize`, `structured`: the context size that triggers them.
    pub threshold: Option<u64>,
    /// `summarize`, `structured`: the recent tokens kept whole.
    pub keep_tokens: Option<u64>,
    /// `summarize`: instructions for the summarizer.
    pub instructions: Option<String>,
}

impl CompactionConfig {
    /// Applies `o` on top of this configuration.
    pub fn apply(&mut self, o: &Overrides) {
        if let Some(n) = o.keep_last {
            self.sliding.get_or_insert_with(Sliding::default).keep_last = n;
        }
        if let Some(n) = o.max_tokens {
            self.budget.get_or_insert_with(Budget::default).max_tokens = n;
        }
        if let Some(n) = o.target_tokens {
            self.budget
                .get_or_insert_with(Budget::default)
                .target_tokens = Some(n);
        }
        if let Some(n) = o.keep_recent {
            self.clear_tool_results
                .get_or_insert_with(ClearToolResults::default)
                .keep_recent = n;
            self.summarize
                .get_or_insert_with(Summarize::default)
                .keep_recent = n;
            self.structured
                .get_or_insert_with(Structured::default)
                .keep_recent = n;
        }
        if let Some(n) = o.min_tokens {
            self.clear_tool_results
                .get_or_insert_with(ClearToolResults::default)
                .min_tokens = n;
        }
        if let Some(n) = o.threshold {
            self.summarize
                .get_or_insert_with(Summarize::default)
                .threshold = n;
            self.structured
                .get_or_insert_with(Structured::default)
                .threshold = n;
        }
        if let Some(n) = o.keep_tokens {
            self.summarize
                .get_or_insert_with(Summarize::default)
                .keep_tokens = Some(n);
            self.structured
                .get_or_insert_with(Structured::default)
                .keep_tokens = Some(n);
        }
        if let Some(text) = &o.instructions {
            self.summarize
                .get_or_insert_with(Summarize::default)
                .instructions = Some(text.clone());
        }
    }
}
