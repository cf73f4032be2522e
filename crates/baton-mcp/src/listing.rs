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

use baton_core::{Run, Seq, TenantId, Timestamp};
use baton_store::{Store, UsageQuery};

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
    let mut projects = std::collections::HashMap::new();
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
        let last_active = last_active(store, tenant, &run).await?;
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
