//! Runs, history, summary versions, pins, constraints, started tools, the search index and
//! imported runs' origins and usage records, as SQLite statements. Every write runs in the writer thread's
//! `BEGIN IMMEDIATE` transaction, which is exclusive: a lock is nothing more than a read.

use async_trait::async_trait;
use baton_core::units::ProtocolEvents;
use baton_core::{Cleared, Entry, EntryMeta, Run, RunId, RunStatus, Seq, Summary, SummaryId};
use baton_core::{TenantId, Timestamp};
use baton_store::backend::{
    ImportRows, NewOrigin, NewSummary, Phrase, Prepared, Row, RunRow, RunRows, Versions, int,
    lookup,
};
use baton_store::import::{
    CompactionEvent, Digest, RunCounts, RunOrigin, RunUsage, SourceCompaction,
};
use baton_store::runs::ListedRun;
use baton_store::{Constraint, Error, ImportUsage, SearchRow, StoredUsage, UsageQuery};
use rusqlite::params;

use crate::{SqliteTx, fail};

const RUN: &str = "SELECT id, tenant_id, status, goal, rules, active_summary_id, last_seq,
    created_at, cleared_through, cleared_min_tokens, pk FROM runs";
const SUMMARY: &str = "SELECT s.id, r.id, s.coverage, s.previous_id, s.body, s.created_at, s.meta
    FROM summaries s JOIN runs r ON r.pk = s.run_pk";
const ENTRY: &str = "SELECT seq, tokens, created_at, message FROM history";
/// The run an imported source made.
pub(crate) const SOURCE: &str = "SELECT o.run_pk, r.id FROM run_origins o JOIN runs r
    ON r.pk = o.run_pk WHERE o.tenant_id = ?1 AND o.source_key = ?2";

#[async_trait]
impl RunRows for SqliteTx {
    async fn tenant_exists(&mut self, tenant: &TenantId) -> Result<bool, Error> {
        let sql = "SELECT 1 FROM tenants WHERE id = ?1";
        Ok(self.one(sql, [tenant.as_str()], |_| Ok(()))?.is_some())
    }

