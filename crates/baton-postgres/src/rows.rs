//! Runs, history, summary versions, pins, constraints, started tools, the search index and
//! imported runs' origins and usage records, as PostgreSQL statements. Batches go in one statement each
//! (`INSERT … SELECT FROM unnest(arrays)`); the primitives that lock begin the job's
//! transaction (see the crate docs).

use async_trait::async_trait;
use baton_core::units::ProtocolEvents;
use baton_core::usage::UsageRecord;
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

use crate::{Params, PgTx, ints};

const RUN: &str = "SELECT id, tenant_id, status, goal, rules, active_summary_id, last_seq,
    created_at, cleared_through, cleared_min_tokens, pk FROM runs";
const RUN_ROW: &str =
    "SELECT pk, status, active_summary_id, last_seq FROM runs WHERE tenant_id = $1 AND id = $2";
const SUMMARY: &str = "SELECT s.id, r.id, s.coverage, s.previous_id, s.body, s.created_at, s.meta
    FROM summaries s JOIN runs r ON r.pk = s.run_pk";
const ENTRY: &str = "SELECT seq, tokens, created_at, message FROM history";
/// Appends a batch of history rows (`$1` the run, `$7` the time, `$2` to `$6` the arrays of
/// seqs, tokens, tool uses, tool results and messages); the bench's bare baseline runs it too.
pub(crate) const INSERT_HISTORY: &str =
    "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
     SELECT $1, s, t, u, r, $7, m
     FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[]) AS x(s, t, u, r, m)";
/// The columns [`Row::run_usage`] reads, summed over a group of usage records.
const USAGE: &str = "SELECT model, estimated, COUNT(*), SUM(input)::bigint, SUM(output)::bigint,
    SUM(cache_write_5m)::bigint, SUM(cache_write_1h)::bigint, SUM(cache_read)::bigint";

#[async_trait]
impl RunRows for PgTx {
    async fn tenant_exists(&mut self, tenant: &TenantId) -> Result<bool, Error> {
        let sql = "SELECT 1 FROM tenants WHERE id = $1";
        let found = self.one(sql, &[&tenant.as_str()], |_| Ok(())).await?;
        Ok(found.is_some())
    }

    async fn insert_run(
        &mut self,
        tenant: &TenantId,
        id: &RunId,
        goal: Option<&str>,
        rules: Option<&str>,
        now: Timestamp,
    ) -> Result<Option<i64>, Error> {
        self.begin().await?;
        let tenants = "INSERT INTO tenants (id, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING";
        self.exec(tenants, &[&tenant.as_str(), &now.0]).await?;
        self.one(
            "INSERT INTO runs (tenant_id, id, status, goal, rules, created_at)
             VALUES ($1, $2, 'active', $3, $4, $5) ON CONFLICT (tenant_id, id) DO NOTHING
             RETURNING pk",
            &[&tenant.as_str(), &id.as_str(), &goal, &rules, &now.0],
            |r| r.int_at(0),
        )
        .await
    }

