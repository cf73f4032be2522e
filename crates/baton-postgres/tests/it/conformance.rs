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
}

baton_store::conformance_tests!(TempSchema::new());
