//! Token counts.
//!
//! [`TokenCounter`] is the seam: [`ByteEstimate`] here (about four bytes of text per token, no
//! vocabulary), real BPE vocabularies in `baton-tokens`. Both count a message the same way —
//! the text of each block, plus a small per-block and per-message overhead for the structure a
//! provider adds — so they differ only in how text becomes tokens. Counts are computed once per
//! message, when it is appended or imported, and stored: a budget check never re-tokenizes
//! history.
//!
//! ```
//! use baton_core::tokens::{ByteEstimate, TokenCounter};
//! use baton_core::{Message, Role};
//! let n = ByteEstimate.count_message(&Message::text(Role::User, "x".repeat(4000)));
//! assert_eq!(n, 4 + 3 + 1000);
//! ```

use crate::{ContentBlock, Message};

/// Counts tokens of text and messages.
///
/// Implementors provide [`count_text`](Self::count_text); [`count_message`](Self::count_message)
/// adds the structure around it the same way for every counter, so a budget computed with one
/// counter compares with another's only through their text counts.
pub trait TokenCounter: Send + Sync {
    /// The counter's name, as configured (`bytes`, `o200k_base`, `cl100k_base`).
    fn name(&self) -> &str;

    /// Tokens of `text`.
    fn count_text(&self, text: &str) -> u32;

    /// Tokens of a message as a provider would receive it.
    fn count_message(&self, message: &Message) -> u32 {
        message
            .content
            .iter()
            .map(|b| count_block(self, b))
            .fold(MESSAGE_OVERHEAD, u32::saturating_add)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn count_text(&self, text: &str) -> u32 {
        (**self).count_text(text)
    }
    fn count_message(&self, message: &Message) -> u32 {
        (**self).count_message(message)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn count_text(&self, text: &str) -> u32 {
        (**self).count_text(text)
    }
    fn count_message(&self, message: &Message) -> u32 {
        (**self).count_message(message)
    }
}

/// The byte-based proxy: a token per four bytes of text, rounded up. Needs no vocabulary and
/// costs nothing; `baton-bench` measures how far it is from the real vocabularies on the corpus.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByteEstimate;

impl TokenCounter for ByteEstimate {
    fn name(&self) -> &str {
        "bytes"
    }
    fn count_text(&self, text: &str) -> u32 {
        estimate_text(text)
    }
}

fn count_block<C: TokenCounter + ?Sized>(counter: &C, block: &ContentBlock) -> u32 {
    let body = match block {
        ContentBlock::Text { text } => counter.count_text(text),
        ContentBlock::ToolReference { tool_name } => counter.count_text(tool_name),
        // Its size on the wire: no vocabulary is known to apply to a block baton cannot read.
        ContentBlock::Opaque { block } => estimate_text(&block.to_string()),
        ContentBlock::Thinking { thinking, .. } => counter.count_text(thinking),
        // Opaque: its size on the wire, as the proxy counts it; no vocabulary applies.
        ContentBlock::RedactedThinking { data } => estimate_text(data),
        ContentBlock::ToolUse { name, input, .. } => counter
            .count_text(name)
            .saturating_add(counter.count_text(&input.to_string())),
        ContentBlock::ToolResult { content, .. } => content
            .iter()
            .map(|b| count_block(counter, b))
            .fold(0, u32::saturating_add),
        // Providers bill images by size, not by payload bytes; a flat figure is closer than bytes.
        ContentBlock::Image { .. } => 1_000,
        ContentBlock::Document { .. } => 1_500,
    };
    body.saturating_add(BLOCK_OVERHEAD)
}

const BYTES_PER_TOKEN: usize = 4;
const BLOCK_OVERHEAD: u32 = 3;
const MESSAGE_OVERHEAD: u32 = 4;

/// Estimated tokens of `text`.
pub fn estimate_text(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(BYTES_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// Estimated tokens of a message as a provider would receive it ([`ByteEstimate`]).
pub fn estimate_message(message: &Message) -> u32 {
    ByteEstimate.count_message(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn estimate_grows_with_text() {
        let short = estimate_message(&Message::text(Role::User, "hi"));
        let long = estimate_message(&Message::text(Role::User, "x".repeat(4000)));
        assert_eq!(short, 4 + 3 + 1);
        assert_eq!(long, 4 + 3 + 1000);
    }
}
