//! API keys on SQLite (schema version 8): one row per key, found by the hash of the whole key.

use async_trait::async_trait;
use baton_core::{TenantId, Timestamp};
use baton_store::Error;
use baton_store::keys::{ApiKey, KeyHash, KeyStore, NewApiKey, Revoke};
use rusqlite::{ErrorCode, OptionalExtension, Row, params};

use crate::{SqliteStore, sql};

const COLUMNS: &str = "id, tenant_id, label, created_at, revoked_at";

/// A key's row: id, tenant, label, created, revoked.
type KeyRow = (String, String, Option<String>, i64, Option<i64>);

fn key_row(r: &Row<'_>) -> rusqlite::Result<KeyRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn decode((id, tenant, label, created_at, revoked_at): KeyRow) -> Result<ApiKey, Error> {
    Ok(ApiKey {
        id,
        tenant: TenantId::new(tenant)?,
        label,
        created_at: Timestamp(created_at),
        revoked_at: revoked_at.map(Timestamp),
    })
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn create_api_key(&self, new: &NewApiKey<'_>) -> Result<ApiKey, Error> {
        let key = ApiKey {
            id: new.id.to_owned(),
            tenant: new.tenant.clone(),
            label: new.label.map(str::to_owned),
            created_at: new.now,
            revoked_at: None,
        };
        let hash = new.hash;
        let row = key.clone();
        self.write(move |conn| {
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO api_keys (hash, id, tenant_id, label, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(sql)?
                .execute(params![
                    &hash.0[..],
                    row.id,
                    row.tenant.as_str(),
                    row.label,
                    row.created_at.0
                ]);
            match inserted {
                Ok(_) => Ok(()),
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == ErrorCode::ConstraintViolation =>
                {
                    Err(Error::InvalidKey {
                        detail: format!("a key with id {} already exists", row.id),
                    })
                }
                Err(e) => Err(sql(e)),
            }
        })
        .await?;
        Ok(key)
    }

    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<ApiKey>, Error> {
        let hash = *hash;
        let row = self
            .read(move |conn| {
                conn.prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM api_keys WHERE hash = ?1 AND revoked_at IS NULL"
                ))
                .map_err(sql)?
                .query_row(params![&hash.0[..]], key_row)
                .optional()
                .map_err(sql)
            })
            .await?;
        row.map(decode).transpose()
    }

    async fn api_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error> {
        let tenant = tenant.map(|t| t.as_str().to_owned());
        let rows = self
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM api_keys WHERE ?1 IS NULL OR tenant_id = ?1
                         ORDER BY created_at, id"
                    ))
                    .map_err(sql)?;
                let rows = stmt.query_map(params![tenant], key_row).map_err(sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(sql)
            })
            .await?;
        rows.into_iter().map(decode).collect()
    }

    async fn revoke_api_keys(&self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error> {
        let (id, tenant) = match which {
            Revoke::Id(id) => (Some(id.to_owned()), None),
            Revoke::Tenant(t) => (None, Some(t.as_str().to_owned())),
        };
        self.write(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = ?3
                     WHERE revoked_at IS NULL AND (id = ?1 OR tenant_id = ?2)",
                )
                .map_err(sql)?
                .execute(params![id, tenant, now.0])
                .map_err(sql)?;
            Ok(n as u64)
        })
        .await
    }
}
