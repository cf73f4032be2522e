//! One compaction of one run, carried out against a store.
//!
//! # Design
//!
//! A compaction is planned on metadata only (`context_meta`: the tail's seqs, stored token counts and tool-call ids), so planning costs O(tail) whatever the history's length, and reads message bodies only for the part a summary replaces.
//! The working state is not a separate record: it is the claims of the active summary version, typed (goal, constraint, verified, hypothesis, failed_approach, pending, artifact, next_step, note) and each citing a seq.
//! So it is versioned, diffable and rolled back with the summary (`summary diff`, `summary activate`), validated by the same install, and recall expands any claim to its original.
//! Guards run twice: before the work (the trigger: threshold, loop guard, cost) and after the summary is written (it must be smaller than what it replaces, and the context must shrink by the minimum), so a compaction that would not pay, or would loop, writes nothing.
//! The loop guard reads the context's size right after the last compaction from that version's `meta` (`tokens_after`), so it holds across processes and restarts.
//! Replay is offline: it carries plans out in memory with the same strategies, summarizer and checks the runtime uses (install validation included), so its figures are what the runtime would do.

use std::time::Instant;

use baton_compact::audit::{Retention, audit};
use baton_compact::trigger::{Skip, Trigger};
use baton_compact::{
    Compaction, HistoryView, Keep, Plan, Strategy, SummarizeError, Summarizer, SummaryRequest,
};
use baton_core::prices::PriceTable;
use baton_core::{Claim, Cleared, Entry, Run, RunId, Seq, Summary, SummaryId, TenantId, Timestamp};
use baton_store::{Candidate, Install, Rejection, SetCleared, Store};

/// How to compact.
#[derive(Clone, Copy)]
pub struct Compactor<'a> {
    /// What to do.
    pub strategy: &'a dyn Strategy,
    /// Who writes a summary's claims, for the `summarize` plan.
    pub summarizer: &'a dyn Summarizer,
    /// When it pays.
    pub trigger: &'a Trigger,
    /// Prices, for the trigger's cost policy.
    pub prices: &'a PriceTable,
    /// Skip the trigger's admission (threshold, loop guard, cost): the user asked for this
    /// compaction. The guards on the written summary (smaller than what it replaces, enough
    /// saved) still apply.
    pub force: bool,
    /// Plan, write and check, but install nothing.
    pub dry_run: bool,
}

/// What [`compact`] did.
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub enum Outcome {
    /// The strategy planned nothing, and why.
    Kept(Keep),
    /// The trigger or a guard refused the plan; nothing was written.
    Refused {
        /// The plan's kind.
        plan: &'static str,
        /// Why.
        reason: Skip,
        /// Context tokens before.
        tokens_before: u64,
        /// Context tokens the plan would have left.
        tokens_after: u64,
    },
    /// A dry run: what would have been installed, with the claims it would carry.
    Planned {
        /// The compaction, without a summary id.
        compaction: Compaction,
        /// The new version's claims (empty for `clear_tool_results`).
        claims: Vec<Claim>,
    },
    /// Done.
    Compacted(Compaction),
    /// The run could not take the compaction: another writer moved it first (a newer
    /// summary, a new cleared setting), or it is not active; nothing was written. Compacting
    /// again plans from the new state.
    Conflict(Rejection),
}

/// What went wrong, other than an expected outcome.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The summarizer failed; nothing was written.
    #[error(transparent)]
    Summarize(#[from] SummarizeError),
    /// The store refused the candidate as invalid: a strategy or summarizer broke its contract
    /// (a claim citing a seq after the cut, an unsafe cut). Nothing was written.
    #[error("strategy {strategy}: the store refused its candidate")]
    Invalid {
        /// The strategy.
        strategy: &'static str,
        /// The store's reason.
        #[source]
        rejection: Rejection,
    },
}

