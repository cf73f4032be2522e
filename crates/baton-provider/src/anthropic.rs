//! The Anthropic Messages API client: [`Client`], configured by [`Config`].
//!
//! It posts to `{base_url}/v1/messages` with `x-api-key` and `anthropic-version: 2023-06-01`,
//! always streaming (`"stream": true`), and reads the reply's server-sent events through
//! `baton-wire`.
//! Note that the base URL has no `/v1`: `https://api.anthropic.com` (or the scripted server's
//! [`crate::scripted::ScriptedServer::anthropic_url`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), baton_provider::Error> {
//! use baton_core::{Message, Role};
//! use baton_provider::{Delta, Provider, Request};
//!
//! let client = baton_provider::anthropic::Client::from_env("claude-sonnet-4-5")?;
//! let request = Request {
//!     model: String::new(), // the client's model
//!     system: Some("Be brief.".into()),
//!     messages: vec![Message::text(Role::User, "Say hi.")],
//!     tools: vec![],
//!     max_tokens: 0, // the client's default
//!     temperature: None,
//! };
//! let response = client
//!     .send(&request, &mut |delta| {
//!         if let Delta::Text(_text) = delta { /* show it */ }
//!     })
//!     .await?;
//! assert_eq!(response.message.role, Role::Assistant);
//! # Ok(()) }
//! ```

use std::time::Duration;

use async_trait::async_trait;
use baton_wire::{Format, MaxTokensField};
use reqwest::header::{self, HeaderMap, HeaderValue};

use crate::http::{self, Call};
use crate::{Delta, Error, Provider, Request, Response, Secret, StopReason};

/// The API's address when `ANTHROPIC_BASE_URL` is not set. It has no `/v1`.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The environment variable holding the key.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// The environment variable overriding the base URL.
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";
/// The `anthropic-version` header sent.
pub const API_VERSION: &str = "2023-06-01";

const PROVIDER: &str = "anthropic";

/// How to reach the Messages API.
#[derive(Clone, Debug)]
pub struct Config {
    /// The key sent as `x-api-key`; required.
    pub api_key: Option<Secret>,
    /// The API's base URL, without `/v1` (default [`DEFAULT_BASE_URL`]).
    pub base_url: String,
    /// The model called when a request names none.
    pub model: String,
    /// `max_tokens` when a request says 0 (default 8192).
    pub max_tokens: u32,
    /// The most one attempt may take, from sending the request to the stream's last byte
    /// (default 600 s). Waiting between retries is not counted.
    pub timeout: Duration,
    /// The most connecting may take (default 10 s).
    pub connect_timeout: Duration,
    /// How many times a 429, a 5xx or a failed connection is retried (default 3).
    pub max_retries: u32,
}

impl Config {
    /// The defaults, for `model`, with no key.
    pub fn new(model: impl Into<String>) -> Config {
        Config {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: model.into(),
            max_tokens: 8192,
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            max_retries: 3,
        }
    }

    /// The defaults, with the key from `ANTHROPIC_API_KEY` and the base URL from
    /// `ANTHROPIC_BASE_URL` when they are set and not empty.
    pub fn from_env(model: impl Into<String>) -> Config {
        let mut config = Config::new(model);
        config.api_key = env(API_KEY_ENV).map(Secret::new);
        if let Some(url) = env(BASE_URL_ENV) {
            config.base_url = url;
        }
        config
    }
}

/// An Anthropic Messages API client.
#[derive(Debug)]
pub struct Client {
    config: Config,
    key: Secret,
    http: reqwest::Client,
}

impl Client {
    /// A client for `config`: [`Error::MissingKey`] (naming `ANTHROPIC_API_KEY`) when it has
    /// no key.
    pub fn new(config: Config) -> Result<Client, Error> {
        let Some(key) = config.api_key.clone() else {
            return Err(Error::MissingKey {
                provider: PROVIDER,
                env_var: API_KEY_ENV,
            });
        };
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|err| Error::Transport {
                provider: PROVIDER,
                detail: format!("cannot build the HTTP client: {err}"),
            })?;
        Ok(Client { config, key, http })
    }

    /// A client for `model` configured from the environment ([`Config::from_env`]).
    pub fn from_env(model: &str) -> Result<Client, Error> {
        Client::new(Config::from_env(model))
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn headers(&self) -> Result<HeaderMap, Error> {
        let mut key = HeaderValue::from_str(self.key.expose()).map_err(|_| Error::Transport {
            provider: PROVIDER,
            detail: format!("{API_KEY_ENV} holds characters a header cannot carry"),
        })?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        Ok(headers)
    }
}

#[async_trait]
impl Provider for Client {
    fn name(&self) -> &str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn operation(&self) -> &str {
        "anthropic.messages"
    }

    fn endpoint(&self) -> &str {
        &self.config.base_url
    }

    fn request_body(&self, request: &Request) -> serde_json::Value {
        let body = crate::wire_body(request, &self.config.model, self.config.max_tokens);
        Format::Anthropic.render_request(&body, MaxTokensField::MaxTokens)
    }

    async fn send(
        &self,
        request: &Request,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        let body = crate::wire_body(request, &self.config.model, self.config.max_tokens);
        let call = Call {
            provider: PROVIDER,
            env_var: API_KEY_ENV,
            format: Format::Anthropic,
            url: format!("{}/v1/messages", self.config.base_url.trim_end_matches('/')),
            headers: self.headers()?,
            body: self.request_body(request).to_string().into_bytes(),
            timeout: self.config.timeout,
            max_retries: self.config.max_retries,
            key: Some(&self.key),
        };
        let reply = http::send(&self.http, &call, on_delta).await?;
        let stop_reason = match reply.stop_reason.as_str() {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            other => StopReason::Other(other.to_owned()),
        };
        Ok(crate::response(reply, stop_reason, &body.model))
    }
}

pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}
