//! SWE-agent trajectories (`.traj`): one JSON object, one transcript.
//!
//! The messages come from `history`, the chat SWE-agent sent to the model (its system prompt,
//! demonstrations, the task, the model's replies and the environment's observations); each entry
//! is an OpenAI-shaped message with SWE-agent's own keys beside it (`agent`, `message_type`,
//! `thought`, `action`, `is_demo`…), read with [`baton_wire::openai::parse_message`], which
//! ignores those keys. `trajectory` (the step list) and the rest of `info` are not read.
//!
//! Two kinds of trajectory:
//! - *function calling*: the file has an entry with `tool_calls` or a `tool` entry. Entries are
//!   read as they are, after two translations: a `tool` entry's `tool_call_ids: [id, …]` becomes
//!   `tool_call_id` (one result per id when there are several), and `cache_control` is dropped
//!   from content parts. A call id used again by a later call (replayed demonstrations repeat
//!   the recorded ids) becomes `<id>.<history index>`, and a result answers the latest call of
//!   its id, so ids stay unique within the transcript.
//! - *thought/action*: the model's `action` text is the tool call. An assistant entry with a
//!   non-empty `action` becomes its `thought` as text (its `content` when there is no thought,
//!   since the content repeats the action in a code fence) and a tool use
//!   `{name: "bash", input: {"command": action}}` with id `swe-<history index>`. Every action is
//!   a line for SWE-agent's shell (its tools are shell commands installed in the environment),
//!   hence one tool name, `bash`. The next user entry, if it comes before another assistant
//!   entry, is the observation: a [`Role::Tool`] message with the tool result.
//!
//! The model is `replay_config.agent.model.name` (the config is an object or a JSON string) when
//! the file has one and it is not one of SWE-agent's stand-ins (`replay`, `human`, …); the
//! session id is `replay_config.problem_statement.id`, else `info.instance_id`, else none
//! (`environment` names the environment, not the session).
//! The final `submit` of a thought/action trajectory has no observation in `history`, so it is
//! left dangling rather than answered from `trajectory`.

use baton_core::{ContentBlock, Message, Role};
use serde_json::{Map, Value, json};

use crate::{Error, Format, ImportedMessage, Transcript};

/// SWE-agent's stand-in models, which name no model that wrote anything.
const PSEUDO_MODELS: [&str; 4] = ["replay", "human", "human_thought", "instant_empty_submit"];

/// Whether `bytes` are a SWE-agent trajectory: an object whose `history` holds role messages.
pub fn sniff(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    if !text.trim_start().starts_with('{') {
        return false;
    }
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let Some(history) = obj.get("history").and_then(Value::as_array) else {
        return false;
    };
    !history.is_empty()
        && history
            .iter()
            .all(|e| e.get("role").is_some_and(Value::is_string))
        && (obj.contains_key("trajectory")
            || obj.contains_key("info")
            || history.iter().any(|e| e.get("agent").is_some()))
}