    async fn run_row(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<RunRow>, Error> {
        let params = [&tenant.as_str() as _, &id.as_str() as _];
        self.one(RUN_ROW, &params, |r| r.run_row()).await
    }

    async fn lock_run(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<RunRow>, Error> {
        self.begin().await?;
        let sql = format!("{RUN_ROW} FOR UPDATE");
        let params = [&tenant.as_str() as _, &id.as_str() as _];
        self.one(&sql, &params, |r| r.run_row()).await
    }

    async fn run(&mut self, tenant: &TenantId, id: &RunId) -> Result<Option<(i64, Run)>, Error> {
        let sql = format!("{RUN} WHERE tenant_id = $1 AND id = $2");
        let params = [&tenant.as_str() as _, &id.as_str() as _];
        self.one(&sql, &params, |r| Ok((r.int_at(10)?, r.run()?)))
            .await
    }

    async fn runs(&mut self, tenant: &TenantId) -> Result<Vec<Run>, Error> {
        let sql = format!("{RUN} WHERE tenant_id = $1 ORDER BY pk");
        self.all(&sql, &[&tenant.as_str()], |r| r.run()).await
    }

    async fn set_status(&mut self, run: i64, status: RunStatus) -> Result<(), Error> {
        let sql = "UPDATE runs SET status = $2 WHERE pk = $1";
        self.exec(sql, &[&run, &status.as_str()]).await
    }

    async fn insert_entries(
        &mut self,
        run: i64,
        after: Seq,
        entries: &[Prepared],
        now: Timestamp,
    ) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let first = int(after.0)? + 1;
        let last = first + int(entries.len() as u64)? - 1;
        let seqs: Vec<i64> = (first..=last).collect();
        let tokens: Vec<i32> = entries
            .iter()
            .map(|e| i32::try_from(e.tokens).unwrap_or(i32::MAX))
            .collect();
        let uses: Vec<Option<&str>> = entries.iter().map(|e| e.tool_uses.as_deref()).collect();
        let results: Vec<Option<&str>> =
            entries.iter().map(|e| e.tool_results.as_deref()).collect();
        let messages: Vec<&str> = entries.iter().map(|e| e.message.as_str()).collect();
        let params: &Params = &[&run, &seqs, &tokens, &uses, &results, &messages, &now.0];
        self.exec(INSERT_HISTORY, params).await?;
        let sql = "UPDATE runs SET last_seq = $1 WHERE pk = $2";
        self.exec(sql, &[&last, &run]).await
    }

    async fn entries(
        &mut self,
        run: i64,
        from: Seq,
        to: Option<Seq>,
        limit: Option<u64>,
    ) -> Result<Vec<Entry>, Error> {
        let sql = format!(
            "{ENTRY} WHERE run_pk = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq LIMIT $4::bigint"
        );
        let to = to.map_or(i64::MAX, |s| lookup(s.0));
        let limit = limit.map(lookup);
        let params = [&run as _, &lookup(from.0) as _, &to as _, &limit as _];
        self.all(&sql, &params, |r| r.entry()).await
    }

    async fn events(&mut self, run: i64, after: Seq) -> Result<Vec<ProtocolEvents>, Error> {
        self.all(
            "SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = $1 AND seq > $2 ORDER BY seq",
            &[&run, &lookup(after.0)],
            |r| r.events(),
        )
        .await
    }

    async fn tool_events(
        &mut self,
        run: i64,
        after: Seq,
        cut: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error> {
        self.all(
            "SELECT seq, tool_uses, tool_results FROM history
             WHERE run_pk = $1 AND seq > $2 AND (tool_uses IS NOT NULL OR tool_results IS NOT NULL)
             UNION SELECT seq, tool_uses, tool_results FROM history WHERE run_pk = $1 AND seq = $3
             ORDER BY seq",
            &[&run, &lookup(after.0), &lookup(cut.0)],
            |r| r.events(),
        )
        .await
    }

    async fn tail_meta(&mut self, run: i64, after: Seq) -> Result<Vec<EntryMeta>, Error> {
        // `message` is never selected, so its TOASTed value is never fetched or decompressed.
        self.all(
            "SELECT seq, tokens, tool_uses, tool_results FROM history WHERE run_pk = $1 AND seq > $2 ORDER BY seq",
            &[&run, &lookup(after.0)],
            |r| r.entry_meta(),
        )
        .await
    }

    async fn count_seqs(&mut self, run: i64, seqs: &[Seq]) -> Result<u64, Error> {
        let list: Vec<i64> = seqs.iter().map(|s| lookup(s.0)).collect();
        let sql = "SELECT COUNT(*) FROM history WHERE run_pk = $1 AND seq = ANY($2)";
        let count = self
            .one(sql, &[&run, &list], |r| r.count(0, "seq count"))
            .await?;
        Ok(count.unwrap_or(0))
    }

    async fn history_counts(&mut self, run: i64) -> Result<RunCounts, Error> {
        // SUM over INTEGER is BIGINT and over BIGINT is NUMERIC: cast so every column is i64.
        let sql = "SELECT COUNT(*)::bigint, COALESCE(SUM(tokens), 0)::bigint,
                COALESCE(SUM(octet_length(message)), 0)::bigint, MIN(created_at), MAX(created_at)
            FROM history WHERE run_pk = $1";
        let counts = self.one(sql, &[&run], |r| r.history_counts()).await?;
        Ok(counts.unwrap_or_default())
    }

    async fn summary_coverage(&mut self, run: i64, id: SummaryId) -> Result<Option<Seq>, Error> {
        let sql = "SELECT coverage FROM summaries WHERE id = $1 AND run_pk = $2";
        self.one(sql, &[&lookup(id.0), &run], |r| r.seq(0)).await
    }

    async fn insert_summary(&mut self, run: i64, new: &NewSummary) -> Result<SummaryId, Error> {
        let (previous, coverage) = (new.previous.map(|p| lookup(p.0)), int(new.coverage.0)?);
        let id = self
            .one(
                "INSERT INTO summaries (run_pk, coverage, previous_id, body, created_at, meta)
                 VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                &[&run, &coverage, &previous, &new.body, &new.now.0, &new.meta],
                |r| r.count(0, "summary id"),
            )
            .await?;
        Ok(SummaryId(id.unwrap_or_default()))
    }

    async fn set_active(
        &mut self,
        run: i64,
        id: SummaryId,
        expected: Option<SummaryId>,
    ) -> Result<bool, Error> {
        let sql = "UPDATE runs SET active_summary_id = $1
                   WHERE pk = $2 AND active_summary_id IS NOT DISTINCT FROM $3";
        let expected = expected.map(|e| lookup(e.0));
        Ok(self.changed(sql, &[&lookup(id.0), &run, &expected]).await? == 1)
    }

    async fn summaries(&mut self, which: Versions<'_>) -> Result<Vec<Summary>, Error> {
        match which {
            Versions::Run(run) => {
                let sql = format!("{SUMMARY} WHERE s.run_pk = $1 ORDER BY s.id");
                self.all(&sql, &[&run], |r| r.summary()).await
            }
            Versions::One { run, id } => {
                let sql = format!("{SUMMARY} WHERE s.id = $1 AND s.run_pk = $2");
                self.all(&sql, &[&lookup(id.0), &run], |r| r.summary())
                    .await
            }
            Versions::OfTenant { tenant, id } => {
                let sql = format!("{SUMMARY} WHERE s.id = $1 AND r.tenant_id = $2");
                let params = [&lookup(id.0) as _, &tenant.as_str() as _];
                self.all(&sql, &params, |r| r.summary()).await
            }
        }
    }

    async fn set_cleared(&mut self, run: i64, cleared: Cleared) -> Result<(), Error> {
        let sql = "UPDATE runs SET cleared_through = $1, cleared_min_tokens = $2 WHERE pk = $3";
        let (through, min_tokens) = (int(cleared.through.0)?, i64::from(cleared.min_tokens));
        self.exec(sql, &[&through, &min_tokens, &run]).await
    }

    async fn pin(&mut self, run: i64, seq: Seq, now: Timestamp) -> Result<bool, Error> {
        let sql = "INSERT INTO pins (run_pk, seq, created_at) VALUES ($1, $2, $3)
                   ON CONFLICT (run_pk, seq) DO NOTHING";
        Ok(self.changed(sql, &[&run, &int(seq.0)?, &now.0]).await? == 1)
    }

    async fn unpin(&mut self, run: i64, seq: Seq) -> Result<bool, Error> {
        let sql = "DELETE FROM pins WHERE run_pk = $1 AND seq = $2";
        Ok(self.changed(sql, &[&run, &lookup(seq.0)]).await? == 1)
    }

    async fn pins(&mut self, run: i64) -> Result<Vec<Seq>, Error> {
        let sql = "SELECT seq FROM pins WHERE run_pk = $1 ORDER BY seq";
        self.all(sql, &[&run], |r| r.seq(0)).await
    }

    async fn pinned_entries(&mut self, run: i64, through: Seq) -> Result<Vec<Entry>, Error> {
        self.all(
            "SELECT h.seq, h.tokens, h.created_at, h.message FROM pins p
             JOIN history h ON h.run_pk = p.run_pk AND h.seq = p.seq
             WHERE p.run_pk = $1 AND p.seq <= $2 ORDER BY p.seq",
            &[&run, &lookup(through.0)],
            |r| r.entry(),
        )
        .await
    }

    async fn insert_constraint(&mut self, run: i64, c: &Constraint) -> Result<(), Error> {
        let sql = "INSERT INTO run_constraints (run_pk, seq, read_only, text, created_at)
                   VALUES ($1, $2, $3, $4, $5)";
        let seq = int(c.seq.0)?;
        self.exec(sql, &[&run, &seq, &c.read_only, &c.text, &c.created_at.0])
            .await
    }

    async fn constraints(&mut self, run: i64) -> Result<Vec<Constraint>, Error> {
        let sql = "SELECT seq, text, read_only, created_at FROM run_constraints
                   WHERE run_pk = $1 ORDER BY seq";
        self.all(sql, &[&run], |r| r.constraint()).await
    }

    async fn start_tool(&mut self, run: i64, id: &str, now: Timestamp) -> Result<bool, Error> {
        let sql = "INSERT INTO tool_runs (run_pk, tool_use_id, started_at) VALUES ($1, $2, $3)
                   ON CONFLICT (run_pk, tool_use_id) DO NOTHING";
        Ok(self.changed(sql, &[&run, &id, &now.0]).await? == 1)
    }

    async fn started_tools(&mut self, run: i64) -> Result<Vec<String>, Error> {
        let sql = "SELECT tool_use_id FROM tool_runs WHERE run_pk = $1 ORDER BY started_at";
        self.all(sql, &[&run], |r| r.text_at(0)).await
    }

    async fn indexed_through(&mut self, run: i64) -> Result<Seq, Error> {
        let sql = "SELECT indexed_through FROM search_progress WHERE run_pk = $1";
        let mark = self.one(sql, &[&run], |r| r.seq(0)).await?;
        Ok(mark.unwrap_or(Seq::ZERO))
    }

    async fn lock_index(&mut self, run: i64) -> Result<Seq, Error> {
        if !self.begun {
            // The mark's row, made in autocommit: inside the indexing transaction its foreign
            // key check would hold a share lock on the run's row until indexing commits, and
            // every append (which locks that row) would wait for the whole batch.
            let sql = "INSERT INTO search_progress (run_pk, indexed_through) VALUES ($1, 0)
                       ON CONFLICT (run_pk) DO NOTHING";
            self.exec(sql, &[&run]).await?;
        }
        self.begin().await?;
        let sql = "SELECT indexed_through FROM search_progress WHERE run_pk = $1 FOR UPDATE";
        let mark = self.one(sql, &[&run], |r| r.seq(0)).await?;
        Ok(mark.unwrap_or(Seq::ZERO))
    }

    async fn index(
        &mut self,
        run: i64,
        rows: &[(Seq, SearchRow)],
        through: Seq,
    ) -> Result<(), Error> {
        let mut seqs = Vec::with_capacity(rows.len());
        let (mut kinds, mut parts, mut bodies) = (Vec::new(), Vec::new(), Vec::new());
        for (seq, row) in rows {
            seqs.push(int(seq.0)?);
            kinds.push(row.kind.as_str());
            parts.push(i32::try_from(row.part).unwrap_or(i32::MAX));
            bodies.push(row.body.as_str());
        }
        self.exec(
            "INSERT INTO history_search (run_pk, seq, kind, part, body)
             SELECT $1, s, k, p, b FROM unnest($2::bigint[], $3::text[], $4::int[], $5::text[]) AS x(s, k, p, b)",
            &[&run, &seqs, &kinds, &parts, &bodies],
        )
        .await?;
        let sql = "UPDATE search_progress SET indexed_through = $1 WHERE run_pk = $2";
        self.exec(sql, &[&int(through.0)?, &run]).await
    }

    async fn search(&mut self, run: i64, phrase: &Phrase) -> Result<Vec<Entry>, Error> {
        let ((query, kind), limit) = (tsquery(phrase), lookup(phrase.limit));
        let sql = format!(
            "{ENTRY} WHERE run_pk = $1 AND seq IN (
                 SELECT seq FROM history_search
                 WHERE run_pk = $1 AND tsv @@ to_tsquery('simple', $2::text)
                   AND ($3::text IS NULL OR kind = $3::text))
             ORDER BY seq LIMIT $4"
        );
        self.all(&sql, &[&run, &query, &kind, &limit], |r| r.entry())
            .await
    }

    async fn search_tenant(
        &mut self,
        tenant: &TenantId,
        phrase: &Phrase,
        cap: u64,
    ) -> Result<Vec<(RunId, Seq)>, Error> {
        let ((query, kind), cap) = (tsquery(phrase), lookup(cap));
        let sql = "SELECT r.id, s.seq FROM history_search s JOIN runs r ON r.pk = s.run_pk
             WHERE r.tenant_id = $1 AND s.tsv @@ to_tsquery('simple', $2::text)
               AND ($3::text IS NULL OR s.kind = $3::text)
             LIMIT $4";
        self.all(sql, &[&tenant.as_str(), &query, &kind, &cap], |r| {
            Ok((RunId::new(r.text_at(0)?)?, r.seq(1)?))
        })
        .await
    }

    async fn unindexed(&mut self, tenant: &TenantId) -> Result<Vec<RunId>, Error> {
        let sql = "SELECT r.id FROM runs r LEFT JOIN search_progress p ON p.run_pk = r.pk
             WHERE r.tenant_id = $1 AND r.last_seq > COALESCE(p.indexed_through, 0)";
        self.all(sql, &[&tenant.as_str()], |r| Ok(RunId::new(r.text_at(0)?)?))
            .await
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
             LEFT JOIN (SELECT run_pk, SUM(tokens)::bigint AS tokens, MIN(created_at) AS first,
                               MAX(created_at) AS last
                        FROM history WHERE run_pk IN (SELECT pk FROM runs WHERE tenant_id = $1)
                        GROUP BY run_pk) h ON h.run_pk = r.pk
             WHERE r.tenant_id = $1 ORDER BY r.pk",
            &[&tenant.as_str()],
            |r| r.listed_run(),
        )
        .await
    }

