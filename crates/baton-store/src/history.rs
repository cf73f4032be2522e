//! The [`Store`] contract written once, over [`Backend`]'s row primitives: runs, history,
//! summary versions by compare-and-swap, pins, constraints, started tools, the reads context
//! assembly and planning make, recall search with its lazy index, and imports.
//!
//! Every write is one job in one write transaction that starts by finding (on PostgreSQL,
//! locking) the run's row, so all check-then-act on a run is ordered by that row: the checks
//! below read the state the write will change, and nothing else can change it first.
//!
//! # Design
//!
//! Every move of a run's context goes through a compare-and-swap on one column of the run row: `active_summary_id` for installs and for `activate_summary` (rolling back or forward to any version of the run, which history never notices), and the `cleared_through`/`cleared_min_tokens` pair for `set_cleared` (which tool results the context shows as a stub; it only moves forward).
//! A version keeps the `meta` its installer gave (strategy, sizes, retention audit) as opaque JSON; the store never interprets it.
//! A pinned message (`pins`) is carried whole in the preamble when a summary covers it, so no strategy can drop it; it is rendered as text, so a pinned half of a tool call never breaks the pairing a provider checks.

use std::collections::BTreeMap;

use async_trait::async_trait;
use baton_core::units::{ProtocolEvents, ProtocolMap};
use baton_core::{
    Cleared, Entry, InvalidCandidate, Run, RunId, RunStatus, Seq, SummaryId, TenantId, Timestamp,
};

use crate::backend::{
    Backend, ImportRows, NewSummary, Phrase, Prepared, RunRow, RunRows, SummaryBody, Versions,
};
use crate::search::{Found, INDEX_BATCH, phrase, search_rows};
use crate::{
    Candidate, Constraint, ContextMeta, ContextParts, Deleted, Error, Imported, Install, NewEntry,
    NewImport, NewRun, Reimport, Rejection, RunPage, RunQuery, RunReport, SearchQuery, SetCleared,
    Store, check_text, generate_run_id, import,
};

/// Wraps a job's body: `job!(|tx| { … })` is the closure [`Backend::write`] and
/// [`Backend::read`] take.
macro_rules! job {
    (|$tx:ident| $body:block) => {
        move |$tx| Box::pin(async move $body)
    };
}
pub(crate) use job;

/// The run's key facts, or why it is not there for this tenant.
pub(crate) async fn find(
    tx: &mut impl RunRows,
    tenant: &TenantId,
    run: &RunId,
) -> Result<RunRow, Error> {
    match tx.run_row(tenant, run).await? {
        Some(row) => Ok(row),
        None => Err(missing(run)),
    }
}

/// [`find`], locking the run's row against its other writers until the transaction ends.
pub(crate) async fn lock(
    tx: &mut impl RunRows,
    tenant: &TenantId,
    run: &RunId,
) -> Result<RunRow, Error> {
    match tx.lock_run(tenant, run).await? {
        Some(row) => Ok(row),
        None => Err(missing(run)),
    }
}

/// The whole run and its key.
pub(crate) async fn load(
    tx: &mut impl RunRows,
    tenant: &TenantId,
    run: &RunId,
) -> Result<(i64, Run), Error> {
    match tx.run(tenant, run).await? {
        Some(found) => Ok(found),
        None => Err(missing(run)),
    }
}

/// The error for a run the tenant does not have. A tenant that never created a run has none,
/// so its missing run is not found either, never an "unknown tenant" (issue 20, item 15).
fn missing(run: &RunId) -> Error {
    Error::RunNotFound { run: run.clone() }
}

/// The run, locked, if it takes writes.
async fn writable(tx: &mut impl RunRows, tenant: &TenantId, run: &RunId) -> Result<RunRow, Error> {
    let row = lock(tx, tenant, run).await?;
    if row.status != RunStatus::Active {
        return Err(Error::RunNotActive {
            run: run.clone(),
            status: row.status,
        });
    }
    Ok(row)
}

/// The seqs `after + 1 ..= after + n`.
fn seqs_after(after: Seq, n: usize) -> Vec<Seq> {
    (1..=n as u64).map(|i| Seq(after.0 + i)).collect()
}

