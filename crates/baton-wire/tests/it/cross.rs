//! Whole histories rendered as requests for the other vendor, checked for the tool pairing each
//! API enforces (as codex's fake provider does on every request).

use std::collections::HashSet;

use baton_core::{Message, Role};
use baton_wire::{anthropic, openai};
use serde_json::Value;

use crate::corpus;

/// Anthropic: after combining consecutive turns of one role (as the API does), every
/// `tool_result` answers a `tool_use` of the assistant turn just before it.
fn anthropic_pairing(messages: &[Value]) -> Vec<String> {
    let mut turns: Vec<(&str, Vec<&Value>)> = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap();
        assert!(
            matches!(role, "user" | "assistant"),
            "role {role} in a request"
        );
        let blocks = message["content"].as_array().unwrap();
        match turns.last_mut() {
            Some((last, into)) if *last == role => into.extend(blocks),
            _ => turns.push((role, blocks.iter().collect())),
        }
    }
    let mut problems = Vec::new();
    for (i, (role, blocks)) in turns.iter().enumerate() {
        if *role != "user" {
            continue;
        }
        let asked: HashSet<&str> = match i.checked_sub(1).map(|j| &turns[j]) {
            Some(("assistant", previous)) => ids(previous, "tool_use", "id"),
            _ => HashSet::new(),
        };
        for id in ids(blocks, "tool_result", "tool_use_id") {
            if !asked.contains(id) {
                problems.push(format!(
                    "turn {i}: tool_result {id} answers no tool_use of the turn before"
                ));
            }
        }
    }
    problems
}

fn ids<'a>(blocks: &[&'a Value], type_name: &str, field: &str) -> HashSet<&'a str> {
    blocks
        .iter()
        .filter(|b| b["type"] == type_name)
        .map(|b| b[field].as_str().unwrap())
        .collect()
}

/// OpenAI: every `tool` message answers a call of the assistant message before the run of tool
/// messages it stands in, and every call is answered there.
fn openai_pairing(messages: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut open: Option<(usize, HashSet<String>)> = None;
    for (i, message) in messages.iter().enumerate() {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap();
            let answered = open.as_mut().is_some_and(|(_, calls)| calls.remove(id));
            if !answered {
                problems.push(format!(
                    "message {i}: tool message {id} answers no open call"
                ));
            }
            continue;
        }
        if let Some((at, calls)) = open.take()
            && !calls.is_empty()
        {
            problems.push(format!("message {at}: calls {calls:?} are never answered"));
        }
        if let Some(Value::Array(calls)) = message.get("tool_calls") {
            let calls = calls
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned())
                .collect();
            open = Some((i, calls));
        }
    }
    problems
}

fn count_results(messages: &[Message]) -> usize {
    messages.iter().map(|m| m.tool_result_ids().count()).sum()
}

#[test]
fn swe_agent_histories_render_as_anthropic_requests() {
    let Some(dir) = corpus::folder("swe-agent-traj") else {
        return;
    };
    let mut checked_results = 0;
    for path in corpus::files(&dir, ".traj") {
        let history: Vec<Message> = corpus::swe_agent_history(&path)
            .sent
            .iter()
            .map(|s| openai::parse_message(&s.value).unwrap())
            .collect();
        let (system, messages) = anthropic::render_request_messages(&history);
        let name = path.display();
        assert!(
            system.is_some_and(|s| !s.is_empty()),
            "{name}: no system text"
        );
        assert_eq!(anthropic_pairing(&messages), Vec::<String>::new(), "{name}");
        let reread: Vec<Message> = messages
            .iter()
            .map(|m| anthropic::parse_message(m).unwrap())
            .collect();
        assert_eq!(count_results(&reread), count_results(&history), "{name}");
        assert!(
            reread
                .iter()
                .all(|m| m.role != Role::System && m.role != Role::Tool)
        );
        checked_results += count_results(&history);
    }
    assert!(checked_results >= 40, "only {checked_results} tool results");
}

#[test]
fn claude_code_threads_render_as_requests_for_both_vendors() {
    let Some(dir) = corpus::folder("claude-code-jsonl") else {
        return;
    };
    let (mut checked, mut broken, mut checked_calls) = (0, Vec::new(), 0);
    for path in corpus::files(&dir, ".jsonl") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (t, samples) in corpus::claude_code_threads(&path).iter().enumerate() {
            let name = format!("{name} thread {t}");
            // Only a thread that is a valid conversation as recorded can show that rendering
            // keeps its tool pairing intact.
            let raw: Vec<Value> = samples
                .iter()
                .map(|s| corpus::canonical_anthropic(&s.value))
                .collect();
            let problems = anthropic_pairing(&raw);
            if !problems.is_empty() {
                broken.push(format!("{name}: {problems:?}"));
                continue;
            }
            let history: Vec<Message> = samples
                .iter()
                .map(|s| anthropic::parse_message(&s.value).unwrap())
                .collect();

            let (_, messages) = anthropic::render_request_messages(&history);
            assert_eq!(anthropic_pairing(&messages), Vec::<String>::new(), "{name}");

            let messages = openai::render_request_messages(&history);
            assert_eq!(openai_pairing(&messages), Vec::<String>::new(), "{name}");
            let reread: Vec<Message> = messages
                .iter()
                .map(|m| openai::parse_message(m).unwrap())
                .collect();
            assert_eq!(count_results(&reread), count_results(&history), "{name}");
            let calls = |ms: &[Message]| ms.iter().map(|m| m.tool_use_ids().count()).sum::<usize>();
            assert_eq!(calls(&reread), calls(&history), "{name}");
            checked_calls += calls(&history);
            checked += 1;
        }
    }
    assert_eq!(
        broken,
        Vec::<String>::new(),
        "threads not valid as recorded"
    );
    assert!(checked >= 28, "only {checked} threads checked");
    assert!(checked_calls >= 900, "only {checked_calls} tool calls");
}
