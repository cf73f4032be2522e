//! The compaction contract: pins carried whole, the tail read as metadata, summary versions
//! activated (rolled back or forward) by compare-and-swap, the cleared-results setting moved
//! forward by compare-and-swap, and a version's meta kept as given.

use baton_core::{
    ClaimKind, Cleared, ContentBlock, EntryMeta, InvalidCandidate, Role, RunId, Seq, SummaryId,
    TenantId,
};

use super::{Harness, claim, installed, new_run, text, tool_call, tool_result};
use crate::{Candidate, Error, Install, Rejection, SetCleared, Store};

async fn seeded(store: &dyn Store, t: &TenantId, id: &str) -> RunId {
    let run = new_run(store, t, id).await;
    store
        .append(
            t,
            &run,
            &[
                text(Role::User, "Keep it read-only."),
                tool_call("c1"),
                tool_result("c1"),
                text(Role::Assistant, "main prints"),
                text(Role::User, "check the tests"),
                tool_call("c2"),
                tool_result("c2"),
                text(Role::Assistant, "they pass"),
            ],
        )
        .await
        .unwrap();
    run
}

async fn install_at(
    store: &dyn Store,
    t: &TenantId,
    run: &RunId,
    base: Option<SummaryId>,
    cut: u64,
) -> SummaryId {
    installed(
        store
            .install_summary(
                t,
                run,
                &Candidate {
                    base,
                    cut: Seq(cut),
                    claims: vec![claim(ClaimKind::Constraint, "read-only", 1)],
                    meta: Some(serde_json::json!({"strategy": "structured", "cut": cut})),
                },
            )
            .await
            .unwrap(),
    )
}

pub async fn pinned_messages_stay_in_the_context_whole(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "pinned").await;
    assert!(store.pin(&t, &run, Seq(1)).await.unwrap());
    assert!(
        !store.pin(&t, &run, Seq(1)).await.unwrap(),
        "pinned already"
    );
    assert!(store.pin(&t, &run, Seq(6)).await.unwrap());
    let err = store.pin(&t, &run, Seq(9)).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::SeqNotFound {
                seq: Seq(9),
                last: Seq(8),
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        store.pin(&t, &run, Seq(0)).await,
        Err(Error::SeqNotFound { .. })
    ));
    install_at(&*store, &t, &run, None, 4).await;
    drop(store);

    let store = h.open().await;
    assert_eq!(store.pins(&t, &run).await.unwrap(), [Seq(1), Seq(6)]);
    let ctx = store.context(&t, &run).await.unwrap();
    // Seq 1 is covered by the summary and pinned: carried whole. Seq 6 is in the tail anyway.
    let pinned: Vec<_> = ctx.pinned.iter().map(|e| e.seq).collect();
    assert_eq!(pinned, [Seq(1)]);
    let preamble = ctx.preamble().unwrap().plain_text();
    assert!(preamble.contains("Keep it read-only."), "{preamble}");
    assert_eq!(ctx.messages.first().map(|e| e.seq), Some(Seq(5)));
    // Another tenant sees no such run; unpinning takes it out.
    let other = TenantId::new("other-tenant").unwrap();
    assert!(store.pin(&other, &run, Seq(1)).await.is_err());
    assert!(store.unpin(&t, &run, Seq(1)).await.unwrap());
    assert!(!store.unpin(&t, &run, Seq(1)).await.unwrap());
    assert!(store.context(&t, &run).await.unwrap().pinned.is_empty());
    assert_eq!(store.pins(&t, &run).await.unwrap(), [Seq(6)]);
}

