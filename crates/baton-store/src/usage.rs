//! Token usage kept per model response, for usage and cost reports.
//!
//! An import carries its transcript's usage records ([`ImportUsage`]); the store keeps one row
//! per tenant and [`UsageRecord::id`], the larger copy when the same response comes again (a
//! streamed response's later rows, a continued session's copy of old responses in its new
//! file, a live file imported again), so a report counts each response once whatever files,
//! and in whatever order, it was read from. A record is kept once the message it belongs to is
//! stored ([`ImportUsage::kept`]): a source that grew but was not extended adds none of its
//! new responses. A response still streaming in a live file, past the messages the import
//! stores, is counted at once with the run that holds the rest (as ccusage counts it), and
//! its larger finished copy replaces it later.
//!
//! [`UsageStore::usage`] reads them back with the session, project and agent each belongs to,
//! which is what `baton report usage` groups by.

use async_trait::async_trait;
use baton_core::usage::UsageRecord;
use baton_core::{RunId, TenantId};

use crate::Error;
use crate::backend::{Backend, ImportRows};
use crate::history::job;

/// The usage records of one transcript, and where they belong.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportUsage {
    /// The session the responses are counted under (a subagent's under its parent's).
    pub session: String,
    /// The project the session was made in, when the source says.
    pub project: Option<String>,
    /// The agent that made it (`claude-code`, `codex`, …).
    pub agent: String,
    /// Each response's record, with the index of the transcript message holding it (`None`
    /// for a response that is no message of the transcript, such as an abandoned branch).
    pub records: Vec<(UsageRecord, Option<usize>)>,
}

impl ImportUsage {
    /// The records to keep once the run holds the transcript's first `stored` messages: those
    /// of responses among them or off the transcript. `u64::MAX` keeps every record: the run
    /// holds all the import brought, and a response still streaming past it counts too.
    pub fn kept(&self, stored: u64) -> impl Iterator<Item = &UsageRecord> {
        self.records
            .iter()
            .filter(move |(_, m)| m.is_none_or(|m| (m as u64) < stored))
            .map(|(r, _)| r)
    }
}

/// One stored response's usage, with where it belongs.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredUsage {
    /// The run it was imported into (the first that brought it).
    pub run: RunId,
    /// The session it is counted under.
    pub session: String,
    /// The project, when known.
    pub project: Option<String>,
    /// The agent that made it.
    pub agent: String,
    /// The record.
    pub record: UsageRecord,
}

/// Which stored records [`UsageStore::usage`] returns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// Include baton's estimates for sources that record no usage.
    pub estimated: bool,
    /// Only records of this project.
    pub project: Option<String>,
}

/// Usage records, kept by [`crate::Store::import`] and read here.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// The tenant's usage records that `query` selects, in the order of their timestamps
    /// (records without one first), one per response.
    async fn usage(&self, tenant: &TenantId, query: &UsageQuery)
    -> Result<Vec<StoredUsage>, Error>;
}

/// One read: the records are written by imports only.
#[async_trait]
impl<B: Backend> UsageStore for B {
    async fn usage(
        &self,
        tenant: &TenantId,
        query: &UsageQuery,
    ) -> Result<Vec<StoredUsage>, Error> {
        let (tenant, query) = (tenant.clone(), query.clone());
        self.read_one(job!(|tx| { tx.usage(&tenant, &query).await }))
            .await
    }
}
