//! What `baton-bench` measures baton against on SQLite (feature `bench`): bare rusqlite loops
//! with baton's schema (its migrations applied verbatim) and durability settings, and no baton
//! code. Only the statements live here; the bench times them.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior, params};

use crate::{connect, migrate};

/// A history row, serialized the way baton serializes it (before the clock starts).
pub use baton_store::backend::Prepared as Row;

/// A bare connection to a file of its own: WAL, `synchronous = NORMAL`, foreign keys on,
/// baton's schema, one tenant and one run.
pub struct Bare {
    conn: Connection,
    tenant: String,
    run: String,
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

impl Bare {
    /// Makes the file at `path` with baton's schema and the run `tenant`/`run`.
    pub fn open(path: &Path, tenant: &str, run: &str) -> Result<Self> {
        let conn = connect(path)?.conn;
        migrate::run(&conn, path)?;
        conn.execute(
            "INSERT INTO tenants (id, created_at) VALUES (?1, 0)",
            [tenant],
        )?;
        conn.execute(
            "INSERT INTO runs (tenant_id, id, status, created_at) VALUES (?1, ?2, 'active', 0)",
            [tenant, run],
        )?;
        let (tenant, run) = (tenant.to_owned(), run.to_owned());
        Ok(Bare { conn, tenant, run })
    }

    /// Appends `rows` in one transaction with the statements baton's `append` runs: `BEGIN
    /// IMMEDIATE`, the run's row, one insert per message, `last_seq`, `COMMIT`.
    pub fn append(&mut self, rows: &[Row], now: i64) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (pk, status, _active, last): (i64, String, Option<i64>, i64) = tx
            .prepare_cached(
                "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = ?1 AND id = ?2",
            )?
            .query_row([&self.tenant, &self.run], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
        if status != "active" {
            return Err(format!("bare baseline: run is {status}").into());
        }
        let mut seq = last;
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for row in rows {
                seq += 1;
                insert.execute(params![
                    pk,
                    seq,
                    row.tokens,
                    row.tool_uses,
                    row.tool_results,
                    now,
                    row.message
                ])?;
            }
        }
        tx.prepare_cached("UPDATE runs SET last_seq = ?1 WHERE pk = ?2")?
            .execute([seq, pk])?;
        tx.commit()?;
        Ok(())
    }

    /// The run's last seq and its history's row count.
    pub fn last_seq(&self) -> Result<(i64, i64)> {
        Ok(self.conn.query_row(
            "SELECT last_seq, (SELECT COUNT(*) FROM history) FROM runs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    }
}

/// The bare limit of the ledger: a table of operations keyed like baton's, where a pair is an
/// insert and an update, each in its own `BEGIN IMMEDIATE` transaction.
pub struct BareLedger {
    conn: Connection,
}

impl BareLedger {
    /// Makes the table in a file of its own.
    pub fn open(path: &Path) -> Result<Self> {
        let conn = connect(path)?.conn;
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
        conn.execute_batch(
            "CREATE TABLE ops (tenant_id TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL,
                 fence INTEGER NOT NULL, result TEXT, updated_at INTEGER NOT NULL,
                 PRIMARY KEY (tenant_id, key)) STRICT;",
        )?;
        Ok(BareLedger { conn })
    }

    /// Begins and completes operation `i`.
    pub fn pair(&mut self, i: usize, now: i64) -> Result<()> {
        let key = format!("op-{i}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "INSERT INTO ops (tenant_id, key, status, fence, updated_at) VALUES ('t', ?1, 'running', 1, ?2)",
        )?
        .execute(params![key, now])?;
        tx.commit()?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "UPDATE ops SET status = 'completed', result = ?2, updated_at = ?3
             WHERE tenant_id = 't' AND key = ?1 AND fence = 1",
        )?
        .execute(params![key, format!("{{\"ok\":{i}}}"), now])?;
        tx.commit()?;
        Ok(())
    }
}
