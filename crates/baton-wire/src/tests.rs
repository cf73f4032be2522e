//! Unit tests of shape detection and the auto-detecting [`crate::parse_message`].

use baton_core::{Message, Role};
use serde_json::{Value, json};

use crate::{Format, detect, parse_message};

#[track_caller]
fn check(wire: Value, format: Option<Format>) {
    assert_eq!(detect(&wire), format, "{wire}");
    let message = parse_message(&wire).unwrap();
    let direct = match format {
        Some(Format::OpenAi) => crate::openai::parse_message(&wire),
        Some(Format::Anthropic) | None => crate::anthropic::parse_message(&wire),
    };
    assert_eq!(message, direct.unwrap());
}

#[track_caller]
fn check_err(wire: Value, expect: &str) {
    assert_eq!(parse_message(&wire).unwrap_err().to_string(), expect);
}

#[test]
fn detects_by_markers() {
    use Format::{Anthropic, OpenAi};
    check(json!({"role": "user", "content": "hi"}), None);
    check(
        json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
        None,
    );
    check(json!({"role": "system", "content": "rules"}), None);
    check(
        json!({"role": "assistant", "content": "x", "tool_calls": []}),
        Some(OpenAi),
    );
    check(
        json!({"role": "tool", "tool_call_id": "a", "content": "x"}),
        Some(OpenAi),
    );
    check(
        json!({"role": "developer", "content": "rules"}),
        Some(OpenAi),
    );
    check(json!({"role": "assistant", "content": null}), Some(OpenAi));
    check(
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}),
        Some(OpenAi),
    );
    check(
        json!({"role": "user", "content": [{"type": "input_text", "text": "x"}]}),
        Some(OpenAi),
    );
    check(
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}),
        Some(Anthropic),
    );
    check(
        json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]}),
        Some(Anthropic),
    );
    check(
        json!({"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}),
        Some(Anthropic),
    );
}

#[test]
fn one_vendor_message_is_one_core_message() {
    let anthropic = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "x"},
        {"type": "tool_result", "tool_use_id": "b", "content": "y"},
        {"type": "text", "text": "go on"},
    ]});
    let message = parse_message(&anthropic).unwrap();
    assert_eq!(message.role, Role::User);
    assert_eq!(message.tool_result_ids().collect::<Vec<_>>(), ["a", "b"]);
    let openai = json!({"role": "tool", "tool_call_id": "a", "content": "x"});
    let message: Message = parse_message(&openai).unwrap();
    assert_eq!(message.role, Role::Tool);
}

#[test]
fn errors() {
    check_err(json!({"content": "hi"}), r#"message: missing field "role""#);
    check_err(
        json!({"role": "robot", "content": "hi"}),
        r#"message: role "robot" is not one of system, developer, user, assistant, tool"#,
    );
    check_err(
        json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "image"}]}),
        r#"message: content[2]: missing field "source""#,
    );
    check_err(
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}], "tool_calls": []}),
        r#"message: has anthropic markers (content[0] of type "tool_use") and openai markers (field "tool_calls")"#,
    );
}

/// Issue 15: a Codex run's history (`baton history --json`) appends again: its tool messages
/// are baton's own stored form, role `tool` with `tool_result` blocks.
#[test]
fn a_stored_tool_message_reads_back_as_stored() {
    let value = serde_json::json!({"role": "tool", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "ok"}]}
    ]});
    let message = crate::parse_message(&value).unwrap();
    assert_eq!(message.role, baton_core::Role::Tool);
    assert_eq!(serde_json::to_value(&message).unwrap(), value);
    // A tool message with a tool_use block is still mixed.
    let mixed = serde_json::json!({"role": "tool", "content": [
        {"type": "tool_use", "id": "x", "name": "n", "input": {}}
    ]});
    assert!(crate::parse_message(&mixed).is_err());
}

/// A message whose only Anthropic blocks are a server tool's call and result is Anthropic, and
/// keeps them; an OpenAI part the OpenAI reader does not read (`input_audio`) and a type of no
/// one's stay errors.
#[test]
fn unknown_block_types_are_anthropic_but_openai_parts_are_not() {
    let searched = json!({"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "n"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "nothing new"},
    ]});
    check(searched.clone(), Some(Format::Anthropic));
    assert_eq!(
        parse_message(&searched).unwrap().content[0].opaque_type(),
        Some("server_tool_use")
    );
    let audio = json!({"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
    ]});
    assert_eq!(detect(&audio), Some(Format::OpenAi));
    check_err(
        audio.clone(),
        r#"message: content[0]: unknown block type "input_audio""#,
    );
    assert_eq!(
        crate::anthropic::parse_message(&audio)
            .unwrap_err()
            .to_string(),
        r#"message: content[0]: unknown block type "input_audio""#
    );
    // A type that is no server tool's is a mistake, named, not a block kept whole.
    check_err(
        json!({"role": "user", "content": [{"type": "hologram", "x": 1}]}),
        r#"message: content[0]: unknown block type "hologram""#,
    );
}
