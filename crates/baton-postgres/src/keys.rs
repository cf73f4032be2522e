//! API keys on PostgreSQL (schema version 8): one row per key, found by the hash of the whole
//! key. Every method is one statement.

use async_trait::async_trait;
use baton_core::{TenantId, Timestamp};
use baton_store::Error;
use baton_store::keys::{ApiKey, KeyHash, KeyStore, NewApiKey, Revoke};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;

use crate::{PgStore, connection_broken, pg};

const COLUMNS: &str = "id, tenant_id, label, created_at, revoked_at";

fn decode(r: &Row) -> Result<ApiKey, Error> {
    Ok(ApiKey {
        id: r.try_get(0).map_err(pg)?,
        tenant: TenantId::new(r.try_get::<_, String>(1).map_err(pg)?)?,
        label: r.try_get(2).map_err(pg)?,
        created_at: Timestamp(r.try_get(3).map_err(pg)?),
        revoked_at: r.try_get::<_, Option<i64>>(4).map_err(pg)?.map(Timestamp),
    })
}

#[async_trait]
impl KeyStore for PgStore {
    async fn create_api_key(&self, new: &NewApiKey<'_>) -> Result<ApiKey, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(&format!(
                    "INSERT INTO api_keys (hash, id, tenant_id, label, created_at)
                     VALUES ($1, $2, $3, $4, $5) RETURNING {COLUMNS}"
                ))
                .await
                .map_err(pg)?;
            let row = client
                .query_one(
                    &stmt,
                    &[
                        &&new.hash.0[..],
                        &new.id,
                        &new.tenant.as_str(),
                        &new.label,
                        &new.now.0,
                    ],
                )
                .await;
            match row {
                Ok(row) => decode(&row),
                Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(Error::InvalidKey {
                    detail: format!("a key with id {} already exists", new.id),
                }),
                Err(e) => Err(pg(e)),
            }
        })
    }

    async fn authenticate(&self, hash: &KeyHash) -> Result<Option<ApiKey>, Error> {
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL"
                ))
                .await
                .map_err(pg)?;
            client
                .query_opt(&stmt, &[&&hash.0[..]])
                .await
                .map_err(pg)?
                .as_ref()
                .map(decode)
                .transpose()
        })
    }

    async fn api_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error> {
        let tenant = tenant.map(TenantId::as_str);
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM api_keys WHERE $1::text IS NULL OR tenant_id = $1::text
                     ORDER BY created_at, id"
                ))
                .await
                .map_err(pg)?;
            client
                .query(&stmt, &[&tenant])
                .await
                .map_err(pg)?
                .iter()
                .map(decode)
                .collect()
        })
    }

    async fn revoke_api_keys(&self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error> {
        let (id, tenant) = match which {
            Revoke::Id(id) => (Some(id), None),
            Revoke::Tenant(t) => (None, Some(t.as_str())),
        };
        with_client!(self, |client| {
            let stmt = client
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = $3
                     WHERE revoked_at IS NULL AND (id = $1::text OR tenant_id = $2::text)",
                )
                .await
                .map_err(pg)?;
            client
                .execute(&stmt, &[&id, &tenant, &now.0])
                .await
                .map_err(pg)
        })
    }
}