    async fn children(&mut self, run: i64) -> Result<Vec<(i64, RunId)>, Error> {
        self.all(
            "SELECT r.pk, r.id FROM run_origins o JOIN runs r ON r.pk = o.run_pk
             WHERE o.parent_run_pk = $1 ORDER BY r.pk",
            &[&run],
            |r| Ok((r.int_at(0)?, RunId::new(r.text_at(1)?)?)),
        )
        .await
    }

    async fn delete_run(&mut self, run: i64) -> Result<u64, Error> {
        self.begin().await?;
        for sql in [
            "INSERT INTO run_deletions (run_pk) VALUES ($1)",
            "DELETE FROM history_search WHERE run_pk = $1",
            "DELETE FROM search_progress WHERE run_pk = $1",
            "DELETE FROM pins WHERE run_pk = $1",
            "DELETE FROM run_constraints WHERE run_pk = $1",
            "DELETE FROM tool_runs WHERE run_pk = $1",
            "DELETE FROM source_compactions WHERE run_pk = $1",
            "DELETE FROM usage_records WHERE run_pk = $1",
            "UPDATE run_origins SET parent_run_pk = NULL WHERE parent_run_pk = $1",
            "DELETE FROM run_origins WHERE run_pk = $1",
            "UPDATE runs SET active_summary_id = NULL WHERE pk = $1",
            "DELETE FROM summaries WHERE run_pk = $1",
        ] {
            self.exec(sql, &[&run]).await?;
        }
        let messages = self
            .changed("DELETE FROM history WHERE run_pk = $1", &[&run])
            .await?;
        self.exec("DELETE FROM runs WHERE pk = $1", &[&run]).await?;
        self.exec("DELETE FROM run_deletions WHERE run_pk = $1", &[&run])
            .await?;
        Ok(messages)
    }
}