/// Validates a candidate inside the install transaction, under the run's lock. `Ok(Err(..))`
/// is a rejection.
async fn validate(
    tx: &mut impl RunRows,
    run: &RunRow,
    c: &Candidate,
) -> Result<Result<(), InvalidCandidate>, Error> {
    let coverage = match c.base {
        None => Seq::ZERO,
        Some(base) => match tx.summary_coverage(run.pk, base).await? {
            Some(coverage) => coverage,
            None => return Ok(Err(InvalidCandidate::BaseNotInRun { base })),
        },
    };
    if c.cut <= coverage {
        return Ok(Err(InvalidCandidate::CutNotBeyondBase {
            cut: c.cut,
            coverage,
        }));
    }
    if c.cut > run.last_seq {
        return Ok(Err(InvalidCandidate::CutNotFound {
            cut: c.cut,
            last: run.last_seq,
        }));
    }
    if let Err(why) = baton_core::claim::validate_sources(&c.claims, c.cut, run.last_seq) {
        return Ok(Err(why));
    }
    // Belt and braces over the gap-free invariant: the cut and every cited seq are rows.
    let mut cited: Vec<Seq> = c.claims.iter().map(|claim| claim.source_seq).collect();
    cited.push(c.cut);
    cited.sort_unstable();
    cited.dedup();
    if tx.count_seqs(run.pk, &cited).await? != cited.len() as u64 {
        return Err(Error::Corrupt {
            what: "history has gaps below the run's last seq".into(),
        });
    }
    let window = tx.tool_events(run.pk, coverage, c.cut).await?;
    if ProtocolMap::analyze(coverage, &window).is_safe(c.cut) {
        return Ok(Ok(()));
    }
    // The rare path: explain against the whole window, so the nearest safe cut named in the
    // message counts text-only messages too.
    let full = tx.events(run.pk, coverage).await?;
    let detail = ProtocolMap::analyze(coverage, &full)
        .explain(c.cut)
        .unwrap_or_else(|| "it splits a protocol unit".to_owned());
    Ok(Err(InvalidCandidate::UnsafeCut { cut: c.cut, detail }))
}

/// The active summary of `run` (key `pk`), which must be one of its versions.
async fn active_summary(
    tx: &mut impl RunRows,
    pk: i64,
    run: &Run,
) -> Result<Option<baton_core::Summary>, Error> {
    let Some(id) = run.active_summary_id else {
        return Ok(None);
    };
    match tx.summaries(Versions::One { run: pk, id }).await?.pop() {
        Some(summary) => Ok(Some(summary)),
        None => Err(Error::Corrupt {
            what: format!("run {} points at missing summary {id}", run.id),
        }),
    }
}

/// Why a cleared-results setting cannot move from `current` to `new` on a run whose last seq
/// is `last`, if it cannot.
fn check_cleared(current: Option<Cleared>, new: Cleared, last: Seq) -> Option<String> {
    if new.through.0 == 0 || new.through > last {
        return Some(format!(
            "through seq {} is not a message of the run (its messages are 1..={last})",
            new.through
        ));
    }
    match current {
        Some(c) if new.through < c.through => Some(format!(
            "through seq {} is before the run's current {}: clearing only moves forward",
            new.through, c.through
        )),
        Some(c) if new.min_tokens > c.min_tokens => Some(format!(
            "min_tokens {} is above the run's current {}: results it stubs would come back",
            new.min_tokens, c.min_tokens
        )),
        Some(c) if c == new => Some("the run clears exactly this already".to_owned()),
        _ => None,
    }
}

#[async_trait]
impl<B: Backend> Store for B {
    async fn create_run(&self, tenant: &TenantId, new: &NewRun) -> Result<Run, Error> {
        check_text("goal", new.goal.as_deref())?;
        check_text("rules", new.rules.as_deref())?;
        let id = match &new.id {
            Some(id) => id.clone(),
            None => generate_run_id()?,
        };
        let (tenant, new) = (tenant.clone(), new.clone());
        self.write(job!(|tx| {
            let now = Timestamp::now();
            let (goal, rules) = (new.goal.as_deref(), new.rules.as_deref());
            if tx
                .insert_run(&tenant, &id, goal, rules, now)
                .await?
                .is_none()
            {
                return Err(Error::RunExists { run: id });
            }
            // What the insert wrote: a run starts active, empty and without a summary.
            Ok(Run {
                id,
                tenant,
                status: RunStatus::Active,
                goal: new.goal,
                rules: new.rules,
                active_summary_id: None,
                last_seq: Seq::ZERO,
                cleared: None,
                created_at: now,
            })
        }))
        .await
    }

