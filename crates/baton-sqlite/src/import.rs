//! Imported runs on SQLite: one `BEGIN IMMEDIATE` transaction per file, so a file is stored
//! whole or not at all, and concurrent importers of one source (in any process) take turns and
//! find each other's run.

use baton_core::units::ProtocolEvents;
use baton_core::usage::{Usage, UsageRecord};
use baton_core::{RunId, RunStatus, Seq, TenantId, Timestamp};
use baton_store::codec::{models_json, parse_digest, parse_ids, parse_models, to_i64, to_u64};
use baton_store::import::{Decision, Stored};
use baton_store::{
    CompactionEvent, Error, Imported, NewImport, Reimport, RunCounts, RunOrigin, RunReport,
    RunUsage, SourceCompaction, StoredUsage, UsageQuery,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::{Prepared, insert_entries, insert_run, load_run, load_run_with_pk, prepare, sql};

/// An import with its messages serialized, ready for the write lock.
pub(crate) struct Ready {
    import: NewImport,
    prepared: Vec<Prepared>,
}

/// Serializes every import's messages before the write lock is taken.
pub(crate) fn ready(imports: Vec<NewImport>) -> Result<Vec<Ready>, Error> {
    imports
        .into_iter()
        .map(|import| {
            let prepared = prepare(import.entries())?;
            Ok(Ready { import, prepared })
        })
        .collect()
}

/// Imports one file's transcripts inside `tx`.
pub(crate) fn import(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    file: &[Ready],
    reimport: Reimport,
) -> Result<Vec<Imported>, Error> {
    let now = Timestamp::now();
    let mut outcomes = Vec::with_capacity(file.len());
    for (index, ready) in file.iter().enumerate() {
        let import = &ready.import;
        let total = import.entries().len() as u64;
        let (outcome, run_pk, kept) = match find_source(tx, tenant, &import.origin.source_key)? {
            None => {
                let (pk, created) = create(tx, tenant, ready, now)?;
                (created, pk, total)
            }
            Some((pk, run, stored)) => {
                let decision =
                    match baton_store::import::decide(import, index, &run, stored, reimport) {
                        Ok(decision) => decision,
                        Err(why) if (import.entries().len() as u64) < stored.source_messages => {
                            // An older copy of the source holds nothing new.
                            let n = Seq(import.entries().len() as u64);
                            let prefix = match n {
                                Seq(0) => Vec::new(),
                                n => crate::read_entries(tx, pk, Seq(1), Some(n))?,
                            };
                            if !baton_store::import::is_older_copy(
                                import,
                                prefix.iter().map(|e| &e.message),
                            ) {
                                return Err(why.into());
                            }
                            Decision::UpToDate
                        }
                        Err(why) => {
                            // Was only the last imported message still being written?
                            let last = crate::read_entries(
                                tx,
                                pk,
                                Seq(stored.source_messages),
                                Some(Seq(stored.source_messages)),
                            )?;
                            return Err(match last.first() {
                                Some(entry) => baton_store::import::refine_divergence(
                                    why,
                                    import,
                                    stored,
                                    &entry.message,
                                ),
                                None => why,
                            }
                            .into());
                        }
                    };
                let outcome = match decision {
                    Decision::UpToDate => Imported::UpToDate(load_run(tx, tenant, &run)?),
                    Decision::Grown { new } => Imported::Grown {
                        run: load_run(tx, tenant, &run)?,
                        new,
                    },
                    Decision::Append {
                        from,
                        compactions_from,
                    } => {
                        let status = load_run(tx, tenant, &run)?.status;
                        if status != RunStatus::Active {
                            return Err(Error::RunNotActive { run, status });
                        }
                        let seqs =
                            insert_entries(tx, pk, stored.last_seq, &ready.prepared[from..], now)?;
                        insert_compactions(tx, pk, &import.compactions, compactions_from)?;
                        update_origin(tx, pk, import, now)?;
                        Imported::Extended {
                            run: load_run(tx, tenant, &run)?,
                            from: seqs.first().copied().unwrap_or(stored.last_seq),
                            appended: seqs.len() as u64,
                        }
                    }
                };
                let kept = match outcome {
                    Imported::Grown { .. } => stored.source_messages,
                    _ => total,
                };
                (outcome, pk, kept)
            }
        };
        insert_usage(tx, tenant, run_pk, import, kept)?;
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The run already holding `source_key`, with what it holds.
fn find_source(
    conn: &Connection,
    tenant: &TenantId,
    source_key: &str,
) -> Result<Option<(i64, RunId, Stored)>, Error> {
    let row = conn
        .prepare_cached(
            "SELECT o.run_pk, r.id, o.source_messages, o.source_digest, r.last_seq,
                    (SELECT COUNT(*) FROM source_compactions c WHERE c.run_pk = o.run_pk)
             FROM run_origins o JOIN runs r ON r.pk = o.run_pk
             WHERE o.tenant_id = ?1 AND o.source_key = ?2",
        )
        .map_err(sql)?
        .query_row(params![tenant.as_str(), source_key], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .optional()
        .map_err(sql)?;
    let Some((pk, run, messages, digest, last_seq, compactions)) = row else {
        return Ok(None);
    };
    let stored = Stored {
        source_messages: to_u64(messages, "source_messages")?,
        digest: parse_digest(&digest)?,
        last_seq: Seq(to_u64(last_seq, "last_seq")?),
        compactions: to_u64(compactions, "compaction count")?,
    };
    Ok(Some((pk, RunId::new(run)?, stored)))
}

/// A new run holding the whole transcript.
fn create(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    ready: &Ready,
    now: Timestamp,
) -> Result<(i64, Imported), Error> {
    let import = &ready.import;
    let id = match &import.id {
        Some(id) => id.clone(),
        None => baton_store::generate_run_id()?,
    };
    let pk = insert_run(tx, tenant, &id, None, None, now)?;
    insert_entries(tx, pk, Seq::ZERO, &ready.prepared, now)?;
    insert_compactions(tx, pk, &import.compactions, 0)?;
    let o = &import.origin;
    let parent_pk: Option<i64> = match &o.parent_key {
        Some(key) => tx
            .prepare_cached(
                "SELECT run_pk FROM run_origins WHERE tenant_id = ?1 AND source_key = ?2",
            )
            .map_err(sql)?
            .query_row(params![tenant.as_str(), key], |r| r.get(0))
            .optional()
            .map_err(sql)?,
        None => None,
    };
    tx.prepare_cached(
        "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, source_session_id,
             parent_key, parent_run_pk, models, first_at, last_at, redactions, skipped_lines,
             side_branches, side_branch_messages, source_messages, source_digest, imported_at,
             updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18)",
    )
    .map_err(sql)?
    .execute(params![
        pk,
        tenant.as_str(),
        o.source_key,
        o.path,
        o.format,
        o.source_session_id,
        o.parent_key,
        parent_pk,
        models_json(&o.models)?,
        o.first_at,
        o.last_at,
        to_i64(o.redactions)?,
        to_i64(o.skipped_lines)?,
        to_i64(o.side_branches)?,
        to_i64(o.side_branch_messages)?,
        to_i64(import.entries().len() as u64)?,
        import.digest().to_hex(),
        now.0,
    ])
    .map_err(sql)?;
    // Subagents imported before their parent: link them now.
    tx.prepare_cached(
        "UPDATE run_origins SET parent_run_pk = ?1
         WHERE tenant_id = ?2 AND parent_key = ?3 AND parent_run_pk IS NULL",
    )
    .map_err(sql)?
    .execute(params![pk, tenant.as_str(), o.source_key])
    .map_err(sql)?;
    Ok((pk, Imported::Created(load_run(tx, tenant, &id)?)))
}

/// Keeps the usage records of the transcript's first `stored` messages (and those of no
/// message): one row per response id, the larger copy when the response is stored already.
fn insert_usage(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run_pk: i64,
    import: &NewImport,
    stored: u64,
) -> Result<(), Error> {
    let u = &import.usage;
    if u.records.is_empty() {
        return Ok(());
    }
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO usage_records (tenant_id, id, run_pk, session, project, agent, model,
                 response_id, request_id, at, input, output, cache_write_5m, cache_write_1h,
                 cache_read, estimated)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
             ON CONFLICT (tenant_id, id) DO UPDATE SET
                 model = excluded.model, response_id = excluded.response_id,
                 request_id = excluded.request_id, at = excluded.at, input = excluded.input,
                 output = excluded.output, cache_write_5m = excluded.cache_write_5m,
                 cache_write_1h = excluded.cache_write_1h, cache_read = excluded.cache_read,
                 estimated = excluded.estimated
             WHERE excluded.input + excluded.output + excluded.cache_write_5m
                   + excluded.cache_write_1h + excluded.cache_read
                 > usage_records.input + usage_records.output + usage_records.cache_write_5m
                   + usage_records.cache_write_1h + usage_records.cache_read",
        )
        .map_err(sql)?;
    for r in u.kept(stored) {
        stmt.execute(params![
            tenant.as_str(),
            r.id,
            run_pk,
            u.session,
            u.project,
            u.agent,
            r.model,
            r.response_id,
            r.request_id,
            r.at.map(|t| t.0),
            to_i64(r.usage.input)?,
            to_i64(r.usage.output)?,
            to_i64(r.usage.cache_write_5m)?,
            to_i64(r.usage.cache_write_1h)?,
            to_i64(r.usage.cache_read)?,
            r.estimated,
        ])
        .map_err(sql)?;
    }
    Ok(())
}

/// The tenant's usage records `query` selects, oldest first.
pub(crate) fn usage(
    conn: &Connection,
    tenant: &TenantId,
    query: &UsageQuery,
) -> Result<Vec<StoredUsage>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT r.id, u.session, u.project, u.agent, u.id, u.model, u.response_id,
                    u.request_id, u.at, u.input, u.output, u.cache_write_5m, u.cache_write_1h,
                    u.cache_read, u.estimated
             FROM usage_records u JOIN runs r ON r.pk = u.run_pk
             WHERE u.tenant_id = ?1 AND (?2 OR NOT u.estimated)
               AND (?3 IS NULL OR u.project = ?3)
             ORDER BY u.at, u.id",
        )
        .map_err(sql)?;
    let mut rows = stmt
        .query(params![tenant.as_str(), query.estimated, query.project])
        .map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let count =
            |i: usize, what: &str| -> Result<u64, Error> { to_u64(r.get(i).map_err(sql)?, what) };
        out.push(StoredUsage {
            run: RunId::new(r.get::<_, String>(0).map_err(sql)?)?,
            session: r.get(1).map_err(sql)?,
            project: r.get(2).map_err(sql)?,
            agent: r.get(3).map_err(sql)?,
            record: UsageRecord {
                id: r.get(4).map_err(sql)?,
                model: r.get(5).map_err(sql)?,
                response_id: r.get(6).map_err(sql)?,
                request_id: r.get(7).map_err(sql)?,
                at: r.get::<_, Option<i64>>(8).map_err(sql)?.map(Timestamp),
                usage: Usage {
                    input: count(9, "input")?,
                    output: count(10, "output")?,
                    cache_write_5m: count(11, "cache_write_5m")?,
                    cache_write_1h: count(12, "cache_write_1h")?,
                    cache_read: count(13, "cache_read")?,
                },
                estimated: r.get(14).map_err(sql)?,
            },
        });
    }
    Ok(out)
}

