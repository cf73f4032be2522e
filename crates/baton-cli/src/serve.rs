//! `baton serve`.

use std::io::Write;

use anyhow::Context as _;
use baton_core::TenantId;
use baton_server::{AppState, Config, TenantContext};

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
        managed_context: match &args.managed_context {
            Some(spec) => managed_context(spec, args.no_capture)?,
            None => Default::default(),
        },
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

/// `--managed-context`'s `TENANT=POLICY[:BUDGET],…`: each tenant's default, or an error that
/// names the part that is wrong.
fn managed_context(
    spec: &str,
    no_capture: bool,
) -> Result<std::collections::HashMap<TenantId, TenantContext>, InvalidInput> {
    let bad = |detail: String| InvalidInput(format!("--managed-context: {detail}"));
    if no_capture {
        return Err(bad(
            "managed context needs the conversations' runs; drop --no-capture".into(),
        ));
    }
    let mut tenants = std::collections::HashMap::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((tenant, policy)) = part.split_once('=') else {
            return Err(bad(format!("{part:?}: expected TENANT=POLICY[:BUDGET]")));
        };
        let tenant = TenantId::new(tenant.trim()).map_err(|e| bad(format!("{part:?}: {e}")))?;
        let (policy, budget) = match policy.split_once(':') {
            Some((policy, budget)) => {
                let budget = budget.trim().parse::<u64>().map_err(|_| {
                    bad(format!(
                        "{part:?}: the budget {budget:?} is not a whole number of tokens"
                    ))
                })?;
                (policy, Some(budget))
            }
            None => (policy, None),
        };
        let context =
            TenantContext::new(policy.trim(), budget).map_err(|e| bad(format!("{part:?}: {e}")))?;
        if tenants.insert(tenant.clone(), context).is_some() {
            return Err(bad(format!("tenant {tenant} is given twice")));
        }
    }
    Ok(tenants)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_context_reads_each_tenant_and_names_what_is_wrong() {
        let got = managed_context("acme=structured:8000, beta=budget", false).unwrap();
        let acme = &got[&TenantId::new("acme").unwrap()];
        assert_eq!((acme.policy(), acme.budget()), ("structured", 8000));
        let beta = &got[&TenantId::new("beta").unwrap()];
        assert_eq!((beta.policy(), beta.budget()), ("budget", 32_000));
        for (spec, wrong) in [
            ("acme", "expected TENANT=POLICY"),
            ("acme=summarize", "not a managed-context policy"),
            ("acme=structured:lots", "not a whole number"),
            ("acme=structured:10", "below the least"),
            ("acme=budget,acme=sliding", "given twice"),
        ] {
            let e = managed_context(spec, false).unwrap_err().to_string();
            assert!(
                e.contains("--managed-context") && e.contains(wrong),
                "{spec}: {e}"
            );
        }
        let e = managed_context("acme=budget", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--no-capture"), "{e}");
    }
}
