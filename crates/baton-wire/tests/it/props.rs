//! Property tests: arbitrary core messages round-trip through each format where it can express
//! them, and the request renderers keep their promises for any history.

use baton_core::{ContentBlock, MediaSource, Message, Role};
use baton_wire::{anthropic, openai};
use proptest::prelude::*;
use serde_json::Value;

/// Non-empty text: a lone empty text block reads back as no blocks (documented).
fn text() -> impl Strategy<Value = String> {
    "\\PC{1,12}"
}

fn id() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_]{1,10}"
}

/// JSON without floats (which a text round trip may not reproduce bit for bit).
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn source() -> impl Strategy<Value = MediaSource> {
    prop_oneof![
        "[a-z]{1,8}".prop_map(|p| MediaSource::Url {
            url: format!("https://example.com/{p}")
        }),
        id().prop_map(|file_id| MediaSource::File { file_id }),
        (
            prop::sample::select(vec!["image/png", "image/jpeg", "application/pdf"]),
            "[A-Za-z0-9+/]{0,16}"
        )
            .prop_map(|(media_type, data)| MediaSource::Base64 {
                media_type: media_type.to_owned(),
                data
            }),
    ]
}

/// Text, images and documents: what every format can put in content.
fn media_or_text() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        3 => text().prop_map(|text| ContentBlock::Text { text }),
        1 => source().prop_map(|source| ContentBlock::Image { source }),
        1 => (source(), prop::option::of(text()))
            .prop_map(|(source, title)| ContentBlock::Document { source, title }),
    ]
}

fn tool_use() -> impl Strategy<Value = ContentBlock> {
    (id(), id(), json()).prop_map(|(id, name, input)| ContentBlock::ToolUse { id, name, input })
}

/// Any block at all, with tool results holding text, images and documents.
fn any_block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        4 => media_or_text(),
        1 => (text(), prop::option::of(text()))
            .prop_map(|(thinking, signature)| ContentBlock::Thinking { thinking, signature }),
        1 => text().prop_map(|data| ContentBlock::RedactedThinking { data }),
        2 => tool_use(),
        2 => (id(), prop::collection::vec(media_or_text(), 0..3), any::<bool>()).prop_map(
            |(tool_use_id, content, is_error)| ContentBlock::ToolResult { tool_use_id, content, is_error }
        ),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool])
}

fn any_message() -> impl Strategy<Value = Message> {
    (role(), prop::collection::vec(any_block(), 0..5))
        .prop_map(|(role, content)| Message { role, content })
}

/// Messages Chat Completions can express one for one: no thinking; assistant text before its tool
/// calls; a tool message holding one text-only result with no error flag; no tool results
/// elsewhere.
fn openai_message() -> impl Strategy<Value = Message> {
    let plain = (
        prop::sample::select(vec![Role::System, Role::User]),
        prop::collection::vec(media_or_text(), 0..4),
    )
        .prop_map(|(role, content)| Message { role, content });
    let assistant = (
        prop::collection::vec(media_or_text(), 0..3),
        prop::collection::vec(openai_tool_use(), 0..3),
    )
        .prop_map(|(mut content, calls)| {
            content.extend(calls);
            Message {
                role: Role::Assistant,
                content,
            }
        });
    let tool =
        (id(), prop::collection::vec(text(), 0..3)).prop_map(|(tool_use_id, texts)| Message {
            role: Role::Tool,
            content: vec![ContentBlock::ToolResult {
                tool_use_id,
                content: texts
                    .into_iter()
                    .map(|text| ContentBlock::Text { text })
                    .collect(),
                is_error: false,
            }],
        });
    prop_oneof![plain, assistant, tool]
}

/// A tool use whose input survives `arguments`: anything but a JSON string whose text is itself
/// valid non-string JSON (documented).
fn openai_tool_use() -> impl Strategy<Value = ContentBlock> {
    tool_use().prop_filter(
        "string input that reads as other JSON",
        |block| match block {
            ContentBlock::ToolUse {
                input: Value::String(s),
                ..
            } => serde_json::from_str::<Value>(s).map_or(true, |v| v.is_string()),
            _ => true,
        },
    )
}