/// Records `compactions[from..]`, numbered by their place in the transcript.
fn insert_compactions(
    tx: &Transaction<'_>,
    run_pk: i64,
    compactions: &[SourceCompaction],
    from: usize,
) -> Result<(), Error> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO source_compactions (run_pk, ordinal, after_seq, summary, at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(sql)?;
    for (ordinal, c) in compactions.iter().enumerate().skip(from) {
        stmt.execute(params![
            run_pk,
            to_i64(ordinal as u64)?,
            to_i64(c.after)?,
            c.summary,
            c.at
        ])
        .map_err(sql)?;
    }
    Ok(())
}

/// After an extension: what the source says of itself now.
fn update_origin(
    tx: &Transaction<'_>,
    run_pk: i64,
    import: &NewImport,
    now: Timestamp,
) -> Result<(), Error> {
    let o = &import.origin;
    tx.prepare_cached(
        "UPDATE run_origins SET path = ?2, models = ?3, first_at = ?4, last_at = ?5,
             redactions = ?6, skipped_lines = ?7, side_branches = ?8, side_branch_messages = ?9,
             source_messages = ?10, source_digest = ?11, updated_at = ?12
         WHERE run_pk = ?1",
    )
    .map_err(sql)?
    .execute(params![
        run_pk,
        o.path,
        models_json(&o.models)?,
        o.first_at,
        o.last_at,
        to_i64(o.redactions)?,
        to_i64(o.skipped_lines)?,
        to_i64(o.side_branches)?,
        to_i64(o.side_branch_messages)?,
        to_i64(import.entries().len() as u64)?,
        import.digest().to_hex(),
        now.0,
    ])
    .map_err(sql)?;
    Ok(())
}

