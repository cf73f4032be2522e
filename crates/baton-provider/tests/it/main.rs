//! Integration tests of the provider clients over real HTTP on loopback: both clients against
//! the scripted server, through conversations, protocol violations and failures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod conversation;
mod failures;
mod protocol;
mod server;

use std::time::Duration;

use baton_core::{ContentBlock, Message, Role};
use baton_provider::scripted::{Script, ScriptedServer};
use baton_provider::{
    Delta, Error, Provider, Request, Response, Secret, ToolSpec, anthropic, openai,
};
use serde_json::json;

/// The key every test client sends; no error may ever show it.
const KEY: &str = "sk-test-4f1c9a77-DO-NOT-PRINT";

/// Which client a test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vendor {
    Anthropic,
    OpenAi,
}

const BOTH: [Vendor; 2] = [Vendor::Anthropic, Vendor::OpenAi];

/// What a test may change about a client.
struct Options {
    key: Option<&'static str>,
    timeout: Duration,
    max_retries: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            key: Some(KEY),
            timeout: Duration::from_secs(20),
            max_retries: 3,
        }
    }
}

fn server(script: serde_json::Value) -> ScriptedServer {
    let script = Script::from_json(&script.to_string()).unwrap();
    ScriptedServer::start(script).unwrap()
}

fn client(vendor: Vendor, server: &ScriptedServer, options: Options) -> Box<dyn Provider> {
    try_client(vendor, &base_url(vendor, server), options).unwrap()
}

fn base_url(vendor: Vendor, server: &ScriptedServer) -> String {
    match vendor {
        Vendor::Anthropic => server.anthropic_url(),
        Vendor::OpenAi => server.openai_url(),
    }
}

fn try_client(vendor: Vendor, url: &str, options: Options) -> Result<Box<dyn Provider>, Error> {
    Ok(match vendor {
        Vendor::Anthropic => {
            let mut config = anthropic::Config::new("claude-test");
            config.api_key = options.key.map(Secret::new);
            config.base_url = url.to_owned();
            config.timeout = options.timeout;
            config.max_retries = options.max_retries;
            Box::new(anthropic::Client::new(config)?)
        }
        Vendor::OpenAi => {
            let mut config = openai::Config::new("gpt-test");
            config.api_key = options.key.map(Secret::new);
            config.base_url = url.to_owned();
            config.timeout = options.timeout;
            config.max_retries = options.max_retries;
            Box::new(openai::Client::new(config)?)
        }
    })
}

fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file.".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }
}

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

/// A user message answering `ids`, each with `output`.
fn results(ids: &[&str], output: &str) -> Message {
    Message {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolResult {
                tool_use_id: (*id).into(),
                content: vec![ContentBlock::Text {
                    text: output.into(),
                }],
                is_error: false,
            })
            .collect(),
    }
}

/// Sends `messages` (with the read_file tool when `tools`), collecting the deltas.
async fn send(
    client: &dyn Provider,
    messages: Vec<Message>,
    tools: bool,
) -> (Result<Response, Error>, Vec<Delta>) {
    let request = Request {
        model: String::new(),
        system: Some("You are a careful agent.".into()),
        messages,
        tools: match tools {
            true => vec![read_file_tool()],
            false => vec![],
        },
        max_tokens: 0,
        temperature: None,
    };
    let mut deltas = Vec::new();
    let result = client.send(&request, &mut |delta| deltas.push(delta)).await;
    (result, deltas)
}

/// The streamed text of `deltas`.
fn text_of(deltas: &[Delta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(text) => Some(text.as_str()),
            Delta::ToolCall { .. } => None,
        })
        .collect()
}