pub async fn context_meta_is_the_tail_without_bodies(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "meta").await;
    store.pin(&t, &run, Seq(2)).await.unwrap();
    let sid = install_at(&*store, &t, &run, None, 3).await;
    let meta = store.context_meta(&t, &run).await.unwrap();
    let entries = store.read_range(&t, &run, Seq(4), None).await.unwrap();
    let expected: Vec<EntryMeta> = entries.iter().map(EntryMeta::of).collect();
    assert_eq!(meta.tail, expected);
    assert_eq!(meta.summary.as_ref().map(|s| s.id), Some(sid));
    assert_eq!(meta.pins, [Seq(2)]);
    assert_eq!(
        meta.pinned.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [Seq(2)]
    );
    // The fixed part plus the tail is the whole assembled context.
    let ctx = store.context(&t, &run).await.unwrap();
    let tail: u64 = meta.tail.iter().map(|m| u64::from(m.tokens)).sum();
    assert_eq!(meta.fixed_tokens() + tail, ctx.tokens);
}

pub async fn versions_activate_backwards_and_forwards_by_compare_and_swap(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "versions").await;
    let v1 = install_at(&*store, &t, &run, None, 3).await;
    let v2 = install_at(&*store, &t, &run, Some(v1), 7).await;
    // Roll back to v1: the messages after 3 are the tail again.
    match store
        .activate_summary(&t, &run, v1, Some(v2))
        .await
        .unwrap()
    {
        Install::Installed(s) => assert_eq!((s.id, s.coverage), (v1, Seq(3))),
        Install::Rejected(why) => panic!("{why}"),
    }
    let ctx = store.context(&t, &run).await.unwrap();
    assert_eq!(ctx.messages.first().map(|e| e.seq), Some(Seq(4)));
    // A stale base writes nothing.
    let stale = store
        .activate_summary(&t, &run, v2, Some(v2))
        .await
        .unwrap();
    assert_eq!(
        stale,
        Install::Rejected(Rejection::StaleBase {
            expected: Some(v2),
            active: Some(v1)
        })
    );
    // Forward again, then a new version built on the rolled-forward one.
    assert!(matches!(
        store
            .activate_summary(&t, &run, v2, Some(v1))
            .await
            .unwrap(),
        Install::Installed(_)
    ));
    let v3 = install_at(&*store, &t, &run, Some(v2), 8).await;
    assert_eq!(
        store.run(&t, &run).await.unwrap().active_summary_id,
        Some(v3)
    );
    // Another run's version is not this run's.
    let other = seeded(&*store, &t, "other").await;
    let foreign = install_at(&*store, &t, &other, None, 3).await;
    assert_eq!(
        store
            .activate_summary(&t, &run, foreign, Some(v3))
            .await
            .unwrap(),
        Install::Rejected(Rejection::Invalid(InvalidCandidate::VersionNotInRun {
            id: foreign
        }))
    );
    // A cancelled run is not reactivated.
    store.cancel_run(&t, &run).await.unwrap();
    assert!(matches!(
        store
            .activate_summary(&t, &run, v1, Some(v3))
            .await
            .unwrap(),
        Install::Rejected(Rejection::RunNotActive { .. })
    ));
    drop(store);
    let store = h.open().await;
    assert_eq!(
        store.run(&t, &run).await.unwrap().active_summary_id,
        Some(v3)
    );
    let versions = store.summaries(&t, &run).await.unwrap();
    assert_eq!(versions.len(), 3, "activation adds no version");
}

