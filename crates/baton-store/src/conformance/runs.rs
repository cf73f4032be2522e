//! Runs listed for people and runs deleted whole (issue 17, items 1 and 6): the listing's
//! fields, filters, sorts and cursor; a deletion that leaves no row of the run in any table,
//! leaves every other run as it was, and is the only way history rows go.

use std::collections::BTreeMap;

use baton_core::usage::{Usage, UsageRecord};
use baton_core::{ClaimKind, Role, RunId, Seq, TenantId, Timestamp};

use super::{Harness, claim, installed, query, text, tool_call, tool_result};
use crate::usage::ImportUsage;
use crate::{
    Candidate, Error, Imported, NewEntry, NewImport, NewRun, Origin, Reimport, RunQuery, RunSort,
    Store,
};

/// A Claude Code session `key` in `project`, active from `first` to `last`, whose messages
/// carry `word` (to find them in the search index), with one priced response of `output`
/// tokens per assistant message.
fn session(key: &str, project: &str, (first, last): (&str, &str), word: &str) -> NewImport {
    let entries = vec![
        text(Role::User, &format!("fix the {word} parser\nand more")),
        tool_call(&format!("{key}-call")),
        tool_result(&format!("{key}-call")),
        text(Role::Assistant, &format!("the {word} parser is fixed")),
    ];
    let origin = Origin {
        source_key: key.into(),
        path: format!("/logs/{key}.jsonl"),
        format: "claude-code".into(),
        source_session_id: Some(key.into()),
        models: vec!["claude-sonnet-4-5".into()],
        first_at: Some(first.into()),
        last_at: Some(last.into()),
        project: Some(project.into()),
        title: Some(format!("fix the {word} parser")),
        ..Origin::default()
    };
    let mut import = NewImport::new(None, origin, entries, vec![]);
    let record = |i: usize, output: u64| UsageRecord {
        id: format!("{key}-r{i}"),
        model: Some("claude-sonnet-4-5".into()),
        response_id: Some(format!("{key}-r{i}")),
        request_id: None,
        at: Timestamp::parse(first),
        usage: Usage {
            input: 1_000_000,
            output,
            ..Usage::default()
        },
        estimated: false,
    };
    import.usage = ImportUsage {
        session: key.into(),
        project: Some(project.into()),
        agent: "claude-code".into(),
        records: vec![(record(1, 0), Some(1)), (record(3, 0), Some(3))],
    };
    import
}

async fn import(store: &dyn Store, t: &TenantId, import: NewImport) -> RunId {
    match store
        .import(t, vec![import], Reimport::No)
        .await
        .unwrap()
        .remove(0)
    {
        Imported::Created(run) => run.id,
        other => panic!("expected a new run, got {other:?}"),
    }
}

fn ids(page: &crate::RunPage) -> Vec<&str> {
    page.runs.iter().map(|r| r.run.id.as_str()).collect()
}

