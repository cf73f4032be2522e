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
}

baton_store::conformance_tests!(TempSchema::new());
