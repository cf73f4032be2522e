//! The response cache's entries, flights and call log (schema version 6) and API keys
//! (version 8) as SQLite statements. A released flight keeps its row with a lease of 0, so its
//! token keeps growing and a holder that lost its lease never matches a later holder's.

use async_trait::async_trait;
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_store::backend::{CacheRows, KeyRows, Row, int};
use baton_store::keys::{ApiKey, KeyHash, NewApiKey, Revoke};
use baton_store::{CacheEntry, CallRecord, Error};
use rusqlite::params;

use crate::SqliteTx;

#[async_trait]
impl CacheRows for SqliteTx {
    async fn cache_read(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        now: Timestamp,
    ) -> Result<Option<(CacheEntry, Vec<u8>)>, Error> {
        self.one(
            "SELECT operation, body, body_sha256, created_at, expires_at, hits FROM cache_entries
             WHERE tenant_id = ?1 AND key = ?2 AND expires_at > ?3",
            params![tenant.as_str(), &key.0[..], now.0],
            |r| r.cache_entry(*key),
        )
    }

    async fn cache_count_hits(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        n: u64,
    ) -> Result<(), Error> {
        let sql = "UPDATE cache_entries SET hits = hits + ?3 WHERE tenant_id = ?1 AND key = ?2";
        self.exec(sql, params![tenant.as_str(), &key.0[..], int(n)?])
            .map(drop)
    }

    async fn cache_drop(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        digest: &[u8],
        created_at: Timestamp,
    ) -> Result<(), Error> {
        let sql = "DELETE FROM cache_entries
                   WHERE tenant_id = ?1 AND key = ?2 AND body_sha256 = ?3 AND created_at = ?4";
        self.exec(
            sql,
            params![tenant.as_str(), &key.0[..], digest, created_at.0],
        )
        .map(drop)
    }

