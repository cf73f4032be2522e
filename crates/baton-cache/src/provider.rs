//! A [`Provider`] whose calls go through a [`Cache`]: the agent loop, `baton call` and the
//! gateway use it so that every model call is keyed, deduplicated, cached and logged.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use baton_provider::{Delta, Error, Provider, Request, Response, StopReason};
use baton_store::CallOutcome;

use crate::call::{Answer, Cache, CallError, CallPolicy, CallRequest};

/// Wraps a provider with a cache.
pub struct CachedProvider {
    inner: Arc<dyn Provider>,
    cache: Arc<Cache>,
    policy: CallPolicy,
    versions: BTreeMap<String, String>,
}

impl CachedProvider {
    /// `inner`'s calls through `cache`, under `policy`.
    pub fn new(inner: Arc<dyn Provider>, cache: Arc<Cache>, policy: CallPolicy) -> Self {
        // The server is part of what answers: two endpoints serving one model name (two
        // OpenAI-compatible servers, say) never share a cached answer.
        let mut versions = BTreeMap::new();
        let endpoint = inner.endpoint().trim_end_matches('/').to_owned();
        if !endpoint.is_empty() {
            versions.insert("endpoint".to_owned(), endpoint);
        }
        CachedProvider {
            inner,
            cache,
            policy,
            versions,
        }
    }

    /// Declares a version that goes into every key (a prompt or tool-set revision).
    pub fn with_version(mut self, name: &str, version: &str) -> Self {
        self.versions.insert(name.to_owned(), version.to_owned());
        self
    }

    /// Sends `request` and says how it was answered.
    pub async fn send_traced(
        &self,
        request: &Request,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<(Response, CallOutcome), Error> {
        let body = self.inner.request_body(request);
        let call = CallRequest {
            operation: self.inner.operation(),
            body: &body,
            model: self.inner.model(),
            versions: &self.versions,
            documents: &[],
        };
        let inner = &self.inner;
        let answered = {
            let on_delta = &mut *on_delta;
            self.cache
                .call(&call, &self.policy, || async move {
                    let response = inner.send(request, on_delta).await?;
                    Ok::<_, Error>(Answer {
                        model: response.model.clone(),
                        usage: baton_core::usage::Usage {
                            input: response.usage.input_tokens,
                            output: response.usage.output_tokens,
                            cache_write_5m: response.usage.cache_write_tokens,
                            cache_write_1h: 0,
                            cache_read: response.usage.cache_read_tokens,
                        },
                        storable: !matches!(response.stop_reason, StopReason::Other(_)),
                        value: response,
                    })
                })
                .await
        };
        let answered = answered.map_err(|e| provider_error(self.inner.name(), e))?;
        if answered.outcome != CallOutcome::Executed {
            // Nothing streamed: give the caller the reply as one piece.
            replay(&answered.value, on_delta);
        }
        Ok((answered.value, answered.outcome))
    }
}

fn replay(response: &Response, on_delta: &mut (dyn FnMut(Delta) + Send)) {
    for block in &response.message.content {
        match block {
            baton_core::ContentBlock::Text { text } => on_delta(Delta::Text(text.clone())),
            baton_core::ContentBlock::ToolUse { id, name, .. } => on_delta(Delta::ToolCall {
                id: id.clone(),
                name: name.clone(),
            }),
            _ => {}
        }
    }
}

/// A cache failure as the provider error the caller expects: the upstream's own error when
/// that is what failed, else a transport error naming the cache.
fn provider_error(name: &str, err: CallError) -> Error {
    if let CallError::Upstream(upstream) = &err
        && let Some(e) = upstream.downcast_ref::<Error>()
    {
        return e.clone();
    }
    let provider = match name {
        "anthropic" => "anthropic",
        "openai" => "openai",
        _ => "cache",
    };
    Error::Transport {
        provider,
        detail: err.to_string(),
    }
}

#[async_trait]
impl Provider for CachedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn operation(&self) -> &str {
        self.inner.operation()
    }

    fn request_body(&self, request: &Request) -> serde_json::Value {
        self.inner.request_body(request)
    }

    async fn send(
        &self,
        request: &Request,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Response, Error> {
        self.send_traced(request, on_delta).await.map(|(r, _)| r)
    }
}
