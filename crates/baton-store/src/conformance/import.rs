//! The import contract: a source becomes one run, found again by its source key; a grown
//! source is extended, never duplicated; a file is imported whole or not at all; subagents are
//! linked to their parent in either order; concurrent importers make one run.

use std::collections::BTreeSet;

use baton_core::units::ProtocolEvents;
use baton_core::usage::{Usage, UsageRecord};
use baton_core::{Message, Role, RunId, RunStatus, Seq, TenantId, Timestamp};

use super::{Harness, text, tool_call, tool_result};
use crate::usage::ImportUsage;
use crate::{
    Error, ImportRejection, Imported, NewEntry, NewImport, Origin, Reimport, RunCounts,
    SourceCompaction, Store, StoredUsage, UsageQuery,
};

fn origin(key: &str) -> Origin {
    Origin {
        source_key: key.into(),
        path: format!("/logs/{key}.jsonl"),
        format: "claude-code".into(),
        source_session_id: Some(key.into()),
        models: vec!["claude-opus-4-6".into()],
        first_at: Some("2026-01-01T10:00:00Z".into()),
        last_at: Some("2026-01-01T11:00:00Z".into()),
        redactions: 2,
        skipped_lines: 7,
        side_branches: 1,
        side_branch_messages: 3,
        ..Origin::default()
    }
}

/// A session: a question, a tool call and its result, an answer, then `extra` more turns.
fn session(extra: usize) -> Vec<NewEntry> {
    let mut entries = vec![
        text(Role::User, "read-only please: what does main do"),
        tool_call("call-1"),
        tool_result("call-1"),
        text(Role::Assistant, "it prints"),
    ];
    entries.extend((0..extra).map(|i| text(Role::User, &format!("turn {i}"))));
    entries
}

fn compaction(after: u64) -> SourceCompaction {
    SourceCompaction {
        after,
        summary: Some(format!("summary after {after}")),
        at: None,
    }
}

fn import_of(key: &str, entries: Vec<NewEntry>, compactions: Vec<SourceCompaction>) -> NewImport {
    NewImport::new(None, origin(key), entries, compactions)
}

async fn import_one(store: &dyn Store, t: &TenantId, import: NewImport, re: Reimport) -> Imported {
    let mut out = store.import(t, vec![import], re).await.unwrap();
    assert_eq!(out.len(), 1);
    out.remove(0)
}

fn created(outcome: Imported) -> RunId {
    match outcome {
        Imported::Created(run) => run.id,
        other => panic!("expected a new run, got {other:?}"),
    }
}

