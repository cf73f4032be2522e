//! `baton serve`.

use std::io::Write;

use anyhow::Context as _;
use baton_core::TenantId;
use baton_server::{AppState, Config};

use crate::args::ServeArgs;
use crate::env::Env;
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
        prices: match &args.prices {
            Some(path) => crate::compaction::load_prices(path)?,
            None => baton_core::prices::PriceTable::defaults(),
        },
        capture: !args.no_capture,
        ui: !args.no_ui,
        ui_open_tenant: None,
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
    // Only a server no other machine can reach shows its dashboard without a key.
    let config = Config {
        ui_open_tenant: addr.ip().is_loopback().then(|| env.tenant.clone()),
        ..config
    };
    let state = AppState::new(env.store.clone(), config)?;
    let shutdown = shutdown_signal()?;
    writeln!(out, "listening on http://{addr}")?;
    out.flush()?;
    tracing::info!(%addr, "serving");
    baton_server::serve(listener, state, shutdown).await?;
    writeln!(out, "stopped")?;
    Ok(())
}

/// Installs the SIGTERM and Ctrl-C handlers now, so a signal sent as soon as the
/// `listening on` line is read stops the server cleanly; the future resolves on either.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
