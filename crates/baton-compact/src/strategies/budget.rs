//! `budget { max_tokens, target_tokens }`: once the context is over `max_tokens`, drops the
//! oldest protocol units until it is under `target_tokens` (three quarters of `max_tokens`
//! unless set). Cutting below the maximum leaves room to grow, so the next compaction is some
//! turns away instead of on every turn (each one voids the provider's prompt cache) and the
//! context never goes over the maximum while a compaction would save too little to be worth
//! it. Uses the token counts stored with each message, so a check costs nothing and never
//! re-tokenizes history. It always keeps the last unit (the turn the model is answering); when
//! even that does not fit, it cuts as far as it safely can and the context stays over.
//!
//! ```
//! use baton_compact::strategies::Budget;
//! use baton_compact::{HistoryView, Plan, Strategy};
//! use baton_core::units::ProtocolEvents;
//! use baton_core::{EntryMeta, Seq};
//! let tail: Vec<EntryMeta> = (1..=10)
//!     .map(|s| EntryMeta { events: ProtocolEvents { seq: Seq(s), ..Default::default() }, tokens: 100 })
//!     .collect();
//! let view = HistoryView::new(None, &tail, &[], 50);
//! let plan = Budget { max_tokens: 600, target_tokens: Some(450) }.plan(&view);
//! assert_eq!(plan.cut(), Some(Seq(6)));            // 50 fixed + 4 × 100 kept
//! assert!(plan.tokens_after(&view) <= 450);
//! ```

use serde::{Deserialize, Serialize};

use crate::{HistoryView, Keep, Plan, Strategy};

/// The `budget` strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// The most tokens the context may hold.
    pub max_tokens: u64,
    /// How far it cuts once over the maximum (default three quarters of it).
    pub target_tokens: Option<u64>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_tokens: 32_000,
            target_tokens: None,
        }
    }
}

impl Budget {
    /// The size a compaction cuts the context down to.
    pub fn target(&self) -> u64 {
        self.target_tokens
            .unwrap_or(self.max_tokens / 4 * 3)
            .min(self.max_tokens)
    }
}

impl Strategy for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        let tokens = view.tokens();
        if tokens <= self.max_tokens {
            return Plan::Keep(Keep::UnderThreshold {
                tokens,
                threshold: self.max_tokens,
            });
        }
        self.cut(view)
    }

    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        self.cut(view)
    }

    fn limit(&self) -> Option<u64> {
        Some(self.max_tokens)
    }
}

impl Budget {
    /// The first safe cut under the target, else the last safe cut.
    fn cut(&self, view: &HistoryView<'_>) -> Plan {
        // The first safe cut that fits, else the last safe cut (as far as it can go).
        let target = self.target();
        let mut last = None;
        for cut in view.safe_cuts() {
            if view.fixed_tokens() + view.tokens_after(cut.seq()) <= target {
                return Plan::Drop { through: cut };
            }
            last = Some(cut);
        }
        match last {
            Some(through) => Plan::Drop { through },
            None => Plan::Keep(Keep::NoSafeCut {
                desired: view.tail().last().map_or(view.coverage(), |m| m.seq()),
            }),
        }
    }
}

impl super::Configured for Budget {
    const NAME: &'static str = "budget";
    const ABOUT: &'static str =
        "once over the maximum, drops the oldest units until under the target";

    fn check(&self) -> Result<(), (&'static str, String, &'static str)> {
        if self.max_tokens == 0 {
            return Err(("max_tokens", "0".into(), "1 or more"));
        }
        if let Some(t) = self.target_tokens
            && t > self.max_tokens
        {
            return Err(("target_tokens", t.to_string(), "at most budget.max_tokens"));
        }
        Ok(())
    }
}
