//! `baton serve` and `baton keys`.

use std::io::Write;

use anyhow::Context as _;
use baton_core::{TenantId, Timestamp};
use baton_server::{AppState, Config};
use baton_store::keys::{NewApiKey, Revoke, generate};
use serde_json::json;

use crate::args::{KeysCommand, ServeArgs};
use crate::commands::{Env, print_json};
use crate::exit::InvalidInput;

/// Serves until SIGTERM or Ctrl-C. The first line of stdout is `listening on http://ADDR`
/// (the bound address, so `--addr 127.0.0.1:0` tells its port).
pub async fn run(env: &Env, args: ServeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let config = Config {
        body_limit: args.body_limit,
        request_timeout: args.request_timeout,
        upstream_timeout: args.upstream_timeout,
        upstream_openai: args
            .upstream_openai
            .map(|u| u.trim_end_matches('/').to_owned()),
        upstream_anthropic: args
            .upstream_anthropic
            .map(|u| u.trim_end_matches('/').to_owned()),
        gateway_tenant: args
            .gateway_tenant
            .as_deref()
            .map(TenantId::new)
            .transpose()
            .map_err(|e| InvalidInput(format!("--gateway-tenant: {e}")))?,
        cache_ttl: args.cache_ttl,
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        body_read_timeout: args.body_read_timeout,
        max_connections: args.max_connections,
    };
    for (flag, value) in [
        ("--cache-ttl", config.cache_ttl),
        ("--header-read-timeout", config.header_read_timeout),
        ("--idle-timeout", config.idle_timeout),
        ("--body-read-timeout", config.body_read_timeout),
        ("--request-timeout", config.request_timeout),
    ] {
        if value.is_zero() {
            return Err(InvalidInput(format!("{flag}: must be more than 0")).into());
        }
    }
    if config.max_connections == 0 {
        return Err(InvalidInput("--max-connections: must be at least 1".into()).into());
    }
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("--addr {}: cannot listen", args.addr))?;
    let addr = listener.local_addr()?;
    let state = AppState::new(env.store.clone(), config)?;
    writeln!(out, "listening on http://{addr}")?;
    out.flush()?;
    tracing::info!(%addr, "serving");
    baton_server::serve(listener, state, shutdown_signal()).await?;
    writeln!(out, "stopped")?;
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// `baton keys create|list|revoke`.
pub async fn keys(env: &Env, command: KeysCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create(args) => {
            let made = generate()?;
            let key = env
                .store
                .create_api_key(&NewApiKey {
                    id: &made.id,
                    hash: made.hash,
                    tenant: &env.tenant,
                    label: args.label.as_deref(),
                    now: Timestamp::now(),
                })
                .await?;
            if env.json {
                return print_json(
                    out,
                    &json!({"id": key.id, "tenant": key.tenant, "label": key.label,
                            "created_at": key.created_at, "key": made.key}),
                );
            }
            writeln!(
                out,
                "key {} for tenant {} (shown once; baton keeps only its hash):",
                key.id, key.tenant
            )?;
            writeln!(out, "{}", made.key)?;
        }
        KeysCommand::List(args) => {
            let tenant = (!args.all).then_some(&env.tenant);
            let keys = env.store.api_keys(tenant).await?;
            if env.json {
                return print_json(out, &serde_json::to_value(&keys)?);
            }
            if keys.is_empty() {
                writeln!(out, "no keys")?;
            }
            for k in keys {
                let revoked = k
                    .revoked_at
                    .map_or_else(|| "live".to_owned(), |t| format!("revoked {t}"));
                writeln!(
                    out,
                    "{}  {}  {}  created {}  {}",
                    k.id,
                    k.tenant,
                    k.label.as_deref().unwrap_or("-"),
                    k.created_at,
                    revoked
                )?;
            }
        }
        KeysCommand::Revoke(args) => {
            let which = match &args.id {
                Some(id) => Revoke::Id(id.trim_start_matches("bk_")),
                None => Revoke::Tenant(&env.tenant),
            };
            let n = env.store.revoke_api_keys(which, Timestamp::now()).await?;
            if env.json {
                return print_json(out, &json!({"revoked": n}));
            }
            match (&args.id, n) {
                (Some(id), 0) => {
                    return Err(InvalidInput(format!("no live key with id {id}")).into());
                }
                (Some(id), _) => writeln!(out, "revoked {id}")?,
                (None, n) => writeln!(out, "revoked {n} key(s) of tenant {}", env.tenant)?,
            }
        }
    }
    Ok(())
}