/// Plans one compaction of `run` and carries it out (see the crate docs).
pub async fn compact(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
    c: &Compactor<'_>,
) -> Result<Outcome, Error> {
    let started = Instant::now();
    let meta = store.context_meta(tenant, run).await?;
    if meta.run.status != baton_core::RunStatus::Active {
        // Nothing to plan for: installs are refused on a run that is not active.
        return Ok(Outcome::Conflict(Rejection::RunNotActive {
            status: meta.run.status,
        }));
    }
    let fixed = meta.fixed_tokens();
    let view = HistoryView::new(meta.summary.as_ref(), &meta.tail, &meta.pins, fixed)
        .with_cleared(meta.run.cleared);
    let plan = c.strategy.plan(&view);
    let tokens_before = view.tokens();
    let estimate = plan.tokens_after(&view);
    let cut = match &plan {
        Plan::Keep(keep) => return Ok(Outcome::Kept(keep.clone())),
        other => other.cut(),
    };
    let old_tokens = cut.map_or(0, |cut| view.tokens_through(cut));
    let summary_call = match &plan {
        Plan::Summarize { .. } if c.summarizer.calls_a_model() => old_tokens,
        _ => 0,
    };
    // The loop guard's reference: the context right after the last compaction, as its
    // version recorded it.
    let after_last = meta
        .summary
        .as_ref()
        .and_then(|s| s.meta.as_ref())
        .and_then(|m| m.get("tokens_after"))
        .and_then(serde_json::Value::as_u64);
    if !c.force
        && let Err(reason) =
            c.trigger
                .admit_priced(tokens_before, estimate, after_last, summary_call, c.prices)
    {
        return Ok(Outcome::Refused {
            plan: plan.kind(),
            reason,
            tokens_before,
            tokens_after: estimate,
        });
    }
    let messages_before = meta.pinned.len() + meta.tail.len();
    let record =
        |tokens_after, messages_after, summary_tokens, summarizer_tokens, retention| Compaction {
            strategy: c.strategy.name().to_owned(),
            run: run.clone(),
            plan: plan.kind(),
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
            cut,
            summary_id: None,
            summary_tokens,
            summarizer_tokens,
            retention,
            duration: started.elapsed(),
        };

    let (through, claims, summarizer_tokens, old) = match &plan {
        Plan::Keep(keep) => return Ok(Outcome::Kept(keep.clone())),
        Plan::ClearToolResults {
            through,
            min_tokens,
        } => {
            let compaction = record(estimate, messages_before, 0, 0, None);
            if c.dry_run {
                return Ok(Outcome::Planned {
                    compaction,
                    claims: Vec::new(),
                });
            }
            let new = Cleared {
                through: *through,
                min_tokens: *min_tokens,
            };
            return match store
                .set_cleared(tenant, run, meta.run.cleared, new)
                .await?
            {
                SetCleared::Set(_) => {
                    c.strategy.observe(&compaction);
                    Ok(Outcome::Compacted(compaction))
                }
                SetCleared::Rejected(why @ Rejection::InvalidClear { .. }) => Err(Error::Invalid {
                    strategy: c.strategy.name(),
                    rejection: why,
                }),
                SetCleared::Rejected(why) => Ok(Outcome::Conflict(why)),
            };
        }
        Plan::Drop { through } => {
            let old = old_part(store, tenant, run, view.coverage(), through.seq()).await?;
            let carried = meta
                .summary
                .as_ref()
                .map(|s| s.claims.clone())
                .unwrap_or_default();
            (through.seq(), carried, 0, old)
        }
        Plan::Summarize {
            through,
            instructions,
        } => {
            let old = old_part(store, tenant, run, view.coverage(), through.seq()).await?;
            let written = c
                .summarizer
                .summarize(&SummaryRequest {
                    base: meta.summary.as_ref(),
                    old: &old,
                    cut: through.seq(),
                    instructions: instructions.as_deref(),
                    pins: &meta.pins,
                })
                .await?;
            let mut claims = written.claims;
            carry_pinned(&mut claims, meta.summary.as_ref(), &meta.pins);
            (
                through.seq(),
                claims,
                written.input_tokens + written.output_tokens,
                old,
            )
        }
        Plan::UpdateState { through } => {
            let old = old_part(store, tenant, run, view.coverage(), through.seq()).await?;
            let base = meta.summary.as_ref().map_or(&[][..], |s| &s.claims[..]);
            let claims = baton_compact::state::merge(
                base,
                baton_compact::summarizer::extract(&old),
                &meta.pins,
            );
            (through.seq(), claims, 0, old)
        }
    };

    // What the context holds after, measured the way `context_meta` measures the fixed part:
    // the preamble assembled with the new claims and the pinned messages the cut now covers,
    // then the tail after the cut.
    let newly_pinned: Vec<Entry> = old
        .iter()
        .filter(|e| meta.pins.contains(&e.seq))
        .cloned()
        .collect();
    let mut pinned_after = meta.pinned.clone();
    pinned_after.extend(newly_pinned.iter().cloned());
    let draft = draft_summary(run, through, &claims);
    let fixed_after = baton_core::context::assemble_pinned(
        &meta.run,
        Some(&draft),
        Vec::new(),
        pinned_after,
        &meta.pins,
    )
    .tokens;
    let tokens_after = fixed_after + view.tokens_after(through);
    let base_claims = meta
        .summary
        .as_ref()
        .map_or(0, |s| claims_preamble(run, s.coverage, &s.claims));
    let new_claims = claims_preamble(run, through, &claims);
    let replaced = base_claims + view.tokens_through(through);
    let summary_written = if matches!(plan, Plan::Drop { .. }) {
        0
    } else {
        new_claims
    };
    if let Err(reason) = c.trigger.accept(
        tokens_before,
        tokens_after,
        summary_written,
        replaced.max(1),
    ) {
        return Ok(Outcome::Refused {
            plan: plan.kind(),
            reason,
            tokens_before,
            tokens_after,
        });
    }
    let retention = retention(store, tenant, run, &meta, &old, through, &claims).await?;
    let messages_after =
        meta.pinned.len() + newly_pinned.len() + meta.tail.len() - view.count_through(through);
    let mut compaction = record(
        tokens_after,
        messages_after,
        new_claims,
        summarizer_tokens,
        Some(retention),
    );
    if c.dry_run {
        return Ok(Outcome::Planned { compaction, claims });
    }
    let candidate = Candidate {
        base: meta.summary.as_ref().map(|s| s.id),
        cut: through,
        claims,
        meta: Some(serde_json::json!({
            "strategy": compaction.strategy,
            "plan": compaction.plan,
            "summarizer": c.summarizer.name(),
            "tokens_before": compaction.tokens_before,
            "tokens_after": compaction.tokens_after,
            "summary_tokens": compaction.summary_tokens,
            "summarizer_tokens": compaction.summarizer_tokens,
            "retention": compaction.retention,
        })),
    };
    match store.install_summary(tenant, run, &candidate).await? {
        Install::Installed(summary) => {
            compaction.summary_id = Some(summary.id);
            compaction.duration = started.elapsed();
            c.strategy.observe(&compaction);
            Ok(Outcome::Compacted(compaction))
        }
        Install::Rejected(why @ Rejection::Invalid(_)) => Err(Error::Invalid {
            strategy: c.strategy.name(),
            rejection: why,
        }),
        Install::Rejected(why) => Ok(Outcome::Conflict(why)),
    }
}