pub async fn runs_are_listed_with_project_title_activity_and_cost(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::new("lister").unwrap();
    // Nothing yet: an empty page, not an error.
    let page = store
        .list_run_summaries(&t, &RunQuery::default())
        .await
        .unwrap();
    assert_eq!(
        (page.runs.len(), page.total, page.next_cursor),
        (0, 0, None)
    );

    let old = import(
        &*store,
        &t,
        session(
            "old",
            "/home/u/code/alpha",
            ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
            "yaml",
        ),
    )
    .await;
    let new = import(
        &*store,
        &t,
        session(
            "new",
            "/home/u/code/beta",
            ("2026-02-01T10:00:00Z", "2026-02-03T09:30:00Z"),
            "toml",
        ),
    )
    .await;
    let mut child = session(
        "new/agent-1",
        "/home/u/code/beta",
        ("2026-02-01T10:05:00Z", "2026-02-01T10:06:00Z"),
        "json",
    );
    child.origin.parent_key = Some("new".into());
    child.usage.records.clear();
    let child = import(&*store, &t, child).await;
    let native = store
        .create_run(
            &t,
            &NewRun {
                goal: Some("write the release notes".into()),
                ..NewRun::default()
            },
        )
        .await
        .unwrap();
    store
        .append(&t, &native.id, &[text(Role::User, "go")])
        .await
        .unwrap();
    drop(store);

    let store = h.open().await;
    let all = store
        .list_run_summaries(&t, &RunQuery::default())
        .await
        .unwrap();
    // By creation, oldest first, every run, on one page.
    assert_eq!(
        ids(&all),
        [
            old.as_str(),
            new.as_str(),
            child.as_str(),
            native.id.as_str()
        ]
    );
    assert_eq!((all.total, all.next_cursor.as_deref()), (4, None));
    let s = &all.runs[1];
    assert_eq!(s.agent.as_deref(), Some("claude-code"));
    assert_eq!(s.project.as_deref(), Some("/home/u/code/beta"));
    assert_eq!(s.title.as_deref(), Some("fix the toml parser"));
    assert_eq!(s.models, ["claude-sonnet-4-5"]);
    assert_eq!(s.first_activity, Timestamp::parse("2026-02-01T10:00:00Z"));
    assert_eq!(s.last_activity, Timestamp::parse("2026-02-03T09:30:00Z"));
    assert_eq!(
        (s.messages, s.subagents, s.parent_run.as_ref()),
        (4, 1, None)
    );
    let tokens: u64 = session(
        "x",
        "p",
        ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"),
        "toml",
    )
    .entries()
    .iter()
    .map(|e| u64::from(e.tokens))
    .sum();
    assert_eq!(s.tokens, tokens);
    // Two responses of a million input tokens each, at $3 per million.
    assert_eq!(s.usage.input, 2_000_000);
    assert!(!s.usage_estimated);
    assert!((s.cost.unwrap() - 6.0).abs() < 1e-9, "{:?}", s.cost);
    let c = &all.runs[2];
    assert_eq!((c.parent_run.as_ref(), c.cost), (Some(&new), None));
    // A native run: its goal is its title, its activity when its messages were stored.
    let n = &all.runs[3];
    assert_eq!((n.agent.as_deref(), n.project.as_deref()), (None, None));
    assert_eq!(n.title.as_deref(), Some("write the release notes"));
    assert!(n.last_activity.unwrap() >= native.created_at);
    assert_eq!(n.messages, 1);

    // Most recent activity first.
    let q = |sort, limit| RunQuery {
        sort,
        limit,
        ..RunQuery::default()
    };
    let last = store
        .list_run_summaries(&t, &q(RunSort::Last, None))
        .await
        .unwrap();
    assert_eq!(
        ids(&last),
        [
            native.id.as_str(),
            new.as_str(),
            child.as_str(),
            old.as_str()
        ]
    );
    let cost = store
        .list_run_summaries(&t, &q(RunSort::Cost, None))
        .await
        .unwrap();
    assert_eq!(&ids(&cost)[..2], [new.as_str(), old.as_str()]);

    // Filters: a project by path or by its last component; activity since a time.
    for project in ["/home/u/code/beta", "beta", "beta/"] {
        let page = store
            .list_run_summaries(
                &t,
                &RunQuery {
                    project: Some(project.into()),
                    ..RunQuery::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(ids(&page), [new.as_str(), child.as_str()], "{project}");
    }
    let since = store
        .list_run_summaries(
            &t,
            &RunQuery {
                since: Timestamp::parse("2026-02-01T10:30:00Z"),
                sort: RunSort::Last,
                ..RunQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(&since), [native.id.as_str(), new.as_str()]);

    // Pages of one by cursor: every run once, in order, then no cursor.
    for sort in RunSort::ALL {
        let whole = store.list_run_summaries(&t, &q(sort, None)).await.unwrap();
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = store
                .list_run_summaries(
                    &t,
                    &RunQuery {
                        cursor: cursor.clone(),
                        ..q(sort, Some(1))
                    },
                )
                .await
                .unwrap();
            assert_eq!(page.total, 4);
            paged.extend(page.runs.iter().map(|r| r.run.id.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        let whole: Vec<RunId> = whole.runs.into_iter().map(|r| r.run.id).collect();
        assert_eq!(paged, whole, "{}", sort.name());
    }

    // Bad queries are refused with what was wrong.
    let page = store
        .list_run_summaries(&t, &q(RunSort::Last, Some(2)))
        .await
        .unwrap();
    let next = page.next_cursor.unwrap();
    for (bad, wanted) in [
        (
            RunQuery {
                cursor: Some(next),
                ..q(RunSort::Cost, Some(2))
            },
            "sorted by last",
        ),
        (
            RunQuery {
                cursor: Some("r1zz".into()),
                ..q(RunSort::Last, Some(2))
            },
            "not a cursor",
        ),
        (q(RunSort::Last, Some(0)), "limit"),
    ] {
        let err = store.list_run_summaries(&t, &bad).await.unwrap_err();
        assert!(
            matches!(&err, Error::InvalidQuery { .. }) && err.to_string().contains(wanted),
            "{err}"
        );
    }
    // Another tenant sees none of them.
    let other = store
        .list_run_summaries(
            &TenantId::new("someone-else").unwrap(),
            &RunQuery::default(),
        )
        .await
        .unwrap();
    assert_eq!(other.total, 0);
}

/// A run with a row in every table that holds a run's rows: history, its search index, a
/// pin, a constraint, a started tool, two summary versions (one active), its origin, source
/// compactions and usage records; a subagent run with its own.
async fn full_run(store: &dyn Store, t: &TenantId, key: &str, word: &str) -> (RunId, RunId) {
    let mut parent = session(
        key,
        "/p",
        ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
        word,
    );
    let usage = parent.usage.clone();
    parent = NewImport::new(
        None,
        parent.origin.clone(),
        parent.entries().to_vec(),
        vec![crate::SourceCompaction {
            after: 2,
            summary: Some(format!("compacted {word}")),
            at: None,
        }],
    );
    parent.usage = usage;
    let run = import(store, t, parent).await;
    let mut child = session(
        &format!("{key}/agent"),
        "/p",
        ("2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"),
        word,
    );
    child.origin.parent_key = Some(key.into());
    let child = import(store, t, child).await;
    for r in [&run, &child] {
        assert!(store.pin(t, r, Seq(1)).await.unwrap());
        let constraint = NewEntry::estimated(baton_core::Message::text(
            Role::User,
            format!("read-only {word}"),
        ));
        store
            .add_constraint(t, r, &constraint, "read-only", true)
            .await
            .unwrap();
        assert!(store.start_tool(t, r, "tool-1").await.unwrap());
        let first = installed(
            store
                .install_summary(
                    t,
                    r,
                    &Candidate {
                        base: None,
                        cut: Seq(3),
                        claims: vec![claim(ClaimKind::Goal, "fix it", 1)],
                        meta: None,
                    },
                )
                .await
                .unwrap(),
        );
        installed(
            store
                .install_summary(
                    t,
                    r,
                    &Candidate {
                        base: Some(first),
                        cut: Seq(4),
                        claims: vec![claim(ClaimKind::Goal, "fix it", 1)],
                        meta: None,
                    },
                )
                .await
                .unwrap(),
        );
        let found = store.search(t, r, &query(word, None, 10)).await.unwrap();
        assert!(!found.entries.is_empty());
    }
    (run, child)
}

pub async fn a_deleted_run_leaves_no_row_and_other_runs_untouched(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let (keep, keep_child) = full_run(&*store, &t, "kept", "kiwi").await;
    // Another tenant's run of the same id must not be reachable.
    let stranger = TenantId::new("stranger").unwrap();
    let before: BTreeMap<String, u64> = h.table_rows().await;
    let keep_context = store.context(&t, &keep).await.unwrap();
    let keep_report = store.run_report(&t, &keep).await.unwrap();
    let keep_found = store
        .search(&t, &keep_child, &query("kiwi", None, 10))
        .await
        .unwrap();
    let (gone, gone_child) = full_run(&*store, &t, "gone", "mango").await;
    assert!(h.indexed("mango").await > 0);
    let grown = h.table_rows().await;
    for table in [
        "history",
        "history_search",
        "summaries",
        "usage_records",
        "run_origins",
    ] {
        assert!(grown[table] > before[table], "{table}: {grown:?}");
    }

    let err = store.delete_run(&stranger, &gone).await.unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
    let err = store
        .delete_run(&t, &RunId::new("no-such-run").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
    assert_eq!(
        h.table_rows().await,
        grown,
        "a refused deletion removes nothing"
    );

    let deleted = store.delete_run(&t, &gone).await.unwrap();
    assert_eq!(deleted.run, gone);
    assert_eq!(deleted.subagents, std::slice::from_ref(&gone_child));
    // 4 messages and a constraint's message, in each of the two runs.
    assert_eq!(deleted.messages, 10);
    drop(store);

    let store = h.open().await;
    let mut after = h.table_rows().await;
    assert_eq!(
        after.insert("deleted_sources".into(), before["deleted_sources"]),
        Some(before["deleted_sources"] + 2),
        "the two deleted runs' sources are kept as deleted"
    );
    assert_eq!(
        after, before,
        "every other table holds what it held before the deleted runs were made"
    );
    assert_eq!(
        h.indexed("mango").await,
        0,
        "the deleted run's words left the index"
    );
    assert!(h.indexed("kiwi").await > 0);
    for run in [&gone, &gone_child] {
        let err = store.run(&t, run).await.unwrap_err();
        assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
        let err = store.delete_run(&t, run).await.unwrap_err();
        assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
    }
    assert_eq!(store.context(&t, &keep).await.unwrap(), keep_context);
    assert_eq!(store.run_report(&t, &keep).await.unwrap(), keep_report);
    assert_eq!(
        store
            .search(&t, &keep_child, &query("kiwi", None, 10))
            .await
            .unwrap(),
        keep_found
    );
    let listed = store
        .list_run_summaries(&t, &RunQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 2);
}

/// A deleted run's source stays deleted: importing it again, grown or not, with or without
/// `AppendNew`, stores nothing and says which run was deleted; its subagent likewise; another
/// tenant's import of the same source is its own; `Restore` imports it as a new run.
pub async fn a_deleted_runs_source_stays_deleted_until_restored(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let (gone, gone_child) = full_run(&*store, &t, "gone", "mango").await;
    let deleted = store.delete_run(&t, &gone).await.unwrap();
    assert_eq!(deleted.subagents, std::slice::from_ref(&gone_child));
    let emptied = h.table_rows().await;
    assert_eq!(emptied["deleted_sources"], 2);

    let parent = || {
        session(
            "gone",
            "/p",
            ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
            "mango",
        )
    };
    let mut grown = parent();
    let mut entries = grown.entries().to_vec();
    entries.push(NewEntry::estimated(baton_core::Message::text(
        Role::User,
        "and one more thing",
    )));
    grown = NewImport::new(None, grown.origin.clone(), entries, vec![]);
    let mut child = session(
        "gone/agent",
        "/p",
        ("2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"),
        "mango",
    );
    child.origin.parent_key = Some("gone".into());
    for reimport in [Reimport::No, Reimport::AppendNew] {
        for (import, was) in [
            (parent(), &gone),
            (grown.clone(), &gone),
            (child.clone(), &gone_child),
        ] {
            let outcome = store.import(&t, vec![import], reimport).await.unwrap();
            match outcome.as_slice() {
                [Imported::Deleted { run, at }] => {
                    assert_eq!(run, was);
                    assert!(at.0 > 0);
                }
                other => {
                    panic!("{reimport:?}: expected the source reported deleted, got {other:?}")
                }
            }
        }
    }
    assert_eq!(
        h.table_rows().await,
        emptied,
        "nothing of a deleted source is stored"
    );
    let listed = store
        .list_run_summaries(&t, &RunQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.total, 0);

    // Another tenant's source of the same key was never deleted.
    let stranger = TenantId::new("stranger").unwrap();
    import(&*store, &stranger, parent()).await;

    // Restored: a new run, and the source is an ordinary one again.
    let outcome = store
        .import(&t, vec![grown.clone()], Reimport::Restore)
        .await
        .unwrap();
    let [Imported::Created(again)] = outcome.as_slice() else {
        panic!("expected a new run, got {outcome:?}");
    };
    assert_ne!(again.id, gone);
    assert_eq!(again.last_seq, Seq(5));
    assert_eq!(
        h.table_rows().await["deleted_sources"],
        1,
        "the child is still deleted"
    );
    let outcome = store.import(&t, vec![grown], Reimport::No).await.unwrap();
    assert!(
        matches!(outcome.as_slice(), [Imported::UpToDate(run)] if run.id == again.id),
        "{outcome:?}"
    );
}

pub async fn history_stays_append_only_outside_a_deletion(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let (run, _) = full_run(&*store, &t, "s", "plum").await;
    let before = h.table_rows().await;
    for sql in [
        "DELETE FROM history",
        "UPDATE history SET tokens = 0",
        "DELETE FROM history_search",
        "UPDATE history_search SET part = 7",
    ] {
        let err = h.execute(sql).await.unwrap_err();
        assert!(err.contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(h.table_rows().await, before);
    // Deleting a run opens the path for that run only, and closes it again.
    let other = import(
        &*store,
        &t,
        session(
            "other",
            "/p",
            ("2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
            "fig",
        ),
    )
    .await;
    store.delete_run(&t, &other).await.unwrap();
    let mut after = h.table_rows().await;
    // The deleted run's source is kept as deleted; every other table is as it was.
    let kept = after.insert("deleted_sources".into(), before["deleted_sources"]);
    assert_eq!(kept, Some(before["deleted_sources"] + 1));
    assert_eq!(after, before);
    let err = h.execute("DELETE FROM history").await.unwrap_err();
    assert!(err.contains("append-only"), "{err}");
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(5));
}
