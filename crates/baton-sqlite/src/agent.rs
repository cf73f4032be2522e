//! What the agent loop keeps on SQLite beside history: constraints and started tool calls.

use baton_core::{RunId, RunStatus, Seq, TenantId, Timestamp};
use baton_store::codec::{to_i64, to_u64};
use baton_store::{Constraint, Error, NewEntry};
use rusqlite::{Connection, Transaction, params};

use crate::{find_run, insert_entries, prepare, sql};

/// Appends the message, pins it and records the constraint, inside `tx`.
pub(crate) fn add_constraint(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run: &RunId,
    entry: &NewEntry,
    text: &str,
    read_only: bool,
) -> Result<Constraint, Error> {
    let row = find_run(tx, tenant, run)?;
    if row.status != RunStatus::Active {
        return Err(Error::RunNotActive {
            run: run.clone(),
            status: row.status,
        });
    }
    let now = Timestamp::now();
    let prepared = prepare(std::slice::from_ref(entry))?;
    let seqs = insert_entries(tx, row.pk, row.last_seq, &prepared, now)?;
    let seq = seqs.first().copied().ok_or_else(|| Error::Corrupt {
        what: "a constraint's message got no seq".into(),
    })?;
    tx.prepare_cached("INSERT INTO pins (run_pk, seq, created_at) VALUES (?1, ?2, ?3)")
        .map_err(sql)?
        .execute(params![row.pk, to_i64(seq.0)?, now.0])
        .map_err(sql)?;
    tx.prepare_cached(
        "INSERT INTO run_constraints (run_pk, seq, read_only, text, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .map_err(sql)?
    .execute(params![row.pk, to_i64(seq.0)?, read_only, text, now.0])
    .map_err(sql)?;
    Ok(Constraint {
        seq,
        text: text.to_owned(),
        read_only,
        created_at: now,
    })
}

/// The run's constraints, oldest first.
pub(crate) fn constraints(conn: &Connection, run_pk: i64) -> Result<Vec<Constraint>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, text, read_only, created_at FROM run_constraints
             WHERE run_pk = ?1 ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        out.push(Constraint {
            seq: Seq(to_u64(r.get(0).map_err(sql)?, "seq")?),
            text: r.get(1).map_err(sql)?,
            read_only: r.get(2).map_err(sql)?,
            created_at: Timestamp(r.get(3).map_err(sql)?),
        });
    }
    Ok(out)
}

/// Records a started tool call; `false` when it was recorded already.
pub(crate) fn start_tool(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run: &RunId,
    tool_use_id: &str,
) -> Result<bool, Error> {
    let row = find_run(tx, tenant, run)?;
    let added = tx
        .prepare_cached(
            "INSERT INTO tool_runs (run_pk, tool_use_id, started_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (run_pk, tool_use_id) DO NOTHING",
        )
        .map_err(sql)?
        .execute(params![row.pk, tool_use_id, Timestamp::now().0])
        .map_err(sql)?;
    Ok(added == 1)
}

/// The started tool calls of the run.
pub(crate) fn started_tools(conn: &Connection, run_pk: i64) -> Result<Vec<String>, Error> {
    let mut stmt = conn
        .prepare_cached("SELECT tool_use_id FROM tool_runs WHERE run_pk = ?1 ORDER BY started_at")
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        out.push(r.get(0).map_err(sql)?);
    }
    Ok(out)
}