/// The messages a cut compacts: after the coverage, through the cut.
async fn old_part(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
    coverage: Seq,
    cut: Seq,
) -> Result<Vec<Entry>, Error> {
    Ok(store
        .read_range(tenant, run, coverage.next(), Some(cut))
        .await?)
}

/// A summary version as it would be installed, for measuring the context it makes.
fn draft_summary(run: &RunId, coverage: Seq, claims: &[Claim]) -> Summary {
    Summary {
        id: SummaryId(0),
        run: run.clone(),
        coverage,
        previous_id: None,
        claims: claims.to_vec(),
        meta: None,
        created_at: Timestamp(0),
    }
}

/// Tokens `claims` take in a preamble of their own, as context assembly renders them.
fn claims_preamble(run: &RunId, coverage: Seq, claims: &[Claim]) -> u64 {
    if claims.is_empty() {
        return 0;
    }
    let bare = Run {
        id: run.clone(),
        tenant: TenantId::default_tenant(),
        status: baton_core::RunStatus::Active,
        goal: None,
        rules: None,
        active_summary_id: None,
        last_seq: coverage,
        cleared: None,
        created_at: Timestamp(0),
    };
    baton_core::context::assemble(
        &bare,
        Some(&draft_summary(run, coverage, claims)),
        Vec::new(),
    )
    .tokens
}

/// Claims of the base that cite a pinned seq are carried into the new version, whatever the
/// summarizer wrote.
fn carry_pinned(claims: &mut Vec<Claim>, base: Option<&baton_core::Summary>, pins: &[Seq]) {
    let Some(base) = base else { return };
    for claim in &base.claims {
        if pins.contains(&claim.source_seq) && !claims.contains(claim) {
            claims.push(claim.clone());
        }
    }
}

/// The retention audit of a cut: the `dropped` part against the new claims, the messages kept
/// after the cut and the pinned ones.
async fn retention(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
    meta: &baton_store::ContextMeta,
    dropped: &[Entry],
    cut: Seq,
    claims: &[Claim],
) -> Result<Retention, Error> {
    let mut kept = store.read_range(tenant, run, cut.next(), None).await?;
    kept.extend(meta.pinned.iter().cloned());
    kept.extend(
        dropped
            .iter()
            .filter(|e| meta.pins.contains(&e.seq))
            .cloned(),
    );
    Ok(audit(dropped, claims, &kept))
}
