//! Token estimates.
//!
//! A byte-based proxy: about four bytes of text per token, plus a small per-block overhead for
//! the structure the provider adds. A real tokenizer plugs in later behind the same call sites;
//! counts are stored per message at append time so budgets never re-tokenize history.

use crate::{ContentBlock, Message};

const BYTES_PER_TOKEN: usize = 4;
const BLOCK_OVERHEAD: u32 = 3;
const MESSAGE_OVERHEAD: u32 = 4;

/// Estimated tokens of `text`.
pub fn estimate_text(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(BYTES_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// Estimated tokens of a message as a provider would receive it.
pub fn estimate_message(message: &Message) -> u32 {
    message
        .content
        .iter()
        .map(estimate_block)
        .fold(MESSAGE_OVERHEAD, u32::saturating_add)
}

fn estimate_block(block: &ContentBlock) -> u32 {
    let body = match block {
        ContentBlock::Text { text } => estimate_text(text),
        ContentBlock::Thinking { thinking, .. } => estimate_text(thinking),
        ContentBlock::RedactedThinking { data } => estimate_text(data),
        ContentBlock::ToolUse { name, input, .. } => {
            estimate_text(name).saturating_add(estimate_text(&input.to_string()))
        }
        ContentBlock::ToolResult { content, .. } => content
            .iter()
            .map(estimate_block)
            .fold(0, u32::saturating_add),
        // Providers bill images by size, not by payload bytes; a flat figure is closer than bytes.
        ContentBlock::Image { .. } => 1_000,
        ContentBlock::Document { .. } => 1_500,
    };
    body.saturating_add(BLOCK_OVERHEAD)
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