    async fn insert_run(
        &mut self,
        tenant: &TenantId,
        id: &RunId,
        goal: Option<&str>,
        rules: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<i64>, Error> {
        let tenants = "INSERT INTO tenants (id, created_at) VALUES (?1, ?2) ON CONFLICT DO NOTHING";
        self.exec(tenants, params![tenant.as_str(), now.0])?;
        let inserted = self.exec(
            "INSERT INTO runs (tenant_id, id, status, goal, rules, created_at)
             VALUES (?1, ?2, 'active', ?3, ?4, ?5) ON CONFLICT (tenant_id, id) DO NOTHING",
            params![tenant.as_str(), id.as_str(), goal, rules, now.0],
        )?;
        Ok((inserted == 1).then(|| self.conn.last_insert_rowid()))
    }

    async fn run_row(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<RunRow>, Error> {
        self.one(
            "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = ?1 AND id = ?2",
            [tenant.as_str(), id.as_str()],
            |r| r.run_row(),
        )
    }

    async fn run(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<(i64, Run)>, Error> {
        let sql = format!("{RUN} WHERE tenant_id = ?1 AND id = ?2");
        self.one(&sql, [tenant.as_str(), id.as_str()], |r| {
            Ok((r.int_at(10)?, r.run()?))
        })
    }

    async fn runs(&mut self, tenant: &TenantId) -> Result<Vec<Run>, Error> {
        let sql = format!("{RUN} WHERE tenant_id = ?1 ORDER BY pk");
        self.all(&sql, [tenant.as_str()], |r| r.run())
    }

    async fn set_status(&mut self, run: i64, status: RunStatus) -> Result<(), Error> {
        let sql = "UPDATE runs SET status = ?2 WHERE pk = ?1";
        self.exec(sql, params![run, status.as_str()]).map(drop)
    }

    async fn insert_entries(
        &mut self,
        run: i64,
        after: Seq,
        entries: &[Prepared],
        now: Timestamp,
    ) -> Result<(), Error> {
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(fail)?;
        let mut seq = int(after.0)?;
        for p in entries {
            seq += 1;
            let row = params![
                run,
                seq,
                p.tokens,
                p.tool_uses,
                p.tool_results,
                now.0,
                p.message
            ];
            insert.execute(row).map_err(fail)?;
        }
        drop(insert);
        if !entries.is_empty() {
            self.exec("UPDATE runs SET last_seq = ?1 WHERE pk = ?2", [seq, run])?;
        }
        Ok(())
    }

    async fn entries(
        &mut self,
        run: i64,
        from: Seq,
        to: Option<Seq>,
        limit: Option<u64>,
    ) -> Result<Vec<Entry>, Error> {
        let sql =
            format!("{ENTRY} WHERE run_pk = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq LIMIT ?4");
        let to = to.map_or(i64::MAX, |s| lookup(s.0));
        let limit = limit.map_or(-1, lookup);
        self.all(&sql, [run, lookup(from.0), to, limit], |r| r.entry())
    }

    async fn events(&mut self, run: i64, after: Seq) -> Result<Vec<ProtocolEvents>, Error> {
        self.all(
            "SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = ?1 AND seq > ?2 ORDER BY seq",
            [run, lookup(after.0)],
            |r| r.events(),
        )
    }

    async fn tool_events(
        &mut self,
        run: i64,
        after: Seq,
        cut: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error> {
        self.all(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = ?1 AND seq > ?2 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL)
             UNION SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = ?1 AND seq = ?3
             ORDER BY seq",
            [run, lookup(after.0), lookup(cut.0)],
            |r| r.events(),
        )
    }

    async fn tail_meta(&mut self, run: i64, after: Seq) -> Result<Vec<EntryMeta>, Error> {
        // The columns before `message` only, so its overflow pages are never read.
        self.all(
            "SELECT seq, tokens, tool_uses, tool_results FROM history WHERE run_pk = ?1 AND seq > ?2 ORDER BY seq",
            [run, lookup(after.0)],
            |r| r.entry_meta(),
        )
    }

    async fn count_seqs(&mut self, run: i64, seqs: &[Seq]) -> Result<u64, Error> {
        let list: Vec<i64> = seqs.iter().map(|s| lookup(s.0)).collect();
        let json = serde_json::to_string(&list).map_err(|e| Error::Corrupt {
            what: e.to_string(),
        })?;
        let sql = "SELECT COUNT(*) FROM history WHERE run_pk = ?1 AND seq IN (SELECT value FROM json_each(?2))";
        let count = self.one(sql, params![run, json], |r| r.count(0, "seq count"))?;
        Ok(count.unwrap_or(0))
    }

    async fn history_counts(&mut self, run: i64) -> Result<RunCounts, Error> {
        let sql = "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(length(CAST(message AS BLOB))), 0),
                MIN(created_at), MAX(created_at) FROM history WHERE run_pk = ?1";
        let counts = self.one(sql, [run], |r| r.history_counts())?;
        Ok(counts.unwrap_or_default())
    }

    async fn summary_coverage(&mut self, run: i64, id: SummaryId) -> Result<Option<Seq>, Error> {
        let sql = "SELECT coverage FROM summaries WHERE id = ?1 AND run_pk = ?2";
        self.one(sql, [lookup(id.0), run], |r| r.seq(0))
    }

    async fn insert_summary(&mut self, run: i64, new: &NewSummary) -> Result<SummaryId, Error> {
        let previous = new.previous.map(|p| lookup(p.0));
        self.exec(
            "INSERT INTO summaries (run_pk, coverage, previous_id, body, created_at, meta)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                run,
                int(new.coverage.0)?,
                previous,
                new.body,
                new.now.0,
                new.meta
            ],
        )?;
        let id = self.conn.last_insert_rowid();
        Ok(SummaryId(u64::try_from(id).unwrap_or_default()))
    }

    async fn set_active(
        &mut self,
        run: i64,
        id: SummaryId,
        expected: Option<SummaryId>,
    ) -> Result<bool, Error> {
        let sql =
            "UPDATE runs SET active_summary_id = ?1 WHERE pk = ?2 AND active_summary_id IS ?3";
        let expected = expected.map(|e| lookup(e.0));
        Ok(self.exec(sql, params![lookup(id.0), run, expected])? == 1)
    }

    async fn summaries(&mut self, which: Versions<'_>) -> Result<Vec<Summary>, Error> {
        match which {
            Versions::Run(run) => {
                let sql = format!("{SUMMARY} WHERE s.run_pk = ?1 ORDER BY s.id");
                self.all(&sql, [run], |r| r.summary())
            }
            Versions::One { run, id } => {
                let sql = format!("{SUMMARY} WHERE s.id = ?1 AND s.run_pk = ?2");
                self.all(&sql, [lookup(id.0), run], |r| r.summary())
            }
            Versions::OfTenant { tenant, id } => {
                let sql = format!("{SUMMARY} WHERE s.id = ?1 AND r.tenant_id = ?2");
                self.all(&sql, params![lookup(id.0), tenant.as_str()], |r| {
                    r.summary()
                })
            }
        }
    }

    async fn set_cleared(&mut self, run: i64, cleared: Cleared) -> Result<(), Error> {
        let sql = "UPDATE runs SET cleared_through = ?1, cleared_min_tokens = ?2 WHERE pk = ?3";
        let values = params![int(cleared.through.0)?, cleared.min_tokens, run];
        self.exec(sql, values).map(drop)
    }

    async fn pin(&mut self, run: i64, seq: Seq, now: Timestamp) -> Result<bool, Error> {
        let sql = "INSERT INTO pins (run_pk, seq, created_at) VALUES (?1, ?2, ?3)
                   ON CONFLICT (run_pk, seq) DO NOTHING";
        Ok(self.exec(sql, [run, int(seq.0)?, now.0])? == 1)
    }

    async fn unpin(&mut self, run: i64, seq: Seq) -> Result<bool, Error> {
        let sql = "DELETE FROM pins WHERE run_pk = ?1 AND seq = ?2";
        Ok(self.exec(sql, [run, lookup(seq.0)])? == 1)
    }

    async fn pins(&mut self, run: i64) -> Result<Vec<Seq>, Error> {
        let sql = "SELECT seq FROM pins WHERE run_pk = ?1 ORDER BY seq";
        self.all(sql, [run], |r| r.seq(0))
    }

    async fn pinned_entries(&mut self, run: i64, through: Seq) -> Result<Vec<Entry>, Error> {
        self.all(
            "SELECT h.seq, h.tokens, h.created_at, h.message FROM pins p
             JOIN history h ON h.run_pk = p.run_pk AND h.seq = p.seq
             WHERE p.run_pk = ?1 AND p.seq <= ?2 ORDER BY p.seq",
            [run, lookup(through.0)],
            |r| r.entry(),
        )
    }

    async fn insert_constraint(&mut self, run: i64, c: &Constraint) -> Result<(), Error> {
        let sql = "INSERT INTO run_constraints (run_pk, seq, read_only, text, created_at)
                   VALUES (?1, ?2, ?3, ?4, ?5)";
        let values = params![run, int(c.seq.0)?, c.read_only, c.text, c.created_at.0];
        self.exec(sql, values).map(drop)
    }

    async fn constraints(&mut self, run: i64) -> Result<Vec<Constraint>, Error> {
        let sql = "SELECT seq, text, read_only, created_at FROM run_constraints
                   WHERE run_pk = ?1 ORDER BY seq";
        self.all(sql, [run], |r| r.constraint())
    }

    async fn start_tool(&mut self, run: i64, id: &str, now: Timestamp) -> Result<bool, Error> {
        let sql = "INSERT INTO tool_runs (run_pk, tool_use_id, started_at) VALUES (?1, ?2, ?3)
                   ON CONFLICT (run_pk, tool_use_id) DO NOTHING";
        Ok(self.exec(sql, params![run, id, now.0])? == 1)
    }

    async fn started_tools(&mut self, run: i64) -> Result<Vec<String>, Error> {
        let sql = "SELECT tool_use_id FROM tool_runs WHERE run_pk = ?1 ORDER BY started_at";
        self.all(sql, [run], |r| r.text_at(0))
    }

    async fn indexed_through(&mut self, run: i64) -> Result<Seq, Error> {
        let sql = "SELECT indexed_through FROM search_progress WHERE run_pk = ?1";
        Ok(self.one(sql, [run], |r| r.seq(0))?.unwrap_or(Seq::ZERO))
    }

    async fn index(
        &mut self,
        run: i64,
        rows: &[(Seq, SearchRow)],
        through: Seq,
    ) -> Result<(), Error> {
        for (seq, row) in rows {
            let key =
                "INSERT INTO history_search (run_pk, seq, kind, part) VALUES (?1, ?2, ?3, ?4)";
            self.exec(key, params![run, int(seq.0)?, row.kind.as_str(), row.part])?;
            let words = "INSERT INTO history_search_words (rowid, body) VALUES (?1, ?2)";
            self.exec(words, params![self.conn.last_insert_rowid(), row.body])?;
        }
        self.exec(
            "INSERT INTO search_progress (run_pk, indexed_through) VALUES (?1, ?2)
             ON CONFLICT (run_pk) DO UPDATE SET indexed_through = excluded.indexed_through",
            [run, int(through.0)?],
        )
        .map(drop)
    }

    async fn search(&mut self, run: i64, phrase: &Phrase) -> Result<Vec<Entry>, Error> {
        let kind = phrase.kind.map(|k| k.as_str());
        self.all(
            &format!(
                "{ENTRY} WHERE run_pk = ?1 AND seq IN (
                     SELECT s.seq FROM history_search_words w JOIN history_search s ON s.id = w.rowid
                     WHERE history_search_words MATCH ?2 AND s.run_pk = ?1 AND (?3 IS NULL OR s.kind = ?3))
                 ORDER BY seq LIMIT ?4"
            ),
            params![run, fts_phrase(phrase), kind, lookup(phrase.limit)],
            |r| r.entry(),
        )
    }

    async fn search_tenant(
        &mut self,
        tenant: &TenantId,
        phrase: &Phrase,
        cap: u64,
    ) -> Result<Vec<(RunId, Seq)>, Error> {
        let kind = phrase.kind.map(|k| k.as_str());
        self.all(
            "SELECT r.id, s.seq FROM history_search_words w
             JOIN history_search s ON s.id = w.rowid JOIN runs r ON r.pk = s.run_pk
             WHERE history_search_words MATCH ?1 AND r.tenant_id = ?2
               AND (?3 IS NULL OR s.kind = ?3)
             LIMIT ?4",
            params![fts_phrase(phrase), tenant.as_str(), kind, lookup(cap)],
            |r| Ok((RunId::new(r.text_at(0)?)?, r.seq(1)?)),
        )
    }

    async fn unindexed(&mut self, tenant: &TenantId) -> Result<Vec<RunId>, Error> {
        self.all(
            "SELECT r.id FROM runs r LEFT JOIN search_progress p ON p.run_pk = r.pk
             WHERE r.tenant_id = ?1 AND r.last_seq > COALESCE(p.indexed_through, 0)",
            [tenant.as_str()],
            |r| Ok(RunId::new(r.text_at(0)?)?),
        )
    }

    async fn listing(&mut self, tenant: &TenantId) -> Result<Vec<ListedRun>, Error> {
        self.all(
            "SELECT r.id, r.tenant_id, r.status, r.goal, r.rules, r.active_summary_id, r.last_seq,
                    r.created_at, r.cleared_through, r.cleared_min_tokens, r.pk, o.format,
                    o.project, o.title, o.models, p.id, o.first_at, o.last_at, h.tokens, h.first,
                    h.last
             FROM runs r
             LEFT JOIN run_origins o ON o.run_pk = r.pk
             LEFT JOIN runs p ON p.pk = o.parent_run_pk
             LEFT JOIN (SELECT run_pk, SUM(tokens) AS tokens, MIN(created_at) AS first,
                               MAX(created_at) AS last
                        FROM history WHERE run_pk IN (SELECT pk FROM runs WHERE tenant_id = ?1)
                        GROUP BY run_pk) h ON h.run_pk = r.pk
             WHERE r.tenant_id = ?1 ORDER BY r.pk",
            [tenant.as_str()],
            |r| r.listed_run(),
        )
    }

    async fn children(&mut self, run: i64) -> Result<Vec<(i64, RunId)>, Error> {
        self.all(
            "SELECT r.pk, r.id FROM run_origins o JOIN runs r ON r.pk = o.run_pk
             WHERE o.parent_run_pk = ?1 ORDER BY r.pk",
            [run],
            |r| Ok((r.int_at(0)?, RunId::new(r.text_at(1)?)?)),
        )
    }

    async fn delete_run(&mut self, run: i64) -> Result<u64, Error> {
        self.exec("INSERT INTO run_deletions (run_pk) VALUES (?1)", [run])?;
        // The FTS5 words first, while `history_search` still names their rowids.
        for sql in [
            "DELETE FROM history_search_words
             WHERE rowid IN (SELECT id FROM history_search WHERE run_pk = ?1)",
            "DELETE FROM history_search WHERE run_pk = ?1",
            "DELETE FROM search_progress WHERE run_pk = ?1",
            "DELETE FROM pins WHERE run_pk = ?1",
            "DELETE FROM run_constraints WHERE run_pk = ?1",
            "DELETE FROM tool_runs WHERE run_pk = ?1",
            "DELETE FROM source_compactions WHERE run_pk = ?1",
            "DELETE FROM usage_records WHERE run_pk = ?1",
            "UPDATE run_origins SET parent_run_pk = NULL WHERE parent_run_pk = ?1",
            "DELETE FROM run_origins WHERE run_pk = ?1",
            "UPDATE runs SET active_summary_id = NULL WHERE pk = ?1",
            "DELETE FROM summaries WHERE run_pk = ?1",
        ] {
            self.exec(sql, [run])?;
        }
        let messages = self.exec("DELETE FROM history WHERE run_pk = ?1", [run])?;
        self.exec("DELETE FROM runs WHERE pk = ?1", [run])?;
        self.exec("DELETE FROM run_deletions WHERE run_pk = ?1", [run])?;
        Ok(messages as u64)
    }
}

#[async_trait]
impl ImportRows for SqliteTx {
    async fn source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(i64, RunId)>, Error> {
        self.one(SOURCE, [tenant.as_str(), source_key], |r| {
            Ok((r.int_at(0)?, RunId::new(r.text_at(1)?)?))
        })
    }