    async fn run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read_one(job!(|tx| { Ok(load(tx, &tenant, &run).await?.1) }))
            .await
    }

    async fn list_runs(&self, tenant: &TenantId) -> Result<Vec<Run>, Error> {
        let tenant = tenant.clone();
        self.read_one(job!(|tx| {
            if !tx.tenant_exists(&tenant).await? {
                return Err(Error::UnknownTenant { tenant });
            }
            tx.runs(&tenant).await
        }))
        .await
    }

    async fn list_run_summaries(
        &self,
        tenant: &TenantId,
        query: &RunQuery,
    ) -> Result<RunPage, Error> {
        let tenant = tenant.clone();
        let (rows, usage) = self
            .read(job!(|tx| {
                let rows = tx.listing(&tenant).await?;
                let usage = tx.usage_by_run(&tenant).await?;
                Ok((rows, usage))
            }))
            .await?;
        crate::runs::page(rows, &usage, query)
    }

    async fn delete_run(&self, tenant: &TenantId, run: &RunId) -> Result<Deleted, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            let row = lock(tx, &tenant, &run).await?;
            // The run's subagents, theirs, and so on, found breadth first; deleted deepest
            // first, so no origin is left naming a deleted parent.
            let mut victims = vec![(row.pk, run.clone())];
            let mut next = 0;
            while let Some((pk, _)) = victims.get(next) {
                for child in tx.children(*pk).await? {
                    if !victims.iter().any(|(seen, _)| *seen == child.0) {
                        victims.push(child);
                    }
                }
                next += 1;
            }
            let mut messages = 0;
            let now = Timestamp::now();
            for (pk, _) in victims.iter().rev() {
                // An imported run's source stays deleted: importing it again stores nothing.
                tx.keep_deleted(*pk, now).await?;
                messages += tx.delete_run(*pk).await?;
            }
            Ok(Deleted {
                run,
                subagents: victims.into_iter().skip(1).map(|(_, id)| id).collect(),
                messages,
            })
        }))
        .await
    }

    async fn cancel_run(&self, tenant: &TenantId, run: &RunId) -> Result<Run, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            let row = lock(tx, &tenant, &run).await?;
            match row.status {
                RunStatus::Active => tx.set_status(row.pk, RunStatus::Cancelled).await?,
                RunStatus::Cancelled => {}
                RunStatus::Completed => {
                    return Err(Error::RunNotActive {
                        run,
                        status: row.status,
                    });
                }
            }
            Ok(load(tx, &tenant, &run).await?.1)
        }))
        .await
    }

    async fn append(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entries: &[NewEntry],
    ) -> Result<Vec<Seq>, Error> {
        let prepared = Prepared::all(entries)?;
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            let row = writable(tx, &tenant, &run).await?;
            if !prepared.is_empty() {
                tx.insert_entries(row.pk, row.last_seq, &prepared, Timestamp::now())
                    .await?;
            }
            Ok(seqs_after(row.last_seq, prepared.len()))
        }))
        .await
    }

    async fn read_range(
        &self,
        tenant: &TenantId,
        run: &RunId,
        from: Seq,
        to: Option<Seq>,
    ) -> Result<Vec<Entry>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.entries(row.pk, from, to, None).await
        }))
        .await
    }

    async fn protocol_window(
        &self,
        tenant: &TenantId,
        run: &RunId,
        after: Seq,
    ) -> Result<Vec<ProtocolEvents>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.events(row.pk, after).await
        }))
        .await
    }

    async fn install_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        candidate: &Candidate,
    ) -> Result<Install, Error> {
        let body = serde_json::to_string(&SummaryBody {
            claims: candidate.claims.clone(),
        })
        .map_err(|e| Error::Corrupt {
            what: format!("summary does not serialize: {e}"),
        })?;
        let meta = candidate
            .meta
            .as_ref()
            .map(|m| {
                serde_json::to_string(m).map_err(|e| Error::Corrupt {
                    what: format!("summary meta does not serialize: {e}"),
                })
            })
            .transpose()?;
        let (tenant, run, candidate) = (tenant.clone(), run.clone(), candidate.clone());
        self.write(job!(|tx| {
            let row = lock(tx, &tenant, &run).await?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive {
                    status: row.status,
                }));
            }
            if let Err(why) = validate(tx, &row, &candidate).await? {
                return Ok(Install::Rejected(Rejection::Invalid(why)));
            }
            // The compare-and-swap, decided under the run's lock before anything is written.
            if row.active_summary_id != candidate.base {
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: candidate.base,
                    active: row.active_summary_id,
                }));
            }
            let now = Timestamp::now();
            let new = NewSummary {
                coverage: candidate.cut,
                previous: candidate.base,
                body,
                meta,
                now,
            };
            let id = tx.insert_summary(row.pk, &new).await?;
            if !tx.set_active(row.pk, id, candidate.base).await? {
                return Err(Error::Corrupt {
                    what: format!("run {run}'s summary pointer moved under its lock"),
                });
            }
            Ok(Install::Installed(baton_core::Summary {
                id,
                run,
                coverage: candidate.cut,
                previous_id: candidate.base,
                claims: candidate.claims,
                meta: candidate.meta,
                created_at: now,
            }))
        }))
        .await
    }

    async fn summaries(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<baton_core::Summary>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.summaries(Versions::Run(row.pk)).await
        }))
        .await
    }

    async fn summary(
        &self,
        tenant: &TenantId,
        id: SummaryId,
    ) -> Result<baton_core::Summary, Error> {
        let tenant = tenant.clone();
        self.read_one(job!(|tx| {
            let which = Versions::OfTenant {
                tenant: &tenant,
                id,
            };
            tx.summaries(which)
                .await?
                .pop()
                .ok_or(Error::SummaryNotFound { id })
        }))
        .await
    }

    async fn context_parts(&self, tenant: &TenantId, run: &RunId) -> Result<ContextParts, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let (pk, run) = load(tx, &tenant, &run).await?;
            let summary = active_summary(tx, pk, &run).await?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            Ok(ContextParts {
                pinned: tx.pinned_entries(pk, coverage).await?,
                pins: tx.pins(pk).await?,
                tail: tx.entries(pk, coverage.next(), None, None).await?,
                run,
                summary,
            })
        }))
        .await
    }

    async fn context_meta(&self, tenant: &TenantId, run: &RunId) -> Result<ContextMeta, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let (pk, run) = load(tx, &tenant, &run).await?;
            let summary = active_summary(tx, pk, &run).await?;
            let coverage = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
            Ok(ContextMeta {
                pinned: tx.pinned_entries(pk, coverage).await?,
                pins: tx.pins(pk).await?,
                tail: tx.tail_meta(pk, coverage).await?,
                run,
                summary,
            })
        }))
        .await
    }

    async fn pin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            // Under the run's lock, its last seq cannot move before the insert.
            let row = lock(tx, &tenant, &run).await?;
            if seq.0 == 0 || seq > row.last_seq {
                return Err(Error::SeqNotFound {
                    run,
                    seq,
                    last: row.last_seq,
                });
            }
            tx.pin(row.pk, seq, Timestamp::now()).await
        }))
        .await
    }

    async fn unpin(&self, tenant: &TenantId, run: &RunId, seq: Seq) -> Result<bool, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            let row = lock(tx, &tenant, &run).await?;
            tx.unpin(row.pk, seq).await
        }))
        .await
    }

    async fn pins(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Seq>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.pins(row.pk).await
        }))
        .await
    }

    async fn add_constraint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        entry: &NewEntry,
        text: &str,
        read_only: bool,
    ) -> Result<Constraint, Error> {
        check_text("constraint", Some(text))?;
        let prepared = Prepared::all(std::slice::from_ref(entry))?;
        let (tenant, run, text) = (tenant.clone(), run.clone(), text.to_owned());
        self.write(job!(|tx| {
            // The run's lock orders this append with every other writer of the run.
            let row = writable(tx, &tenant, &run).await?;
            let now = Timestamp::now();
            tx.insert_entries(row.pk, row.last_seq, &prepared, now)
                .await?;
            let constraint = Constraint {
                seq: row.last_seq.next(),
                text,
                read_only,
                created_at: now,
            };
            tx.pin(row.pk, constraint.seq, now).await?;
            tx.insert_constraint(row.pk, &constraint).await?;
            Ok(constraint)
        }))
        .await
    }

    async fn constraints(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<Constraint>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.constraints(row.pk).await
        }))
        .await
    }

    async fn start_tool(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool_use_id: &str,
    ) -> Result<bool, Error> {
        check_text("tool call id", Some(tool_use_id))?;
        let (tenant, run, id) = (tenant.clone(), run.clone(), tool_use_id.to_owned());
        self.write(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.start_tool(row.pk, &id, Timestamp::now()).await
        }))
        .await
    }

    async fn started_tools(&self, tenant: &TenantId, run: &RunId) -> Result<Vec<String>, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let row = find(tx, &tenant, &run).await?;
            tx.started_tools(row.pk).await
        }))
        .await
    }

    async fn activate_summary(
        &self,
        tenant: &TenantId,
        run: &RunId,
        id: SummaryId,
        base: Option<SummaryId>,
    ) -> Result<Install, Error> {
        // Ids past the databases' range can only be a caller's: invalid input, not a stale
        // base or a missing version (issue 20 item 4).
        crate::backend::int(id.0)?;
        if let Some(base) = base {
            crate::backend::int(base.0)?;
        }
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            let row = lock(tx, &tenant, &run).await?;
            if row.status != RunStatus::Active {
                return Ok(Install::Rejected(Rejection::RunNotActive {
                    status: row.status,
                }));
            }
            let Some(summary) = tx.summaries(Versions::One { run: row.pk, id }).await?.pop() else {
                return Ok(Install::Rejected(Rejection::Invalid(
                    InvalidCandidate::VersionNotInRun { id },
                )));
            };
            // The compare-and-swap an install makes, decided under the run's lock.
            if row.active_summary_id != base || !tx.set_active(row.pk, id, base).await? {
                return Ok(Install::Rejected(Rejection::StaleBase {
                    expected: base,
                    active: row.active_summary_id,
                }));
            }
            Ok(Install::Installed(summary))
        }))
        .await
    }

    async fn set_cleared(
        &self,
        tenant: &TenantId,
        run: &RunId,
        expected: Option<Cleared>,
        new: Cleared,
    ) -> Result<SetCleared, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.write(job!(|tx| {
            lock(tx, &tenant, &run).await?;
            let (pk, current) = load(tx, &tenant, &run).await?;
            if current.status != RunStatus::Active {
                return Ok(SetCleared::Rejected(Rejection::RunNotActive {
                    status: current.status,
                }));
            }
            if current.cleared != expected {
                return Ok(SetCleared::Rejected(Rejection::StaleCleared {
                    expected,
                    active: current.cleared,
                }));
            }
            if let Some(detail) = check_cleared(current.cleared, new, current.last_seq) {
                return Ok(SetCleared::Rejected(Rejection::InvalidClear { detail }));
            }
            tx.set_cleared(pk, new).await?;
            Ok(SetCleared::Set(Run {
                cleared: Some(new),
                ..current
            }))
        }))
        .await
    }

    async fn search(
        &self,
        tenant: &TenantId,
        run: &RunId,
        query: &SearchQuery,
    ) -> Result<Found, Error> {
        let phrase = phrase(query)?;
        let (tenant, run) = (tenant.clone(), run.clone());
        // The common case: the index is up to date, and the search is one read.
        let state = {
            let (tenant, run, phrase) = (tenant.clone(), run.clone(), phrase.clone());
            self.read(job!(|tx| {
                let row = find(tx, &tenant, &run).await?;
                if tx.indexed_through(row.pk).await? < row.last_seq {
                    return Ok(Err((row.pk, row.last_seq)));
                }
                Ok(Ok(found(tx, row.pk, phrase).await?))
            }))
            .await?
        };
        let (pk, upto) = match state {
            Ok(found) => return Ok(found),
            Err(behind) => behind,
        };
        // History the index has not seen, through the last seq at the call: one batch per
        // write transaction, so appenders and installs (of this process or another) get the
        // write lock between batches; concurrent searchers of the run take batches in turn
        // (each locks the run's mark first) and never index a message twice.
        let mut indexed = 0;
        loop {
            let (n, caught_up) = self
                .write(job!(|tx| {
                    let after = tx.lock_index(pk).await?;
                    if after >= upto {
                        return Ok((0, true));
                    }
                    let batch = tx
                        .entries(pk, after.next(), Some(upto), Some(INDEX_BATCH))
                        .await?;
                    let Some(last) = batch.last().map(|e| e.seq) else {
                        return Err(Error::Corrupt {
                            what: format!(
                                "history of run {pk} has no rows after seq {after} up to seq {upto}"
                            ),
                        });
                    };
                    let rows: Vec<_> = batch
                        .iter()
                        .flat_map(|e| search_rows(&e.message).into_iter().map(|r| (e.seq, r)))
                        .collect();
                    tx.index(pk, &rows, last).await?;
                    Ok((batch.len(), last >= upto))
                }))
                .await?;
            indexed += n;
            if caught_up {
                break;
            }
        }
        if indexed > 0 {
            tracing::debug!(run = %run, messages = indexed, "indexed history for search");
        }
        self.read(job!(|tx| { found(tx, pk, phrase).await })).await
    }

    async fn search_across(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
        cap: u64,
    ) -> Result<Option<BTreeMap<RunId, Vec<Seq>>>, Error> {
        let phrase = phrase(query)?;
        let lagging = {
            let tenant = tenant.clone();
            self.read(job!(|tx| { tx.unindexed(&tenant).await }))
                .await?
        };
        // Each lagging run is brought up to date by the one path that indexes.
        for run in &lagging {
            let one = SearchQuery {
                pattern: query.pattern.clone(),
                kind: query.kind,
                limit: 1,
            };
            match self.search(tenant, run, &one).await {
                // Deleted since it was listed: nothing of it to find.
                Err(Error::RunNotFound { .. }) => {}
                other => drop(other?),
            }
        }
        let (tenant, limit) = (tenant.clone(), cap.saturating_add(1));
        let pairs = self
            .read(job!(|tx| {
                tx.search_tenant(&tenant, &phrase, limit).await
            }))
            .await?;
        if pairs.len() as u64 > cap {
            return Ok(None);
        }
        let mut runs: BTreeMap<RunId, Vec<Seq>> = BTreeMap::new();
        for (run, seq) in pairs {
            runs.entry(run).or_default().push(seq);
        }
        for seqs in runs.values_mut() {
            seqs.sort_unstable();
            seqs.dedup();
        }
        Ok(Some(runs))
    }

    async fn import(
        &self,
        tenant: &TenantId,
        imports: Vec<NewImport>,
        reimport: Reimport,
    ) -> Result<Vec<Imported>, Error> {
        import::store(self, tenant, imports, reimport).await
    }

    async fn source_run(
        &self,
        tenant: &TenantId,
        source_key: &str,
    ) -> Result<Option<RunId>, Error> {
        let (tenant, key) = (tenant.clone(), source_key.to_owned());
        self.read(job!(|tx| {
            Ok(tx.source(&tenant, &key).await?.map(|(_, id)| id))
        }))
        .await
    }

    async fn run_report(&self, tenant: &TenantId, run: &RunId) -> Result<RunReport, Error> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.read(job!(|tx| {
            let (pk, run) = load(tx, &tenant, &run).await?;
            let mut counts = tx.history_counts(pk).await?;
            counts.count_tools(&tx.tool_events(pk, Seq::ZERO, Seq::ZERO).await?);
            Ok(RunReport {
                origin: tx.origin(pk).await?,
                compactions: tx.compactions(pk).await?,
                counts,
                usage: tx.run_usage(pk).await?,
                run,
            })
        }))
        .await
    }
}

/// The entries matching `phrase`; when there are none and every word was whole, whether the
/// words as prefixes match something, to suggest that form.
async fn found(tx: &mut impl RunRows, pk: i64, phrase: Phrase) -> Result<Found, Error> {
    let entries = tx.search(pk, &phrase).await?;
    if !entries.is_empty() || phrase.words.iter().any(|(_, prefix)| *prefix) {
        return Ok(Found {
            entries,
            prefix_form: None,
        });
    }
    let prefixes = Phrase {
        words: phrase
            .words
            .iter()
            .map(|(w, _)| (w.clone(), true))
            .collect(),
        limit: 1,
        kind: phrase.kind,
    };
    let form = tx.search(pk, &prefixes).await?.first().map(|_| {
        let words: Vec<String> = phrase.words.iter().map(|(w, _)| format!("{w}*")).collect();
        words.join(" ")
    });
    Ok(Found {
        entries,
        prefix_form: form,
    })
}