pub async fn concurrent_activations_on_one_base_have_one_winner(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "race").await;
    let mut versions = Vec::new();
    let mut base = None;
    for cut in [1, 3, 4, 5, 7, 8] {
        let id = install_at(&*store, &t, &run, base, cut).await;
        versions.push(id);
        base = Some(id);
    }
    let active = base;
    let mut tasks = Vec::new();
    for id in versions.iter().take(5).copied() {
        let store = h.open().await;
        let (t, run) = (t.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            (
                id,
                store.activate_summary(&t, &run, id, active).await.unwrap(),
            )
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let (id, outcome) = task.await.unwrap();
        if matches!(outcome, Install::Installed(_)) {
            winners.push(id);
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(
        store.run(&t, &run).await.unwrap().active_summary_id,
        Some(winners[0])
    );
}

pub async fn cleared_results_move_forward_by_compare_and_swap(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "cleared").await;
    let first = Cleared {
        through: Seq(3),
        min_tokens: 1,
    };
    let set = |outcome: SetCleared| match outcome {
        SetCleared::Set(run) => run,
        SetCleared::Rejected(why) => panic!("{why}"),
    };
    let updated = set(store.set_cleared(&t, &run, None, first).await.unwrap());
    assert_eq!(updated.cleared, Some(first));
    // The tool result at seq 3 is a stub now; the one at 7 is whole; pairing intact.
    let ctx = store.context(&t, &run).await.unwrap();
    assert_eq!(ctx.cleared, [Seq(3)]);
    let ContentBlock::ToolResult { content, .. } = &ctx.messages[2].message.content[0] else {
        panic!("seq 3 is a tool result")
    };
    assert!(
        matches!(&content[0], ContentBlock::Text { text } if text.contains("recall seq 3")),
        "{content:?}"
    );
    assert!(ctx.problems.is_empty());
    // History keeps the original.
    let original = store
        .read_range(&t, &run, Seq(3), Some(Seq(3)))
        .await
        .unwrap();
    assert!(original[0].message.content[0] != ctx.messages[2].message.content[0]);

    let stale = store.set_cleared(&t, &run, None, first).await.unwrap();
    assert_eq!(
        stale,
        SetCleared::Rejected(Rejection::StaleCleared {
            expected: None,
            active: Some(first)
        })
    );
    let back = Cleared {
        through: Seq(2),
        min_tokens: 1,
    };
    assert!(matches!(
        store
            .set_cleared(&t, &run, Some(first), back)
            .await
            .unwrap(),
        SetCleared::Rejected(Rejection::InvalidClear { .. })
    ));
    let pickier = Cleared {
        through: Seq(7),
        min_tokens: 500,
    };
    assert!(matches!(
        store
            .set_cleared(&t, &run, Some(first), pickier)
            .await
            .unwrap(),
        SetCleared::Rejected(Rejection::InvalidClear { .. })
    ));
    let beyond = Cleared {
        through: Seq(99),
        min_tokens: 1,
    };
    assert!(matches!(
        store
            .set_cleared(&t, &run, Some(first), beyond)
            .await
            .unwrap(),
        SetCleared::Rejected(Rejection::InvalidClear { .. })
    ));
    let further = Cleared {
        through: Seq(7),
        min_tokens: 1,
    };
    set(store
        .set_cleared(&t, &run, Some(first), further)
        .await
        .unwrap());
    drop(store);
    let store = h.open().await;
    assert_eq!(store.run(&t, &run).await.unwrap().cleared, Some(further));
    assert_eq!(
        store.context(&t, &run).await.unwrap().cleared,
        [Seq(3), Seq(7)]
    );
    // A pinned tool result is never a stub.
    store.pin(&t, &run, Seq(7)).await.unwrap();
    assert_eq!(store.context(&t, &run).await.unwrap().cleared, [Seq(3)]);
}

pub async fn a_versions_meta_is_kept_as_given(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = seeded(&*store, &t, "meta-kept").await;
    let id = install_at(&*store, &t, &run, None, 4).await;
    let plain = installed(
        store
            .install_summary(
                &t,
                &run,
                &Candidate {
                    base: Some(id),
                    cut: Seq(5),
                    claims: vec![],
                    meta: None,
                },
            )
            .await
            .unwrap(),
    );
    drop(store);
    let store = h.open().await;
    let with = store.summary(&t, id).await.unwrap();
    assert_eq!(
        with.meta,
        Some(serde_json::json!({"strategy": "structured", "cut": 4}))
    );
    assert_eq!(store.summary(&t, plain).await.unwrap().meta, None);
}
