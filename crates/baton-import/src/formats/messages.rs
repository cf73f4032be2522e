//! OpenAI Chat Completions and Anthropic Messages histories: plain lists of vendor messages.
//!
//! Containers, tried in this order:
//! - a JSON array of messages;
//! - an object with a `messages` array (a request body, an export), with an optional top-level
//!   `system` (a string or a list of text blocks, as the Anthropic API takes it) read as a
//!   system message placed first, and an optional `model` used for its assistant messages;
//! - a single message object;
//! - JSONL: one message per line, or one conversation object (`{"messages": […]}`, the
//!   fine-tuning form) per line, each line then one transcript with `index` = line number − 1.
//!
//! Each message is read with [`baton_wire::openai::parse_message`] or
//! [`baton_wire::anthropic::parse_message`], as the format says. A message's own `model` and
//! `timestamp` (or `created_at`) strings are kept when present.
//! A message that does not parse fails the file, naming its line (JSONL) or its index
//! (`messages[3]: …`).
//!
//! Sniffing: every item must be a message object (a `role` the vendors know, no Claude Code
//! `sessionId`/`parentUuid`, no Codex `payload`). Then [`baton_wire::detect`] judges each
//! message, and a top-level `system` counts as an Anthropic marker. A file with only OpenAI
//! markers, or with no markers at all (role and text only, which reads the same either way), is
//! OpenAI; a file with only Anthropic markers is Anthropic; a file with both is neither, so that
//! exactly one sniffer claims a file.

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Map, Value};

use crate::{Error, Format, ImportedMessage, Transcript};

/// Roles either vendor uses inside a message list.
const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// Where a message sits, for error messages.
#[derive(Clone, Copy)]
enum Loc {
    /// The 1-based line of a JSONL file.
    Line(usize),
    /// The index in a `messages` array.
    Index(usize),
    /// The index in the `messages` array of the conversation on a JSONL line.
    LineIndex(usize, usize),
}

impl Loc {
    fn error(self, reason: &str) -> Error {
        match self {
            Loc::Line(line) => Error::at(line, reason),
            Loc::Index(i) => Error::malformed(format!("messages[{i}]{reason}")),
            Loc::LineIndex(line, i) => Error::at(line, format!("messages[{i}]{reason}")),
        }
    }

    /// An error from `baton_wire`, whose text starts with `message`.
    fn wire_error(self, e: &baton_wire::Error) -> Error {
        let text = e.to_string();
        match self {
            Loc::Line(_) => self.error(&text),
            Loc::Index(_) | Loc::LineIndex(..) => match text.strip_prefix("message") {
                Some(rest) => self.error(rest),
                None => self.error(&format!(": {text}")),
            },
        }
    }
}

/// One conversation found in a file, before parsing.
struct Conversation {
    /// The transcript index.
    index: usize,
    /// The top-level `system`, if any.
    system: Option<Value>,
    /// The top-level `model`, if any.
    model: Option<String>,
    messages: Vec<(Loc, Value)>,
}

/// Whether `bytes` are an OpenAI message list.
pub fn sniff_openai(bytes: &[u8]) -> bool {
    markers(bytes).is_some_and(|(_, anthropic)| anthropic == 0)
}

/// Whether `bytes` are an Anthropic message list.
pub fn sniff_anthropic(bytes: &[u8]) -> bool {
    markers(bytes).is_some_and(|(openai, anthropic)| anthropic > 0 && openai == 0)
}

/// How many messages carry OpenAI and Anthropic markers, or `None` when `bytes` are not a
/// message list.
fn markers(bytes: &[u8]) -> Option<(usize, usize)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let conversations = load(text).ok()?;
    let mut openai = 0;
    let mut anthropic = 0;
    let mut any = false;
    for c in &conversations {
        if c.system.is_some() {
            anthropic += 1;
        }
        for (_, m) in &c.messages {
            if !looks_like_message(m) {
                return None;
            }
            any = true;
            match baton_wire::detect(m) {
                Some(baton_wire::Format::OpenAi) => openai += 1,
                Some(baton_wire::Format::Anthropic) => anthropic += 1,
                None => {}
            }
        }
    }
    any.then_some((openai, anthropic))
}