#[async_trait]
impl ImportRows for PgTx {
    async fn lock_sources(&mut self, tenant: &TenantId, keys: &[&str]) -> Result<(), Error> {
        // Transaction-scoped advisory locks keyed by schema, tenant and source key, taken all
        // at once in one order, so importers of overlapping files wait instead of deadlocking.
        self.begin().await?;
        let keys: Vec<String> = keys
            .iter()
            .map(|key| format!("{}\n{}\n{key}", self.schema, tenant.as_str()))
            .collect();
        self.exec(
            "SELECT pg_advisory_xact_lock(hashtextextended(k, 0))
             FROM unnest($1::text[]) WITH ORDINALITY AS x(k, n) ORDER BY n",
            &[&keys],
        )
        .await
    }

    async fn source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(i64, RunId)>, Error> {
        self.one(
            "SELECT o.run_pk, r.id FROM run_origins o JOIN runs r ON r.pk = o.run_pk
             WHERE o.tenant_id = $1 AND o.source_key = $2",
            &[&tenant.as_str(), &source_key],
            |r| Ok((r.int_at(0)?, RunId::new(r.text_at(1)?)?)),
        )
        .await
    }

    async fn keep_deleted(&mut self, run: i64, at: Timestamp) -> Result<(), Error> {
        let sql = "INSERT INTO deleted_sources (tenant_id, source_key, run_id, deleted_at)
                   SELECT o.tenant_id, o.source_key, r.id, $2
                   FROM run_origins o JOIN runs r ON r.pk = o.run_pk WHERE o.run_pk = $1
                   ON CONFLICT (tenant_id, source_key) DO UPDATE
                   SET run_id = excluded.run_id, deleted_at = excluded.deleted_at";
        self.exec(sql, &[&run, &at.0]).await
    }

