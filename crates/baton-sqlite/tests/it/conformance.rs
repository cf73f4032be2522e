//! The store contract of `baton-store`, on a temp-file SQLite database.

use std::sync::Arc;

use async_trait::async_trait;
use baton_sqlite::SqliteStore;
use baton_store::Store;
use baton_store::conformance::Harness;

struct TempSqlite {
    dir: tempfile::TempDir,
}

impl TempSqlite {
    fn new() -> Self {
        TempSqlite {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

#[async_trait]
impl Harness for TempSqlite {
    async fn open(&self) -> Arc<dyn Store> {
        Arc::new(
            SqliteStore::open(self.dir.path().join("baton.db"))
                .await
                .unwrap(),
        )
    }

    async fn corrupt_cache_bodies(&self) {
        let conn = rusqlite::Connection::open(self.dir.path().join("baton.db")).unwrap();
        conn.execute("UPDATE cache_entries SET body = X'deadbeef'", [])
            .unwrap();
    }
}

baton_store::conformance_tests!(TempSqlite::new());
