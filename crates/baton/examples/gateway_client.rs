//! A client of a running `baton serve`, in any language's shoes: it speaks only HTTP and
//! JSON. It creates a run, appends two messages in the OpenAI chat shape, and reads the
//! assembled context back.
//!
//! Start a server and make a key, then run the example with both:
//!
//! ```text
//! baton keys create --label example     # prints bk_…
//! baton serve --addr 127.0.0.1:8700 &
//! BATON_URL=http://127.0.0.1:8700 BATON_KEY=bk_… cargo run -p baton --example gateway_client
//! ```

// An example is a program: its output is what it shows.
#![allow(clippy::print_stdout)]

use anyhow::Context as _;
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = std::env::var("BATON_URL").unwrap_or_else(|_| "http://127.0.0.1:8700".into());
    let key =
        std::env::var("BATON_KEY").context("BATON_KEY: the key `baton keys create` printed")?;
    let api = Api {
        http: reqwest::Client::new(),
        base,
        key,
    };

    let run = api
        .call(
            reqwest::Method::POST,
            "/v1/runs",
            Some(json!({ "goal": "answer from the docs" })),
        )
        .await?;
    let id = run["id"].as_str().context("the run has no id")?.to_owned();
    let appended = api
        .call(
            reqwest::Method::POST,
            &format!("/v1/runs/{id}/messages"),
            Some(json!({
                "format": "openai",
                "messages": [
                    { "role": "user", "content": "What does baton store?" },
                    { "role": "assistant", "content": "Each run's history, append-only." }
                ]
            })),
        )
        .await?;
    let context = api
        .call(
            reqwest::Method::GET,
            &format!("/v1/runs/{id}/context"),
            None,
        )
        .await?;
    println!(
        "run {id}: appended seqs {}; context of {} messages, {} tokens",
        appended["seqs"],
        context["messages"].as_array().map_or(0, Vec::len),
        context["tokens"]["total"],
    );
    Ok(())
}

/// The service at `base`, called with `key`.
struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    /// Sends `body` (if any) to `path`; the JSON answer of a success, else the problem's text.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| url.clone())?;
        let status = response.status();
        let body: Value = response.json().await.with_context(|| url.clone())?;
        anyhow::ensure!(status.is_success(), "{url}: {status}: {body}");
        Ok(body)
    }
}
