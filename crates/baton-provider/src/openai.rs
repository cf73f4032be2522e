//! The OpenAI Chat Completions client: [`Client`], configured by [`Config`]; with a base URL it
//! talks to any OpenAI-compatible server (llama.cpp's `llama-server`, vLLM, Ollama).
//!
//! It posts to `{base_url}/chat/completions`, always streaming (`"stream": true` with
//! `"stream_options": {"include_usage": true}`), and reads the reply's chunks through
//! `baton-wire`.
//! Note that the base URL includes `/v1`: `https://api.openai.com/v1`,
//! `http://localhost:8080/v1` for llama.cpp, `http://localhost:11434/v1` for Ollama (or the
//! scripted server's [`crate::scripted::ScriptedServer::openai_url`]).
//!
//! The key is sent as `Authorization: Bearer …` when there is one. Without one, a client for
//! OpenAI's own URL is [`Error::MissingKey`], and a client for any other URL (a local server)
//! sends no `Authorization` header at all.
//! Requests to OpenAI's own URL carry `max_completion_tokens`, which its reasoning models
//! require; requests elsewhere carry `max_tokens`, which every compatible server reads.
//!
//! ```no_run
//! # async fn run() -> Result<(), baton_provider::Error> {
//! use baton_provider::openai::{Client, Config};
//!
//! // A local llama.cpp server needs no key.
//! let mut config = Config::new("qwen2.5-coder");
//! config.base_url = "http://localhost:8080/v1".into();
//! let client = Client::new(config)?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use async_trait::async_trait;
use baton_wire::{Format, MaxTokensField};
use reqwest::header::{self, HeaderMap, HeaderValue};

use crate::anthropic::env;
use crate::http::{self, Call};
use crate::{Delta, Error, Provider, Request, Response, Secret, StopReason};

/// The API's address when `OPENAI_BASE_URL` is not set. It includes `/v1`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The environment variable holding the key.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";
/// The environment variable overriding the base URL.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

const PROVIDER: &str = "openai";

/// How to reach a Chat Completions API.
#[derive(Clone, Debug)]
pub struct Config {
    /// The key sent as a bearer token; required for OpenAI's own URL only.
    pub api_key: Option<Secret>,
    /// The API's base URL, including `/v1` (default [`DEFAULT_BASE_URL`]).
    pub base_url: String,
    /// The model called when a request names none.
    pub model: String,
    /// The token limit when a request says 0 (default 8192).
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

    /// The defaults, with the key from `OPENAI_API_KEY` and the base URL from
    /// `OPENAI_BASE_URL` when they are set and not empty.
    pub fn from_env(model: impl Into<String>) -> Config {
        let mut config = Config::new(model);
        config.api_key = env(API_KEY_ENV).map(Secret::new);
        if let Some(url) = env(BASE_URL_ENV) {
            config.base_url = url;
        }
        config
    }

    /// Whether the base URL is OpenAI's own.
    pub fn is_openai(&self) -> bool {
        self.base_url.trim_end_matches('/') == DEFAULT_BASE_URL
    }
}

/// An OpenAI Chat Completions client.
#[derive(Debug)]
pub struct Client {
    config: Config,
    http: reqwest::Client,
}

impl Client {
    /// A client for `config`: [`Error::MissingKey`] (naming `OPENAI_API_KEY`) when it has no
    /// key and its base URL is OpenAI's own.
    pub fn new(config: Config) -> Result<Client, Error> {
        if config.api_key.is_none() && config.is_openai() {
            return Err(Error::MissingKey {
                provider: PROVIDER,
                env_var: API_KEY_ENV,
            });
        }
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|err| Error::Transport {
                provider: PROVIDER,
                detail: format!("cannot build the HTTP client: {err}"),
            })?;
        Ok(Client { config, http })
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
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    Error::Transport {
                        provider: PROVIDER,
                        detail: format!("{API_KEY_ENV} holds characters a header cannot carry"),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
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
        "openai.chat_completions"
    }

    fn endpoint(&self) -> &str {
        &self.config.base_url
    }

    fn request_body(&self, request: &Request) -> serde_json::Value {
        let body = crate::wire_body(request, &self.config.model, self.config.max_tokens);
        let field = match self.config.is_openai() {
            true => MaxTokensField::MaxCompletionTokens,
            false => MaxTokensField::MaxTokens,
        };
        Format::OpenAi.render_request(&body, field)
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
            format: Format::OpenAi,
            url: format!(
                "{}/chat/completions",
                self.config.base_url.trim_end_matches('/')
            ),
            headers: self.headers()?,
            body: self.request_body(request).to_string().into_bytes(),
            timeout: self.config.timeout,
            max_retries: self.config.max_retries,
            key: self.config.api_key.as_ref(),
        };
        let reply = http::send(&self.http, &call, on_delta).await?;
        let stop_reason = match reply.stop_reason.as_str() {
            "stop" => StopReason::EndTurn,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            "length" => StopReason::MaxTokens,
            other => StopReason::Other(other.to_owned()),
        };
        Ok(crate::response(reply, stop_reason, &body.model))
    }
}