    async fn keep_deleted(&mut self, run: i64, at: Timestamp) -> Result<(), Error> {
        let sql = "INSERT INTO deleted_sources (tenant_id, source_key, run_id, deleted_at)
                   SELECT o.tenant_id, o.source_key, r.id, ?2
                   FROM run_origins o JOIN runs r ON r.pk = o.run_pk WHERE o.run_pk = ?1
                   ON CONFLICT (tenant_id, source_key) DO UPDATE
                   SET run_id = excluded.run_id, deleted_at = excluded.deleted_at";
        self.exec(sql, [run, at.0]).map(drop)
    }

    async fn deleted_source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(RunId, Timestamp)>, Error> {
        self.one(
            "SELECT run_id, deleted_at FROM deleted_sources
             WHERE tenant_id = ?1 AND source_key = ?2",
            [tenant.as_str(), source_key],
            |r| Ok((RunId::new(r.text_at(0)?)?, r.time(1)?)),
        )
    }

    async fn restore_source(&mut self, tenant: &TenantId, source_key: &str) -> Result<(), Error> {
        let sql = "DELETE FROM deleted_sources WHERE tenant_id = ?1 AND source_key = ?2";
        self.exec(sql, [tenant.as_str(), source_key]).map(drop)
    }

    async fn stored_source(&mut self, run: i64) -> Result<(u64, Digest, u64), Error> {
        let sql = "SELECT source_messages, source_digest,
                (SELECT COUNT(*) FROM source_compactions WHERE run_pk = ?1)
            FROM run_origins WHERE run_pk = ?1";
        self.one(sql, [run], |r| r.stored_source())?
            .ok_or_else(|| Error::Corrupt {
                what: format!("run {run} has no origin"),
            })
    }

