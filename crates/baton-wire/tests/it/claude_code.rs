//! Anthropic round trips over every user and assistant message of the Claude Code sessions.

use baton_core::{ContentBlock, Message};
use baton_wire::{Format, anthropic, detect};

use crate::corpus;

#[test]
fn every_message_round_trips() {
    let Some(dir) = corpus::folder("claude-code-jsonl") else {
        return;
    };
    let (mut messages, mut blocks, mut tool_uses, mut tool_results, mut thinking) = (0, 0, 0, 0, 0);
    for path in corpus::files(&dir, ".jsonl") {
        for sample in corpus::claude_code_messages(&path) {
            let at = &sample.at;
            let message =
                anthropic::parse_message(&sample.value).unwrap_or_else(|e| panic!("{at}: {e}"));
            let rendered = anthropic::render_message(&message);
            assert_eq!(
                corpus::canonical_anthropic(&rendered),
                corpus::canonical_anthropic(&sample.value),
                "{at}: render(parse(x)) differs from x"
            );
            let again = anthropic::parse_message(&rendered).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(again, message, "{at}: parse(render(m)) differs from m");
            // Auto-detection reads it the same (or, with no markers, as Anthropic anyway).
            assert_ne!(detect(&sample.value), Some(Format::OpenAi), "{at}");
            assert_eq!(
                baton_wire::parse_message(&sample.value).unwrap(),
                message,
                "{at}"
            );

            messages += 1;
            blocks += message.content.len();
            tool_uses += message.tool_use_ids().count();
            tool_results += message.tool_result_ids().count();
            thinking += count_thinking(&message);
        }
    }
    // The corpus held 2670 messages, 942 tool uses, 941 tool results and 164 thinking blocks
    // when these tests were written; the floors keep the test from passing on an empty read.
    assert!(messages >= 2500, "only {messages} messages");
    assert!(blocks >= 2500, "only {blocks} blocks");
    assert!(tool_uses >= 900, "only {tool_uses} tool uses");
    assert!(tool_results >= 900, "only {tool_results} tool results");
    assert!(thinking >= 150, "only {thinking} thinking blocks");
}

fn count_thinking(message: &Message) -> usize {
    message
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::Thinking { .. }))
        .count()
}
