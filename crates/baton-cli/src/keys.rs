//! `baton keys create|list|revoke`: the HTTP service's API keys.

use std::io::Write;

use baton_core::Timestamp;
use baton_store::keys::{NewApiKey, Revoke, generate};
use baton_view::{KeyList, KeyView, NewKeyView};
use serde_json::json;

use crate::args::KeysCommand;
use crate::env::{Env, print_json};
use crate::exit::NotFound;

/// `baton keys create|list|revoke`.
pub async fn run(env: &Env, command: KeysCommand, out: &mut dyn Write) -> anyhow::Result<()> {
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
                    &NewKeyView {
                        listed: KeyView::from(&key),
                        key: made.key,
                    },
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
                let keys = keys.iter().map(KeyView::from).collect();
                return print_json(out, &KeyList { keys });
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
            if let (Some(id), 0) = (&args.id, n) {
                return Err(NotFound(format!("no live key with id {id}")).into());
            }
            if env.json {
                return print_json(out, &json!({"revoked": n}));
            }
            match &args.id {
                Some(id) => writeln!(out, "revoked {id}")?,
                None => writeln!(out, "revoked {n} key(s) of tenant {}", env.tenant)?,
            }
        }
    }
    Ok(())
}