/// A run with its origin, source compactions and counts, read inside one read transaction.
pub(crate) fn report(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run: &RunId,
) -> Result<RunReport, Error> {
    let (pk, run) = load_run_with_pk(tx, tenant, run)?;
    let origin = read_origin(tx, pk)?;
    let mut stmt = tx
        .prepare_cached(
            "SELECT after_seq, summary, at FROM source_compactions WHERE run_pk = ?1 ORDER BY ordinal",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([pk]).map_err(sql)?;
    let mut compactions = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        compactions.push(CompactionEvent {
            after: Seq(to_u64(r.get(0).map_err(sql)?, "after_seq")?),
            summary: r.get(1).map_err(sql)?,
            at: r.get(2).map_err(sql)?,
        });
    }
    let (messages, tokens, bytes, first, last): (i64, i64, i64, Option<i64>, Option<i64>) = tx
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(length(CAST(message AS BLOB))), 0),
                    MIN(created_at), MAX(created_at)
             FROM history WHERE run_pk = ?1",
        )
        .map_err(sql)?
        .query_row([pk], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .map_err(sql)?;
    let mut counts = RunCounts {
        messages: to_u64(messages, "message count")?,
        tokens: to_u64(tokens, "token sum")?,
        bytes: to_u64(bytes, "byte sum")?,
        first_appended_at: first.map(Timestamp),
        last_appended_at: last.map(Timestamp),
        ..RunCounts::default()
    };
    counts.count_tools(&tool_rows(tx, pk)?);
    Ok(RunReport {
        run,
        origin,
        compactions,
        counts,
        usage: run_usage(tx, pk)?,
    })
}

