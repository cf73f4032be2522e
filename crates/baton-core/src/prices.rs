//! The price table: what a model's tokens cost, per million, by model name prefix.
//!
//! Defaults ship in `prices.toml` at the crate's root (embedded here); a user's file of the same
//! shape replaces them ([`PriceTable::parse`]). The cost-aware compaction trigger weighs
//! tokens saved against a summary call and the prompt-cache loss with it; reports price the
//! calls they count with it.
//!
//! ```
//! use baton_core::prices::PriceTable;
//! let table = PriceTable::defaults();
//! let sonnet = table.get("claude-sonnet-4-5-20250929").unwrap();
//! assert_eq!(sonnet.input, 3.0);
//! assert!(table.get("my-local-llama").is_none());
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::usage::Usage;

/// The table shipped with baton.
pub const DEFAULT_PRICES: &str = include_str!("../prices.toml");

/// Prices of one model, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Fresh input tokens.
    pub input: f64,
    /// Input tokens read from the provider's prompt cache.
    pub cached_input: f64,
    /// Input tokens written to the prompt cache (Anthropic: with the default 5-minute lifetime).
    pub cache_write: f64,
    /// Input tokens written to the prompt cache with a 1-hour lifetime (Anthropic charges twice
    /// the input price); when absent, `cache_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<f64>,
    /// Output tokens.
    pub output: f64,
}

impl Price {
    /// Dollars for `tokens` at a per-million `rate`.
    pub fn cost(rate: f64, tokens: u64) -> f64 {
        rate * tokens as f64 / 1_000_000.0
    }

    /// Dollars for `usage` at these prices.
    pub fn usage_cost(&self, usage: &Usage) -> f64 {
        Price::cost(self.input, usage.input)
            + Price::cost(self.output, usage.output)
            + Price::cost(self.cache_write, usage.cache_write_5m)
            + Price::cost(
                self.cache_write_1h.unwrap_or(self.cache_write),
                usage.cache_write_1h,
            )
            + Price::cost(self.cached_input, usage.cache_read)
    }
}

/// Prices by model name prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// Prices by model name prefix.
    pub models: BTreeMap<String, Price>,
}

/// A price file that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PriceError {
    /// Not valid TOML of the table's shape.
    #[error("price table: {detail}")]
    Malformed {
        /// What was wrong, with its line where the parser says.
        detail: String,
    },
    /// A price that is negative or not a number.
    #[error("price table: models.{model:?}.{field} = {value}: expected a price of 0 or more")]
    Invalid {
        /// The model prefix.
        model: String,
        /// Which field.
        field: &'static str,
        /// The value.
        value: f64,
    },
}

impl PriceTable {
    /// The table shipped with baton (`prices.toml`).
    pub fn defaults() -> Self {
        // The embedded file is checked by this crate's tests; an unreadable one would be a
        // build defect, and an empty table only makes every model unpriced.
        PriceTable::parse(DEFAULT_PRICES).unwrap_or(PriceTable {
            models: BTreeMap::new(),
        })
    }

    /// Parses a price file.
    pub fn parse(text: &str) -> Result<Self, PriceError> {
        let table: PriceTable = toml::from_str(text).map_err(|e| PriceError::Malformed {
            detail: e.to_string().trim_end().replace('\n', " "),
        })?;
        for (model, p) in &table.models {
            for (field, value) in [
                ("input", p.input),
                ("cached_input", p.cached_input),
                ("cache_write", p.cache_write),
                ("cache_write_1h", p.cache_write_1h.unwrap_or(0.0)),
                ("output", p.output),
            ] {
                if !(value >= 0.0 && value.is_finite()) {
                    return Err(PriceError::Invalid {
                        model: model.clone(),
                        field,
                        value,
                    });
                }
            }
        }
        Ok(table)
    }

