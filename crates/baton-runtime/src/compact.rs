//! One compaction of one run, carried out against a store: the store as the executor's
//! [`Target`], and the executor itself (`baton_compact::Executor`, wrapped in `Logged` when the
//! settings name a log), so the runtime and replay run the same code.
//!
//! # Design
//!
//! A compaction is planned on metadata only (`context_meta`: the tail's seqs, stored token counts and tool-call ids), so planning costs O(tail) whatever the history's length, and reads message bodies only for the part a summary replaces.
//! The working state is not a separate record: it is the claims of the active summary version, typed (`baton_core::ClaimKind`) and each citing a seq.
//! So it is versioned, diffable and rolled back with the summary (`summary diff`, `summary activate`), validated by the same install, and recall expands any claim to its original.
//! Guards run twice: before the work (the trigger: threshold, loop guard, cost) and after the summary is written (it must be smaller than what it replaces, and the context must shrink by the minimum), so a compaction that would not pay, or would loop, writes nothing.
//! The loop guard reads the context's size right after the last compaction from that version's `meta` (`tokens_after`), so it holds across processes and restarts; a context over its strategy's limit passes it.
//! Replay is offline: it carries plans out in memory with the same strategies, summarizer and checks the runtime uses (install validation included), so its figures are what the runtime would do.

use async_trait::async_trait;
use baton_compact::executor::{Applied, Execute, RunState, Settings, Target, Version};
use baton_compact::strategies::ClearToolResults;
use baton_compact::{Executor, Logged, Strategy, SummarizeError, Summarizer};
use baton_core::prices::PriceTable;
use baton_core::tokens::TokenCounter;
use baton_core::{Cleared, Entry, RunId, RunStatus, Seq, TenantId};
use baton_store::{Candidate, Install, Rejection, SetCleared, Store};

/// How to compact.
#[derive(Clone, Copy)]
pub struct Compactor<'a> {
    /// What to do.
    pub strategy: &'a dyn Strategy,
    /// Who writes a summary's claims, for the `summarize` plan.
    pub summarizer: &'a dyn Summarizer,
    /// The shared settings: trigger, clearing layer, the working state's cap, the log.
    pub settings: &'a Settings,
    /// The clearing layer's settings (the `clear-tool-results` table).
    pub clear: ClearToolResults,
    /// Prices, for the trigger's cost policy.
    pub prices: &'a PriceTable,
    /// How the run counts tokens (the working state is measured with it).
    pub counter: &'a dyn TokenCounter,
    /// The user asked for this compaction now: the strategy plans as if its threshold were
    /// reached and the trigger's admission is skipped. The guards on the written summary
    /// (smaller than what it replaces, a context that shrinks) still apply.
    pub force: bool,
    /// Plan, write and check, but install nothing.
    pub dry_run: bool,
}

/// What [`compact`] did.
pub type Outcome = baton_compact::Outcome<Rejection>;

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
    /// The strategy needs a model and the summarizer is offline; nothing was written.
    #[error(
        "strategy {strategy} needs a model to write its summary (baton chat, or the HTTP API with a provider); offline, use structured"
    )]
    NeedsModel {
        /// The strategy.
        strategy: &'static str,
    },
}

/// Plans one compaction of `run` and carries it out (see the crate docs).
pub async fn compact(
    store: &dyn Store,
    tenant: &TenantId,
    run: &RunId,
    c: &Compactor<'_>,
) -> Result<Outcome, Error> {
    let executor = Executor {
        strategy: c.strategy,
        summarizer: c.summarizer,
        settings: c.settings,
        clear: c.clear,
        prices: c.prices,
        counter: c.counter,
        force: c.force,
        dry_run: c.dry_run,
    };
    let target = StoreRun { store, tenant, run };
    let executed = match &c.settings.log {
        Some(path) => Logged::new(executor, path).execute(&target).await,
        None => executor.execute(&target).await,
    };
    executed.map_err(|e| match e {
        baton_compact::executor::Error::Target(e) => Error::Store(e),
        baton_compact::executor::Error::Summarize(e) => Error::Summarize(e),
        baton_compact::executor::Error::Invalid {
            strategy,
            rejection,
        } => Error::Invalid {
            strategy,
            rejection,
        },
        baton_compact::executor::Error::NeedsModel { strategy } => Error::NeedsModel { strategy },
    })
}

/// A run in a store, as the executor's target.
struct StoreRun<'a> {
    store: &'a dyn Store,
    tenant: &'a TenantId,
    run: &'a RunId,
}

#[async_trait]
impl Target for StoreRun<'_> {
    type Error = baton_store::Error;
    type Rejection = Rejection;

    async fn state(&self) -> Result<RunState<'_>, baton_store::Error> {
        let meta = self.store.context_meta(self.tenant, self.run).await?;
        Ok(RunState {
            run: meta.run,
            summary: meta.summary,
            tail: meta.tail.into(),
            pins: meta.pins,
            pinned: meta.pinned,
        })
    }

    async fn read(
        &self,
        from: Seq,
        through: Option<Seq>,
    ) -> Result<Vec<Entry>, baton_store::Error> {
        self.store
            .read_range(self.tenant, self.run, from, through)
            .await
    }

    async fn install(&self, version: Version) -> Result<Applied<Rejection>, baton_store::Error> {
        let candidate = Candidate {
            base: version.base,
            cut: version.cut,
            claims: version.claims,
            meta: Some(version.meta),
        };
        Ok(
            match self
                .store
                .install_summary(self.tenant, self.run, &candidate)
                .await?
            {
                Install::Installed(summary) => Applied::Done(Some(summary.id)),
                Install::Rejected(why @ Rejection::Invalid(_)) => Applied::Invalid(why),
                Install::Rejected(why) => Applied::Conflict(why),
            },
        )
    }

    async fn clear(
        &self,
        current: Option<Cleared>,
        new: Cleared,
    ) -> Result<Applied<Rejection>, baton_store::Error> {
        Ok(
            match self
                .store
                .set_cleared(self.tenant, self.run, current, new)
                .await?
            {
                SetCleared::Set(_) => Applied::Done(None),
                SetCleared::Rejected(why @ Rejection::InvalidClear { .. }) => Applied::Invalid(why),
                SetCleared::Rejected(why) => Applied::Conflict(why),
            },
        )
    }

    fn inactive(&self, status: RunStatus) -> Rejection {
        Rejection::RunNotActive { status }
    }
}
