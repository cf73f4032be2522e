//! Imported runs on PostgreSQL: one transaction per file, so a file is stored whole or not at
//! all.
//!
//! Concurrency: before anything else, an import takes a transaction-scoped advisory lock for
//! every source its file names (each transcript's source key, and its parent's), keyed by
//! schema, tenant and source key, all at once and in one order. Importers of one source, on any
//! connection or machine, take turns: the later ones find the run the first one made and its
//! origin, never a unique violation. Importers of overlapping files cannot deadlock on each
//! other, and a subagent and its parent imported at the same time are linked by whichever
//! commits second. Extending a run then takes the run's row lock (`SELECT … FOR UPDATE`), like
//! every write that changes a run, so appenders and installs are ordered with it, and what
//! [`decide`](baton_store::import::decide) compares is read under both locks.

use baton_core::usage::{Usage, UsageRecord};
use baton_core::{RunId, RunStatus, Seq, TenantId, Timestamp};
use baton_store::codec::{models_json, parse_digest, parse_models, to_i64, to_u64};
use baton_store::import::{Decision, Stored};
use baton_store::{
    CompactionEvent, Error, Imported, NewImport, Reimport, RunCounts, RunOrigin, RunReport,
    RunUsage, SourceCompaction, StoredUsage, UsageQuery,
};
use deadpool_postgres::{GenericClient, Transaction};

use crate::{
    Prepared, RunRow, events_from_rows, find_run, insert_entries, insert_run, load_run, pg, prepare,
};

/// An import with its messages serialized, ready for a connection.
pub(crate) struct Ready {
    import: NewImport,
    prepared: Prepared,
}

/// Serializes every import's messages before a connection is taken.
pub(crate) fn ready(imports: Vec<NewImport>) -> Result<Vec<Ready>, Error> {
    imports
        .into_iter()
        .map(|import| {
            let prepared = prepare(import.entries())?;
            Ok(Ready { import, prepared })
        })
        .collect()
}

