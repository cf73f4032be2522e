//! What `baton-bench` measures baton against on PostgreSQL (feature `bench`): bare
//! `tokio-postgres` on a schema of its own with baton's migration applied verbatim, and the
//! statements that make, analyze and drop the bench's schemas. Only the SQL lives here; the
//! bench times it.

use std::pin::pin;
use std::time::Duration;

use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, NoTls, Statement};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const COLUMNS: &str = "run_pk, seq, tokens, tool_uses, tool_results, created_at, message";

/// A plain driver connection to `url` (read as baton reads it), its connection driven by a
/// task of the current runtime.
pub async fn connect(url: &str) -> Result<Client> {
    let (mut config, ..) = crate::parse_url(url)?;
    config.application_name("baton-bench");
    let (client, connection) =
        tokio::time::timeout(Duration::from_secs(10), config.connect(NoTls)).await??;
    tokio::spawn(connection);
    Ok(client)
}

/// The server's version and `synchronous_commit`.
pub async fn server(client: &Client) -> Result<(String, String)> {
    let row = client
        .query_one(
            "SELECT current_setting('server_version'), current_setting('synchronous_commit')",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// Makes an empty schema.
pub async fn create_schema(client: &Client, schema: &str) -> Result<()> {
    Ok(client
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await?)
}

/// Gathers statistics on the ledger's tables in `schema`, as autovacuum would.
pub async fn analyze_ledger(client: &Client, schema: &str) -> Result<()> {
    let sql = format!("ANALYZE \"{schema}\".operations, \"{schema}\".attempts");
    Ok(client.batch_execute(&sql).await?)
}

/// Drops `schemas` and everything in them.
pub async fn drop_schemas(client: &Client, schemas: &[&str]) -> Result<()> {
    let mut sql = "SET lock_timeout = '10s';".to_owned();
    for schema in schemas {
        sql.push_str(&format!(" DROP SCHEMA IF EXISTS \"{schema}\" CASCADE;"));
    }
    Ok(client.batch_execute(&sql).await?)
}

/// A history row, serialized the way baton serializes it (before the clock starts).
pub use baton_store::backend::Prepared as Row;

/// The seven columns of `row`, in `COLUMNS`' order (`tokens` its token count as `INT4`).
fn columns<'a>(
    row: &'a Row,
    tokens: &'a i32,
    [run, seq, now]: [&'a i64; 3],
) -> [&'a (dyn ToSql + Sync); 7] {
    let (uses, results) = (&row.tool_uses, &row.tool_results);
    [run, seq, tokens, uses, results, now, &row.message]
}

/// The token counts of `rows`, as `INT4`.
fn tokens(rows: &[Row]) -> Result<Vec<i32>> {
    rows.iter().map(|r| Ok(i32::try_from(r.tokens)?)).collect()
}

/// The column types of `COPY`, in `COLUMNS`' order.
const TYPES: [Type; 7] = [
    Type::INT8,
    Type::INT8,
    Type::INT4,
    Type::TEXT,
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
];

/// How the bare baseline writes a batch's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// baton's own statement shape: `INSERT … SELECT FROM unnest(arrays)`.
    Unnest,
    /// `INSERT … VALUES (…), (…), …` with seven parameters per row.
    Values,
    /// `COPY history FROM STDIN (FORMAT binary)`.
    Copy,
}

/// The bare baseline: one driver connection, baton's schema, no baton code.
pub struct Bare {
    client: Client,
    tenant: String,
    statements: [Statement; 6],
}

/// A run in the bare schema, its seqs counted on the client.
pub struct BareRun {
    pk: i64,
    /// Its last seq.
    pub last: i64,
}

impl Bare {
    /// Makes `schema` on the server of `url` with baton's first migration and a tenant, and
    /// prepares the statements for batches of `batch`.
    pub async fn open(url: &str, schema: &str, tenant: &str, batch: usize) -> Result<Self> {
        let client = connect(url).await?;
        let migration = include_str!("../migrations/0001_init.sql");
        let setup =
            format!("CREATE SCHEMA \"{schema}\"; SET search_path = \"{schema}\"; {migration}");
        client.batch_execute(&setup).await?;
        let sql = "INSERT INTO tenants (id, created_at) VALUES ($1, 0)";
        client.execute(sql, &[&tenant]).await?;
        let rows: Vec<String> = (0..batch)
            .map(|i| {
                let p: Vec<String> = (1..=7).map(|k| format!("${}", i * 7 + k)).collect();
                format!("({})", p.join(", "))
            })
            .collect();
        let mut statements = Vec::new();
        for sql in [
            crate::rows::INSERT_HISTORY.to_owned(),
            format!("INSERT INTO history ({COLUMNS}) VALUES {}", rows.join(", ")),
            format!("COPY history ({COLUMNS}) FROM STDIN (FORMAT binary)"),
            format!("INSERT INTO history ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"),
            "SELECT pk, status, active_summary_id, last_seq FROM runs
             WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
                .to_owned(),
            "UPDATE runs SET last_seq = $1 WHERE pk = $2".to_owned(),
        ] {
            statements.push(client.prepare(&sql).await?);
        }
        let statements = statements
            .try_into()
            .map_err(|_| "bare baseline: six statements expected")?;
        let tenant = tenant.to_owned();
        Ok(Bare {
            client,
            tenant,
            statements,
        })
    }

    /// A new, empty run.
    pub async fn create_run(&self, id: &str) -> Result<BareRun> {
        let sql = "INSERT INTO runs (tenant_id, id, status, created_at)
                   VALUES ($1, $2, 'active', 0) RETURNING pk";
        let pk = self
            .client
            .query_one(sql, &[&self.tenant, &id])
            .await?
            .get(0);
        Ok(BareRun { pk, last: 0 })
    }

    /// One batch in one transaction: `BEGIN`, the rows by `method`, `last_seq`, `COMMIT`.
    pub async fn batch(
        &self,
        run: &mut BareRun,
        rows: &[Row],
        method: Method,
        now: i64,
    ) -> Result<()> {
        let [unnest, values, copy, _, _, update] = &self.statements;
        let (first, last) = (run.last + 1, run.last + i64::try_from(rows.len())?);
        let seqs: Vec<i64> = (first..=last).collect();
        let tokens = tokens(rows)?;
        self.client.batch_execute("BEGIN").await?;
        match method {
            Method::Unnest => {
                let uses: Vec<Option<&str>> = rows.iter().map(|r| r.tool_uses.as_deref()).collect();
                let results: Vec<Option<&str>> =
                    rows.iter().map(|r| r.tool_results.as_deref()).collect();
                let messages: Vec<&str> = rows.iter().map(|r| r.message.as_str()).collect();
                let params: [&(dyn ToSql + Sync); 7] =
                    [&run.pk, &seqs, &tokens, &uses, &results, &messages, &now];
                self.client.execute(unnest, &params).await?;
            }
            Method::Values => {
                if rows.len() * 7 != values.params().len() {
                    return Err("bare VALUES insert prepared for another batch size".into());
                }
                let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * 7);
                for ((row, seq), t) in rows.iter().zip(&seqs).zip(&tokens) {
                    params.extend_from_slice(&columns(row, t, [&run.pk, seq, &now]));
                }
                self.client.execute(values, &params).await?;
            }
            Method::Copy => {
                let sink = self.client.copy_in(copy).await?;
                let mut writer = pin!(BinaryCopyInWriter::new(sink, &TYPES));
                for ((row, seq), t) in rows.iter().zip(&seqs).zip(&tokens) {
                    let row = columns(row, t, [&run.pk, seq, &now]);
                    writer.as_mut().write(&row).await?;
                }
                if writer.finish().await? != rows.len() as u64 {
                    return Err("bare COPY wrote another number of rows".into());
                }
            }
        }
        self.client.execute(update, &[&last, &run.pk]).await?;
        self.client.batch_execute("COMMIT").await?;
        run.last = last;
        Ok(())
    }

    /// One row in one transaction; with `lock`, first the run-row `SELECT … FOR UPDATE` baton
    /// runs, so the statements are baton's own.
    pub async fn single(
        &self,
        run: &mut BareRun,
        id: &str,
        row: &Row,
        lock: bool,
        now: i64,
    ) -> Result<()> {
        let [_, _, _, single, lock_run, update] = &self.statements;
        let (seq, tokens) = (run.last + 1, i32::try_from(row.tokens)?);
        self.client.batch_execute("BEGIN").await?;
        if lock {
            self.client
                .query_one(lock_run, &[&self.tenant, &id])
                .await?;
        }
        self.client
            .execute(single, &columns(row, &tokens, [&run.pk, &seq, &now]))
            .await?;
        self.client.execute(update, &[&seq, &run.pk]).await?;
        self.client.batch_execute("COMMIT").await?;
        run.last = seq;
        Ok(())
    }

    /// The run's stored last seq and its history's row count.
    pub async fn stored(&self, run: &BareRun) -> Result<(i64, i64)> {
        let sql = "SELECT r.last_seq, (SELECT count(*) FROM history h WHERE h.run_pk = r.pk)
                   FROM runs r WHERE r.pk = $1";
        let row = self.client.query_one(sql, &[&run.pk]).await?;
        Ok((row.get(0), row.get(1)))
    }
}
