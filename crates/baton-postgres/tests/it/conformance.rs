//! The store contract of `baton-store`, on PostgreSQL.

use std::sync::Arc;

use async_trait::async_trait;
use baton_store::Store;
use baton_store::conformance::Harness;

use crate::support::TempSchema;

#[async_trait]
impl Harness for TempSchema {
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(self.store().await)
    }

    async fn corrupt_cache_bodies(&self) {
        let sql = format!(
            "UPDATE \"{}\".cache_entries SET body = '\\xdeadbeef'::bytea",
            self.name
        );
        self.raw().await.batch_execute(&sql).await.unwrap();
    }

    async fn table_rows(&self) -> std::collections::BTreeMap<String, u64> {
        let client = self.raw().await;
        let names: Vec<String> = client
            .query(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = $1 AND table_type = 'BASE TABLE'",
                &[&self.name],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut out = std::collections::BTreeMap::new();
        for name in names {
            let sql = format!("SELECT COUNT(*) FROM \"{}\".\"{name}\"", self.name);
            let n: i64 = client.query_one(&sql, &[]).await.unwrap().get(0);
            out.insert(name, n as u64);
        }
        out
    }

    async fn indexed(&self, word: &str) -> u64 {
        let sql = format!(
            "SELECT COUNT(*) FROM \"{}\".history_search WHERE tsv @@ to_tsquery('simple', $1)",
            self.name
        );
        let n: i64 = self
            .raw()
            .await
            .query_one(&sql, &[&word])
            .await
            .unwrap()
            .get(0);
        n as u64
    }

    async fn execute(&self, sql: &str) -> Result<u64, String> {
        let client = self.raw().await;
        client
            .batch_execute(&format!("SET search_path = \"{}\"", self.name))
            .await
            .map_err(|e| e.to_string())?;
        client.execute(sql, &[]).await.map_err(|e| {
            // The server's message, not the driver's "db error".
            e.as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned())
        })
    }
}

baton_store::conformance_tests!(TempSchema::new());