/// The run's usage records summed per model and kind.
fn run_usage(conn: &Connection, run_pk: i64) -> Result<Vec<RunUsage>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT model, estimated, COUNT(*), SUM(input), SUM(output), SUM(cache_write_5m),
                    SUM(cache_write_1h), SUM(cache_read)
             FROM usage_records WHERE run_pk = ?1
             GROUP BY model, estimated ORDER BY model NULLS FIRST, estimated",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(sql)? {
        let count =
            |i: usize, what: &str| -> Result<u64, Error> { to_u64(r.get(i).map_err(sql)?, what) };
        out.push(RunUsage {
            model: r.get(0).map_err(sql)?,
            estimated: r.get(1).map_err(sql)?,
            responses: count(2, "responses")?,
            usage: Usage {
                input: count(3, "input")?,
                output: count(4, "output")?,
                cache_write_5m: count(5, "cache_write_5m")?,
                cache_write_1h: count(6, "cache_write_1h")?,
                cache_read: count(7, "cache_read")?,
            },
        });
    }
    Ok(out)
}

/// The run's rows that open or answer tool calls (through the partial index
/// `history_tool_rows`), as protocol events.
fn tool_rows(conn: &Connection, run_pk: i64) -> Result<Vec<ProtocolEvents>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = ?1 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL) ORDER BY seq",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(sql)? {
        let seq = Seq(to_u64(row.get(0).map_err(sql)?, "seq")?);
        out.push(ProtocolEvents {
            seq,
            uses: parse_ids(row.get(1).map_err(sql)?, seq)?,
            results: parse_ids(row.get(2).map_err(sql)?, seq)?,
        });
    }
    Ok(out)
}

fn read_origin(conn: &Connection, run_pk: i64) -> Result<Option<RunOrigin>, Error> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT o.source_key, o.path, o.format, o.source_session_id, p.id, o.models, o.first_at,
                    o.last_at, o.redactions, o.skipped_lines, o.side_branches,
                    o.side_branch_messages, o.source_messages, o.imported_at, o.updated_at
             FROM run_origins o LEFT JOIN runs p ON p.pk = o.parent_run_pk
             WHERE o.run_pk = ?1",
        )
        .map_err(sql)?;
    let mut rows = stmt.query([run_pk]).map_err(sql)?;
    let Some(r) = rows.next().map_err(sql)? else {
        return Ok(None);
    };
    let count =
        |i: usize, what: &str| -> Result<u64, Error> { to_u64(r.get(i).map_err(sql)?, what) };
    let models: String = r.get(5).map_err(sql)?;
    Ok(Some(RunOrigin {
        source_key: r.get(0).map_err(sql)?,
        path: r.get(1).map_err(sql)?,
        format: r.get(2).map_err(sql)?,
        source_session_id: r.get(3).map_err(sql)?,
        parent_run: r
            .get::<_, Option<String>>(4)
            .map_err(sql)?
            .map(RunId::new)
            .transpose()?,
        models: parse_models(&models)?,
        first_at: r.get(6).map_err(sql)?,
        last_at: r.get(7).map_err(sql)?,
        redactions: count(8, "redactions")?,
        skipped_lines: count(9, "skipped_lines")?,
        side_branches: count(10, "side_branches")?,
        side_branch_messages: count(11, "side_branch_messages")?,
        source_messages: count(12, "source_messages")?,
        imported_at: Timestamp(r.get(13).map_err(sql)?),
        updated_at: Timestamp(r.get(14).map_err(sql)?),
    }))
}
