//! When a compaction runs, and when one is refused.
//!
//! A strategy says *what* it would do; the [`Trigger`] says whether doing it now pays:
//!
//! - **threshold**: nothing happens below `min_context_tokens` (when set), whatever the
//!   strategy would plan.
//! - **loop guard**: after a compaction, the next waits until new messages have grown the
//!   context by `min_growth` of its size right after that compaction. Without it, a context
//!   that stays over a strategy's threshold after compacting (a large summary, a huge last
//!   message) is compacted again on every turn — the loop users of other agents report.
//! - **minimum reduction**: a compaction that would save less than `min_reduction` of the
//!   context is refused, and so is a summary that is not smaller than what it replaces
//!   ([`Trigger::accept`], checked once the summary is written).
//! - **cost-aware** (optional, [`CostPolicy`]): compacting rewrites the prompt prefix and so
//!   voids the provider's prompt cache. The tokens saved per step, over the expected remaining
//!   steps, at the cached-input price (what they would have cost, being a cached prefix), must
//!   exceed the summary call (its input and output tokens) plus rewriting the new prefix into
//!   the cache. Prices come from [`baton_core::prices::PriceTable`].
//!
//! ```
//! use baton_compact::trigger::{Trigger, Skip};
//! let trigger = Trigger::default();
//! // 100k tokens down to 30k: admitted.
//! assert!(trigger.admit(100_000, 30_000, None, 0).is_ok());
//! // Saving 2%: refused.
//! assert!(matches!(trigger.admit(100_000, 98_000, None, 0), Err(Skip::TooLittle { .. })));
//! // Right after a compaction that left 30k, at 31k: the loop guard waits.
//! assert!(matches!(trigger.admit(31_000, 5_000, Some(30_000), 0), Err(Skip::LoopGuard { .. })));
//! ```

use baton_core::prices::{Price, PriceTable};
use serde::{Deserialize, Serialize};

/// The trigger policy: the `[compaction.trigger]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Trigger {
    /// Below this many context tokens nothing is compacted (0: the strategy alone decides).
    pub min_context_tokens: u64,
    /// The least share of the context a compaction must save (0.1 = 10%).
    pub min_reduction: f64,
    /// Loop guard: the share by which new messages must have grown the context since the last
    /// compaction before the next one.
    pub min_growth: f64,
    /// Weigh what a compaction saves against what it costs, when set.
    pub cost: Option<CostPolicy>,
}

impl Default for Trigger {
    fn default() -> Self {
        Trigger {
            min_context_tokens: 0,
            min_reduction: 0.1,
            min_growth: 0.25,
            cost: None,
        }
    }
}

/// The cost-aware part of the policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostPolicy {
    /// The model the agent calls (priced from the price table).
    pub model: String,
    /// How many more model calls the run is expected to make.
    pub remaining_steps: u32,
    /// Whether the provider caches the prompt prefix (Anthropic with `cache_control`, OpenAI
    /// automatically). Without a cache, saved tokens are worth the full input price and a
    /// compaction voids nothing.
    #[serde(default = "yes")]
    pub prompt_cache: bool,
}

fn yes() -> bool {
    true
}

/// Why a compaction does not run now.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Skip {
    /// The context is under the trigger's threshold.
    UnderThreshold {
        /// Context tokens.
        tokens: u64,
        /// The threshold.
        threshold: u64,
    },
    /// The last compaction was too recent: not enough new content since.
    LoopGuard {
        /// Context tokens now.
        tokens: u64,
        /// Context tokens right after the last compaction.
        after_last: u64,
        /// Tokens needed before the next compaction.
        needed: u64,
    },
    /// The compaction would save too little.
    TooLittle {
        /// Context tokens before.
        before: u64,
        /// Context tokens after.
        after: u64,
        /// The least share it must save.
        min_reduction: f64,
    },
    /// The summary is not smaller than what it replaces.
    SummaryNotSmaller {
        /// Tokens of the new summary.
        summary: u64,
        /// Tokens of the messages and summary it replaces.
        replaced: u64,
    },
    /// The compaction costs more than it saves.
    NotWorthIt {
        /// Dollars saved over the remaining steps.
        saves: f64,
        /// Dollars it costs (summary call plus prompt-cache rewrite).
        costs: f64,
    },
    /// The cost policy's model has no price.
    Unpriced {
        /// The model.
        model: String,
    },
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::UnderThreshold { tokens, threshold } => {
                write!(
                    f,
                    "{tokens} context tokens is under the trigger's {threshold}"
                )
            }
            Skip::LoopGuard {
                tokens,
                after_last,
                needed,
            } => write!(
                f,
                "loop guard: the context grew from {after_last} to {tokens} tokens since the last compaction; it compacts again at {needed}"
            ),
            Skip::TooLittle {
                before,
                after,
                min_reduction,
            } => write!(
                f,
                "it would save {:.1}% ({before} → {after} tokens), under the minimum of {:.1}%",
                100.0 * before.saturating_sub(*after) as f64 / (*before).max(1) as f64,
                100.0 * min_reduction
            ),
            Skip::SummaryNotSmaller { summary, replaced } => write!(
                f,
                "the summary ({summary} tokens) is not smaller than what it replaces ({replaced} tokens)"
            ),
            Skip::NotWorthIt { saves, costs } => write!(
                f,
                "it would save ${saves:.4} over the remaining steps and cost ${costs:.4}"
            ),
            Skip::Unpriced { model } => write!(
                f,
                "the cost policy's model {model:?} has no price in the price table"
            ),
        }
    }
}