/// Imports one file's transcripts inside `tx` (read committed, so every statement after a lock
/// wait sees what the transaction it waited for committed).
pub(crate) async fn import(
    tx: &Transaction<'_>,
    schema: &str,
    tenant: &TenantId,
    file: &[Ready],
    reimport: Reimport,
) -> Result<Vec<Imported>, Error> {
    lock_sources(tx, schema, tenant, file).await?;
    let now = Timestamp::now();
    let mut outcomes = Vec::with_capacity(file.len());
    for (index, ready) in file.iter().enumerate() {
        let import = &ready.import;
        let total = import.entries().len() as u64;
        let (outcome, run_pk, kept) = match find_source(tx, tenant, &import.origin.source_key)
            .await?
        {
            None => {
                let (pk, created) = create(tx, tenant, ready, now).await?;
                (created, pk, total)
            }
            Some(run) => {
                // The run's row lock first, then what `decide` compares.
                let row = find_run(tx, tenant, &run, true).await?;
                let stored = read_stored(tx, &row).await?;
                let decision =
                    match baton_store::import::decide(import, index, &run, stored, reimport) {
                        Ok(decision) => decision,
                        Err(why) if (import.entries().len() as u64) < stored.source_messages => {
                            // An older copy of the source holds nothing new.
                            let n = Seq(import.entries().len() as u64);
                            let prefix = match n {
                                Seq(0) => Vec::new(),
                                n => crate::read_entries(tx, row.pk, Seq(1), Some(n)).await?,
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
                            let n = Seq(stored.source_messages);
                            let last = crate::read_entries(tx, row.pk, n, Some(n)).await?;
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
                    Decision::UpToDate => Imported::UpToDate(load_run(tx, tenant, &run).await?.1),
                    Decision::Grown { new } => Imported::Grown {
                        run: load_run(tx, tenant, &run).await?.1,
                        new,
                    },
                    Decision::Append {
                        from,
                        compactions_from,
                    } => {
                        if row.status != RunStatus::Active {
                            return Err(Error::RunNotActive {
                                run,
                                status: row.status,
                            });
                        }
                        let seqs =
                            insert_entries(tx, row.pk, stored.last_seq, &ready.prepared, from, now)
                                .await?;
                        insert_compactions(tx, row.pk, &import.compactions, compactions_from)
                            .await?;
                        update_origin(tx, row.pk, import, now).await?;
                        Imported::Extended {
                            run: load_run(tx, tenant, &run).await?.1,
                            from: seqs.first().copied().unwrap_or(stored.last_seq),
                            appended: seqs.len() as u64,
                        }
                    }
                };
                let kept = match outcome {
                    Imported::Grown { .. } => stored.source_messages,
                    _ => total,
                };
                (outcome, row.pk, kept)
            }
        };
        insert_usage(tx, tenant, run_pk, import, kept).await?;
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// Takes the advisory locks of every source `file` names: each transcript's source key, and
/// the parent key of a subagent (so that a parent's import and its subagent's see each other's
/// origin whichever commits first). All at once and sorted, so two files naming the same
/// sources in different orders wait for each other instead of deadlocking. The locks are held
/// until the transaction ends.
async fn lock_sources(
    tx: &Transaction<'_>,
    schema: &str,
    tenant: &TenantId,
    file: &[Ready],
) -> Result<(), Error> {
    let mut keys: Vec<String> = file
        .iter()
        .flat_map(|ready| {
            let o = &ready.import.origin;
            std::iter::once(&o.source_key).chain(o.parent_key.as_ref())
        })
        .map(|key| format!("{schema}\n{}\n{key}", tenant.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let stmt = tx
        .prepare_cached(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, 0))
             FROM unnest($1::text[]) WITH ORDINALITY AS x(k, n) ORDER BY n",
        )
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&keys]).await.map_err(pg)?;
    Ok(())
}

/// The run already holding `source_key`.
async fn find_source(
    c: &impl GenericClient,
    tenant: &TenantId,
    source_key: &str,
) -> Result<Option<RunId>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT r.id FROM run_origins o JOIN runs r ON r.pk = o.run_pk
             WHERE o.tenant_id = $1 AND o.source_key = $2",
        )
        .await
        .map_err(pg)?;
    c.query_opt(&stmt, &[&tenant.as_str(), &source_key])
        .await
        .map_err(pg)?
        .map(|row| RunId::new(row.get::<_, String>(0)))
        .transpose()
        .map_err(Error::from)
}

/// What the run found by [`find_source`] holds of its source, read under its row lock (`row`).
async fn read_stored(c: &impl GenericClient, row: &RunRow) -> Result<Stored, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT source_messages, source_digest,
                    (SELECT COUNT(*) FROM source_compactions WHERE run_pk = $1)
             FROM run_origins WHERE run_pk = $1",
        )
        .await
        .map_err(pg)?;
    let r = c.query_one(&stmt, &[&row.pk]).await.map_err(pg)?;
    Ok(Stored {
        source_messages: to_u64(r.get(0), "source_messages")?,
        digest: parse_digest(r.get(1))?,
        last_seq: row.last_seq,
        compactions: to_u64(r.get(2), "compaction count")?,
    })
}

/// A new run holding the whole transcript.
async fn create(
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
    let pk = insert_run(tx, tenant, &id, None, None, now).await?;
    insert_entries(tx, pk, Seq::ZERO, &ready.prepared, 0, now).await?;
    insert_compactions(tx, pk, &import.compactions, 0).await?;
    let o = &import.origin;
    let parent_pk: Option<i64> = match &o.parent_key {
        Some(key) => {
            let stmt = tx
                .prepare_cached(
                    "SELECT run_pk FROM run_origins WHERE tenant_id = $1 AND source_key = $2",
                )
                .await
                .map_err(pg)?;
            tx.query_opt(&stmt, &[&tenant.as_str(), key])
                .await
                .map_err(pg)?
                .map(|row| row.get(0))
        }
        None => None,
    };
    let stmt = tx
        .prepare_cached(
            "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, source_session_id,
                 parent_key, parent_run_pk, models, first_at, last_at, redactions, skipped_lines,
                 side_branches, side_branch_messages, source_messages, source_digest, imported_at,
                 updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $18)",
        )
        .await
        .map_err(pg)?;
    tx.execute(
        &stmt,
        &[
            &pk,
            &tenant.as_str(),
            &o.source_key,
            &o.path,
            &o.format,
            &o.source_session_id,
            &o.parent_key,
            &parent_pk,
            &models_json(&o.models)?,
            &o.first_at,
            &o.last_at,
            &to_i64(o.redactions)?,
            &to_i64(o.skipped_lines)?,
            &to_i64(o.side_branches)?,
            &to_i64(o.side_branch_messages)?,
            &to_i64(import.entries().len() as u64)?,
            &import.digest().to_hex(),
            &now.0,
        ],
    )
    .await
    .map_err(pg)?;
    // Subagents imported before their parent: link them now.
    let stmt = tx
        .prepare_cached(
            "UPDATE run_origins SET parent_run_pk = $1
             WHERE tenant_id = $2 AND parent_key = $3 AND parent_run_pk IS NULL",
        )
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&pk, &tenant.as_str(), &o.source_key])
        .await
        .map_err(pg)?;
    Ok((pk, Imported::Created(load_run(tx, tenant, &id).await?.1)))
}

