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

    async fn table_rows(&self) -> std::collections::BTreeMap<String, u64> {
        let conn = self.conn();
        let mut names: Vec<String> = conn
            .prepare(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'
                 AND name NOT LIKE 'sqlite_%'
                 AND name NOT LIKE 'history_search_words_%'",
            )
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // The FTS5 table's one row per indexed document.
        names.push("history_search_words_docsize".into());
        names
            .into_iter()
            .map(|name| {
                let n: i64 = conn
                    .query_row(&format!("SELECT COUNT(*) FROM \"{name}\""), [], |r| {
                        r.get(0)
                    })
                    .unwrap();
                (name, n as u64)
            })
            .collect()
    }

    async fn indexed(&self, word: &str) -> u64 {
        let n: i64 = self
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM history_search_words WHERE history_search_words MATCH ?1",
                [format!("\"{word}\"")],
                |r| r.get(0),
            )
            .unwrap();
        n as u64
    }

    async fn execute(&self, sql: &str) -> Result<u64, String> {
        self.conn()
            .execute(sql, [])
            .map(|n| n as u64)
            .map_err(|e| e.to_string())
    }
}

impl TempSqlite {
    fn conn(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(self.dir.path().join("baton.db")).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        conn
    }
}

baton_store::conformance_tests!(TempSqlite::new());