impl Trigger {
    /// Whether a compaction from `before` to (an estimated) `after` tokens may run now.
    /// `after_last` is the context's size right after the run's last compaction, if there was
    /// one; `summary_call` the tokens a summarizer would read (0 when none is called).
    pub fn admit(
        &self,
        before: u64,
        after: u64,
        after_last: Option<u64>,
        summary_call: u64,
    ) -> Result<(), Skip> {
        self.admit_priced(
            before,
            after,
            after_last,
            summary_call,
            &PriceTable::defaults(),
        )
    }

    /// [`admit`](Self::admit) with a price table of the caller's.
    pub fn admit_priced(
        &self,
        before: u64,
        after: u64,
        after_last: Option<u64>,
        summary_call: u64,
        prices: &PriceTable,
    ) -> Result<(), Skip> {
        if before < self.min_context_tokens {
            return Err(Skip::UnderThreshold {
                tokens: before,
                threshold: self.min_context_tokens,
            });
        }
        if let Some(after_last) = after_last {
            // Saturating: `after_last` comes from a stored version's meta, which a client may
            // have written; a huge one must refuse, not overflow.
            let needed =
                after_last.saturating_add((after_last as f64 * self.min_growth).ceil() as u64);
            if before < needed {
                return Err(Skip::LoopGuard {
                    tokens: before,
                    after_last,
                    needed,
                });
            }
        }
        self.reduction(before, after)?;
        if let Some(cost) = &self.cost {
            // The summary's own output is unknown here; count it at a tenth of its input.
            cost.weigh(before, after, summary_call, summary_call / 10, prices)?;
        }
        Ok(())
    }

    /// Whether a compaction may run while the context is over its strategy's limit and took new
    /// content since the last compaction: neither the loop guard nor the minimum reduction holds
    /// it back; it only has to shrink the context.
    pub fn admit_over(&self, before: u64, after: u64) -> Result<(), Skip> {
        if after >= before {
            return Err(Skip::TooLittle {
                before,
                after,
                min_reduction: 0.0,
            });
        }
        Ok(())
    }

    /// [`accept`](Self::accept) for a context over its limit: the summary must still be smaller
    /// than what it replaces, and the context must shrink, by any amount.
    pub fn accept_over(
        &self,
        before: u64,
        after: u64,
        summary: u64,
        replaced: u64,
    ) -> Result<(), Skip> {
        if summary >= replaced {
            return Err(Skip::SummaryNotSmaller { summary, replaced });
        }
        self.admit_over(before, after)
    }

    /// Whether a written summary may be installed: it must be smaller than the summary and
    /// messages it replaces, and the context must shrink by the minimum reduction.
    pub fn accept(&self, before: u64, after: u64, summary: u64, replaced: u64) -> Result<(), Skip> {
        if summary >= replaced {
            return Err(Skip::SummaryNotSmaller { summary, replaced });
        }
        self.reduction(before, after)
    }

    fn reduction(&self, before: u64, after: u64) -> Result<(), Skip> {
        let saved = before.saturating_sub(after) as f64;
        if before == 0 || saved < self.min_reduction * before as f64 || after >= before {
            return Err(Skip::TooLittle {
                before,
                after,
                min_reduction: self.min_reduction,
            });
        }
        Ok(())
    }
}

impl CostPolicy {
    /// Dollars saved and spent by a compaction from `before` to `after` context tokens whose
    /// summary call reads `summary_in` and writes `summary_out` tokens; `Err` when it does not
    /// pay (or the model has no price).
    pub fn weigh(
        &self,
        before: u64,
        after: u64,
        summary_in: u64,
        summary_out: u64,
        prices: &PriceTable,
    ) -> Result<(f64, f64), Skip> {
        let price = prices.get(&self.model).ok_or_else(|| Skip::Unpriced {
            model: self.model.clone(),
        })?;
        let (saves, costs) = self.balance(price, before, after, summary_in, summary_out);
        if saves <= costs {
            return Err(Skip::NotWorthIt { saves, costs });
        }
        Ok((saves, costs))
    }

    fn balance(
        &self,
        price: &Price,
        before: u64,
        after: u64,
        summary_in: u64,
        summary_out: u64,
    ) -> (f64, f64) {
        let saved_per_step = before.saturating_sub(after);
        let (kept_rate, rewrite) = if self.prompt_cache {
            // Saved tokens were a cached prefix; the new prefix must be written to the cache
            // once, where it would otherwise have been read from it.
            (
                price.cached_input,
                Price::cost(price.cache_write - price.cached_input, after),
            )
        } else {
            (price.input, 0.0)
        };
        let saves = Price::cost(kept_rate, saved_per_step) * f64::from(self.remaining_steps);
        let costs = Price::cost(price.input, summary_in)
            + Price::cost(price.output, summary_out)
            + rewrite.max(0.0);
        (saves, costs)
    }
}

#[cfg(test)]
mod tests;
