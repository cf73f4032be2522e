//! What `baton history --check` finds beyond the tool-call pairing `ProtocolMap` checks: a
//! user message (anything but tool results) placed after a tool call and before that call's
//! result. Every provider refuses such a conversation (Anthropic wants the results right
//! after the call; OpenAI wants every call answered before the next user message), so a
//! transcript with one cannot be sent as it stands.

use std::collections::HashSet;

use baton_core::{ContentBlock, Entry, Role, Seq};
use serde::Serialize;

/// A user message between a tool call and its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UserBetween {
    /// Always `user_between_use_and_result`.
    pub kind: &'static str,
    /// The user message.
    pub seq: Seq,
    /// The call still waiting for its result there.
    pub tool_use_id: String,
}

/// Every user message that interrupts a call waiting for its result (one entry per call
/// interrupted), in seq order. Calls never answered are not counted here: they are dangling.
pub fn user_between(entries: &[Entry]) -> Vec<UserBetween> {
    let answered: HashSet<&str> = entries
        .iter()
        .flat_map(|e| e.message.tool_result_ids())
        .collect();
    let mut open: Vec<&str> = Vec::new();
    let mut found = Vec::new();
    for entry in entries {
        let message = &entry.message;
        for id in message.tool_result_ids() {
            open.retain(|o| *o != id);
        }
        let speaks = message.role == Role::User
            && message
                .content
                .iter()
                .any(|b| !matches!(b, ContentBlock::ToolResult { .. }));
        if speaks {
            for id in &open {
                found.push(UserBetween {
                    kind: "user_between_use_and_result",
                    seq: entry.seq,
                    tool_use_id: (*id).to_owned(),
                });
            }
        }
        for id in message.tool_use_ids() {
            if answered.contains(id) && !open.contains(&id) {
                open.push(id);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use baton_core::{Message, Timestamp};
    use serde_json::json;

    use super::*;

    fn entry(seq: u64, role: Role, content: serde_json::Value) -> Entry {
        Entry {
            seq: Seq(seq),
            tokens: 1,
            message: Message {
                role,
                content: serde_json::from_value(content).unwrap(),
            },
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn a_user_message_between_a_call_and_its_result_is_found() {
        let call = json!([{"type": "tool_use", "id": "a", "name": "ls", "input": {}}]);
        let result = json!([{"type": "tool_result", "tool_use_id": "a", "content": []}]);
        let text = json!([{"type": "text", "text": "wait"}]);
        let between = [
            entry(1, Role::User, text.clone()),
            entry(2, Role::Assistant, call.clone()),
            entry(3, Role::User, text.clone()),
            entry(4, Role::User, result.clone()),
        ];
        let found = user_between(&between);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].seq, found[0].tool_use_id.as_str()), (Seq(3), "a"));
        let fine = [
            entry(1, Role::User, text.clone()),
            entry(2, Role::Assistant, call.clone()),
            entry(3, Role::User, result),
            entry(4, Role::User, text.clone()),
        ];
        assert!(user_between(&fine).is_empty());
        // A call never answered is dangling, not interrupted.
        let dangling = [entry(1, Role::Assistant, call), entry(2, Role::User, text)];
        assert!(user_between(&dangling).is_empty());
    }
}
