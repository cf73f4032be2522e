//! The reads compaction needs on SQLite: the run with its active summary, pinned messages, and
//! the tail as metadata (sizes and tool-call ids, no bodies).

use baton_core::units::ProtocolEvents;
use baton_core::{Entry, EntryMeta, Run, RunId, Seq, Summary, TenantId};
use baton_store::Error;
use baton_store::codec::{parse_ids, to_i64, to_u64};
use rusqlite::{Connection, params};

use crate::{entry_from_row, load_run_with_pk, load_summary, sql};

/// The run, its key and its active summary, in one read transaction.
pub(crate) fn run_and_summary(
    conn: &Connection,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, Run, Option<Summary>), Error> {
    let (pk, run) = load_run_with_pk(conn, tenant, run)?;
    let summary = match run.active_summary_id {
        Some(id) => Some(load_summary(conn, pk, id)?.ok_or_else(|| Error::Corrupt {
            what: format!("run {} points at missing summary {id}", run.id),
        })?),
        None => None,
    };
    Ok((pk, run, summary))
}

/// The pinned entries at or below `coverage`, in order.
pub(crate) fn pinned_entries(
    conn: &Connection,
    run_pk: i64,
    coverage: Seq,
) -> Result<Vec<Entry>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT h.seq, h.tokens, h.created_at, h.message FROM pins p
             JOIN history h ON h.run_pk = p.run_pk AND h.seq = p.seq
             WHERE p.run_pk = ?1 AND p.seq <= ?2 ORDER BY p.seq",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![run_pk, to_i64(coverage.0)?])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        out.push(entry_from_row(row)?);
    }
    Ok(out)
}

/// Every pinned seq of the run, in order.
pub(crate) fn pins(conn: &Connection, run_pk: i64) -> Result<Vec<Seq>, Error> {
    let mut stmt = conn
        .prepare_cached("SELECT seq FROM pins WHERE run_pk = ?1 ORDER BY seq")
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        out.push(Seq(to_u64(row.get(0).map_err(sql)?, "seq")?));
    }
    Ok(out)
}

/// The entries after `coverage` without their bodies: the columns before `message` only, so
/// the message's overflow pages are never read.
pub(crate) fn tail_meta(
    conn: &Connection,
    run_pk: i64,
    coverage: Seq,
) -> Result<Vec<EntryMeta>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tokens, tool_uses, tool_results FROM history
             WHERE run_pk = ?1 AND seq > ?2 ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![run_pk, to_i64(coverage.0)?])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let seq = Seq(to_u64(row.get(0).map_err(sql)?, "seq")?);
        let tokens: i64 = row.get(1).map_err(sql)?;
        out.push(EntryMeta {
            events: ProtocolEvents {
                seq,
                uses: parse_ids(row.get(2).map_err(sql)?, seq)?,
                results: parse_ids(row.get(3).map_err(sql)?, seq)?,
            },
            tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
        });
    }
    Ok(out)
}