fn looks_like_message(value: &Value) -> bool {
    let Some(obj) = value.as_object() else {
        return false;
    };
    obj.get("role")
        .and_then(Value::as_str)
        .is_some_and(|r| ROLES.contains(&r))
        && !["sessionId", "parentUuid", "payload"]
            .iter()
            .any(|k| obj.contains_key(*k))
}

/// Reads a message list as `format` ([`Format::OpenAi`] or [`Format::Anthropic`]).
pub fn parse(bytes: &[u8], format: Format) -> Result<Vec<Transcript>, Error> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| Error::malformed(format!("not UTF-8: {e}")))?;
    let read: fn(&Value) -> Result<Message, baton_wire::Error> = match format {
        Format::Anthropic => baton_wire::anthropic::parse_message,
        _ => baton_wire::openai::parse_message,
    };
    let mut out = Vec::new();
    for c in load(text)? {
        let mut t = Transcript::new(format);
        t.index = c.index;
        if let Some(system) = &c.system {
            let content = system_content(system).ok_or_else(|| {
                Error::malformed("\"system\": expected a string or a list of text blocks")
            })?;
            if !content.is_empty() {
                t.messages.push(ImportedMessage {
                    message: Message {
                        role: Role::System,
                        content,
                    },
                    timestamp: None,
                    model: None,
                    line: None,
                });
            }
        }
        for (loc, value) in &c.messages {
            let message = read(value).map_err(|e| loc.wire_error(&e))?;
            let str_field = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_owned);
            let model = (message.role == Role::Assistant)
                .then(|| str_field("model").or_else(|| c.model.clone()))
                .flatten()
                .filter(|m| !m.is_empty());
            if let Some(model) = &model {
                t.saw_model(model);
            }
            t.messages.push(ImportedMessage {
                message,
                timestamp: str_field("timestamp").or_else(|| str_field("created_at")),
                model,
                line: None,
            });
        }
        out.push(t);
    }
    Ok(out)
}

/// Finds the conversations of a file, without parsing messages.
fn load(text: &str) -> Result<Vec<Conversation>, Error> {
    if let Ok(whole) = serde_json::from_str::<Value>(text) {
        return match whole {
            Value::Array(items) => Ok(vec![Conversation {
                index: 0,
                system: None,
                model: None,
                messages: items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (Loc::Index(i), v))
                    .collect(),
            }]),
            Value::Object(obj) if obj.contains_key("messages") => {
                conversation(obj, 0, Loc::Index).map(|c| vec![c])
            }
            v @ Value::Object(_) if v.get("role").is_some() => Ok(vec![Conversation {
                index: 0,
                system: None,
                model: None,
                messages: vec![(Loc::Index(0), v)],
            }]),
            _ => Err(Error::malformed(
                "expected a JSON array of messages, an object with \"messages\", or JSONL",
            )),
        };
    }
    let mut lines = Vec::new();
    let mut conversations = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| Error::at(i + 1, format!("invalid JSON: {e}")))?;
        match value {
            Value::Object(obj) if obj.contains_key("messages") && !obj.contains_key("role") => {
                conversations.push(conversation(obj, i, |k| Loc::LineIndex(i + 1, k))?);
            }
            v @ Value::Object(_) => lines.push((Loc::Line(i + 1), v)),
            _ => return Err(Error::at(i + 1, "expected a message object")),
        }
    }
    match (lines.is_empty(), conversations.is_empty()) {
        (true, true) => Err(Error::malformed("no messages")),
        (false, true) => Ok(vec![Conversation {
            index: 0,
            system: None,
            model: None,
            messages: lines,
        }]),
        (true, false) => Ok(conversations),
        (false, false) => {
            let first = lines
                .first()
                .map(|(loc, _)| match loc {
                    Loc::Line(l) => *l,
                    _ => 0,
                })
                .unwrap_or_default();
            Err(Error::at(
                first,
                "a message line in a file of conversation lines",
            ))
        }
    }
}