async fn messages(store: &dyn Store, t: &TenantId, run: &RunId) -> Vec<Message> {
    store
        .read_range(t, run, Seq(1), None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .collect()
}

pub async fn import_creates_a_run_with_its_origin(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let entries = session(1);
    let tokens: u64 = entries.iter().map(|e| u64::from(e.tokens)).sum();
    let expected: Vec<Message> = entries.iter().map(|e| e.message.clone()).collect();
    let mut import = import_of("s1", entries, vec![compaction(2)]);
    import.id = Some(RunId::new("imported-1").unwrap());
    let run = created(import_one(&*store, &t, import, Reimport::No).await);
    assert_eq!(run.as_str(), "imported-1");
    drop(store);

    let store = h.open().await;
    assert_eq!(messages(&*store, &t, &run).await, expected);
    let report = store.run_report(&t, &run).await.unwrap();
    assert_eq!(report.run.last_seq, Seq(5));
    assert_eq!(report.run.status, RunStatus::Active);
    let o = report.origin.expect("an imported run has an origin");
    assert_eq!(o.source_key, "s1");
    assert_eq!(o.path, "/logs/s1.jsonl");
    assert_eq!(o.format, "claude-code");
    assert_eq!(o.source_session_id.as_deref(), Some("s1"));
    assert_eq!(o.parent_run, None);
    assert_eq!(o.models, ["claude-opus-4-6"]);
    assert_eq!(o.first_at.as_deref(), Some("2026-01-01T10:00:00Z"));
    assert_eq!(o.last_at.as_deref(), Some("2026-01-01T11:00:00Z"));
    assert_eq!(
        (
            o.redactions,
            o.skipped_lines,
            o.side_branches,
            o.side_branch_messages
        ),
        (2, 7, 1, 3)
    );
    assert_eq!(o.source_messages, 5);
    assert_eq!(report.compactions.len(), 1);
    assert_eq!(report.compactions[0].after, Seq(2));
    assert_eq!(
        report.compactions[0].summary.as_deref(),
        Some("summary after 2")
    );
    let c = &report.counts;
    assert_eq!((c.messages, c.tool_calls), (5, 1));
    assert_eq!((c.orphan_tool_results, c.dangling_tool_calls), (0, 0));
    assert_eq!(c.tokens, tokens);
    let bytes: u64 = expected
        .iter()
        .map(|m| serde_json::to_string(m).unwrap().len() as u64)
        .sum();
    assert_eq!(c.bytes, bytes, "bytes are the stored JSON's");
    assert!(c.first_appended_at.is_some() && c.last_appended_at.is_some());
    // The imported run is an ordinary run: it takes appends and summaries.
    let seqs = store
        .append(&t, &run, &[text(Role::User, "more")])
        .await
        .unwrap();
    assert_eq!(seqs, [Seq(6)]);
}

/// How `baton import --history` tells an imported session from a deleted one: by its source
/// key, in the caller's tenant only, without importing anything.
pub async fn source_run_finds_an_imported_source_in_its_tenant(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let other = TenantId::new("other").unwrap();
    assert_eq!(store.source_run(&t, "claude-code:s9").await.unwrap(), None);
    let run = created(
        import_one(
            &*store,
            &t,
            import_of("claude-code:s9", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    assert_eq!(
        store.source_run(&t, "claude-code:s9").await.unwrap(),
        Some(run)
    );
    assert_eq!(
        store.source_run(&other, "claude-code:s9").await.unwrap(),
        None
    );
    assert_eq!(
        store.source_run(&t, "claude-code:s").await.unwrap(),
        None,
        "a key is matched whole"
    );
}

pub async fn reimport_finds_the_run_and_appends_only_what_is_new(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let first = import_of("grows", session(0), vec![compaction(2)]);
    let run = created(import_one(&*store, &t, first.clone(), Reimport::No).await);

    // The same source again: found, nothing written, with or without --reimport.
    for re in [Reimport::No, Reimport::AppendNew] {
        match import_one(&*store, &t, first.clone(), re).await {
            Imported::UpToDate(r) => assert_eq!((r.id.clone(), r.last_seq), (run.clone(), Seq(4))),
            other => panic!("expected up to date, got {other:?}"),
        }
    }
    // The source grew by two messages and one compaction.
    let grown = import_of("grows", session(2), vec![compaction(2), compaction(5)]);
    match import_one(&*store, &t, grown.clone(), Reimport::No).await {
        Imported::Grown { run: r, new } => {
            assert_eq!((r.id, r.last_seq, new), (run.clone(), Seq(4), 2))
        }
        other => panic!("expected grown, got {other:?}"),
    }
    assert_eq!(
        messages(&*store, &t, &run).await.len(),
        4,
        "reported, not appended"
    );
    match import_one(&*store, &t, grown.clone(), Reimport::AppendNew).await {
        Imported::Extended {
            run: r,
            from,
            appended,
        } => {
            assert_eq!(
                (r.id, r.last_seq, from, appended),
                (run.clone(), Seq(6), Seq(5), 2)
            );
        }
        other => panic!("expected extended, got {other:?}"),
    }
    drop(store);

    let store = h.open().await;
    let expected: Vec<Message> = session(2).into_iter().map(|e| e.message).collect();
    assert_eq!(
        messages(&*store, &t, &run).await,
        expected,
        "each message once, in order"
    );
    let report = store.run_report(&t, &run).await.unwrap();
    assert_eq!(report.origin.unwrap().source_messages, 6);
    let afters: Vec<_> = report.compactions.iter().map(|c| c.after).collect();
    assert_eq!(afters, [Seq(2), Seq(5)], "compaction events not duplicated");
    assert_eq!(store.list_runs(&t).await.unwrap().len(), 1);
    match import_one(&*store, &t, grown, Reimport::AppendNew).await {
        Imported::UpToDate(r) => assert_eq!(r.last_seq, Seq(6)),
        other => panic!("expected up to date, got {other:?}"),
    }
}

/// An import that continues after a prefix known by its digest (the gateway's capture)
/// appends what follows it, as a whole import would, and is refused, storing nothing, when the
/// store cannot check it: an unknown source, fewer messages stored than the prefix, another
/// prefix.
pub async fn an_import_continues_after_a_prefix_known_by_its_digest(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let whole = import_of("cont", session(3), vec![]);
    let after = |skipped: u64, digest, entries: &[NewEntry]| {
        NewImport::after(
            None,
            origin("cont"),
            (skipped, digest),
            entries.to_vec(),
            vec![],
        )
    };
    let all = whole.entries().to_vec();

    // No run yet: a continuation cannot make one.
    let err = store
        .import(
            &t,
            vec![after(2, whole.digest_after(2).unwrap(), &all[2..])],
            Reimport::AppendNew,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Import(ImportRejection::PrefixNotHeld {
                skipped: 2,
                stored: 0,
                ..
            })
        ),
        "{err}"
    );

    let first = import_of("cont", all[..4].to_vec(), vec![]);
    let run = created(import_one(&*store, &t, first, Reimport::No).await);
    assert_eq!(
        store.list_runs(&t).await.unwrap().len(),
        1,
        "the refused continuation made none"
    );
    // More stored than the prefix: only what the run lacks is appended.
    let continued = after(2, whole.digest_after(2).unwrap(), &all[2..5]);
    assert_eq!(continued.len(), 5);
    match import_one(&*store, &t, continued, Reimport::AppendNew).await {
        Imported::Extended { from, appended, .. } => assert_eq!((from, appended), (Seq(5), 1)),
        other => panic!("expected extended, got {other:?}"),
    }
    // Exactly the prefix stored.
    match import_one(
        &*store,
        &t,
        after(5, whole.digest_after(5).unwrap(), &all[5..]),
        Reimport::AppendNew,
    )
    .await
    {
        Imported::Extended { from, appended, .. } => assert_eq!((from, appended), (Seq(6), 2)),
        other => panic!("expected extended, got {other:?}"),
    }
    let expected: Vec<Message> = all.iter().map(|e| e.message.clone()).collect();
    assert_eq!(messages(&*store, &t, &run).await, expected);
    let report = store.run_report(&t, &run).await.unwrap();
    assert_eq!(report.origin.unwrap().source_messages, 7);
    // What is stored is what a whole import of the transcript stores: it is up to date.
    match import_one(&*store, &t, whole.clone(), Reimport::AppendNew).await {
        Imported::UpToDate(r) => assert_eq!(r.last_seq, Seq(7)),
        other => panic!("expected up to date, got {other:?}"),
    }

    // A prefix the store holds more than, with another digest, or longer than what is stored:
    // refused, nothing changed.
    let mut more = all.clone();
    more.push(text(Role::User, "one more"));
    let grown = import_of("cont", more.clone(), vec![]);
    let wrong = grown.digest_after(3).unwrap();
    for (continuation, what) in [
        (after(6, wrong, &more[6..]), "another prefix"),
        (
            after(8, grown.digest(), &[text(Role::User, "later")]),
            "a prefix longer than the run",
        ),
    ] {
        let err = store
            .import(&t, vec![continuation], Reimport::AppendNew)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Import(
                    ImportRejection::Diverged {
                        first: None,
                        stored: 7,
                        ..
                    } | ImportRejection::PrefixNotHeld {
                        skipped: 8,
                        stored: 7,
                        ..
                    }
                )
            ),
            "{what}: {err}"
        );
    }
    assert_eq!(
        messages(&*store, &t, &run).await,
        expected,
        "nothing changed"
    );
    assert_eq!(store.list_runs(&t).await.unwrap().len(), 1);
}

pub async fn an_edited_source_or_a_run_that_moved_on_is_not_extended(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = created(
        import_one(
            &*store,
            &t,
            import_of("e", session(1), vec![]),
            Reimport::No,
        )
        .await,
    );
    // Edited: the second message differs.
    let mut edited = session(3);
    edited[0] = text(Role::User, "a different question");
    let err = store
        .import(
            &t,
            vec![import_of("e", edited, vec![])],
            Reimport::AppendNew,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Import(ImportRejection::Diverged { index: 0, run: r, stored: 5, .. }) if *r == run),
        "{err}"
    );
    // The refusal names the first message that differs, with both sides (issue 17, item 1).
    let Error::Import(ImportRejection::Diverged {
        first: Some(first), ..
    }) = &err
    else {
        panic!("no difference named: {err}");
    };
    assert_eq!(first.seq, Seq(1), "{err}");
    assert_eq!(first.stored, "read-only please: what does main do");
    assert_eq!(first.incoming, "a different question");
    let shown = err.to_string();
    assert!(
        shown.contains("message 1 differs")
            && shown.contains("\"read-only please: what does main do\"")
            && shown.contains("\"a different question\""),
        "{shown}"
    );
    // Shorter than what was imported, and not its start: diverged too.
    let mut shorter = session(0);
    shorter[3] = text(Role::Assistant, "it exits");
    let err = store
        .import(&t, vec![import_of("e", shorter, vec![])], Reimport::No)
        .await
        .unwrap_err();
    let Error::Import(ImportRejection::Diverged {
        first: Some(first), ..
    }) = &err
    else {
        panic!("not a divergence naming its message: {err}");
    };
    assert_eq!(first.seq, Seq(4), "{err}");
    assert_eq!(first.incoming, "it exits", "{err}");
    // An older copy (the start of what was imported), with or without `--reimport`: up to
    // date, nothing written (issue 17).
    for reimport in [Reimport::No, Reimport::AppendNew] {
        match import_one(&*store, &t, import_of("e", session(0), vec![]), reimport).await {
            Imported::UpToDate(r) => assert_eq!((r.id.clone(), r.last_seq), (run.clone(), Seq(5))),
            other => panic!("expected up to date, got {other:?}"),
        }
    }
    let empty = import_of("e", Vec::new(), vec![]);
    assert!(matches!(
        import_one(&*store, &t, empty, Reimport::AppendNew).await,
        Imported::UpToDate(_)
    ));
    // Someone appended to the run: new source messages would not follow their predecessors.
    store
        .append(&t, &run, &[text(Role::User, "local")])
        .await
        .unwrap();
    let err = store
        .import(
            &t,
            vec![import_of("e", session(3), vec![])],
            Reimport::AppendNew,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Import(ImportRejection::RunMovedOn {
                last_seq: 6,
                stored: 5,
                ..
            })
        ),
        "{err}"
    );
    assert_eq!(
        store.run(&t, &run).await.unwrap().last_seq,
        Seq(6),
        "nothing appended"
    );
    // A cancelled run is not extended either.
    let other = created(
        import_one(
            &*store,
            &t,
            import_of("c", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    store.cancel_run(&t, &other).await.unwrap();
    let err = store
        .import(
            &t,
            vec![import_of("c", session(1), vec![])],
            Reimport::AppendNew,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RunNotActive { .. }), "{err}");
    assert_eq!(store.run(&t, &other).await.unwrap().last_seq, Seq(4));
}

pub async fn a_file_is_imported_whole_or_not_at_all(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::new("atomic").unwrap();
    let taken = created(
        import_one(
            &*store,
            &t,
            import_of("old", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    let mut bad = session(1);
    bad[1] = text(Role::User, "edited");
    // Transcript 0 is new, transcript 1 diverged: the whole file fails, transcript 0 included.
    let file = vec![
        import_of("fresh", session(0), vec![compaction(1)]),
        import_of("old", bad, vec![]),
    ];
    let err = store
        .import(&t, file, Reimport::AppendNew)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Import(ImportRejection::Diverged { index: 1, .. })
        ),
        "{err}"
    );
    // A run id that is taken fails the file the same way.
    let mut clash = import_of("fresh", session(0), vec![]);
    clash.id = Some(taken.clone());
    let err = store
        .import(
            &t,
            vec![import_of("fresh-2", session(0), vec![]), clash],
            Reimport::No,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RunExists { .. }), "{err}");
    drop(store);

    let store = h.open().await;
    let runs = store.list_runs(&t).await.unwrap();
    assert_eq!(runs.len(), 1, "only the earlier import's run: {runs:?}");
    assert_eq!(runs[0].id, taken);
    assert_eq!(runs[0].last_seq, Seq(4));
    // The failed file left no origin behind: importing it properly now creates its runs.
    let ok = store
        .import(
            &t,
            vec![
                import_of("fresh", session(0), vec![compaction(1)]),
                import_of("fresh-2", session(1), vec![]),
            ],
            Reimport::No,
        )
        .await
        .unwrap();
    assert!(
        ok.iter().all(|o| matches!(o, Imported::Created(_))),
        "{ok:?}"
    );
}

pub async fn subagents_link_to_their_parent_in_either_order(h: &dyn Harness) {
    let store = h.open().await;
    for (tenant, parent_first) in [("parent-first", true), ("child-first", false)] {
        let t = TenantId::new(tenant).unwrap();
        let parent = import_of("session-p", session(0), vec![]);
        let mut child = import_of("session-p/agent-a1", session(1), vec![]);
        child.origin.parent_key = Some("session-p".into());
        let (parent_run, child_run) = if parent_first {
            let p = created(import_one(&*store, &t, parent, Reimport::No).await);
            (
                p,
                created(import_one(&*store, &t, child, Reimport::No).await),
            )
        } else {
            let c = created(import_one(&*store, &t, child, Reimport::No).await);
            assert_eq!(
                store
                    .run_report(&t, &c)
                    .await
                    .unwrap()
                    .origin
                    .unwrap()
                    .parent_run,
                None
            );
            (
                created(import_one(&*store, &t, parent, Reimport::No).await),
                c,
            )
        };
        let report = store.run_report(&t, &child_run).await.unwrap();
        assert_eq!(
            report.origin.unwrap().parent_run,
            Some(parent_run.clone()),
            "{tenant}"
        );
        let report = store.run_report(&t, &parent_run).await.unwrap();
        assert_eq!(report.origin.unwrap().parent_run, None, "{tenant}");
    }
}

pub async fn imports_are_isolated_by_tenant(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (TenantId::new("a").unwrap(), TenantId::new("b").unwrap());
    let run_a = created(
        import_one(
            &*store,
            &a,
            import_of("same", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    // The same source for another tenant is a run of its own, not "already imported".
    let run_b = created(
        import_one(
            &*store,
            &b,
            import_of("same", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    assert_ne!(run_a, run_b);
    assert_eq!(store.list_runs(&a).await.unwrap().len(), 1);
    assert_eq!(store.list_runs(&b).await.unwrap().len(), 1);
    assert!(matches!(
        store.run_report(&b, &run_a).await,
        Err(Error::RunNotFound { .. })
    ));
}

pub async fn concurrent_imports_of_one_source_make_one_run(h: &dyn Harness) {
    let t = TenantId::default_tenant();
    let contenders = 8;
    let mut tasks = Vec::new();
    for _ in 0..contenders {
        let store = h.open().await;
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            let import = import_of("raced", session(20), vec![compaction(3)]);
            import_one(&*store, &t, import, Reimport::AppendNew).await
        }));
    }
    let mut created_runs = BTreeSet::new();
    let mut found = BTreeSet::new();
    for task in tasks {
        match task.await.unwrap() {
            Imported::Created(run) => assert!(created_runs.insert(run.id)),
            Imported::UpToDate(run) => {
                found.insert(run.id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        created_runs.len(),
        1,
        "exactly one importer creates the run"
    );
    assert!(found.is_subset(&created_runs), "the others find it");
    let store = h.open().await;
    let runs = store.list_runs(&t).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(messages(&*store, &t, &runs[0].id).await.len(), 24);
    let report = store.run_report(&t, &runs[0].id).await.unwrap();
    assert_eq!(report.compactions.len(), 1);
}

pub async fn run_report_counts_a_native_run(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = store
        .create_run(&t, &crate::NewRun::default())
        .await
        .unwrap()
        .id;
    let empty = store.run_report(&t, &run).await.unwrap();
    assert_eq!(empty.origin, None);
    assert_eq!(empty.counts, RunCounts::default());
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "go"),
                tool_result("ghost"), // orphan: its call is nowhere
                tool_call("a"),
                tool_result("a"),
                tool_call("b"), // dangling: no result yet
            ],
        )
        .await
        .unwrap();
    let report = store.run_report(&t, &run).await.unwrap();
    let c = report.counts;
    assert_eq!(
        (
            c.messages,
            c.tool_calls,
            c.orphan_tool_results,
            c.dangling_tool_calls
        ),
        (5, 2, 1, 1)
    );
    assert!(report.compactions.is_empty());
    let mut count = RunCounts::default();
    count.count_tools(&[ProtocolEvents {
        seq: Seq(1),
        uses: vec!["x".into(), "y".into()],
        results: vec![],
    }]);
    assert_eq!((count.tool_calls, count.dangling_tool_calls), (2, 2));
    assert!(matches!(
        store.run_report(&t, &RunId::new("nope").unwrap()).await,
        Err(Error::RunNotFound { .. })
    ));
}

pub async fn a_last_message_read_mid_stream_is_named_as_such(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = created(
        import_one(
            &*store,
            &t,
            import_of("live", session(0), vec![]),
            Reimport::No,
        )
        .await,
    );
    // The last response went on after the import read it.
    let mut later = session(2);
    later[3] = text(Role::Assistant, "it prints, and then exits with 0");
    let err = store
        .import(
            &t,
            vec![import_of("live", later, vec![])],
            Reimport::AppendNew,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Import(ImportRejection::LastMessageChanged { stored: 4, run: r, .. }) if *r == run),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("was still being written when it was imported"),
        "{err}"
    );
    assert_eq!(
        store.run(&t, &run).await.unwrap().last_seq,
        Seq(4),
        "nothing appended"
    );
}

/// A usage record of response `id` with `output` tokens, on message `message`.
fn usage_of(id: &str, output: u64, message: Option<usize>) -> (UsageRecord, Option<usize>) {
    (
        UsageRecord {
            id: id.into(),
            model: Some("claude-opus-4-6".into()),
            response_id: Some(id.into()),
            request_id: None,
            at: Timestamp::parse("2026-01-01T10:30:00Z"),
            usage: Usage {
                input: 3,
                output,
                cache_write_5m: 100,
                cache_write_1h: 50,
                cache_read: 1000,
            },
            estimated: false,
        },
        message,
    )
}

fn with_usage(
    mut import: NewImport,
    project: &str,
    records: Vec<(UsageRecord, Option<usize>)>,
) -> NewImport {
    import.usage = ImportUsage {
        session: import.origin.source_key.clone(),
        project: Some(project.into()),
        agent: "claude-code".into(),
        records,
    };
    import
}

fn outputs(rows: &[StoredUsage]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|u| (u.record.id.clone(), u.record.usage.output))
        .collect()
}

// issue 17: usage kept once per response, across files and imports.
pub async fn usage_is_kept_once_per_response_the_larger_copy(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let all = UsageQuery {
        estimated: true,
        project: None,
    };
    // Session a: responses r1 (message 1) and r2 (message 3, read mid-stream), r0 of no
    // message (an abandoned branch), and r9 still streaming past the four messages the
    // import holds (a live file's, counted at once).
    let a = with_usage(
        import_of("a", session(0), vec![]),
        "p1",
        vec![
            usage_of("r1", 10, Some(1)),
            usage_of("r2", 5, Some(3)),
            usage_of("r0", 7, None),
            usage_of("r9", 3, Some(4)),
        ],
    );
    let run_a = created(import_one(&*store, &t, a, Reimport::No).await);
    // Session b copies r2, whole this time, and adds r3 on a message it has beyond what
    // is stored... first without appending: r3 is not kept, r2's larger copy is.
    let b = || {
        with_usage(
            import_of("b", session(0), vec![]),
            "p2",
            vec![usage_of("r2", 40, Some(3)), usage_of("r3", 9, Some(4))],
        )
    };
    let mut first_b = b();
    first_b.usage.records.pop();
    let _ = created(import_one(&*store, &t, first_b, Reimport::No).await);
    // Grown by r3's message, with r8 streaming after it.
    let grown = with_usage(
        import_of("b", session(1), vec![]),
        "p2",
        vec![
            usage_of("r2", 40, Some(3)),
            usage_of("r3", 9, Some(4)),
            usage_of("r8", 4, Some(5)),
        ],
    );
    assert!(matches!(
        import_one(&*store, &t, grown.clone(), Reimport::No).await,
        Imported::Grown { .. }
    ));
    let rows = store.usage(&t, &all).await.unwrap();
    let mut got = outputs(&rows);
    got.sort();
    assert_eq!(
        got,
        [
            ("r0".into(), 7),
            ("r1".into(), 10),
            ("r2".into(), 40),
            ("r9".into(), 3)
        ],
        "the larger copy of r2; r3's message is not stored, so neither r3 nor r8 after it"
    );
    // r2 stays with the run that first brought it, and its session.
    let r2 = rows.iter().find(|u| u.record.id == "r2").unwrap();
    assert_eq!((&r2.run, r2.session.as_str()), (&run_a, "a"));
    assert_eq!(r2.record.usage.cache_write_1h, 50);
    // Extended: r3 is kept, and r8 streaming after it. The smaller copy of r2 again changes
    // nothing.
    assert!(matches!(
        import_one(&*store, &t, grown, Reimport::AppendNew).await,
        Imported::Extended { .. }
    ));
    let again = with_usage(
        import_of("a", session(0), vec![]),
        "p1",
        vec![usage_of("r2", 5, Some(3))],
    );
    assert!(matches!(
        import_one(&*store, &t, again, Reimport::AppendNew).await,
        Imported::UpToDate(_)
    ));
    let mut got = outputs(&store.usage(&t, &all).await.unwrap());
    got.sort();
    assert_eq!(
        got,
        [
            ("r0".into(), 7),
            ("r1".into(), 10),
            ("r2".into(), 40),
            ("r3".into(), 9),
            ("r8".into(), 4),
            ("r9".into(), 3)
        ]
    );
    // Filters: a project; estimates only when asked for.
    let p2 = UsageQuery {
        estimated: true,
        project: Some("p2".into()),
    };
    let mut in_p2 = outputs(&store.usage(&t, &p2).await.unwrap());
    in_p2.sort();
    assert_eq!(in_p2, [("r3".into(), 9), ("r8".into(), 4)]);
    let mut estimate = usage_of("e1", 11, Some(0));
    estimate.0.estimated = true;
    let c = with_usage(import_of("c", session(0), vec![]), "p1", vec![estimate]);
    let _ = created(import_one(&*store, &t, c, Reimport::No).await);
    let measured = UsageQuery::default();
    assert_eq!(store.usage(&t, &measured).await.unwrap().len(), 6);
    let rows = store.usage(&t, &all).await.unwrap();
    assert_eq!(rows.len(), 7);
    assert!(
        rows.iter()
            .any(|u| u.record.id == "e1" && u.record.estimated)
    );
    // Another tenant has none of it.
    let other = TenantId::new("other").unwrap();
    assert!(store.usage(&other, &all).await.unwrap().is_empty());
    // A file that fails keeps none of its usage.
    let mut bad = session(1);
    bad[1] = text(Role::User, "edited");
    let failing = vec![
        with_usage(
            import_of("d", session(0), vec![]),
            "p3",
            vec![usage_of("r4", 1, Some(1))],
        ),
        with_usage(
            import_of("a", bad, vec![]),
            "p1",
            vec![usage_of("r5", 1, Some(1))],
        ),
    ];
    assert!(
        store
            .import(&t, failing, Reimport::AppendNew)
            .await
            .is_err()
    );
    assert_eq!(store.usage(&t, &all).await.unwrap().len(), 7);
}

pub async fn a_sessions_file_replaces_its_untouched_stand_in_in_the_same_import(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    // Two sessions' prompts recovered from a history, then their files imported.
    let stand_in = |id: &str| {
        NewImport::new(
            None,
            Origin {
                format: "claude-code-history".into(),
                ..origin(&format!("claude-code-history:{id}"))
            },
            vec![text(Role::User, "read-only please: what does main do")],
            vec![],
        )
    };
    let kept = created(import_one(&*store, &t, stand_in("s2"), Reimport::No).await);
    let gone = created(import_one(&*store, &t, stand_in("s1"), Reimport::No).await);
    assert!(store.pin(&t, &kept, Seq(1)).await.unwrap(), "worked on");
    let file = |id: &str| {
        let mut import = import_of(&format!("claude-code:{id}"), session(0), vec![]);
        import.origin.replaces = Some(format!("claude-code-history:{id}"));
        import
    };
    let outcomes = store
        .import(&t, vec![file("s1"), file("s2")], Reimport::No)
        .await
        .unwrap();
    assert!(outcomes.iter().all(|o| matches!(o, Imported::Created(_))));
    assert_eq!(
        store
            .source_run(&t, "claude-code-history:s1")
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        store.run(&t, &gone).await,
        Err(Error::RunNotFound { .. })
    ));
    assert_eq!(
        store
            .source_run(&t, "claude-code-history:s2")
            .await
            .unwrap(),
        Some(kept.clone()),
        "a pinned stand-in is kept"
    );
    assert_eq!(messages(&*store, &t, &kept).await.len(), 1);
    // Importing the files again changes nothing.
    let again = store
        .import(&t, vec![file("s1"), file("s2")], Reimport::No)
        .await
        .unwrap();
    assert!(
        again.iter().all(|o| matches!(o, Imported::UpToDate(_))),
        "{again:?}"
    );
    assert_eq!(
        store
            .source_run(&t, "claude-code-history:s2")
            .await
            .unwrap(),
        Some(kept)
    );
}