    async fn insert_origin(
        &mut self,
        run: i64,
        tenant: &TenantId,
        new: &NewOrigin<'_>,
    ) -> Result<(), Error> {
        let o = new.origin;
        self.exec(
            "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, source_session_id,
                 parent_key, parent_run_pk, models, first_at, last_at, redactions, skipped_lines,
                 side_branches, side_branch_messages, source_messages, source_digest, imported_at,
                 updated_at, project, title)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18,
                 ?19, ?20)",
            params![
                run, tenant.as_str(), o.source_key, o.path, o.format, o.source_session_id,
                o.parent_key, new.parent, new.models, o.first_at, o.last_at, int(o.redactions)?,
                int(o.skipped_lines)?, int(o.side_branches)?, int(o.side_branch_messages)?,
                int(new.messages)?, new.digest.to_hex(), new.now.0, o.project, o.title,
            ],
        )?;
        // Subagents imported before their parent: link them now.
        self.exec(
            "UPDATE run_origins SET parent_run_pk = ?1
             WHERE tenant_id = ?2 AND parent_key = ?3 AND parent_run_pk IS NULL",
            params![run, tenant.as_str(), o.source_key],
        )
        .map(drop)
    }

    async fn update_origin(&mut self, run: i64, new: &NewOrigin<'_>) -> Result<(), Error> {
        let o = new.origin;
        self.exec(
            "UPDATE run_origins SET path = ?2, models = ?3, first_at = ?4, last_at = ?5,
                 redactions = ?6, skipped_lines = ?7, side_branches = ?8, side_branch_messages = ?9,
                 source_messages = ?10, source_digest = ?11, updated_at = ?12,
                 project = COALESCE(?13, project), title = COALESCE(?14, title)
             WHERE run_pk = ?1",
            params![
                run,
                o.path,
                new.models,
                o.first_at,
                o.last_at,
                int(o.redactions)?,
                int(o.skipped_lines)?,
                int(o.side_branches)?,
                int(o.side_branch_messages)?,
                int(new.messages)?,
                new.digest.to_hex(),
                new.now.0,
                o.project,
                o.title,
            ],
        )
        .map(drop)
    }

    async fn insert_compactions(
        &mut self,
        run: i64,
        compactions: &[SourceCompaction],
        from: usize,
    ) -> Result<(), Error> {
        let sql = "INSERT INTO source_compactions (run_pk, ordinal, after_seq, summary, at)
                   VALUES (?1, ?2, ?3, ?4, ?5)";
        for (ordinal, c) in compactions.iter().enumerate().skip(from) {
            let ordinal = int(ordinal as u64)?;
            self.exec(sql, params![run, ordinal, int(c.after)?, c.summary, c.at])?;
        }
        Ok(())
    }

    async fn origin(&mut self, run: i64) -> Result<Option<RunOrigin>, Error> {
        self.one(
            "SELECT o.source_key, o.path, o.format, o.source_session_id, p.id, o.models, o.first_at,
                    o.last_at, o.redactions, o.skipped_lines, o.side_branches,
                    o.side_branch_messages, o.source_messages, o.imported_at, o.updated_at,
                    o.project, o.title
             FROM run_origins o LEFT JOIN runs p ON p.pk = o.parent_run_pk WHERE o.run_pk = ?1",
            [run],
            |r| r.origin(),
        )
    }

    async fn compactions(&mut self, run: i64) -> Result<Vec<CompactionEvent>, Error> {
        let sql = "SELECT after_seq, summary, at FROM source_compactions WHERE run_pk = ?1 ORDER BY ordinal";
        self.all(sql, [run], |r| r.compaction())
    }

    async fn insert_usage(
        &mut self,
        tenant: &TenantId,
        run: i64,
        usage: &ImportUsage,
        kept: u64,
    ) -> Result<(), Error> {
        let sql =
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
                   + usage_records.cache_write_1h + usage_records.cache_read";
        for r in usage.kept(kept) {
            let u = &r.usage;
            self.exec(
                sql,
                params![
                    tenant.as_str(),
                    r.id,
                    run,
                    usage.session,
                    usage.project,
                    usage.agent,
                    r.model,
                    r.response_id,
                    r.request_id,
                    r.at.map(|t| t.0),
                    int(u.input)?,
                    int(u.output)?,
                    int(u.cache_write_5m)?,
                    int(u.cache_write_1h)?,
                    int(u.cache_read)?,
                    r.estimated,
                ],
            )?;
        }
        Ok(())
    }

    async fn run_usage(&mut self, run: i64) -> Result<Vec<RunUsage>, Error> {
        let sql = "SELECT model, estimated, COUNT(*), SUM(input), SUM(output),
                SUM(cache_write_5m), SUM(cache_write_1h), SUM(cache_read)
            FROM usage_records WHERE run_pk = ?1
            GROUP BY model, estimated ORDER BY model NULLS FIRST, estimated";
        self.all(sql, [run], |r| r.run_usage())
    }

    async fn usage_by_run(&mut self, tenant: &TenantId) -> Result<Vec<(i64, RunUsage)>, Error> {
        let sql = "SELECT model, estimated, COUNT(*), SUM(input), SUM(output),
                SUM(cache_write_5m), SUM(cache_write_1h), SUM(cache_read), run_pk
            FROM usage_records WHERE tenant_id = ?1
            GROUP BY run_pk, model, estimated";
        self.all(sql, [tenant.as_str()], |r| {
            Ok((r.int_at(8)?, r.run_usage()?))
        })
    }

    async fn usage(
        &mut self,
        tenant: &TenantId,
        query: &UsageQuery,
    ) -> Result<Vec<StoredUsage>, Error> {
        let sql = "SELECT r.id, u.session, u.project, u.agent, u.id, u.model, u.response_id,
                u.request_id, u.at, u.input, u.output, u.cache_write_5m, u.cache_write_1h,
                u.cache_read, u.estimated
            FROM usage_records u JOIN runs r ON r.pk = u.run_pk
            WHERE u.tenant_id = ?1 AND (?2 OR NOT u.estimated)
              AND (?3 IS NULL OR u.project = ?3)
            ORDER BY u.at NULLS FIRST, u.id";
        let params = params![tenant.as_str(), query.estimated, query.project];
        self.all(sql, params, |r| r.stored_usage())
    }
}

/// An FTS5 phrase of one string per word, each followed by `*` when it is a prefix:
/// `"src" + "mai"*`.
fn fts_phrase(phrase: &Phrase) -> String {
    phrase.render("\"", "*", " + ")
}
