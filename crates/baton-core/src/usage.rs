//! What a model response cost in tokens, as its provider reported it (or as baton estimated it).
//!
//! [`Usage`] splits the tokens the way Anthropic bills them: fresh input, output, prompt-cache
//! writes kept 5 minutes and 1 hour (priced apart), and cache reads. OpenAI-style counts map onto
//! it with `input` = prompt tokens minus cached ones, `cache_read` = the cached ones, and no
//! cache writes.
//!
//! [`UsageRecord`] is one response's usage with what identifies it: a stable [`UsageRecord::id`]
//! that is the same wherever the response is found again (a streamed response written as several
//! rows, a continued session that copies old responses into its new file), so a store keeps one
//! record per id and a report counts each response once, whatever files it was read from.
//!
//! ```
//! use baton_core::usage::Usage;
//!
//! let u = Usage { input: 3, output: 50, cache_write_5m: 100, cache_write_1h: 0, cache_read: 900 };
//! assert_eq!(u.total(), 1053);
//! assert_eq!(u.context(), 1003);
//! assert_eq!(u.cache_efficiency(), Some(0.9));
//! ```

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Token counts of one or more model responses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens read fresh (neither written to nor read from the prompt cache).
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Input tokens written to the prompt cache with a 5-minute lifetime.
    pub cache_write_5m: u64,
    /// Input tokens written to the prompt cache with a 1-hour lifetime (priced higher).
    pub cache_write_1h: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
}

impl Usage {
    /// Every token counted: input, output, cache writes and cache reads.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_write() + self.cache_read
    }

    /// Cache writes of both lifetimes.
    pub fn cache_write(&self) -> u64 {
        self.cache_write_5m + self.cache_write_1h
    }

    /// The size of the prompt the response was given: fresh input, cache writes and reads.
    pub fn context(&self) -> u64 {
        self.input + self.cache_write() + self.cache_read
    }

    /// The share of cached input that was read rather than written,
    /// `cache_read / (cache_read + cache_write)`; `None` when nothing was cached.
    pub fn cache_efficiency(&self) -> Option<f64> {
        let cached = self.cache_read + self.cache_write();
        (cached > 0).then(|| self.cache_read as f64 / cached as f64)
    }

    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_write_5m += other.cache_write_5m;
        self.cache_write_1h += other.cache_write_1h;
        self.cache_read += other.cache_read;
    }
}

/// One model response's usage and what identifies it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// The response's identity, the same in every file it is found in: for Claude Code
    /// `claude-code:<message.id>:<requestId>` (`claude-code:<message.id>` when the line has no
    /// request id); for Codex `codex:<session id>:<cumulative total tokens>`; for estimates
    /// `<source key>#<message index>`. A store keeps one record per id.
    pub id: String,
    /// The model that answered, when the source says.
    pub model: Option<String>,
    /// The provider's response id (Anthropic's `message.id`), when the source has it.
    pub response_id: Option<String>,
    /// The provider's request id, when the source has it.
    pub request_id: Option<String>,
    /// When the source logged the response.
    pub at: Option<Timestamp>,
    /// The tokens.
    pub usage: Usage,
    /// True when the counts are baton's estimate (a tokenizer over the transcript), not the
    /// provider's report.
    pub estimated: bool,
}

impl UsageRecord {
    /// Which of two records of the same id to keep: the one with more tokens (a streamed
    /// response's later rows carry its growing output count; a copy in another file is the
    /// same response), `self` on a tie. So the totals a store keeps do not depend on the order
    /// the files were read in.
    pub fn keep_larger(self, other: UsageRecord) -> UsageRecord {
        if other.usage.total() > self.usage.total() {
            other
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, output: u64) -> UsageRecord {
        UsageRecord {
            id: id.into(),
            model: None,
            response_id: None,
            request_id: None,
            at: None,
            usage: Usage {
                output,
                ..Usage::default()
            },
            estimated: false,
        }
    }

    #[test]
    fn sums_and_shares() {
        let mut u = Usage::default();
        assert_eq!(u.cache_efficiency(), None);
        u.add(&Usage {
            input: 1,
            output: 2,
            cache_write_5m: 3,
            cache_write_1h: 4,
            cache_read: 7,
        });
        u.add(&Usage {
            cache_read: 7,
            ..Usage::default()
        });
        assert_eq!((u.total(), u.cache_write(), u.context()), (24, 7, 22));
        assert_eq!(u.cache_efficiency(), Some(14.0 / 21.0));
    }

    #[test]
    fn the_larger_copy_is_kept_whatever_the_order() {
        let (a, b) = (record("x", 5), record("x", 9));
        assert_eq!(a.clone().keep_larger(b.clone()).usage.output, 9);
        assert_eq!(b.clone().keep_larger(a).usage.output, 9);
        let tie = record("x", 9);
        assert_eq!(b.keep_larger(tie).usage.output, 9);
    }
}
