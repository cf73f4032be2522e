//! `baton migrate` and `baton doctor`: the store itself, with its backend known.

use std::io::Write;

use serde_json::json;

use crate::env::{Backend, open_backend, print_json};

/// `baton migrate`.
pub async fn migrate(db: Option<&str>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let (where_, applied, version) = match open_backend(db, true).await? {
        Backend::Sqlite(s) => (
            s.path().display().to_string(),
            None,
            baton_sqlite::SCHEMA_VERSION,
        ),
        Backend::Postgres(p) => {
            let applied = p.migrate().await?;
            (
                format!("schema {}", p.schema()),
                Some(applied),
                baton_postgres::SCHEMA_VERSION,
            )
        }
    };
    if json {
        return print_json(out, &json!({ "store": where_, "schema_version": version }));
    }
    match applied {
        Some(applied) if !applied.is_empty() => {
            writeln!(out, "{where_}: migrated to schema version {version}")?
        }
        _ => writeln!(out, "{where_}: schema version {version}, up to date")?,
    }
    Ok(())
}

/// `baton doctor`.
pub async fn doctor(db: Option<&str>, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    let (backend, facts): (&str, Vec<(String, String)>) = match open_backend(db, false).await? {
        Backend::Sqlite(s) => {
            let mut facts = vec![("path".to_owned(), s.path().display().to_string())];
            facts.push((
                "supported_schema_version".to_owned(),
                baton_sqlite::SCHEMA_VERSION.to_string(),
            ));
            facts.extend(s.doctor().await?);
            ("sqlite", facts)
        }
        Backend::Postgres(p) => {
            let d = p.doctor().await?;
            let mut facts = vec![
                ("url".to_owned(), d.url),
                ("schema".to_owned(), d.schema),
                ("server".to_owned(), d.server_version),
                ("schema_version".to_owned(), d.schema_version.to_string()),
                (
                    "supported_schema_version".to_owned(),
                    d.supported_version.to_string(),
                ),
            ];
            facts.extend(d.settings);
            ("postgres", facts)
        }
    };
    if json {
        let map: serde_json::Map<_, _> = facts.into_iter().map(|(k, v)| (k, json!(v))).collect();
        return print_json(
            out,
            &json!({ "backend": backend, "ok": true, "facts": map }),
        );
    }
    writeln!(out, "ok: {backend} store reachable")?;
    for (key, value) in facts {
        writeln!(out, "  {key:<36} {value}")?;
    }
    Ok(())
}