fn conversation(
    mut obj: Map<String, Value>,
    index: usize,
    loc: impl Fn(usize) -> Loc,
) -> Result<Conversation, Error> {
    let Some(Value::Array(items)) = obj.remove("messages") else {
        return Err(loc(0).error(": \"messages\" is not an array"));
    };
    let model = obj.get("model").and_then(Value::as_str).map(str::to_owned);
    Ok(Conversation {
        index,
        system: obj.remove("system").filter(|s| !s.is_null()),
        model,
        messages: items
            .into_iter()
            .enumerate()
            .map(|(i, v)| (loc(i), v))
            .collect(),
    })
}

/// A top-level `system`: a string, or a list of text blocks.
fn system_content(system: &Value) -> Option<Vec<ContentBlock>> {
    match system {
        Value::String(s) if s.is_empty() => Some(Vec::new()),
        Value::String(s) => Some(vec![ContentBlock::Text { text: s.clone() }]),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| {
                (b.get("type").and_then(Value::as_str) == Some("text"))
                    .then(|| b.get("text").and_then(Value::as_str))
                    .flatten()
                    .map(|text| ContentBlock::Text {
                        text: text.to_owned(),
                    })
            })
            .collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detect(bytes: &[u8]) -> Option<Format> {
        match (sniff_openai(bytes), sniff_anthropic(bytes)) {
            (true, true) => panic!("both sniffers claim {}", String::from_utf8_lossy(bytes)),
            (true, false) => Some(Format::OpenAi),
            (false, true) => Some(Format::Anthropic),
            (false, false) => None,
        }
    }

    #[test]
    fn sniffers_split_by_markers() {
        let openai = br#"[{"role":"user","content":"hi"},{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"a"}]"#;
        assert_eq!(detect(openai), Some(Format::OpenAi));
        let anthropic = br#"{"system":"be brief","messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(detect(anthropic), Some(Format::Anthropic));
        let anthropic_jsonl = b"{\"role\":\"user\",\"content\":\"hi\"}\n{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"ls\",\"input\":{}}]}\n";
        assert_eq!(detect(anthropic_jsonl), Some(Format::Anthropic));
        // Text only reads the same either way: OpenAI claims it, Anthropic does not.
        assert_eq!(
            detect(br#"[{"role":"user","content":"hi"}]"#),
            Some(Format::OpenAi)
        );
        // Both markers: neither claims it.
        let mixed = br#"[{"role":"tool","tool_call_id":"c","content":"x"},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]"#;
        assert_eq!(detect(mixed), None);
        // Other formats' lines.
        assert_eq!(
            detect(b"{\"type\":\"user\",\"sessionId\":\"s\",\"parentUuid\":null,\"role\":\"user\",\"message\":{}}\n"),
            None
        );
        assert_eq!(
            detect(b"{\"timestamp\":\"t\",\"type\":\"response_item\",\"payload\":{\"role\":\"user\"}}\n"),
            None
        );
        assert_eq!(
            detect(br#"[{"id":0,"source":"user","action":"message"}]"#),
            None
        );
        assert_eq!(
            detect(br#"{"history":[{"role":"user","content":"x"}]}"#),
            None
        );
        assert_eq!(detect(b"[]"), None);
        assert_eq!(detect(b"#### hi"), None);
    }

    #[test]
    fn reads_every_container() {
        let array = br#"[{"role":"system","content":"S"},{"role":"user","content":"hi"},
            {"role":"assistant","content":"yo","model":"gpt-4o","timestamp":"2025-01-01T00:00:00Z"}]"#;
        let t = &parse(array, Format::OpenAi).unwrap()[0];
        assert_eq!(t.format, Format::OpenAi);
        assert_eq!(t.messages.len(), 3);
        assert_eq!(t.messages[0].message, Message::text(Role::System, "S"));
        assert_eq!(t.messages[2].model.as_deref(), Some("gpt-4o"));
        assert_eq!(
            t.messages[2].timestamp.as_deref(),
            Some("2025-01-01T00:00:00Z")
        );
        assert_eq!(t.models, ["gpt-4o"]);

        let object = json!({"model": "claude-x", "system": [{"type": "text", "text": "A"},
                                                            {"type": "text", "text": "B"}],
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]});
        let ts = parse(object.to_string().as_bytes(), Format::Anthropic).unwrap();
        let t = &ts[0];
        assert_eq!(t.messages.len(), 3);
        assert_eq!(t.messages[0].message.role, Role::System);
        assert_eq!(t.messages[0].message.content.len(), 2);
        assert_eq!(t.messages[2].model.as_deref(), Some("claude-x"));
        assert_eq!(t.messages[1].model, None);

        let jsonl = b"{\"role\":\"user\",\"content\":\"a\"}\n\n{\"role\":\"assistant\",\"content\":\"b\",\"created_at\":\"t1\"}\n";
        let t = &parse(jsonl, Format::Anthropic).unwrap()[0];
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[1].timestamp.as_deref(), Some("t1"));

        let single = br#"{"role":"user","content":"only"}"#;
        assert_eq!(parse(single, Format::OpenAi).unwrap()[0].messages.len(), 1);

        let conversations = b"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n{\"messages\":[{\"role\":\"user\",\"content\":\"b\"},{\"role\":\"assistant\",\"content\":\"c\"}]}\n";
        let ts = parse(conversations, Format::OpenAi).unwrap();
        assert_eq!(ts.len(), 2);
        assert_eq!((ts[0].index, ts[1].index), (0, 1));
        assert_eq!(ts[1].messages.len(), 2);
    }

    #[test]
    fn tool_pairing_survives() {
        let openai = br#"[{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"a"}]"#;
        let t = &parse(openai, Format::OpenAi).unwrap()[0];
        assert_eq!(t.tool_calls(), 1);
        assert_eq!(
            t.messages[1].message.tool_result_ids().collect::<Vec<_>>(),
            ["c1"]
        );
    }

    #[test]
    fn malformed_input_names_line_or_index() {
        let err = parse(
            b"{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"robot\",\"content\":\"b\"}\n",
            Format::OpenAi,
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(2), .. }),
            "{err}"
        );
        assert!(err.to_string().contains("robot"), "{err}");
        let err = parse(
            br#"[{"role":"user","content":"a"},{"role":"user","content":[{"type":"image"}]}]"#,
            Format::Anthropic,
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("messages[1]: "), "{err}");
        assert!(err.to_string().contains("source"), "{err}");
        let err = parse(b"{\"role\":\"user\"}\n{oops\n", Format::OpenAi).unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(2), .. }),
            "{err}"
        );
        let err = parse(
            b"{\"role\":\"user\",\"content\":\"a\"}\n[1]\n",
            Format::OpenAi,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "line 2: expected a message object");
        let err = parse(br#"{"messages": 3}"#, Format::OpenAi).unwrap_err();
        assert!(err.to_string().contains("not an array"), "{err}");
        let err = parse(br#"{"system": 3, "messages": []}"#, Format::Anthropic).unwrap_err();
        assert!(err.to_string().starts_with("\"system\""), "{err}");
        let err = parse(
            b"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n{\"messages\":[{\"role\":\"x\",\"content\":\"b\"}]}\n",
            Format::OpenAi,
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(2), .. }),
            "{err}"
        );
        assert!(
            err.to_string().starts_with("line 2: messages[0]: "),
            "{err}"
        );
        assert!(parse(b"", Format::OpenAi).is_err());
        assert!(parse(b"42", Format::OpenAi).is_err());
    }
}