    async fn cache_put(
        &mut self,
        tenant: &TenantId,
        entry: &CacheEntry,
        digest: &[u8],
    ) -> Result<(), Error> {
        self.exec(
            "INSERT INTO cache_entries
                 (tenant_id, key, operation, body, body_sha256, created_at, expires_at, hits)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)
             ON CONFLICT (tenant_id, key) DO UPDATE SET
                 operation = excluded.operation, body = excluded.body,
                 body_sha256 = excluded.body_sha256, created_at = excluded.created_at,
                 expires_at = excluded.expires_at, hits = 0",
            params![
                tenant.as_str(),
                &entry.key.0[..],
                entry.operation,
                entry.body,
                digest,
                entry.created_at.0,
                entry.expires_at.0
            ],
        )
        .map(drop)
    }

    async fn cache_prune(&mut self, tenant: &TenantId, now: Timestamp) -> Result<u64, Error> {
        let sql = "DELETE FROM cache_entries WHERE tenant_id = ?1 AND expires_at <= ?2";
        Ok(self.exec(sql, params![tenant.as_str(), now.0])? as u64)
    }

    async fn insert_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<u64>, Error> {
        let sql = "INSERT INTO flights (tenant_id, key, owner, token, lease_expires_at, started_at)
                   VALUES (?1, ?2, ?3, 1, ?4, ?5) ON CONFLICT (tenant_id, key) DO NOTHING";
        let inserted = self.exec(
            sql,
            params![tenant.as_str(), &key.0[..], owner, until.0, now.0],
        )?;
        Ok((inserted == 1).then_some(1))
    }

    async fn take_over_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<(u64, bool)>, Error> {
        let sql = "SELECT token, lease_expires_at FROM flights
                   WHERE tenant_id = ?1 AND key = ?2 AND lease_expires_at <= ?3";
        let ended = self.one(sql, params![tenant.as_str(), &key.0[..], now.0], |r| {
            Ok((r.count(0, "a flight's token")?, r.int_at(1)?))
        })?;
        let Some((token, lease)) = ended else {
            return Ok(None);
        };
        let token = token.checked_add(1).ok_or_else(|| Error::Corrupt {
            what: "a flight's token overflowed".into(),
        })?;
        self.exec(
            "UPDATE flights SET owner = ?3, token = ?4, lease_expires_at = ?5, started_at = ?6
             WHERE tenant_id = ?1 AND key = ?2",
            params![
                tenant.as_str(),
                &key.0[..],
                owner,
                int(token)?,
                until.0,
                now.0
            ],
        )?;
        // A lease of 0 is a released flight, not an expired one.
        Ok(Some((token, lease != 0)))
    }

    async fn flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
    ) -> Result<Option<(String, Timestamp)>, Error> {
        let sql = "SELECT owner, lease_expires_at FROM flights WHERE tenant_id = ?1 AND key = ?2";
        self.one(sql, params![tenant.as_str(), &key.0[..]], |r| {
            Ok((r.text_at(0)?, r.time(1)?))
        })
    }

    async fn renew_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
        until: Timestamp,
    ) -> Result<bool, Error> {
        let sql = "UPDATE flights SET lease_expires_at = ?4
                   WHERE tenant_id = ?1 AND key = ?2 AND token = ?3 AND lease_expires_at > 0";
        let values = params![tenant.as_str(), &key.0[..], int(token)?, until.0];
        Ok(self.exec(sql, values)? == 1)
    }

    async fn release_flight(
        &mut self,
        tenant: &TenantId,
        key: &RequestKey,
        token: u64,
    ) -> Result<bool, Error> {
        let sql = "UPDATE flights SET lease_expires_at = 0
                   WHERE tenant_id = ?1 AND key = ?2 AND token = ?3 AND lease_expires_at > 0";
        Ok(self.exec(sql, params![tenant.as_str(), &key.0[..], int(token)?])? == 1)
    }

    async fn insert_calls(
        &mut self,
        tenant: &TenantId,
        records: &[CallRecord],
    ) -> Result<(), Error> {
        let sql = "INSERT INTO calls (tenant_id, at, operation, request_hash, model, input_tokens,
                       output_tokens, cost_usd, outcome, latency_ms, overlapped)
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
        for r in records {
            self.exec(
                sql,
                params![
                    tenant.as_str(),
                    r.at.0,
                    r.operation,
                    &r.request_hash.0[..],
                    r.model,
                    int(r.input_tokens)?,
                    int(r.output_tokens)?,
                    r.cost_usd,
                    r.outcome.as_str(),
                    int(r.latency_ms)?,
                    r.overlapped,
                ],
            )?;
        }
        Ok(())
    }

    async fn calls(
        &mut self,
        tenant: &TenantId,
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<CallRecord>, Error> {
        self.all(
            "SELECT at, operation, request_hash, model, input_tokens, output_tokens, cost_usd,
                    outcome, latency_ms, overlapped
             FROM calls WHERE tenant_id = ?1 AND at >= ?2 AND at < ?3 ORDER BY at, id",
            params![tenant.as_str(), since.0, until.0],
            |r| r.call(),
        )
    }
}

const KEY: &str = "SELECT id, tenant_id, label, created_at, revoked_at FROM api_keys";

#[async_trait]
impl KeyRows for SqliteTx {
    async fn insert_key(&mut self, new: &NewApiKey<'_>) -> Result<bool, Error> {
        let sql = "INSERT INTO api_keys (hash, id, tenant_id, label, created_at)
                   VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING";
        let values = params![
            &new.hash.0[..],
            new.id,
            new.tenant.as_str(),
            new.label,
            new.now.0
        ];
        Ok(self.exec(sql, values)? == 1)
    }

    async fn key(&mut self, hash: &KeyHash) -> Result<Option<ApiKey>, Error> {
        let sql = format!("{KEY} WHERE hash = ?1 AND revoked_at IS NULL");
        self.one(&sql, [&hash.0[..]], |r| r.api_key())
    }

    async fn keys(&mut self, tenant: Option<&TenantId>) -> Result<Vec<ApiKey>, Error> {
        let sql = format!("{KEY} WHERE ?1 IS NULL OR tenant_id = ?1 ORDER BY created_at, id");
        self.all(&sql, [tenant.map(TenantId::as_str)], |r| r.api_key())
    }

    async fn revoke_keys(&mut self, which: Revoke<'_>, now: Timestamp) -> Result<u64, Error> {
        let (id, tenant) = match which {
            Revoke::Id(id) => (Some(id), None),
            Revoke::Tenant(t) => (None, Some(t.as_str())),
        };
        let sql = "UPDATE api_keys SET revoked_at = ?3
                   WHERE revoked_at IS NULL AND (id = ?1 OR tenant_id = ?2)";
        Ok(self.exec(sql, params![id, tenant, now.0])? as u64)
    }
}
