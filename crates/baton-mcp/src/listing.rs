//! The run listing the `runs` and `search` tools read: the seam between the MCP server and
//! whatever listing the store offers.
//!
//! # Design
//!
//! The store on `main` lists a tenant's runs whole (`Store::list_runs`) and knows a run's
//! project only through the usage records its imports kept. [`list`] builds the filtered
//! listing from those: `project` keeps the runs that have usage records of that project,
//! `since` the runs whose last activity (the source's last timestamp for an imported run, else
//! the last append, else its creation) is at or after it, newest activity first.
//! When the store gains a listing of its own with project, title and filters (issue 17's
//! paginated `GET /v1/runs`), only [`list`] changes: the tools call nothing else.
//!
//! A run's last activity costs one `run_report` to learn, so [`list`] would read one report
//! per run on every `search` or `runs` call. A [`Memo`], shared by every call a service
//! answers, keeps what it learned per run with the run's creation time and last seq: a run is
//! reread only when its history grew (or it was deleted and made again), so a repeated call
//! over an unchanged store costs the listing and the usage query, not one report per run.
//! An import that moves a source's clock without appending anything keeps the old time until
//! the run next grows; that moves only where the run sorts, never what any tool answers
//! about it.

use std::collections::HashMap;
use std::sync::Mutex;

use baton_core::{Run, Seq, TenantId, Timestamp};
use baton_store::{Store, UsageQuery};

/// The run a last activity was learned for: tenant and run id.
type MemoKey = (String, String);

/// Last activity already learned, shared by the calls of one service (see the module docs):
/// per run, the creation time and last seq it was learned at, and the time. One entry per
/// run, replaced when the run grows, so the memo stays as large as the tenant's run list.
#[derive(Debug, Default)]
pub struct Memo {
    known: Mutex<HashMap<MemoKey, (i64, u64, Timestamp)>>,
}

impl Memo {
    fn key(tenant: &TenantId, run: &Run) -> MemoKey {
        (tenant.as_str().to_owned(), run.id.as_str().to_owned())
    }

    /// The last activity learned for `run` as it is now: none if it grew (or was made again).
    fn get(&self, key: &MemoKey, run: &Run) -> Option<Timestamp> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .filter(|(created, seq, _)| *created == run.created_at.0 && *seq == run.last_seq.0)
            .map(|(_, _, at)| *at)
    }

    fn put(&self, key: MemoKey, run: &Run, at: Timestamp) {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, (run.created_at.0, run.last_seq.0, at));
    }
}

/// What the listing keeps.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only runs of this project (as the source agent named its working directory).
    pub project: Option<String>,
    /// Only runs active at or after this time.
    pub since: Option<Timestamp>,
    /// Only runs with at least one message.
    pub non_empty: bool,
}

/// One run of the listing.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The run.
    pub run: Run,
    /// When it was last active (see the module docs).
    pub last_active: Timestamp,
    /// The project, when the store knows it.
    pub project: Option<String>,
}

/// The tenant's runs that `filter` keeps, most recently active first. A tenant with nothing
/// stored has no runs.
pub async fn list(
    store: &dyn Store,
    memo: &Memo,
    tenant: &TenantId,
    filter: &Filter,
) -> Result<Vec<Listed>, baton_store::Error> {
    let runs = match store.list_runs(tenant).await {
        Err(baton_store::Error::UnknownTenant { .. }) => return Ok(Vec::new()),
        other => other?,
    };
    // The project of each run, from its usage records (the only place main keeps it).
    let usage = store
        .usage(
            tenant,
            &UsageQuery {
                estimated: true,
                project: filter.project.clone(),
            },
        )
        .await?;
    let mut projects = HashMap::new();
    for u in usage {
        if let Some(project) = u.project {
            projects.entry(u.run.to_string()).or_insert(project);
        }
    }
    let mut listed = Vec::new();
    for run in runs {
        if filter.non_empty && run.last_seq == Seq::ZERO {
            continue;
        }
        let project = projects.get(run.id.as_str()).cloned();
        if filter.project.is_some() && project.is_none() {
            continue;
        }
        let key = Memo::key(tenant, &run);
        let last_active = match memo.get(&key, &run) {
            Some(at) => at,
            None => {
                let at = last_active(store, tenant, &run).await?;
                memo.put(key, &run, at);
                at
            }
        };
        if filter.since.is_some_and(|since| last_active < since) {
            continue;
        }
        listed.push(Listed {
            run,
            last_active,
            project,
        });
    }
    listed.sort_by_key(|l| std::cmp::Reverse(l.last_active));
    Ok(listed)
}

/// When `run` was last active: its source's last timestamp, else its last append, else its
/// creation.
async fn last_active(
    store: &dyn Store,
    tenant: &TenantId,
    run: &Run,
) -> Result<Timestamp, baton_store::Error> {
    if run.last_seq == Seq::ZERO {
        return Ok(run.created_at);
    }
    let report = store.run_report(tenant, &run.id).await?;
    let source = report
        .origin
        .as_ref()
        .and_then(|o| o.last_at.as_deref())
        .and_then(parse_time);
    Ok(source
        .or(report.counts.last_appended_at)
        .unwrap_or(run.created_at))
}

/// An RFC 3339 time (`2026-02-01T10:00:00Z`) or a UTC day (`2026-02-01`).
pub fn parse_time(text: &str) -> Option<Timestamp> {
    if let Some(day) = Timestamp::from_day(text) {
        return Some(day);
    }
    let t = humantime::parse_rfc3339_weak(text).ok()?;
    let ms = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some(Timestamp(i64::try_from(ms).ok()?))
}