    /// The price of `model`: the entry whose name is the longest prefix of it (case-insensitive,
    /// a provider prefix such as `anthropic/` ignored).
    pub fn get(&self, model: &str) -> Option<&Price> {
        let model = model.to_ascii_lowercase();
        let model = model.rsplit('/').next().unwrap_or(&model);
        self.models
            .iter()
            .filter(|(prefix, _)| model.starts_with(&prefix.to_ascii_lowercase()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_table_parses_and_the_longest_prefix_wins() {
        let table = PriceTable::parse(DEFAULT_PRICES).unwrap();
        assert!(table.models.len() >= 10);
        assert_eq!(table.get("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(table.get("gpt-4o-2024-08-06").unwrap().input, 2.5);
        assert_eq!(table.get("openai/GPT-4o").unwrap().input, 2.5);
        assert_eq!(table.get("claude-opus-4-5-20251101").unwrap().output, 25.0);
        assert_eq!(table.get("claude-opus-4-1-20250805").unwrap().output, 75.0);
        assert!(table.get("llama3").is_none());
        assert_eq!(Price::cost(3.0, 2_000_000), 6.0);
    }

    /// issue 17: claude-opus-4-6 was priced by the "claude-opus-4" prefix at Opus 4's $15/$75.
    #[test]
    fn r17_current_models_have_their_own_rates_and_a_one_hour_write_rate() {
        let table = PriceTable::defaults();
        for (model, input, read, write_5m, write_1h, output) in [
            ("claude-opus-4-6", 5.0, 0.5, 6.25, 10.0, 25.0),
            ("claude-opus-4-5-20251101", 5.0, 0.5, 6.25, 10.0, 25.0),
            ("claude-opus-4-1-20250805", 15.0, 1.5, 18.75, 30.0, 75.0),
            ("claude-sonnet-4-5-20250929", 3.0, 0.3, 3.75, 6.0, 15.0),
            ("claude-sonnet-4-20250514", 3.0, 0.3, 3.75, 6.0, 15.0),
            ("claude-haiku-4-5-20251001", 1.0, 0.1, 1.25, 2.0, 5.0),
            ("gpt-5", 1.25, 0.125, 1.25, 1.25, 10.0),
            ("gpt-5.1-codex-max", 1.25, 0.125, 1.25, 1.25, 10.0),
            ("gpt-5.2-codex", 1.75, 0.175, 1.75, 1.75, 14.0),
            ("gpt-5-mini", 0.25, 0.025, 0.25, 0.25, 2.0),
            ("gpt-5-nano-2025-08-07", 0.05, 0.005, 0.05, 0.05, 0.4),
        ] {
            let p = table
                .get(model)
                .unwrap_or_else(|| panic!("{model} has no price"));
            assert_eq!(
                (
                    p.input,
                    p.cached_input,
                    p.cache_write,
                    p.cache_write_1h.unwrap_or(p.cache_write),
                    p.output
                ),
                (input, read, write_5m, write_1h, output),
                "{model}"
            );
        }
        let usage = Usage {
            input: 1_000_000,
            output: 1_000_000,
            cache_write_5m: 1_000_000,
            cache_write_1h: 1_000_000,
            cache_read: 1_000_000,
        };
        let opus = table.get("claude-opus-4-6").unwrap();
        assert_eq!(opus.usage_cost(&usage), 5.0 + 25.0 + 6.25 + 10.0 + 0.5);
        let gpt = table.get("gpt-5").unwrap();
        assert_eq!(gpt.usage_cost(&usage), 1.25 + 10.0 + 1.25 + 1.25 + 0.125);
    }

    #[test]
    fn a_bad_file_names_what_is_wrong() {
        let err = PriceTable::parse("[models.x]\ninput = 1.0\n").unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
        let err = PriceTable::parse(
            "[models.x]\ninput = -1.0\ncached_input = 0.0\ncache_write = 0.0\noutput = 0.0\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "price table: models.\"x\".input = -1: expected a price of 0 or more"
        );
        let err = PriceTable::parse("[models.x]\nprice = 1\n").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err = PriceTable::parse(
            "[models.x]\ninput = 1.0\ncached_input = 0.0\ncache_write = 0.0\ncache_write_1h = -2.0\noutput = 0.0\n",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "price table: models.\"x\".cache_write_1h = -2: expected a price of 0 or more"
        );
    }
}