proptest! {
    #[test]
    fn anthropic_round_trips_every_message(message in any_message()) {
        let rendered = anthropic::render_message(&message);
        let back = anthropic::parse_message(&rendered).unwrap();
        // The Messages API carries tool results in user messages.
        let role = match message.role {
            Role::Tool => Role::User,
            role => role,
        };
        prop_assert_eq!(back, Message { role, ..message });
        prop_assert_eq!(baton_wire::parse_message(&rendered).unwrap().content, anthropic::parse_message(&rendered).unwrap().content);
    }

    #[test]
    fn openai_round_trips_what_it_can_express(message in openai_message()) {
        let rendered = openai::render_message(&message);
        prop_assert_eq!(rendered.len(), 1, "{:?}", rendered);
        prop_assert_eq!(openai::parse_message(&rendered[0]).unwrap(), message.clone());
        prop_assert_eq!(baton_wire::parse_message(&rendered[0]).unwrap(), message);
    }

    #[test]
    fn openai_keeps_every_tool_id_of_any_message(message in any_message()) {
        let rendered = openai::render_message(&message);
        let back: Vec<Message> = rendered.iter().map(|m| openai::parse_message(m).unwrap()).collect();
        let uses: Vec<&str> = back.iter().flat_map(Message::tool_use_ids).collect();
        let results: Vec<&str> = back.iter().flat_map(Message::tool_result_ids).collect();
        prop_assert_eq!(uses, message.tool_use_ids().collect::<Vec<_>>());
        prop_assert_eq!(results, message.tool_result_ids().collect::<Vec<_>>());
        let texts = |ms: &[Message]| ms.iter().map(Message::plain_text).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n");
        if message.tool_result_ids().next().is_none() {
            prop_assert_eq!(texts(&back), message.plain_text());
        }
    }

    #[test]
    fn anthropic_requests_hold_only_user_and_assistant(history in prop::collection::vec(any_message(), 0..8)) {
        let (system, messages) = anthropic::render_request_messages(&history);
        let back: Vec<Message> = messages.iter().map(|m| anthropic::parse_message(m).unwrap()).collect();
        prop_assert!(back.iter().all(|m| matches!(m.role, Role::User | Role::Assistant)));
        let results = |ms: &[Message]| ms.iter().flat_map(Message::tool_result_ids).map(str::to_owned).collect::<Vec<_>>();
        let non_system: Vec<Message> = history.iter().filter(|m| m.role != Role::System).cloned().collect();
        prop_assert_eq!(results(&back), results(&non_system));
        let system_text: Vec<String> = history
            .iter()
            .filter(|m| m.role == Role::System)
            .map(Message::plain_text)
            .filter(|t| !t.is_empty())
            .collect();
        prop_assert_eq!(system, (!system_text.is_empty()).then(|| system_text.join("\n\n")));
        // No two results-only user messages in a row: parallel results are merged.
        // (An assistant message carrying a result is malformed input; it is not merged.)
        let results_only = |m: &Message| m.role == Role::User && !m.content.is_empty() && m.content.iter().all(|b| matches!(b, ContentBlock::ToolResult { .. }));
        prop_assert!(back.windows(2).all(|w| !(results_only(&w[0]) && results_only(&w[1]))));
    }

    #[test]
    fn openai_requests_answer_calls_right_after_them(history in prop::collection::vec(openai_pairs(), 0..5)) {
        let history: Vec<Message> = history.into_iter().flatten().collect();
        let messages = openai::render_request_messages(&history);
        // Every tool message stands in the run of tool messages right after the assistant message
        // holding its call.
        let mut open: Vec<String> = Vec::new();
        for message in &messages {
            match message["role"].as_str() {
                Some("tool") => {
                    let id = message["tool_call_id"].as_str().unwrap();
                    prop_assert!(open.iter().any(|c| c == id), "{} answers no open call in {:?}", id, messages);
                }
                Some("assistant") => {
                    open = message["tool_calls"].as_array().map_or(Vec::new(), |calls| {
                        calls.iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect()
                    });
                }
                _ => open.clear(),
            }
        }
    }
}

/// A well-paired exchange as Claude Code records it: one assistant message per call (with
/// thinking), then one user message per result.
fn openai_pairs() -> impl Strategy<Value = Vec<Message>> {
    (text(), prop::collection::vec(id(), 1..4)).prop_map(|(thinking, ids)| {
        let mut out = vec![Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Thinking {
                thinking,
                signature: None,
            }],
        }];
        for id in &ids {
            out.push(Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: id.clone(),
                    name: "f".into(),
                    input: Value::Null,
                }],
            });
        }
        for id in ids {
            out.push(Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id,
                    content: vec![],
                    is_error: false,
                }],
            });
        }
        out.push(Message::text(Role::User, "next"));
        out
    })
}
