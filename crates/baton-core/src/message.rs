//! The message model: a role and a list of content blocks.
//!
//! This is baton's own shape, independent of any vendor. `baton-wire` converts the Anthropic
//! Messages and OpenAI Chat Completions shapes to and from it. The serde form below is what the
//! store keeps in its history rows, so changing it needs a migration.

use serde::{Deserialize, Serialize};

/// Who produced a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the operator of the agent.
    System,
    /// The person (or the harness speaking for them).
    User,
    /// The model.
    Assistant,
    /// A tool's answer (the OpenAI shape; Anthropic carries tool results in user messages).
    Tool,
}

impl Role {
    /// The lowercase name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Who produced it.
    pub role: Role,
    /// What it says, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A message holding one text block.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The ids of the tool calls this message makes, in order.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// The ids of the tool calls this message answers, in order.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
    }

    /// The concatenated text of the text blocks, for display and search.
    pub fn plain_text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// One block of a message's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning. The signature, when the provider gives one, is kept so the
    /// block can be sent back unchanged.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature over it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the provider keeps opaque (Anthropic `redacted_thinking`, OpenAI encrypted
    /// reasoning): kept byte for byte, never interpreted.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
    /// A call to a tool.
    ToolUse {
        /// The call's id, unique within the run; its result names it.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, as JSON.
        input: serde_json::Value,
    },
    /// A tool's answer to the call named by `tool_use_id`.
    ToolResult {
        /// The id of the call it answers.
        tool_use_id: String,
        /// What the tool returned: text, images or documents.
        content: Vec<ContentBlock>,
        /// Whether the tool reported an error.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// An image, by reference.
    Image {
        /// Where the image is.
        source: MediaSource,
    },
    /// A tool made available by name, in a tool's result: what Claude Code's `ToolSearch`
    /// returns (Anthropic `tool_reference`), so the model may call the tool it names next.
    ToolReference {
        /// The tool's name.
        tool_name: String,
    },
    /// A vendor block baton's model has no variant for (the blocks of Anthropic's server tools:
    /// `server_tool_use`, `web_search_tool_result`, `web_fetch_tool_result`…), kept whole as the
    /// vendor wrote it and sent back to that vendor unchanged; never interpreted, and left out
    /// when rendering for another vendor.
    Opaque {
        /// The block as the vendor wrote it, its `type` included.
        block: serde_json::Value,
    },
    /// A document (PDF, text file…), by reference.
    Document {
        /// Where the document is.
        source: MediaSource,
        /// Its title, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
}

impl ContentBlock {
    /// For an [`ContentBlock::Opaque`] block, the vendor's type name (`server_tool_use`…).
    pub fn opaque_type(&self) -> Option<&str> {
        match self {
            ContentBlock::Opaque { block } => block.get("type").and_then(|t| t.as_str()),
            _ => None,
        }
    }

    /// The block's type name, as serialized.
    pub fn type_name(&self) -> &'static str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Thinking { .. } => "thinking",
            ContentBlock::RedactedThinking { .. } => "redacted_thinking",
            ContentBlock::ToolUse { .. } => "tool_use",
            ContentBlock::ToolResult { .. } => "tool_result",
            ContentBlock::Image { .. } => "image",
            ContentBlock::ToolReference { .. } => "tool_reference",
            ContentBlock::Opaque { .. } => "opaque",
            ContentBlock::Document { .. } => "document",
        }
    }
}

/// Where an image or document lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MediaSource {
    /// A URL the provider can fetch.
    Url {
        /// The address.
        url: String,
    },
    /// A file previously uploaded to the provider.
    File {
        /// The provider's file id.
        file_id: String,
    },
    /// Bytes carried inline, base64-encoded, as the vendor formats allow.
    Base64 {
        /// The MIME type, such as `image/png`.
        media_type: String,
        /// The base64 payload.
        data: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_form_is_stable_and_strict() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text { text: "hi".into() },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "ls".into(),
                    input: serde_json::json!({"path": "."}),
                },
            ],
        };
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(
            json,
            r#"{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"ls","input":{"path":"."}}]}"#
        );
        assert_eq!(serde_json::from_str::<Message>(&json).unwrap(), m);

        let unknown = r#"{"role":"user","content":[{"type":"video","url":"x"}]}"#;
        let err = serde_json::from_str::<Message>(unknown)
            .unwrap_err()
            .to_string();
        assert!(err.contains("video"), "{err}");
        let extra = r#"{"role":"user","content":[{"type":"text","text":"x","color":1}]}"#;
        assert!(serde_json::from_str::<Message>(extra).is_err());
    }
}
