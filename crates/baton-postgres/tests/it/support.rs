//! A fresh schema per test.

use baton_postgres::PgStore;

/// The server under test.
pub fn server_url() -> String {
    std::env::var("BATON_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A schema name no other test uses.
pub fn fresh_schema() -> String {
    format!("baton_t_{}", uuid::Uuid::now_v7().simple())
}

/// `url` with `?schema=NAME` (or `&schema=NAME`) added.
pub fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}schema={schema}")
}

/// A schema on the test server, dropped on success.
pub struct TempSchema {
    pub name: String,
    pub url: String,
}

impl TempSchema {
    pub fn new() -> Self {
        let name = fresh_schema();
        TempSchema {
            url: with_schema(&server_url(), &name),
            name,
        }
    }

    pub async fn store(&self) -> PgStore {
        PgStore::connect(&self.url).await.unwrap_or_else(|e| {
            panic!(
                "cannot reach the test PostgreSQL at {} (set BATON_TEST_PG): {e}",
                server_url()
            )
        })
    }

    /// A plain driver connection to the server, for what the store's API cannot do.
    pub async fn raw(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&server_url(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| {
                panic!("cannot reach the test PostgreSQL at {}: {e}", server_url())
            });
        tokio::spawn(connection);
        client
    }
}

impl Drop for TempSchema {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("left schema {} behind for inspection", self.name);
            return;
        }
        let name = self.name.clone();
        // Drop runs outside any runtime guarantee: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&server_url(), tokio_postgres::NoTls).await
                {
                    tokio::spawn(conn);
                    // A connection of the test still holding a lock must not hang the suite.
                    let sql = format!(
                        "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
                    );
                    if let Err(e) = client.batch_execute(&sql).await {
                        eprintln!("could not drop schema {name}: {e}");
                    }
                }
            });
        })
        .join();
    }
}
