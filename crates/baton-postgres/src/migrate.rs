//! Versioned migrations, applied at connect.
//!
//! Versions are recorded in `baton_schema` inside baton's schema; the numbering is shared with
//! `baton-sqlite` (version N means the same tables on both). Migrations run in one transaction
//! holding an advisory lock keyed by the schema name, so many workers starting at once apply
//! each migration exactly once.

use baton_store::Error;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::FromSqlOwned;

use crate::{Params, pg};

/// The migrations, in order; migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_search.sql"),
    include_str!("../migrations/0003_import.sql"),
    include_str!("../migrations/0004_compaction.sql"),
    include_str!("../migrations/0005_agent.sql"),
    include_str!("../migrations/0006_cache.sql"),
    include_str!("../migrations/0007_ledger.sql"),
    include_str!("../migrations/0008_api_keys.sql"),
    include_str!("../migrations/0009_ledger_by_key.sql"),
    include_str!("../migrations/0010_usage.sql"),
    include_str!("../migrations/0011_runs.sql"),
    include_str!("../migrations/0012_deleted_sources.sql"),
    include_str!("../migrations/0013_live_attempt.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The schema version of `schema`, 0 when baton has not created it.
pub(crate) async fn current_version(c: &impl GenericClient, schema: &str) -> Result<i64, Error> {
    let sql = "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'baton_schema')";
    if !value::<bool>(c, sql, &[&schema]).await? {
        return Ok(0);
    }
    let sql = format!("SELECT COALESCE(MAX(version), 0)::bigint FROM \"{schema}\".baton_schema");
    value(c, &sql, &[]).await
}

/// The first column of the one row `sql` returns.
async fn value<T: FromSqlOwned>(
    c: &impl GenericClient,
    sql: &str,
    params: &Params<'_>,
) -> Result<T, Error> {
    Ok(c.query_one(sql, params).await.map_err(pg)?.get(0))
}

/// Applies the missing migrations; returns the versions applied.
pub(crate) async fn run(
    client: &mut deadpool_postgres::Object,
    schema: &str,
) -> Result<Vec<i64>, Error> {
    let tx = client.transaction().await.map_err(pg)?;
    match apply(&tx, schema).await {
        Ok(applied) => {
            tx.commit().await.map_err(pg)?;
            if !applied.is_empty() {
                tracing::info!(schema, versions = ?applied, "migrated");
            }
            Ok(applied)
        }
        Err(err) => {
            // Release the advisory lock and any catalog locks now, not when the driver gets to it.
            let _ = tx.rollback().await;
            Err(err)
        }
    }
}

async fn apply(tx: &deadpool_postgres::Transaction<'_>, schema: &str) -> Result<Vec<i64>, Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('baton migrations ' || $1::text))",
        &[&schema],
    )
    .await
    .map_err(pg)?;
    let version = current_version(tx, schema).await?;
    if version == 0 {
        let sql = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1";
        let foreign: i64 = value(tx, sql, &[&schema]).await?;
        if foreign > 0 {
            return Err(Error::NotABatonDatabase {
                path: format!("schema {schema}"),
                detail: format!("it holds {foreign} tables and no baton_schema table"),
            });
        }
    }
    if version > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            path: format!("schema {schema}"),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == SCHEMA_VERSION {
        return Ok(Vec::new());
    }
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{schema}\";
         SET LOCAL search_path = \"{schema}\";
         CREATE TABLE IF NOT EXISTS baton_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL);"
    ))
    .await
    .map_err(pg)?;
    let mut applied = Vec::new();
    for (index, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(usize::MAX))
    {
        let to = i64::try_from(index).unwrap_or(i64::MAX) + 1;
        tx.batch_execute(sql).await.map_err(pg)?;
        tx.execute(
            "INSERT INTO baton_schema (version, applied_at) VALUES ($1, $2)",
            &[&to, &baton_core::Timestamp::now().0],
        )
        .await
        .map_err(pg)?;
        applied.push(to);
    }
    Ok(applied)
}
