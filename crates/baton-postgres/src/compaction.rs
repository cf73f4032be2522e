//! The reads compaction needs on PostgreSQL: the run with its active summary, pinned messages,
//! and the tail as metadata (sizes and tool-call ids, no bodies). Callers run them inside one
//! `snapshot()` transaction, so they agree with each other.

use baton_core::units::ProtocolEvents;
use baton_core::{Entry, EntryMeta, Run, RunId, Seq, Summary, TenantId};
use baton_store::Error;
use baton_store::codec::{parse_ids, to_i64, to_u64};
use deadpool_postgres::GenericClient;

use crate::{entry_from_row, load_run, load_summary, pg};

/// The run, its key and its active summary.
pub(crate) async fn run_and_summary(
    c: &impl GenericClient,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, Run, Option<Summary>), Error> {
    let (pk, run) = load_run(c, tenant, run).await?;
    let summary = match run.active_summary_id {
        Some(id) => Some(
            load_summary(c, pk, id)
                .await?
                .ok_or_else(|| Error::Corrupt {
                    what: format!("run {} points at missing summary {id}", run.id),
                })?,
        ),
        None => None,
    };
    Ok((pk, run, summary))
}

/// The pinned entries at or below `coverage`, in order.
pub(crate) async fn pinned_entries(
    c: &impl GenericClient,
    run_pk: i64,
    coverage: Seq,
) -> Result<Vec<Entry>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT h.seq, h.tokens, h.created_at, h.message FROM pins p
             JOIN history h ON h.run_pk = p.run_pk AND h.seq = p.seq
             WHERE p.run_pk = $1 AND p.seq <= $2 ORDER BY p.seq",
        )
        .await
        .map_err(pg)?;
    c.query(&stmt, &[&run_pk, &to_i64(coverage.0)?])
        .await
        .map_err(pg)?
        .iter()
        .map(entry_from_row)
        .collect()
}

/// Every pinned seq of the run, in order.
pub(crate) async fn pins(c: &impl GenericClient, run_pk: i64) -> Result<Vec<Seq>, Error> {
    let stmt = c
        .prepare_cached("SELECT seq FROM pins WHERE run_pk = $1 ORDER BY seq")
        .await
        .map_err(pg)?;
    c.query(&stmt, &[&run_pk])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| to_u64(row.get(0), "seq").map(Seq))
        .collect()
}

/// The entries after `coverage` without their bodies: `message` is never selected, so its
/// TOASTed value is never fetched or decompressed.
pub(crate) async fn tail_meta(
    c: &impl GenericClient,
    run_pk: i64,
    coverage: Seq,
) -> Result<Vec<EntryMeta>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT seq, tokens, tool_uses, tool_results FROM history
             WHERE run_pk = $1 AND seq > $2 ORDER BY seq",
        )
        .await
        .map_err(pg)?;
    c.query(&stmt, &[&run_pk, &to_i64(coverage.0)?])
        .await
        .map_err(pg)?
        .iter()
        .map(|row| {
            let seq = Seq(to_u64(row.get(0), "seq")?);
            Ok(EntryMeta {
                events: ProtocolEvents {
                    seq,
                    uses: parse_ids(row.get(2), seq)?,
                    results: parse_ids(row.get(3), seq)?,
                },
                tokens: u32::try_from(row.get::<_, i32>(1)).unwrap_or(0),
            })
        })
        .collect()
}
