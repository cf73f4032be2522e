//! `baton call`: one model call through the response cache. With `--repeat N --concurrency C`
//! it makes the same call N times, C at a time, and prints how each was answered: the
//! command-line face of in-flight deduplication (run it from several processes at once and the
//! upstream sees one request).

use std::io::Write;
use std::sync::Arc;

use anyhow::Context as _;
use baton_cache::{Cache, CachedProvider, CallPolicy};
use baton_core::{Message, Role};
use baton_provider::Request;
use baton_store::CallOutcome;

use crate::args::{CallArgs, ChatArgs, StrategyOpts, WireKind};
use crate::env::Env;
use crate::exit::InvalidInput;

/// Runs `baton call`.
pub async fn run(env: &Env, args: CallArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.repeat == 0 || args.concurrency == 0 {
        return Err(InvalidInput("--repeat and --concurrency must be at least 1".into()).into());
    }
    let chat_args = ChatArgs {
        run: None,
        provider: args.provider,
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        script: args.script.clone(),
        wire: WireKind::Anthropic,
        read_only: false,
        strategy: None,
        summarizer: None,
        opts: StrategyOpts::default(),
        workdir: None,
        message: vec![],
        verbose: false,
        reply_tokens: args.max_tokens,
        no_cache: false,
    };
    let (provider, _server) = crate::chat::provider(&chat_args)?;
    let mut cache = Cache::new(env.store.clone(), env.tenant.clone());
    if let Some(path) = &args.prices {
        cache = cache.with_prices(crate::compaction::load_prices(path)?);
    }
    let policy = CallPolicy {
        no_cache: args.no_cache,
        no_store: args.no_store,
        ttl: args.ttl,
    };
    if policy.ttl.is_some_and(|t| t.is_zero()) {
        return Err(InvalidInput("--ttl must be more than zero".into()).into());
    }
    let cached = Arc::new(CachedProvider::new(provider, Arc::new(cache), policy));
    let request = Arc::new(Request {
        model: String::new(),
        system: args.system.clone(),
        messages: vec![Message::text(Role::User, &args.message)],
        tools: vec![],
        max_tokens: args.max_tokens,
        temperature: None,
    });

    let gate = Arc::new(tokio::sync::Semaphore::new(args.concurrency as usize));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.repeat {
        let (cached, request, gate) = (cached.clone(), request.clone(), gate.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            cached.send_traced(&request, &mut |_| {}).await
        });
    }
    let mut replies = Vec::new();
    let mut outcomes = std::collections::BTreeMap::<&str, u64>::new();
    while let Some(joined) = tasks.join_next().await {
        let (response, outcome) = joined.context("a call's task failed")??;
        *outcomes.entry(outcome.as_str()).or_default() += 1;
        replies.push(response);
    }
    let texts: std::collections::BTreeSet<String> =
        replies.iter().map(|r| text_of(&r.message)).collect();
    if env.json {
        let first = replies.first();
        let value = serde_json::json!({
            "reply": first.map(|r| text_of(&r.message)),
            "model": first.map(|r| r.model.clone()),
            "calls": replies.len(),
            "distinct_replies": texts.len(),
            "outcomes": outcomes,
        });
        writeln!(out, "{value}")?;
    } else {
        for text in &texts {
            writeln!(out, "{text}")?;
        }
        let summary: Vec<String> = outcomes.iter().map(|(k, v)| format!("{v} {k}")).collect();
        if args.repeat > 1 || !outcomes.contains_key(CallOutcome::Executed.as_str()) {
            writeln!(out, "({})", summary.join(", "))?;
        }
    }
    Ok(())
}

/// The text blocks of a reply, joined.
fn text_of(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|b| match b {
            baton_core::ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
