//! Unit tests of the script format: the documented example parses, unknown fields are refused,
//! and `when` and `expect` say which condition failed.

use baton_core::{ContentBlock, Message, Role};
use baton_wire::{RequestBody, ToolDef};
use serde_json::json;

use super::{Expect, Script, When};

fn request(system: Option<&str>, messages: Vec<Message>, tools: usize) -> RequestBody {
    RequestBody {
        model: "m".into(),
        system: system.map(str::to_owned),
        messages,
        tools: (0..tools)
            .map(|i| ToolDef {
                name: format!("t{i}"),
                description: String::new(),
                input_schema: json!({}),
            })
            .collect(),
        max_tokens: Some(10),
        temperature: None,
        stream: false,
    }
}

#[test]
fn the_documented_example_parses() {
    let text = r#"{"turns": [
      {"reply": {"text": "I'll read it.", "tool_calls": [{"name": "read_file", "input": {"path": "a.txt"}}]}},
      {"when": {"tools": false}, "reply": {"text": "[{\"kind\":\"goal\",\"text\":\"x\",\"source_seq\":1}]"}},
      {"expect": {"contains": "read-only"}, "reply": {"text": "Done."}},
      {"reply": {"error": {"status": 429, "retry_after": 0}}},
      {"reply": {"raw": "this is not json"}},
      {"reply": {"text": "cut off", "truncate": true}},
      {"reply": {"delay_ms": 2000, "text": "late"}}
    ]}"#;
    let script = Script::from_json(text).unwrap();
    assert_eq!(script.turns.len(), 7);
    assert_eq!(
        script.turns[0].reply.tool_calls[0].input,
        json!({"path": "a.txt"})
    );
    assert_eq!(script.turns[1].when.tools, Some(false));
    assert_eq!(
        script.turns[3].reply.error.as_ref().unwrap().retry_after,
        Some(0)
    );
    let again = serde_json::to_string(&script).unwrap();
    assert_eq!(Script::from_json(&again).unwrap(), script);
}

#[test]
fn unknown_fields_are_refused() {
    let err = Script::from_json(r#"{"turns": [{"reply": {"txt": "hi"}}]}"#).unwrap_err();
    assert!(err.to_string().starts_with("unknown field `txt`"), "{err}");
}

#[test]
fn when_names_the_failing_condition() {
    let results = Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "t".into(),
            content: vec![ContentBlock::Text {
                text: "contents of a.txt".into(),
            }],
            is_error: false,
        }],
    };
    let conversation = vec![
        Message::text(Role::User, "read a.txt"),
        Message::text(Role::Assistant, "ok"),
        results,
    ];
    let req = request(Some("You are terse."), conversation, 2);
    let when = |w: serde_json::Value| serde_json::from_value::<When>(w).unwrap().check(&req);
    assert_eq!(when(json!({})), Ok(()));
    assert_eq!(
        when(json!({"tools": true, "system_contains": "terse"})),
        Ok(())
    );
    assert_eq!(when(json!({"last_user_contains": "a.txt"})), Ok(()));
    assert_eq!(
        when(json!({"tools": false})),
        Err("when.tools is false, but the request offers 2 tools".into())
    );
    assert_eq!(
        when(json!({"system_contains": "verbose"})),
        Err("when.system_contains \"verbose\" is not in the system text".into())
    );
    assert_eq!(
        when(json!({"last_user_contains": "read a.txt"})),
        Err("when.last_user_contains \"read a.txt\" is not in the messages after the last assistant message".into())
    );
}

#[test]
fn expect_names_the_failing_expectation() {
    let expect = Expect {
        contains: Some("read-only".into()),
        not_contains: Some("secret".into()),
    };
    assert_eq!(expect.check("a read-only run"), Ok(()));
    assert_eq!(
        expect.check("a run"),
        Err("expect.contains: the request does not contain \"read-only\"".into())
    );
    assert_eq!(
        expect.check("read-only secret"),
        Err("expect.not_contains: the request contains \"secret\"".into())
    );
}