/// Reads one trajectory.
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::at(e.line().max(1), format!("invalid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(Error::malformed("expected a trajectory object"));
    };
    let Some(history) = obj.get("history").and_then(Value::as_array) else {
        return Err(Error::malformed("expected a \"history\" array"));
    };

    let mut t = Transcript::new(Format::SweAgent);
    let replay = replay_config(&obj);
    let model = replay
        .as_ref()
        .and_then(|c| c.pointer("/agent/model/name"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty() && !PSEUDO_MODELS.contains(m))
        .map(str::to_owned);
    t.source_session_id = replay
        .as_ref()
        .and_then(|c| c.pointer("/problem_statement/id"))
        .or_else(|| obj.get("info").and_then(|i| i.get("instance_id")))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(model) = &model {
        t.saw_model(model);
    }

    let function_calling = history.iter().any(|e| {
        e.get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
            || e.get("role").and_then(Value::as_str) == Some("tool")
    });
    let mut pending: Option<String> = None;
    let mut ids = CallIds::default();
    for (i, entry) in history.iter().enumerate() {
        let at = |reason: String| Error::malformed(format!("history[{i}]: {reason}"));
        let Some(entry) = entry.as_object() else {
            return Err(at("expected a message object".to_owned()));
        };
        let translated = translate(entry);
        let mut message = if entry.get("role").and_then(Value::as_str) == Some("tool") {
            tool_message(&translated).map_err(at)?
        } else {
            baton_wire::openai::parse_message(&Value::Object(translated))
                .map_err(|e| at(e.to_string()))?
        };
        if function_calling {
            ids.dedupe(&mut message, i);
        } else {
            match message.role {
                Role::Assistant => {
                    // An unanswered call stays dangling; this entry may open the next.
                    pending = None;
                    if let Some(action) = entry.get("action").and_then(Value::as_str)
                        && !action.trim().is_empty()
                    {
                        let id = format!("swe-{i}");
                        let mut content = Vec::new();
                        match entry.get("thought").and_then(Value::as_str) {
                            Some(thought) if !thought.trim().is_empty() => {
                                content.push(ContentBlock::Text {
                                    text: thought.to_owned(),
                                });
                            }
                            _ => content.append(&mut message.content),
                        }
                        content.push(ContentBlock::ToolUse {
                            id: id.clone(),
                            name: "bash".to_owned(),
                            input: json!({ "command": action }),
                        });
                        message.content = content;
                        pending = Some(id);
                    }
                }
                Role::User => {
                    if let Some(id) = pending.take() {
                        message = Message {
                            role: Role::Tool,
                            content: vec![ContentBlock::ToolResult {
                                tool_use_id: id,
                                content: message.content,
                                is_error: false,
                            }],
                        };
                    }
                }
                Role::System | Role::Tool => {}
            }
        }
        let model = (message.role == Role::Assistant)
            .then(|| model.clone())
            .flatten();
        t.messages.push(ImportedMessage {
            message,
            timestamp: None,
            model,
            line: None,
        });
    }
    Ok(vec![t])
}

/// Call ids seen so far, so that a reused id (replayed demonstrations repeat the recorded ids)
/// can be made unique: the later call becomes `<id>.<history index>`, and results answer the
/// latest call of an id.
#[derive(Default)]
struct CallIds {
    used: std::collections::HashSet<String>,
    latest: std::collections::HashMap<String, String>,
}

impl CallIds {
    fn dedupe(&mut self, message: &mut Message, index: usize) {
        for block in &mut message.content {
            match block {
                ContentBlock::ToolUse { id, .. } => {
                    let original = id.clone();
                    if self.used.contains(id.as_str()) {
                        *id = format!("{original}.{index}");
                    }
                    self.used.insert(id.clone());
                    self.latest.insert(original, id.clone());
                }
                ContentBlock::ToolResult { tool_use_id, .. } => {
                    if let Some(latest) = self.latest.get(tool_use_id.as_str()) {
                        *tool_use_id = latest.clone();
                    }
                }
                _ => {}
            }
        }
    }
}

/// The replay config, given as an object or as a JSON string.
fn replay_config(obj: &Map<String, Value>) -> Option<Value> {
    match obj.get("replay_config")? {
        Value::String(s) => serde_json::from_str(s).ok(),
        v @ Value::Object(_) => Some(v.clone()),
        _ => None,
    }
}

/// The entry in the form `baton_wire::openai::parse_message` reads: `cache_control` dropped from
/// content parts.
fn translate(entry: &Map<String, Value>) -> Map<String, Value> {
    let mut out = entry.clone();
    if let Some(Value::Array(parts)) = out.get_mut("content") {
        for part in parts {
            if let Value::Object(part) = part {
                part.remove("cache_control");
            }
        }
    }
    out
}

/// A `tool` entry, answering the ids in `tool_call_ids` (or `tool_call_id`).
fn tool_message(entry: &Map<String, Value>) -> Result<Message, String> {
    let ids: Vec<String> = match (entry.get("tool_call_id"), entry.get("tool_call_ids")) {
        (Some(Value::String(id)), _) => vec![id.clone()],
        (_, Some(Value::Array(ids))) => ids
            .iter()
            .map(|id| {
                id.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "tool_call_ids: expected strings".to_owned())
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("tool message without \"tool_call_ids\" or \"tool_call_id\"".to_owned()),
    };
    let Some(first) = ids.first() else {
        return Err("tool message with empty \"tool_call_ids\"".to_owned());
    };
    let mut wire = entry.clone();
    wire.remove("tool_call_ids");
    wire.insert("tool_call_id".to_owned(), Value::String(first.clone()));
    let mut message =
        baton_wire::openai::parse_message(&Value::Object(wire)).map_err(|e| e.to_string())?;
    if let Some(ContentBlock::ToolResult { content, .. }) = message.content.first().cloned() {
        for id in &ids[1..] {
            message.content.push(ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: content.clone(),
                is_error: false,
            });
        }
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(value: Value) -> Transcript {
        let mut ts = parse(&serde_json::to_vec(&value).unwrap()).unwrap();
        assert_eq!(ts.len(), 1);
        ts.remove(0)
    }

    #[test]
    fn thought_action_entries_become_bash_calls() {
        let t = one(json!({
            "environment": "swe_main",
            "history": [
                {"role": "system", "content": "SETTING", "agent": "primary"},
                {"role": "user", "content": "demo", "is_demo": "True", "agent": "primary"},
                {"role": "user", "content": "ISSUE", "agent": "primary"},
                {"role": "assistant", "content": "Look.\n```\nls\n```", "thought": "Look.\n",
                 "action": "ls\n", "agent": "primary"},
                {"role": "user", "content": "a.py", "agent": "primary"},
                {"role": "assistant", "content": "no thought\n```\nsubmit\n```", "action": "submit\n"},
                {"role": "assistant", "content": "plain", "action": ""},
            ],
            "info": {"model_stats": {"api_calls": 2}},
            "trajectory": [],
        }));
        assert_eq!(t.source_session_id, None);
        assert!(t.models.is_empty());
        let m = &t.messages;
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].message, Message::text(Role::System, "SETTING"));
        assert_eq!(m[1].message, Message::text(Role::User, "demo"));
        assert_eq!(m[2].message, Message::text(Role::User, "ISSUE"));
        assert_eq!(
            m[3].message.content,
            [
                ContentBlock::Text {
                    text: "Look.\n".into()
                },
                ContentBlock::ToolUse {
                    id: "swe-3".into(),
                    name: "bash".into(),
                    input: json!({"command": "ls\n"})
                },
            ]
        );
        assert_eq!(
            m[4].message,
            Message {
                role: Role::Tool,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "swe-3".into(),
                    content: vec![ContentBlock::Text {
                        text: "a.py".into()
                    }],
                    is_error: false,
                }],
            }
        );
        // No thought: the content is the text.
        assert_eq!(m[5].message.plain_text(), "no thought\n```\nsubmit\n```");
        assert_eq!(m[5].message.tool_use_ids().collect::<Vec<_>>(), ["swe-5"]);
        // An empty action is no call, and the dangling submit is not answered by it.
        assert_eq!(m[6].message, Message::text(Role::Assistant, "plain"));
        assert_eq!(t.tool_calls(), 2);
    }

    #[test]
    fn function_calling_entries_translate_tool_call_ids() {
        let t = one(json!({
            "history": [
                {"role": "system", "content": "S", "message_type": "system_prompt"},
                {"role": "user", "content": [{"type": "text", "text": "ISSUE",
                                              "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": "find", "thought": "find", "action": "find_file x",
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "find_file", "arguments": "{\"file_name\":\"x\"}"}},
                                {"id": "call_2", "type": "function",
                                 "function": {"name": "open", "arguments": "{}"}}]},
                {"role": "tool", "content": "found", "tool_call_ids": ["call_1", "call_2"]},
                {"role": "assistant", "content": "bye", "action": "ignored in this mode"},
            ],
            "replay_config": "{\"agent\": {\"model\": {\"name\": \"gpt-4o\"}}, \"problem_statement\": {\"id\": \"repo-1\"}}",
        }));
        assert_eq!(t.source_session_id.as_deref(), Some("repo-1"));
        assert_eq!(t.models, ["gpt-4o"]);
        let m = &t.messages;
        assert_eq!(m.len(), 5);
        assert_eq!(m[1].message, Message::text(Role::User, "ISSUE"));
        assert_eq!(m[2].model.as_deref(), Some("gpt-4o"));
        assert_eq!(
            m[2].message.tool_use_ids().collect::<Vec<_>>(),
            ["call_1", "call_2"]
        );
        assert_eq!(m[3].message.role, Role::Tool);
        assert_eq!(
            m[3].message.tool_result_ids().collect::<Vec<_>>(),
            ["call_1", "call_2"]
        );
        assert_eq!(m[4].message.tool_use_ids().count(), 0);
        assert_eq!(t.tool_calls(), 2);
    }

    #[test]
    fn reused_call_ids_are_made_unique() {
        let call = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
                          "function": {"name": "ls", "arguments": "{}"}}]});
        let answer = json!({"role": "tool", "content": "x", "tool_call_ids": ["c"]});
        let t = one(json!({"history": [call, answer, call, answer], "trajectory": []}));
        let uses: Vec<&str> = t
            .messages
            .iter()
            .flat_map(|m| m.message.tool_use_ids())
            .collect();
        let results: Vec<&str> = t
            .messages
            .iter()
            .flat_map(|m| m.message.tool_result_ids())
            .collect();
        assert_eq!(uses, ["c", "c.2"]);
        assert_eq!(results, ["c", "c.2"]);
    }

    #[test]
    fn session_id_from_info_and_object_replay_config() {
        let t = one(json!({
            "history": [{"role": "user", "content": "x", "agent": "main"}],
            "info": {"instance_id": "inst-9"},
        }));
        assert_eq!(t.source_session_id.as_deref(), Some("inst-9"));
        let t = one(json!({
            "history": [{"role": "assistant", "content": "x", "agent": "main"}],
            "replay_config": {"agent": {"model": {"name": "claude"}}},
        }));
        assert_eq!(t.messages[0].model.as_deref(), Some("claude"));
    }

    #[test]
    fn sniff_needs_role_history_and_swe_agent_keys() {
        assert!(sniff(
            br#"{"history":[{"role":"user","content":"x"}],"trajectory":[]}"#
        ));
        assert!(sniff(
            br#"{"history":[{"role":"user","content":"x","agent":"main"}]}"#
        ));
        assert!(!sniff(br#"{"history":[{"role":"user","content":"x"}]}"#));
        assert!(!sniff(br#"{"history":[{"action":"run"}],"info":{}}"#));
        assert!(!sniff(br#"{"messages":[{"role":"user","content":"x"}]}"#));
        assert!(!sniff(br#"[{"role":"user","content":"x"}]"#));
        assert!(!sniff(b"#### hi\n"));
    }

    #[test]
    fn malformed_input_names_the_entry() {
        let err = parse(b"{\n\"history\": [\n").unwrap_err();
        assert!(
            matches!(err, Error::Malformed { line: Some(3), .. }),
            "{err:?}"
        );
        assert_eq!(
            parse(b"[]").unwrap_err().to_string(),
            "expected a trajectory object"
        );
        assert_eq!(
            parse(br#"{"trajectory": []}"#).unwrap_err().to_string(),
            "expected a \"history\" array"
        );
        let err = parse(br#"{"history": [{"role": "user", "content": "x"}, 3]}"#).unwrap_err();
        assert_eq!(err.to_string(), "history[1]: expected a message object");
        let err = parse(br#"{"history": [{"role": "robot", "content": "x"}]}"#).unwrap_err();
        assert!(err.to_string().starts_with("history[0]: "), "{err}");
        assert!(err.to_string().contains("robot"), "{err}");
        let err = parse(br#"{"history": [{"role": "tool", "content": "x"}]}"#).unwrap_err();
        assert!(err.to_string().contains("tool_call_ids"), "{err}");
        let err = parse(br#"{"history": [{"role": "tool", "content": "x", "tool_call_ids": []}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }
}
