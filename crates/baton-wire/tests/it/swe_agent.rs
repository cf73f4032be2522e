//! OpenAI round trips over every `history` entry of the SWE-agent trajectories.

use baton_core::Role;
use baton_wire::{Format, detect, openai};

use crate::corpus;

#[test]
fn every_message_round_trips() {
    let Some(dir) = corpus::folder("swe-agent-traj") else {
        return;
    };
    let (mut messages, mut tool_messages, mut tool_calls, mut function_calling_files) =
        (0, 0, 0, 0);
    for path in corpus::files(&dir, ".traj") {
        if path.to_string_lossy().contains("function_calling") {
            function_calling_files += 1;
        }
        let history = corpus::swe_agent_history(&path);
        for (sent, stored) in history.sent.iter().zip(&history.stored) {
            let at = &sent.at;
            let message =
                openai::parse_message(&sent.value).unwrap_or_else(|e| panic!("{at}: {e}"));
            let rendered = openai::render_message(&message);
            assert_eq!(
                rendered.len(),
                1,
                "{at}: one message renders as {rendered:?}"
            );
            assert_eq!(
                corpus::canonical_openai(&rendered[0]),
                corpus::canonical_openai(&sent.value),
                "{at}: render(parse(x)) differs from x"
            );
            let again = openai::parse_message(&rendered[0]).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(again, message, "{at}: parse(render(m)) differs from m");
            assert_ne!(detect(&sent.value), Some(Format::Anthropic), "{at}");
            assert_eq!(
                baton_wire::parse_message(&sent.value).unwrap(),
                message,
                "{at}"
            );
            // SWE-agent's own keys (agent, message_type, thought, action) are ignored; its tool
            // entries store `tool_call_ids` instead of `tool_call_id`, which only the sent form has.
            if message.role != Role::Tool {
                let stored =
                    openai::parse_message(&stored.value).unwrap_or_else(|e| panic!("{at}: {e}"));
                assert_eq!(stored, message, "{at}: stored and sent forms differ");
            }

            messages += 1;
            tool_messages += usize::from(message.role == Role::Tool);
            tool_calls += message.tool_use_ids().count();
        }
    }
    // 463 entries, 44 tool messages and 44 tool calls when these tests were written.
    assert!(
        function_calling_files >= 3,
        "only {function_calling_files} function-calling files"
    );
    assert!(messages >= 400, "only {messages} messages");
    assert!(tool_messages >= 40, "only {tool_messages} tool messages");
    assert!(tool_calls >= 40, "only {tool_calls} tool calls");
}