/// Keeps the usage records of the transcript's first `stored` messages (and those of no
/// message), in one statement: one row per response id, the larger copy when the response is
/// stored already.
async fn insert_usage(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run_pk: i64,
    import: &NewImport,
    stored: u64,
) -> Result<(), Error> {
    let u = &import.usage;
    let records: Vec<&UsageRecord> = u.kept(stored).collect();
    if records.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    let models: Vec<Option<&str>> = records.iter().map(|r| r.model.as_deref()).collect();
    let responses: Vec<Option<&str>> = records.iter().map(|r| r.response_id.as_deref()).collect();
    let requests: Vec<Option<&str>> = records.iter().map(|r| r.request_id.as_deref()).collect();
    let at: Vec<Option<i64>> = records.iter().map(|r| r.at.map(|t| t.0)).collect();
    let count = |f: fn(&Usage) -> u64| -> Result<Vec<i64>, Error> {
        records.iter().map(|r| to_i64(f(&r.usage))).collect()
    };
    let input = count(|u| u.input)?;
    let output = count(|u| u.output)?;
    let write_5m = count(|u| u.cache_write_5m)?;
    let write_1h = count(|u| u.cache_write_1h)?;
    let read = count(|u| u.cache_read)?;
    let estimated: Vec<bool> = records.iter().map(|r| r.estimated).collect();
    // One row per id within the statement too (ON CONFLICT may touch a row only once): the
    // larger copy, as across imports.
    let stmt = tx
        .prepare_cached(
            "INSERT INTO usage_records (tenant_id, id, run_pk, session, project, agent, model,
                 response_id, request_id, at, input, output, cache_write_5m, cache_write_1h,
                 cache_read, estimated)
             SELECT DISTINCT ON (x.id) $1, x.id, $2, $3, $4, $5, x.model, x.response_id,
                    x.request_id, x.at, x.input, x.output, x.w5, x.w1, x.rd, x.est
             FROM unnest($6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[],
                         $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[],
                         $15::bigint[], $16::bool[])
                  AS x(id, model, response_id, request_id, at, input, output, w5, w1, rd, est)
             ORDER BY x.id, x.input + x.output + x.w5 + x.w1 + x.rd DESC
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
        .await
        .map_err(pg)?;
    tx.execute(
        &stmt,
        &[
            &tenant.as_str(),
            &run_pk,
            &u.session,
            &u.project,
            &u.agent,
            &ids,
            &models,
            &responses,
            &requests,
            &at,
            &input,
            &output,
            &write_5m,
            &write_1h,
            &read,
            &estimated,
        ],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// The tenant's usage records `query` selects, oldest first.
pub(crate) async fn usage(
    c: &impl GenericClient,
    tenant: &TenantId,
    query: &UsageQuery,
) -> Result<Vec<StoredUsage>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT r.id, u.session, u.project, u.agent, u.id, u.model, u.response_id,
                    u.request_id, u.at, u.input, u.output, u.cache_write_5m, u.cache_write_1h,
                    u.cache_read, u.estimated
             FROM usage_records u JOIN runs r ON r.pk = u.run_pk
             WHERE u.tenant_id = $1 AND ($2 OR NOT u.estimated)
               AND ($3::text IS NULL OR u.project = $3)
             ORDER BY u.at NULLS FIRST, u.id",
        )
        .await
        .map_err(pg)?;
    let rows = c
        .query(&stmt, &[&tenant.as_str(), &query.estimated, &query.project])
        .await
        .map_err(pg)?;
    rows.iter()
        .map(|r| {
            Ok(StoredUsage {
                run: RunId::new(r.get::<_, String>(0))?,
                session: r.get(1),
                project: r.get(2),
                agent: r.get(3),
                record: UsageRecord {
                    id: r.get(4),
                    model: r.get(5),
                    response_id: r.get(6),
                    request_id: r.get(7),
                    at: r.get::<_, Option<i64>>(8).map(Timestamp),
                    usage: Usage {
                        input: to_u64(r.get(9), "input")?,
                        output: to_u64(r.get(10), "output")?,
                        cache_write_5m: to_u64(r.get(11), "cache_write_5m")?,
                        cache_write_1h: to_u64(r.get(12), "cache_write_1h")?,
                        cache_read: to_u64(r.get(13), "cache_read")?,
                    },
                    estimated: r.get(14),
                },
            })
        })
        .collect()
}