    async fn deleted_source(
        &mut self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<(RunId, Timestamp)>, Error> {
        self.one(
            "SELECT run_id, deleted_at FROM deleted_sources
             WHERE tenant_id = $1 AND source_key = $2",
            &[&tenant.as_str(), &source_key],
            |r| Ok((RunId::new(r.text_at(0)?)?, r.time(1)?)),
        )
        .await
    }

    async fn restore_source(&mut self, tenant: &TenantId, source_key: &str) -> Result<(), Error> {
        let sql = "DELETE FROM deleted_sources WHERE tenant_id = $1 AND source_key = $2";
        self.exec(sql, &[&tenant.as_str(), &source_key]).await
    }

    async fn stored_source(&mut self, run: i64) -> Result<(u64, Digest, u64), Error> {
        let sql = "SELECT source_messages, source_digest,
                (SELECT COUNT(*) FROM source_compactions WHERE run_pk = $1)
            FROM run_origins WHERE run_pk = $1";
        let stored = self.one(sql, &[&run], |r| r.stored_source()).await?;
        stored.ok_or_else(|| Error::Corrupt {
            what: format!("run {run} has no origin"),
        })
    }

    async fn insert_origin(
        &mut self,
        run: i64,
        tenant: &TenantId,
        new: &NewOrigin<'_>,
    ) -> Result<(), Error> {
        let (o, counts) = (new.origin, counts(new)?);
        self.exec(
            "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, source_session_id,
                 parent_key, parent_run_pk, models, first_at, last_at, redactions, skipped_lines,
                 side_branches, side_branch_messages, source_messages, source_digest, imported_at,
                 updated_at, project, title)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, ($12::bigint[])[1], ($12::bigint[])[2], ($12::bigint[])[3], ($12::bigint[])[4],
                 ($12::bigint[])[5], $13, $14, $14, $15, $16)",
            &[
                &run, &tenant.as_str(), &o.source_key, &o.path, &o.format, &o.source_session_id,
                &o.parent_key, &new.parent, &new.models, &o.first_at, &o.last_at, &counts,
                &new.digest.to_hex(), &new.now.0, &o.project, &o.title,
            ],
        )
        .await?;
        // Subagents imported before their parent: link them now.
        self.exec(
            "UPDATE run_origins SET parent_run_pk = $1
             WHERE tenant_id = $2 AND parent_key = $3 AND parent_run_pk IS NULL",
            &[&run, &tenant.as_str(), &o.source_key],
        )
        .await
    }

    async fn update_origin(&mut self, run: i64, new: &NewOrigin<'_>) -> Result<(), Error> {
        let (o, counts) = (new.origin, counts(new)?);
        self.exec(
            "UPDATE run_origins SET path = $2, models = $3, first_at = $4, last_at = $5,
                 redactions = ($6::bigint[])[1], skipped_lines = ($6::bigint[])[2], side_branches = ($6::bigint[])[3],
                 side_branch_messages = ($6::bigint[])[4], source_messages = ($6::bigint[])[5], source_digest = $7,
                 updated_at = $8, project = COALESCE($9, project), title = COALESCE($10, title)
             WHERE run_pk = $1",
            &[
                &run, &o.path, &new.models, &o.first_at, &o.last_at, &counts,
                &new.digest.to_hex(), &new.now.0, &o.project, &o.title,
            ],
        )
        .await
    }

    async fn insert_compactions(
        &mut self,
        run: i64,
        compactions: &[SourceCompaction],
        from: usize,
    ) -> Result<(), Error> {
        let (mut ordinals, mut afters, mut summaries, mut ats) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (ordinal, c) in compactions.iter().enumerate().skip(from) {
            ordinals.push(int(ordinal as u64)?);
            afters.push(int(c.after)?);
            summaries.push(c.summary.as_deref());
            ats.push(c.at.as_deref());
        }
        if ordinals.is_empty() {
            return Ok(());
        }
        self.exec(
            "INSERT INTO source_compactions (run_pk, ordinal, after_seq, summary, at)
             SELECT $1, o, a, s, t FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[]) AS x(o, a, s, t)",
            &[&run, &ordinals, &afters, &summaries, &ats],
        )
        .await
    }

    async fn origin(&mut self, run: i64) -> Result<Option<RunOrigin>, Error> {
        self.one(
            "SELECT o.source_key, o.path, o.format, o.source_session_id, p.id, o.models, o.first_at,
                    o.last_at, o.redactions, o.skipped_lines, o.side_branches,
                    o.side_branch_messages, o.source_messages, o.imported_at, o.updated_at,
                    o.project, o.title
             FROM run_origins o LEFT JOIN runs p ON p.pk = o.parent_run_pk WHERE o.run_pk = $1",
            &[&run],
            |r| r.origin(),
        )
        .await
    }

    async fn compactions(&mut self, run: i64) -> Result<Vec<CompactionEvent>, Error> {
        let sql = "SELECT after_seq, summary, at FROM source_compactions WHERE run_pk = $1 ORDER BY ordinal";
        self.all(sql, &[&run], |r| r.compaction()).await
    }

    async fn insert_usage(
        &mut self,
        tenant: &TenantId,
        run: i64,
        usage: &ImportUsage,
        kept: u64,
    ) -> Result<(), Error> {
        let records: Vec<&UsageRecord> = usage.kept(kept).collect();
        if records.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        let models: Vec<Option<&str>> = records.iter().map(|r| r.model.as_deref()).collect();
        let responses: Vec<Option<&str>> =
            records.iter().map(|r| r.response_id.as_deref()).collect();
        let requests: Vec<Option<&str>> = records.iter().map(|r| r.request_id.as_deref()).collect();
        let at: Vec<Option<i64>> = records.iter().map(|r| r.at.map(|t| t.0)).collect();
        let input = ints(&records, |r| r.usage.input)?;
        let output = ints(&records, |r| r.usage.output)?;
        let write_5m = ints(&records, |r| r.usage.cache_write_5m)?;
        let write_1h = ints(&records, |r| r.usage.cache_write_1h)?;
        let read = ints(&records, |r| r.usage.cache_read)?;
        let estimated: Vec<bool> = records.iter().map(|r| r.estimated).collect();
        // One row per id within the statement too (ON CONFLICT may touch a row only once): the
        // larger copy, as across imports.
        self.exec(
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
            &[
                &tenant.as_str(),
                &run,
                &usage.session,
                &usage.project,
                &usage.agent,
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
    }

    async fn run_usage(&mut self, run: i64) -> Result<Vec<RunUsage>, Error> {
        let sql = format!(
            "{USAGE} FROM usage_records WHERE run_pk = $1
             GROUP BY model, estimated ORDER BY model NULLS FIRST, estimated"
        );
        self.all(&sql, &[&run], |r| r.run_usage()).await
    }

    async fn usage_by_run(&mut self, tenant: &TenantId) -> Result<Vec<(i64, RunUsage)>, Error> {
        let sql = format!(
            "{USAGE}, run_pk FROM usage_records WHERE tenant_id = $1 GROUP BY run_pk, model, estimated"
        );
        self.all(&sql, &[&tenant.as_str()], |r| {
            Ok((r.int_at(8)?, r.run_usage()?))
        })
        .await
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
            WHERE u.tenant_id = $1 AND ($2 OR NOT u.estimated)
              AND ($3::text IS NULL OR u.project = $3)
            ORDER BY u.at NULLS FIRST, u.id";
        let (estimated, project) = (&query.estimated, &query.project);
        self.all(sql, &[&tenant.as_str(), estimated, project], |r| {
            r.stored_usage()
        })
        .await
    }
}

/// An origin's counts, as one array parameter: redactions, skipped lines, side branches, their
/// messages, source messages.
fn counts(new: &NewOrigin<'_>) -> Result<Vec<i64>, Error> {
    let o = new.origin;
    [
        o.redactions,
        o.skipped_lines,
        o.side_branches,
        o.side_branch_messages,
        new.messages,
    ]
    .into_iter()
    .map(int)
    .collect()
}

/// A tsquery of the words in order (`<->`), each quoted and marked `:*` when it is a prefix
/// (`'src' <-> 'mai':*`), and the kind of row the phrase is limited to.
fn tsquery(phrase: &Phrase) -> (String, Option<&'static str>) {
    let kind = phrase.kind.map(|k| k.as_str());
    (phrase.render("'", ":*", " <-> "), kind)
}