/// Records `compactions[from..]`, numbered by their place in the transcript, in one statement.
async fn insert_compactions(
    tx: &Transaction<'_>,
    run_pk: i64,
    compactions: &[SourceCompaction],
    from: usize,
) -> Result<(), Error> {
    let (mut ordinals, mut afters, mut summaries, mut ats) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (ordinal, c) in compactions.iter().enumerate().skip(from) {
        ordinals.push(to_i64(ordinal as u64)?);
        afters.push(to_i64(c.after)?);
        summaries.push(c.summary.as_deref());
        ats.push(c.at.as_deref());
    }
    if ordinals.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(
            "INSERT INTO source_compactions (run_pk, ordinal, after_seq, summary, at)
             SELECT $1, o, a, s, t FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS x(o, a, s, t)",
        )
        .await
        .map_err(pg)?;
    tx.execute(&stmt, &[&run_pk, &ordinals, &afters, &summaries, &ats])
        .await
        .map_err(pg)?;
    Ok(())
}

/// After an extension: what the source says of itself now.
async fn update_origin(
    tx: &Transaction<'_>,
    run_pk: i64,
    import: &NewImport,
    now: Timestamp,
) -> Result<(), Error> {
    let o = &import.origin;
    let stmt = tx
        .prepare_cached(
            "UPDATE run_origins SET path = $2, models = $3, first_at = $4, last_at = $5,
                 redactions = $6, skipped_lines = $7, side_branches = $8, side_branch_messages = $9,
                 source_messages = $10, source_digest = $11, updated_at = $12
             WHERE run_pk = $1",
        )
        .await
        .map_err(pg)?;
    tx.execute(
        &stmt,
        &[
            &run_pk,
            &o.path,
            &models_json(&o.models)?,
            &o.first_at,
            &o.last_at,
            &to_i64(o.redactions)?,
            &to_i64(o.skipped_lines)?,
            &to_i64(o.side_branches)?,
            &to_i64(o.side_branch_messages)?,
            &to_i64(import.entries().len() as u64)?,
            &import.digest().to_hex(),
            &now.0,
        ],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// A run with its origin, source compactions and counts, read inside `tx` (one snapshot).
pub(crate) async fn report(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    run: &RunId,
) -> Result<RunReport, Error> {
    let (pk, run) = load_run(tx, tenant, run).await?;
    let origin = read_origin(tx, pk).await?;
    let stmt = tx
        .prepare_cached(
            "SELECT after_seq, summary, at FROM source_compactions WHERE run_pk = $1 ORDER BY ordinal",
        )
        .await
        .map_err(pg)?;
    let compactions = tx
        .query(&stmt, &[&pk])
        .await
        .map_err(pg)?
        .iter()
        .map(|r| {
            Ok(CompactionEvent {
                after: Seq(to_u64(r.get(0), "after_seq")?),
                summary: r.get(1),
                at: r.get(2),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    // SUM over INTEGER is BIGINT and over BIGINT is NUMERIC: cast so every column reads as i64.
    let stmt = tx
        .prepare_cached(
            "SELECT COUNT(*)::bigint, COALESCE(SUM(tokens), 0)::bigint,
                    COALESCE(SUM(octet_length(message)), 0)::bigint,
                    MIN(created_at), MAX(created_at)
             FROM history WHERE run_pk = $1",
        )
        .await
        .map_err(pg)?;
    let r = tx.query_one(&stmt, &[&pk]).await.map_err(pg)?;
    let mut counts = RunCounts {
        messages: to_u64(r.get(0), "message count")?,
        tokens: to_u64(r.get(1), "token sum")?,
        bytes: to_u64(r.get(2), "byte sum")?,
        first_appended_at: r.get::<_, Option<i64>>(3).map(Timestamp),
        last_appended_at: r.get::<_, Option<i64>>(4).map(Timestamp),
        ..RunCounts::default()
    };
    // The run's rows that open or answer tool calls, through the partial index
    // `history_tool_rows`.
    let stmt = tx
        .prepare_cached(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = $1 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL) ORDER BY seq",
        )
        .await
        .map_err(pg)?;
    let rows = tx.query(&stmt, &[&pk]).await.map_err(pg)?;
    counts.count_tools(&events_from_rows(&rows)?);
    let stmt = tx
        .prepare_cached(
            "SELECT model, estimated, COUNT(*), SUM(input)::bigint, SUM(output)::bigint,
                    SUM(cache_write_5m)::bigint, SUM(cache_write_1h)::bigint,
                    SUM(cache_read)::bigint
             FROM usage_records WHERE run_pk = $1
             GROUP BY model, estimated ORDER BY model NULLS FIRST, estimated",
        )
        .await
        .map_err(pg)?;
    let usage = tx
        .query(&stmt, &[&pk])
        .await
        .map_err(pg)?
        .iter()
        .map(|r| {
            Ok(RunUsage {
                model: r.get(0),
                estimated: r.get(1),
                responses: to_u64(r.get(2), "responses")?,
                usage: Usage {
                    input: to_u64(r.get(3), "input")?,
                    output: to_u64(r.get(4), "output")?,
                    cache_write_5m: to_u64(r.get(5), "cache_write_5m")?,
                    cache_write_1h: to_u64(r.get(6), "cache_write_1h")?,
                    cache_read: to_u64(r.get(7), "cache_read")?,
                },
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(RunReport {
        run,
        origin,
        compactions,
        counts,
        usage,
    })
}

/// Where the run came from, when it was imported.
async fn read_origin(c: &impl GenericClient, run_pk: i64) -> Result<Option<RunOrigin>, Error> {
    let stmt = c
        .prepare_cached(
            "SELECT o.source_key, o.path, o.format, o.source_session_id, p.id, o.models, o.first_at,
                    o.last_at, o.redactions, o.skipped_lines, o.side_branches,
                    o.side_branch_messages, o.source_messages, o.imported_at, o.updated_at
             FROM run_origins o LEFT JOIN runs p ON p.pk = o.parent_run_pk
             WHERE o.run_pk = $1",
        )
        .await
        .map_err(pg)?;
    let Some(r) = c.query_opt(&stmt, &[&run_pk]).await.map_err(pg)? else {
        return Ok(None);
    };
    let count = |i: usize, what: &str| to_u64(r.get(i), what);
    Ok(Some(RunOrigin {
        source_key: r.get(0),
        path: r.get(1),
        format: r.get(2),
        source_session_id: r.get(3),
        parent_run: r.get::<_, Option<String>>(4).map(RunId::new).transpose()?,
        models: parse_models(r.get(5))?,
        first_at: r.get(6),
        last_at: r.get(7),
        redactions: count(8, "redactions")?,
        skipped_lines: count(9, "skipped_lines")?,
        side_branches: count(10, "side_branches")?,
        side_branch_messages: count(11, "side_branch_messages")?,
        source_messages: count(12, "source_messages")?,
        imported_at: Timestamp(r.get(13)),
        updated_at: Timestamp(r.get(14)),
    }))
}
