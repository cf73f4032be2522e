//! The conformance suite: the store contract, written once, run against every backend.
//!
//! A backend's integration tests implement [`Harness`] (how to open *the same* database again,
//! with fresh connections) and expand [`conformance_tests!`](crate::conformance_tests) with it.
//! Each test opens its own database, so they run in parallel. Reopening proves durability: what
//! a test checks after [`Harness::open`] was read back from storage, not from memory.
//!
//! These functions are test code that ships in the library so every backend crate can run it;
//! they panic on a broken contract, as tests do.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{
    Claim, ClaimKind, ContentBlock, InvalidCandidate, Message, Role, RunId, RunStatus, Seq,
    SummaryId, TenantId,
};

use crate::{
    Candidate, Error, Install, NewEntry, NewRun, Rejection, SearchKind, SearchQuery, Store,
};

mod agent;
mod cache;
mod compaction;
mod import;
mod keys;
mod ledger;
mod ledger_model;
mod runs;
mod text;
pub use agent::*;
pub use cache::*;
pub use compaction::*;
pub use import::*;
pub use keys::*;
pub use ledger::*;
pub use ledger_model::*;
pub use runs::*;
pub use text::*;

/// A backend under test: one database, opened as many times as a test asks.
#[async_trait]
pub trait Harness: Send + Sync {
    /// Opens the harness's database with fresh connections. Every call reaches the same data.
    async fn open(&self) -> Arc<dyn Store>;

    /// Overwrites every stored cache body behind the store's back (its checksum unchanged),
    /// as a bad disk or a stray write would: the store must notice.
    async fn corrupt_cache_bodies(&self);

    /// The number of rows of every table of baton's schema, by name, read behind the store's
    /// back (on SQLite, an FTS5 table is counted by its one-row-per-document shadow table;
    /// its other shadow tables, whose rows are index segments, are left out).
    async fn table_rows(&self) -> std::collections::BTreeMap<String, u64>;

    /// How many rows of the search index hold `word`, asked of the index itself (SQLite's
    /// FTS5 table, PostgreSQL's tsvectors), not of the store.
    async fn indexed(&self, word: &str) -> u64;

    /// Runs one SQL statement in baton's schema, behind the store's back; the rows it changed,
    /// or the database's error.
    async fn execute(&self, sql: &str) -> Result<u64, String>;
}

/// Expands to one `#[tokio::test]` per conformance test, each with a fresh harness from
/// `$make_harness` (an expression evaluated once per test).
#[macro_export]
macro_rules! conformance_tests {
    ($make_harness:expr) => {
        $crate::conformance_tests!(@each $make_harness;
            runs_lifecycle,
            run_ids_are_unique_per_tenant,
            tenants_are_isolated,
            append_assigns_gap_free_seqs_that_survive_reopen,
            append_to_a_cancelled_run_is_refused,
            read_range_is_inclusive_and_bounded,
            seed_scenario_stale_base_is_rejected,
            first_summary_needs_base_none,
            invalid_candidates_write_nothing,
            unsafe_cut_is_refused,
            install_on_cancelled_run_is_refused,
            concurrent_installs_on_one_base_have_one_winner,
            concurrent_appends_stay_gap_free,
            context_reads_summary_and_tail,
            context_flags_orphan_tool_results,
            search_finds_phrases_in_text_tool_use_and_tool_result,
            search_kind_filter_narrows,
            search_matches_whole_words_in_order_ignoring_case,
            search_results_are_in_seq_order_and_limited,
            search_is_isolated_by_run_and_tenant,
            search_across_finds_the_runs_a_phrase_matches_within_a_cap,
            search_recalls_messages_a_summary_covers,
            search_finds_phrases_deep_in_long_messages,
            invalid_search_queries_are_errors,
            prefix_search_matches_word_beginnings_and_is_suggested,
            search_on_a_long_run_returns_in_order,
            search_finds_messages_appended_after_a_search,
            concurrent_first_searches_index_each_message_once,
            import_creates_a_run_with_its_origin,
            reimport_finds_the_run_and_appends_only_what_is_new,
            an_import_continues_after_a_prefix_known_by_its_digest,
            an_edited_source_or_a_run_that_moved_on_is_not_extended,
            usage_is_kept_once_per_response_the_larger_copy,
            a_file_is_imported_whole_or_not_at_all,
            subagents_link_to_their_parent_in_either_order,
            a_sessions_file_replaces_its_untouched_stand_in_in_the_same_import,
            imports_are_isolated_by_tenant,
            source_run_finds_an_imported_source_in_its_tenant,
            concurrent_imports_of_one_source_make_one_run,
            run_report_counts_a_native_run,
            a_last_message_read_mid_stream_is_named_as_such,
            pinned_messages_stay_in_the_context_whole,
            context_meta_is_the_tail_without_bodies,
            versions_activate_backwards_and_forwards_by_compare_and_swap,
            concurrent_activations_on_one_base_have_one_winner,
            cleared_results_move_forward_by_compare_and_swap,
            a_versions_meta_is_kept_as_given,
            constraints_are_pinned_messages_the_executor_can_read,
            a_started_tool_call_is_claimed_once,
            cache_entries_are_served_until_they_expire_and_count_hits,
            the_cache_is_isolated_by_tenant_whatever_the_key,
            a_corrupt_entry_is_reported_removed_and_never_served,
            concurrent_claimers_have_one_leader,
            an_expired_lease_goes_to_one_claimer_with_a_higher_token,
            the_call_log_keeps_every_call_in_order_per_tenant,
            a_stale_holder_never_touches_a_later_flight,
            begin_creates_once_then_answers_from_the_record,
            an_expired_lease_is_taken_over_and_the_late_worker_fenced_out,
            failures_are_retried_only_when_retryable,
            concurrent_begins_and_takeovers_have_one_winner,
            expired_records_are_pruned_never_reused,
            the_attempts_log_keeps_every_end_its_time_payment_and_error,
            a_repeated_publish_by_the_publishing_fence_changes_nothing,
            the_ledger_keeps_its_invariants_over_random_interleavings,
            text_with_a_nul_is_refused_alike_everywhere,
            api_keys_authenticate_their_tenant_until_revoked,
            runs_are_listed_with_project_title_activity_and_cost,
            a_deleted_run_leaves_no_row_and_other_runs_untouched,
            a_deleted_runs_source_stays_deleted_until_restored,
            history_stays_append_only_outside_a_deletion
        );
    };
    (@each $make_harness:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let harness = $make_harness;
                $crate::conformance::$name(&harness).await;
            }
        )*
    };
}

fn tenant(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

fn run_id(name: &str) -> RunId {
    RunId::new(name).unwrap()
}

fn text(role: Role, s: &str) -> NewEntry {
    NewEntry::estimated(Message::text(role, s))
}

fn tool_call(id: &str) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "read_file".into(),
            input: serde_json::json!({"path": "src/main.rs"}),
        }],
    })
}

fn tool_result(id: &str) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text {
                text: "fn main() {}".into(),
            }],
            is_error: false,
        }],
    })
}

fn claim(kind: ClaimKind, text: &str, seq: u64) -> Claim {
    Claim::new(kind, text, Seq(seq))
}

async fn new_run(store: &dyn Store, t: &TenantId, id: &str) -> RunId {
    let new = NewRun {
        id: Some(run_id(id)),
        ..NewRun::default()
    };
    store.create_run(t, &new).await.unwrap().id
}

async fn install(store: &dyn Store, t: &TenantId, run: &RunId, c: Candidate) -> Install {
    store.install_summary(t, run, &c).await.unwrap()
}

fn installed(outcome: Install) -> SummaryId {
    match outcome {
        Install::Installed(s) => s.id,
        Install::Rejected(why) => panic!("expected an install, got: {why}"),
    }
}

fn invalid(outcome: Install) -> InvalidCandidate {
    match outcome {
        Install::Rejected(Rejection::Invalid(why)) => why,
        other => panic!("expected an invalid candidate, got {other:?}"),
    }
}

pub async fn runs_lifecycle(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let new = NewRun {
        id: None,
        goal: Some("diagnose the connection failure".into()),
        rules: Some("read-only".into()),
    };
    let run = store.create_run(&t, &new).await.unwrap();
    assert_eq!(run.status, RunStatus::Active);
    assert_eq!(run.tenant, t);
    assert_eq!(run.last_seq, Seq::ZERO);
    assert_eq!(run.active_summary_id, None);
    let second = new_run(&*store, &t, "second").await;
    drop(store);

    let store = h.open().await;
    let got = store.run(&t, &run.id).await.unwrap();
    assert_eq!(got.goal.as_deref(), Some("diagnose the connection failure"));
    assert_eq!(got.rules.as_deref(), Some("read-only"));
    let listed: Vec<_> = store
        .list_runs(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, vec![run.id.clone(), second]);

    let cancelled = store.cancel_run(&t, &run.id).await.unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    // Cancelling twice is a no-op.
    assert_eq!(
        store.cancel_run(&t, &run.id).await.unwrap().status,
        RunStatus::Cancelled
    );
    let err = store.run(&t, &run_id("nope")).await.unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
}

pub async fn run_ids_are_unique_per_tenant(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (tenant("a"), tenant("b"));
    new_run(&*store, &a, "r-1").await;
    let again = store
        .create_run(
            &a,
            &NewRun {
                id: Some(run_id("r-1")),
                ..NewRun::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(again, Error::RunExists { .. }), "{again}");
    // The same id in another tenant is another run.
    new_run(&*store, &b, "r-1").await;
    let g1 = store.create_run(&a, &NewRun::default()).await.unwrap().id;
    let g2 = store.create_run(&a, &NewRun::default()).await.unwrap().id;
    assert_ne!(g1, g2);
}

pub async fn tenants_are_isolated(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (tenant("a"), tenant("b"));
    let run = new_run(&*store, &a, "secret").await;
    store
        .append(&a, &run, &[text(Role::User, "a's data")])
        .await
        .unwrap();
    let sid = installed(
        install(
            &*store,
            &a,
            &run,
            Candidate {
                base: None,
                cut: Seq(1),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
    new_run(&*store, &b, "other").await;

    let not_found = |e: Error| matches!(e, Error::RunNotFound { .. });
    assert!(not_found(store.run(&b, &run).await.unwrap_err()));
    assert!(not_found(
        store.read_range(&b, &run, Seq(1), None).await.unwrap_err()
    ));
    assert!(not_found(
        store
            .append(&b, &run, &[text(Role::User, "x")])
            .await
            .unwrap_err()
    ));
    assert!(not_found(store.context(&b, &run).await.unwrap_err()));
    assert!(not_found(store.summaries(&b, &run).await.unwrap_err()));
    assert!(not_found(store.cancel_run(&b, &run).await.unwrap_err()));
    let c = Candidate {
        base: Some(sid),
        cut: Seq(1),
        claims: vec![],
        meta: None,
    };
    assert!(not_found(
        store.install_summary(&b, &run, &c).await.unwrap_err()
    ));
    assert!(matches!(
        store.summary(&b, sid).await.unwrap_err(),
        Error::SummaryNotFound { .. }
    ));
    assert!(
        store
            .list_runs(&b)
            .await
            .unwrap()
            .iter()
            .all(|r| r.id != run)
    );
    let unknown = store.list_runs(&tenant("nobody")).await.unwrap_err();
    assert!(matches!(unknown, Error::UnknownTenant { .. }), "{unknown}");
    // And a's data is untouched by b's attempts.
    assert_eq!(
        store
            .read_range(&a, &run, Seq(1), None)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.run(&a, &run).await.unwrap().status, RunStatus::Active);
}

pub async fn append_assigns_gap_free_seqs_that_survive_reopen(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    let first = store
        .append(
            &t,
            &run,
            &[text(Role::User, "one"), text(Role::Assistant, "two")],
        )
        .await
        .unwrap();
    assert_eq!(first, vec![Seq(1), Seq(2)]);
    assert_eq!(store.append(&t, &run, &[]).await.unwrap(), vec![]);
    let next = store
        .append(&t, &run, &[text(Role::User, "three")])
        .await
        .unwrap();
    assert_eq!(next, vec![Seq(3)]);
    drop(store);

    let store = h.open().await;
    let entries = store.read_range(&t, &run, Seq(1), None).await.unwrap();
    let seqs: Vec<_> = entries.iter().map(|e| e.seq.0).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(entries[1].message, Message::text(Role::Assistant, "two"));
    assert!(entries.iter().all(|e| e.tokens > 0));
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(3));
    // A second run numbers from 1 on its own.
    let other = new_run(&*store, &t, "r2").await;
    assert_eq!(
        store
            .append(&t, &other, &[text(Role::User, "x")])
            .await
            .unwrap(),
        vec![Seq(1)]
    );
}

pub async fn append_to_a_cancelled_run_is_refused(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    store
        .append(&t, &run, &[text(Role::User, "one")])
        .await
        .unwrap();
    store.cancel_run(&t, &run).await.unwrap();
    let err = store
        .append(&t, &run, &[text(Role::User, "two")])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::RunNotActive {
                status: RunStatus::Cancelled,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        store
            .read_range(&t, &run, Seq(1), None)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn read_range_is_inclusive_and_bounded(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    let batch: Vec<_> = (1..=10)
        .map(|i| text(Role::User, &format!("m{i}")))
        .collect();
    store.append(&t, &run, &batch).await.unwrap();
    let seqs = |v: Vec<baton_core::Entry>| v.into_iter().map(|e| e.seq.0).collect::<Vec<_>>();
    assert_eq!(
        seqs(
            store
                .read_range(&t, &run, Seq(3), Some(Seq(5)))
                .await
                .unwrap()
        ),
        [3, 4, 5]
    );
    assert_eq!(
        seqs(store.read_range(&t, &run, Seq(9), None).await.unwrap()),
        [9, 10]
    );
    assert!(
        store
            .read_range(&t, &run, Seq(11), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .read_range(&t, &run, Seq(5), Some(Seq(4)))
            .await
            .unwrap()
            .is_empty()
    );
    let window = store.protocol_window(&t, &run, Seq(8)).await.unwrap();
    assert_eq!(window.iter().map(|e| e.seq.0).collect::<Vec<_>>(), [9, 10]);
}

/// Seed 000, "Un caso completo": two summaries race on one base while message 5 arrives.
pub async fn seed_scenario_stale_base_is_rejected(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r-1").await;
    let originals = [
        "La ejecución es de solo lectura.",
        "Empieza la investigación de red.",
        "La API resuelve el nombre db.",
        "Falta comprobar el puerto configurado.",
    ];
    let batch: Vec<_> = originals.iter().map(|s| text(Role::User, s)).collect();
    store.append(&t, &run, &batch).await.unwrap();
    let initial = vec![claim(ClaimKind::Constraint, "Solo lectura", 1)];
    let base = installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(2),
                claims: initial.clone(),
                meta: None,
            },
        )
        .await,
    );

    let mut a = initial.clone();
    a.push(claim(ClaimKind::Verified, "El nombre db se resuelve", 3));
    let mut b = initial;
    b.push(claim(ClaimKind::NextStep, "Continuar diagnóstico DNS", 2));
    // Message 5 arrives while A and B are being prepared.
    store
        .append(
            &t,
            &run,
            &[text(Role::User, "El usuario pide revisar TLS.")],
        )
        .await
        .unwrap();
    let a_id = installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: Some(base),
                cut: Seq(4),
                claims: a,
                meta: None,
            },
        )
        .await,
    );
    match install(
        &*store,
        &t,
        &run,
        Candidate {
            base: Some(base),
            cut: Seq(3),
            claims: b,
            meta: None,
        },
    )
    .await
    {
        Install::Rejected(Rejection::StaleBase { expected, active }) => {
            assert_eq!(expected, Some(base));
            assert_eq!(active, Some(a_id));
        }
        other => panic!("B must be rejected as stale, got {other:?}"),
    }
    drop(store);

    let store = h.open().await;
    let ctx = store.context(&t, &run).await.unwrap();
    let summary = ctx.summary.as_ref().unwrap();
    assert_eq!(summary.id, a_id);
    assert_eq!(summary.coverage, Seq(4));
    assert!(
        summary
            .claims
            .iter()
            .any(|c| c.source_seq == Seq(1) && c.text == "Solo lectura")
    );
    assert_eq!(
        ctx.messages.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [Seq(5)]
    );
    assert_eq!(
        store
            .read_range(&t, &run, Seq(1), None)
            .await
            .unwrap()
            .len(),
        5
    );
    let versions = store.summaries(&t, &run).await.unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[1].previous_id, Some(base));
    assert_eq!(store.summary(&t, a_id).await.unwrap().coverage, Seq(4));
}

pub async fn first_summary_needs_base_none(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "a"),
                text(Role::User, "b"),
                text(Role::User, "c"),
            ],
        )
        .await
        .unwrap();
    let first = installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(1),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
    // Base "none" once the run has an active summary is stale, not invalid.
    match install(
        &*store,
        &t,
        &run,
        Candidate {
            base: None,
            cut: Seq(2),
            claims: vec![],
            meta: None,
        },
    )
    .await
    {
        Install::Rejected(Rejection::StaleBase {
            expected: None,
            active,
        }) => assert_eq!(active, Some(first)),
        other => panic!("expected stale base, got {other:?}"),
    }
    assert_eq!(store.summaries(&t, &run).await.unwrap().len(), 1);
}

pub async fn invalid_candidates_write_nothing(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    let other = new_run(&*store, &t, "other").await;
    let batch: Vec<_> = (1..=4)
        .map(|i| text(Role::User, &format!("m{i}")))
        .collect();
    store.append(&t, &run, &batch).await.unwrap();
    let long: Vec<_> = (1..=9)
        .map(|i| text(Role::User, &format!("o{i}")))
        .collect();
    store.append(&t, &other, &long).await.unwrap();
    let base = installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(2),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
    let other_base = installed(
        install(
            &*store,
            &t,
            &other,
            Candidate {
                base: None,
                cut: Seq(1),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );

    let ok = |seq| vec![claim(ClaimKind::Verified, "fine", seq)];
    type Case = (Candidate, fn(&InvalidCandidate) -> bool);
    let cases: Vec<Case> = vec![
        (
            Candidate {
                base: Some(base),
                cut: Seq(9),
                claims: ok(1),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::CutNotFound { .. }),
        ),
        (
            Candidate {
                base: Some(base),
                cut: Seq(2),
                claims: ok(1),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::CutNotBeyondBase { .. }),
        ),
        (
            Candidate {
                base: Some(base),
                cut: Seq(1),
                claims: ok(1),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::CutNotBeyondBase { .. }),
        ),
        (
            Candidate {
                base: Some(base),
                cut: Seq(3),
                claims: ok(4),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::SourceAfterCut { .. }),
        ),
        // seq 7 exists in the other run only.
        (
            Candidate {
                base: Some(base),
                cut: Seq(4),
                claims: ok(7),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::SourceNotFound { .. }),
        ),
        (
            Candidate {
                base: Some(base),
                cut: Seq(4),
                claims: ok(0),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::SourceNotFound { .. }),
        ),
        (
            Candidate {
                base: Some(other_base),
                cut: Seq(4),
                claims: ok(1),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::BaseNotInRun { .. }),
        ),
        (
            Candidate {
                base: Some(SummaryId(987_654)),
                cut: Seq(4),
                claims: ok(1),
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::BaseNotInRun { .. }),
        ),
        (
            Candidate {
                base: Some(base),
                cut: Seq(4),
                claims: vec![claim(ClaimKind::Note, " ", 1)],
                meta: None,
            },
            |e| matches!(e, InvalidCandidate::EmptyText { .. }),
        ),
    ];
    for (candidate, expected) in cases {
        let why = invalid(install(&*store, &t, &run, candidate.clone()).await);
        assert!(expected(&why), "{candidate:?}: unexpected rejection {why}");
    }
    drop(store);
    let store = h.open().await;
    assert_eq!(store.summaries(&t, &run).await.unwrap().len(), 1);
    assert_eq!(
        store.run(&t, &run).await.unwrap().active_summary_id,
        Some(base)
    );
    // A valid candidate still goes through afterwards.
    installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: Some(base),
                cut: Seq(4),
                claims: ok(1),
                meta: None,
            },
        )
        .await,
    );
}

pub async fn unsafe_cut_is_refused(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "read main"),
                tool_call("t1"),
                tool_result("t1"),
                text(Role::Assistant, "done"),
            ],
        )
        .await
        .unwrap();
    let why = invalid(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(2),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
    assert!(
        matches!(why, InvalidCandidate::UnsafeCut { cut: Seq(2), .. }),
        "{why}"
    );
    assert!(
        why.to_string()
            .contains("nearest safe cut at or before it is 1"),
        "{why}"
    );
    assert!(store.summaries(&t, &run).await.unwrap().is_empty());
    installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(3),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
}

pub async fn install_on_cancelled_run_is_refused(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "r").await;
    store
        .append(&t, &run, &[text(Role::User, "a")])
        .await
        .unwrap();
    store.cancel_run(&t, &run).await.unwrap();
    match install(
        &*store,
        &t,
        &run,
        Candidate {
            base: None,
            cut: Seq(1),
            claims: vec![],
            meta: None,
        },
    )
    .await
    {
        Install::Rejected(Rejection::RunNotActive {
            status: RunStatus::Cancelled,
        }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    let after = store.run(&t, &run).await.unwrap();
    assert_eq!(after.status, RunStatus::Cancelled);
    assert_eq!(after.active_summary_id, None);
}

pub async fn concurrent_installs_on_one_base_have_one_winner(h: &dyn Harness) {
    let t = TenantId::default_tenant();
    let store = h.open().await;
    let run = new_run(&*store, &t, "race").await;
    let batch: Vec<_> = (1..=40)
        .map(|i| text(Role::User, &format!("m{i}")))
        .collect();
    store.append(&t, &run, &batch).await.unwrap();
    let base = installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(1),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );

    let mut tasks = Vec::new();
    for i in 0..16u64 {
        // Each contender has its own connections.
        let store = h.open().await;
        let (t, run) = (t.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let c = Candidate {
                base: Some(base),
                cut: Seq(2 + i),
                claims: vec![claim(ClaimKind::Note, "contender", 1 + i)],
                meta: None,
            };
            store.install_summary(&t, &run, &c).await.unwrap()
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Install::Installed(s) => winners.push(s.id),
            Install::Rejected(Rejection::StaleBase { expected, .. }) => {
                assert_eq!(expected, Some(base))
            }
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one install wins");
    let store = h.open().await;
    assert_eq!(
        store.run(&t, &run).await.unwrap().active_summary_id,
        Some(winners[0])
    );
    assert_eq!(
        store.summaries(&t, &run).await.unwrap().len(),
        2,
        "losers leave no rows"
    );
    assert_eq!(
        store
            .read_range(&t, &run, Seq(1), None)
            .await
            .unwrap()
            .len(),
        40
    );
}

pub async fn concurrent_appends_stay_gap_free(h: &dyn Harness) {
    let t = TenantId::default_tenant();
    let store = h.open().await;
    let run = new_run(&*store, &t, "busy").await;
    let (writers, batches) = (8, 10);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let store = h.open().await;
        let (t, run) = (t.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for b in 0..batches {
                let batch = vec![
                    text(Role::User, &format!("w{w}b{b}m0")),
                    text(Role::User, &format!("w{w}b{b}m1")),
                ];
                let seqs = store.append(&t, &run, &batch).await.unwrap();
                assert_eq!(seqs[1].0, seqs[0].0 + 1, "a batch is contiguous");
                got.extend(seqs);
            }
            got
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        for seq in task.await.unwrap() {
            assert!(all.insert(seq), "seq {seq} assigned twice");
        }
    }
    let n = (writers * batches * 2) as u64;
    assert_eq!(all, (1..=n).map(Seq).collect::<BTreeSet<_>>());
    let entries = h
        .open()
        .await
        .read_range(&t, &run, Seq(1), None)
        .await
        .unwrap();
    let texts: BTreeSet<_> = entries.iter().map(|e| e.message.plain_text()).collect();
    assert_eq!(texts.len() as u64, n, "every message stored exactly once");
}

pub async fn context_reads_summary_and_tail(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let new = NewRun {
        id: Some(run_id("ctx")),
        goal: Some("ship it".into()),
        rules: Some("be brief".into()),
    };
    let run = store.create_run(&t, &new).await.unwrap().id;
    let batch: Vec<_> = (1..=6)
        .map(|i| text(Role::User, &format!("m{i}")))
        .collect();
    store.append(&t, &run, &batch).await.unwrap();
    let plain = store.context(&t, &run).await.unwrap();
    assert!(plain.summary.is_none());
    assert_eq!(plain.messages.len(), 6);
    let sum: u64 = plain.messages.iter().map(|e| u64::from(e.tokens)).sum();
    assert!(plain.tokens > sum, "rules and goal are counted too");

    installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(4),
                claims: vec![claim(ClaimKind::Goal, "ship it", 1)],
                meta: None,
            },
        )
        .await,
    );
    let ctx = store.context(&t, &run).await.unwrap();
    assert_eq!(ctx.goal.as_deref(), Some("ship it"));
    assert_eq!(ctx.rules.as_deref(), Some("be brief"));
    assert_eq!(
        ctx.messages.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
        [5, 6]
    );
    assert!(ctx.tokens < plain.tokens + 50);
}

pub async fn context_flags_orphan_tool_results(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "orphan").await;
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "hi"),
                tool_result("ghost"),
                text(Role::Assistant, "ok"),
            ],
        )
        .await
        .unwrap();
    let ctx = store.context(&t, &run).await.unwrap();
    assert_eq!(ctx.messages.len(), 3, "history keeps what happened");
    assert!(matches!(
        &ctx.problems[..],
        [baton_core::units::Problem::OrphanResult { seq: Seq(2), .. }]
    ));
    // No cut may keep the orphan.
    let why = invalid(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(1),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
    assert!(matches!(why, InvalidCandidate::UnsafeCut { .. }), "{why}");
    installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(2),
                claims: vec![],
                meta: None,
            },
        )
        .await,
    );
}

fn query(pattern: &str, kind: Option<SearchKind>, limit: usize) -> SearchQuery {
    SearchQuery {
        pattern: pattern.into(),
        kind,
        limit,
    }
}

/// The seqs a search finds (at most 1,000).
pub async fn found(
    store: &dyn Store,
    t: &TenantId,
    run: &RunId,
    pattern: &str,
    kind: Option<SearchKind>,
) -> Vec<u64> {
    store
        .search(t, run, &query(pattern, kind, 1000))
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.seq.0)
        .collect()
}

fn grep_call(id: &str, pattern: &str) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "grep_files".into(),
            input: serde_json::json!({"pattern": pattern, "paths": ["src/net/resolver.rs"]}),
        }],
    })
}

fn result_text(id: &str, text: &str) -> NewEntry {
    NewEntry::estimated(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text { text: text.into() }],
            is_error: false,
        }],
    })
}

/// A run touching every kind: 1 text, 2 tool call, 3 its result, 4 thinking + text.
async fn searchable_run(store: &dyn Store, t: &TenantId, id: &str) -> RunId {
    let run = new_run(store, t, id).await;
    store
        .append(
            t,
            &run,
            &[
                text(Role::User, "Why does the connection to db time out?"),
                grep_call("g1", "connect_timeout"),
                result_text(
                    "g1",
                    "src/net/resolver.rs:12: let connect_timeout = Duration::from_secs(5);",
                ),
                NewEntry::estimated(Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Thinking {
                            thinking: "The resolver waits five seconds.".into(),
                            signature: None,
                        },
                        ContentBlock::Text {
                            text: "The timeout is set in the resolver.".into(),
                        },
                    ],
                }),
            ],
        )
        .await
        .unwrap();
    run
}

pub async fn search_finds_phrases_in_text_tool_use_and_tool_result(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = searchable_run(&*store, &t, "s").await;
    drop(store);

    // Reopened: the first search indexes the committed history.
    let store = h.open().await;
    assert_eq!(
        found(&*store, &t, &run, "connection to db", None).await,
        [1]
    );
    // A tool call: its name and its input's values.
    assert_eq!(found(&*store, &t, &run, "grep files", None).await, [2]);
    assert_eq!(
        found(&*store, &t, &run, "net resolver rs", None).await,
        [2, 3]
    );
    // A tool result's text.
    assert_eq!(found(&*store, &t, &run, "from_secs(5)", None).await, [3]);
    // Thinking blocks are text.
    assert_eq!(
        found(&*store, &t, &run, "waits five seconds", None).await,
        [4]
    );
    assert!(
        found(&*store, &t, &run, "nowhere to be found", None)
            .await
            .is_empty()
    );
    // The entries come back whole, as stored.
    let hits = store
        .search(&t, &run, &query("timeout is set", None, 10))
        .await
        .unwrap()
        .entries;
    let stored = store
        .read_range(&t, &run, Seq(4), Some(Seq(4)))
        .await
        .unwrap();
    assert_eq!(hits, stored);
}

pub async fn search_kind_filter_narrows(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = searchable_run(&*store, &t, "s").await;
    // "connect timeout" is in the call's input (2) and in the result (3); "time out" is text.
    assert_eq!(
        found(&*store, &t, &run, "connect timeout", None).await,
        [2, 3]
    );
    let by_kind = |kind| found(&*store, &t, &run, "connect timeout", Some(kind));
    assert_eq!(by_kind(SearchKind::ToolUse).await, [2]);
    assert_eq!(by_kind(SearchKind::ToolResult).await, [3]);
    assert!(by_kind(SearchKind::Text).await.is_empty());
    assert_eq!(
        found(&*store, &t, &run, "resolver", Some(SearchKind::Text)).await,
        [4]
    );
    assert_eq!(found(&*store, &t, &run, "resolver", None).await, [2, 3, 4]);
}

pub async fn search_matches_whole_words_in_order_ignoring_case(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "words").await;
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "The Café on Main Street serves Crème Brûlée."),
                text(Role::User, "main-street, CAFE"),
                text(Role::User, "street main"),
            ],
        )
        .await
        .unwrap();
    let f = |p: &'static str| found(&*store, &t, &run, p, None);
    assert_eq!(f("main street").await, [1, 2]);
    assert_eq!(f("MAIN STREET").await, [1, 2]);
    assert_eq!(f("street main").await, [3], "word order matters");
    assert_eq!(f("cafe").await, [1, 2], "diacritics fold");
    assert_eq!(f("creme brulee").await, [1]);
    assert!(f("mai").await.is_empty(), "not a substring search");
    assert!(f("streets").await.is_empty(), "no stemming");
    assert!(
        f("main serves").await.is_empty(),
        "a phrase, not a bag of words"
    );
    assert_eq!(
        f("\"main\" street!").await,
        [1, 2],
        "punctuation separates words"
    );
    assert_eq!(
        f("main.*").await,
        [1, 2, 3],
        "not a regex: just the word main"
    );
}

pub async fn search_results_are_in_seq_order_and_limited(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "order").await;
    for i in 1..=12u64 {
        let entry = match i % 3 {
            0 => text(Role::User, &format!("needle in text {i}")),
            1 => grep_call(&format!("c{i}"), "needle"),
            _ => result_text(&format!("c{}", i - 1), &format!("needle at line {i}")),
        };
        store.append(&t, &run, &[entry]).await.unwrap();
    }
    let all: Vec<u64> = (1..=12).collect();
    assert_eq!(found(&*store, &t, &run, "needle", None).await, all);
    let limited = store
        .search(&t, &run, &query("needle", None, 5))
        .await
        .unwrap()
        .entries;
    assert_eq!(
        limited.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    let one = store
        .search(&t, &run, &query("needle", Some(SearchKind::ToolResult), 1))
        .await
        .unwrap()
        .entries;
    assert_eq!(one.iter().map(|e| e.seq.0).collect::<Vec<_>>(), [2]);
    // A message matching in several kinds comes back once.
    store
        .append(
            &t,
            &run,
            &[NewEntry::estimated(Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: "needle again".into(),
                    },
                    ContentBlock::ToolUse {
                        id: "c13".into(),
                        name: "needle".into(),
                        input: serde_json::json!({}),
                    },
                ],
            })],
        )
        .await
        .unwrap();
    let hits = found(&*store, &t, &run, "needle", None).await;
    assert_eq!(hits.len(), 13);
    assert_eq!(hits.last(), Some(&13));
}

/// `search_across`: every run of the tenant that the phrase matches, with its matching seqs
/// in order; runs never searched before are indexed first; another tenant's runs, and a kind
/// that does not match, are left out; past the cap the answer is `None`; a bad query fails.
pub async fn search_across_finds_the_runs_a_phrase_matches_within_a_cap(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (tenant("a"), tenant("b"));
    let one = new_run(&*store, &a, "one").await;
    let two = new_run(&*store, &a, "two").await;
    let none = new_run(&*store, &a, "none").await;
    let theirs = new_run(&*store, &b, "theirs").await;
    for (t, run, texts) in [
        (
            &a,
            &one,
            vec!["the rare needle", "hay", "another rare needle here"],
        ),
        (&a, &two, vec!["hay", "hay", "hay", "a rare needle at last"]),
        (&a, &none, vec!["only hay"]),
        (&b, &theirs, vec!["their rare needle"]),
    ] {
        let messages: Vec<_> = texts.into_iter().map(|t| text(Role::User, t)).collect();
        store.append(t, run, &messages).await.unwrap();
    }
    // Nothing was searched yet: search_across indexes what it needs first.
    let q = query("rare needle", None, 1);
    let found = store.search_across(&a, &q, 100).await.unwrap().unwrap();
    let expected: std::collections::BTreeMap<_, _> = [
        (one.clone(), vec![Seq(1), Seq(3)]),
        (two.clone(), vec![Seq(4)]),
    ]
    .into_iter()
    .collect();
    assert_eq!(found, expected);
    // Appended after: found on the next call.
    store
        .append(
            &a,
            &none,
            &[text(Role::Assistant, "no longer only a rare needle")],
        )
        .await
        .unwrap();
    let found = store.search_across(&a, &q, 100).await.unwrap().unwrap();
    assert_eq!(found.get(&none), Some(&vec![Seq(2)]));
    assert_eq!(found.len(), 3);
    // The other tenant sees only its own.
    let theirs_found = store.search_across(&b, &q, 100).await.unwrap().unwrap();
    assert_eq!(theirs_found.keys().collect::<Vec<_>>(), [&theirs]);
    // A kind the matches are not.
    let tools = query("rare needle", Some(SearchKind::ToolResult), 1);
    assert!(
        store
            .search_across(&a, &tools, 100)
            .await
            .unwrap()
            .unwrap()
            .is_empty()
    );
    // Absent, and past the cap.
    let absent = query("absentword", None, 1);
    assert!(
        store
            .search_across(&a, &absent, 100)
            .await
            .unwrap()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search_across(&a, &query("hay", None, 1), 3)
            .await
            .unwrap(),
        None
    );
    assert!(
        store
            .search_across(&a, &query("hay", None, 1), 10)
            .await
            .unwrap()
            .is_some()
    );
    // A bad query fails as `search` does.
    let err = store
        .search_across(&a, &query("  ", None, 1), 10)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQuery { .. }), "{err:?}");
}

pub async fn search_is_isolated_by_run_and_tenant(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (tenant("a"), tenant("b"));
    let mine = new_run(&*store, &a, "mine").await;
    let sibling = new_run(&*store, &a, "sibling").await;
    let theirs = new_run(&*store, &b, "theirs").await;
    // The same run id in another tenant is another run.
    let twin = new_run(&*store, &b, "mine").await;
    store
        .append(&a, &mine, &[text(Role::User, "common ground")])
        .await
        .unwrap();
    store
        .append(
            &a,
            &sibling,
            &[text(Role::User, "common ground, sibling secret")],
        )
        .await
        .unwrap();
    store
        .append(
            &b,
            &theirs,
            &[text(Role::User, "common ground, tenant secret")],
        )
        .await
        .unwrap();
    store
        .append(&b, &twin, &[text(Role::User, "twin secret")])
        .await
        .unwrap();
    assert_eq!(found(&*store, &a, &mine, "common ground", None).await, [1]);
    assert!(found(&*store, &a, &mine, "secret", None).await.is_empty());
    assert!(found(&*store, &a, &mine, "sibling", None).await.is_empty());
    assert!(found(&*store, &a, &mine, "tenant", None).await.is_empty());
    assert!(found(&*store, &a, &mine, "twin", None).await.is_empty());
    assert_eq!(found(&*store, &b, &twin, "twin secret", None).await, [1]);

    let q = query("common ground", None, 10);
    let err = store.search(&b, &sibling, &q).await.unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
    let err = store.search(&a, &theirs, &q).await.unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
    // A tenant that never created a run has no run of that id: not found, like any other.
    let err = store
        .search(&tenant("nobody"), &mine, &q)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::RunNotFound { .. }), "{err}");
}

pub async fn search_recalls_messages_a_summary_covers(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = searchable_run(&*store, &t, "covered").await;
    store
        .append(
            &t,
            &run,
            &[text(Role::User, "Now check the TLS certificate.")],
        )
        .await
        .unwrap();
    installed(
        install(
            &*store,
            &t,
            &run,
            Candidate {
                base: None,
                cut: Seq(4),
                claims: vec![claim(ClaimKind::Verified, "the resolver timeout is 5 s", 3)],
                meta: None,
            },
        )
        .await,
    );
    drop(store);
    let store = h.open().await;
    let ctx = store.context(&t, &run).await.unwrap();
    assert_eq!(
        ctx.messages.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
        [5]
    );
    // The summary covers 1..=4, but recall is of the originals.
    assert_eq!(
        found(&*store, &t, &run, "connection to db", None).await,
        [1]
    );
    let hits = store
        .search(
            &t,
            &run,
            &query("from_secs", Some(SearchKind::ToolResult), 10),
        )
        .await
        .unwrap()
        .entries;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].seq, Seq(3));
    assert_eq!(
        hits[0].message.tool_result_ids().collect::<Vec<_>>(),
        ["g1"]
    );
    assert_eq!(found(&*store, &t, &run, "resolver", None).await, [2, 3, 4]);
    // Summaries themselves are not searched: "5 s" is only in a claim.
    assert!(
        found(&*store, &t, &run, "timeout is 5 s", None)
            .await
            .is_empty()
    );
    assert_eq!(found(&*store, &t, &run, "tls certificate", None).await, [5]);
}

pub async fn search_finds_phrases_deep_in_long_messages(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "long").await;
    // 20,000 distinct words: past PostgreSQL's last tsvector position (16,383), so only the
    // overlapping parts make the end findable.
    let words: Vec<String> = (0..20_000).map(|i| format!("w{i}")).collect();
    store
        .append(
            &t,
            &run,
            &[
                text(Role::User, "start"),
                grep_call("big", "w"),
                result_text("big", &words.join(" ")),
            ],
        )
        .await
        .unwrap();
    let part = crate::search::PART_WORDS;
    for at in [0, part - 3, part - 1, part + 100, 4000, 16_380, 19_990] {
        let phrase = words[at..(at + 10).min(words.len())].join(" ");
        assert_eq!(
            found(&*store, &t, &run, &phrase, None).await,
            [3],
            "{phrase}"
        );
    }
    // The longest phrase allowed, anywhere, including across a part boundary.
    let max = crate::search::MAX_PHRASE_WORDS;
    // Around where the second part starts and the first ends: the tightest fits.
    for start in [
        part - max - 1,
        part - max,
        part - max / 2,
        part - 1,
        19_999 - max,
    ] {
        let phrase = words[start..start + max].join(" ");
        assert_eq!(
            found(&*store, &t, &run, &phrase, None).await,
            [3],
            "{max} words from w{start}"
        );
    }
    assert!(found(&*store, &t, &run, "w19999 w0", None).await.is_empty());
}

pub async fn invalid_search_queries_are_errors(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = searchable_run(&*store, &t, "bad").await;
    for pattern in ["", "   ", "!?", "\"\"", "*", "-- ..."] {
        let err = store
            .search(&t, &run, &query(pattern, None, 10))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidQuery { .. }),
            "{pattern:?}: {err}"
        );
        assert!(err.to_string().contains("has no words"), "{err}");
    }
    let err = store
        .search(&t, &run, &query("resolver", None, 0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQuery { .. }), "{err}");
    let too_long = "word ".repeat(crate::search::MAX_PHRASE_WORDS + 1);
    let err = store
        .search(&t, &run, &query(&too_long, None, 10))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidQuery { .. }), "{err}");
    // Characters that mean something to a backend's query syntax are only separators here.
    for pattern in [
        "resolver\"",
        "resolver OR x",
        "resolver*",
        "NEAR(resolver)",
        "resolver & !x",
        "'resolver'",
        "resolver:*",
    ] {
        let hits = store
            .search(&t, &run, &query(pattern, None, 10))
            .await
            .unwrap()
            .entries;
        let want: &[u64] = if pattern.contains('x') || pattern.contains("NEAR") {
            &[]
        } else {
            &[2, 3, 4]
        };
        assert_eq!(
            hits.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
            want,
            "{pattern:?}"
        );
    }
}

/// Issue 20, item 16: `word*` matches the words a word begins, in any place of a phrase and on
/// both backends alike; when nothing matches whole words but the prefix form would, the search
/// says so.
pub async fn prefix_search_matches_word_beginnings_and_is_suggested(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = searchable_run(&*store, &t, "prefix").await;
    assert_eq!(found(&*store, &t, &run, "resolv*", None).await, [2, 3, 4]);
    assert_eq!(found(&*store, &t, &run, "CONN*", None).await, [1, 2, 3]);
    assert_eq!(found(&*store, &t, &run, "conn* time*", None).await, [2, 3]);
    assert_eq!(found(&*store, &t, &run, "src/net/res*", None).await, [2, 3]);
    assert_eq!(found(&*store, &t, &run, "res* wait*", None).await, [4]);
    let kind = Some(SearchKind::ToolResult);
    assert_eq!(found(&*store, &t, &run, "res*", kind).await, [3]);
    assert!(
        found(&*store, &t, &run, "resolverz*", None)
            .await
            .is_empty()
    );

    let search = |pattern: &str| {
        let query = query(pattern, None, 10);
        let (store, t, run) = (store.clone(), t.clone(), run.clone());
        async move { store.search(&t, &run, &query).await }
    };
    // No whole word `tim` or `db tim`; their prefix forms find something.
    let none = search("tim").await.unwrap();
    assert!(none.entries.is_empty());
    assert_eq!(none.prefix_form.as_deref(), Some("tim*"));
    let two = search("DB tim").await.unwrap();
    assert!(two.entries.is_empty());
    assert_eq!(two.prefix_form.as_deref(), Some("db* tim*"));
    // A whole-word match, a prefix already asked for, or nothing either way: no suggestion.
    let whole = search("timeout").await.unwrap();
    assert_eq!(whole.entries.len(), 3);
    assert_eq!(whole.prefix_form, None);
    assert_eq!(search("zzz").await.unwrap().prefix_form, None);
    assert_eq!(search("xq*").await.unwrap().prefix_form, None);
    // The suggestion respects the kind asked for.
    let text_only = store
        .search(&t, &run, &query("connec", Some(SearchKind::ToolResult), 10))
        .await
        .unwrap();
    assert_eq!(text_only.prefix_form.as_deref(), Some("connec*"));
    let nowhere = store
        .search(&t, &run, &query("wait", Some(SearchKind::ToolResult), 10))
        .await
        .unwrap();
    assert_eq!(nowhere.prefix_form, None);
}

pub async fn search_on_a_long_run_returns_in_order(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "long-run").await;
    let mut expected = Vec::new();
    for chunk in 0..20u64 {
        let batch: Vec<_> = (1..=100u64)
            .map(|i| {
                let seq = chunk * 100 + i;
                if seq % 7 == 0 {
                    expected.push(seq);
                    text(Role::User, &format!("message {seq}: the cache was stale"))
                } else {
                    text(Role::Assistant, &format!("message {seq}: nothing to see"))
                }
            })
            .collect();
        store.append(&t, &run, &batch).await.unwrap();
    }
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(2000));
    let hits = store
        .search(&t, &run, &query("cache was stale", None, 5000))
        .await
        .unwrap()
        .entries;
    assert_eq!(hits.iter().map(|e| e.seq.0).collect::<Vec<_>>(), expected);
    assert!(
        hits.iter()
            .all(|e| e.message.plain_text().ends_with("the cache was stale"))
    );
    let first = store
        .search(
            &t,
            &run,
            &query("cache was stale", Some(SearchKind::Text), 3),
        )
        .await
        .unwrap()
        .entries;
    assert_eq!(
        first.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
        [7, 14, 21]
    );
    assert_eq!(found(&*store, &t, &run, "message 1999", None).await, [1999]);
}

pub async fn search_finds_messages_appended_after_a_search(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "growing").await;
    // A run with no history: nothing to index, nothing found.
    assert!(found(&*store, &t, &run, "lease", None).await.is_empty());
    store
        .append(
            &t,
            &run,
            &[text(Role::User, "Renew the lease on the lock.")],
        )
        .await
        .unwrap();
    assert_eq!(found(&*store, &t, &run, "lease", None).await, [1]);
    store
        .append(
            &t,
            &run,
            &[
                grep_call("g1", "lease_ttl"),
                result_text("g1", "src/lock.rs:40: const LEASE_TTL: u64 = 30;"),
            ],
        )
        .await
        .unwrap();
    // The index caught up with what was appended since the last search, and only that.
    assert_eq!(found(&*store, &t, &run, "lease", None).await, [1, 2, 3]);
    assert_eq!(
        found(&*store, &t, &run, "lease ttl", Some(SearchKind::ToolResult)).await,
        [3]
    );
    assert_eq!(found(&*store, &t, &run, "lease", None).await, [1, 2, 3]);
    // Appended through one store, searched through another.
    let other = h.open().await;
    other
        .append(&t, &run, &[text(Role::Assistant, "The lease lasts 30 s.")])
        .await
        .unwrap();
    assert_eq!(found(&*store, &t, &run, "lease", None).await, [1, 2, 3, 4]);
    assert_eq!(found(&*other, &t, &run, "lease lasts", None).await, [4]);
    // Cancelling stops appends, not recall.
    store.cancel_run(&t, &run).await.unwrap();
    assert_eq!(found(&*other, &t, &run, "lease", None).await, [1, 2, 3, 4]);
}

/// Appends `hay bale {seq}` for seqs `from..from + n`, except `needle` at seq `at`.
async fn append_hay(store: &dyn Store, t: &TenantId, run: &RunId, from: u64, n: u64, at: u64) {
    let mut seq = from;
    while seq < from + n {
        let end = (seq + 500).min(from + n);
        let batch: Vec<_> = (seq..end)
            .map(|s| {
                if s == at {
                    text(Role::User, &format!("the needle {at} in the haystack"))
                } else {
                    text(Role::Assistant, &format!("hay bale {s}"))
                }
            })
            .collect();
        store.append(t, run, &batch).await.unwrap();
        seq = end;
    }
}

/// Two stores search the run at once, each for the needle at `at` and for all the hay; both
/// must see each needle once and every bale once, indexed by one of them.
async fn search_concurrently(h: &dyn Harness, t: &TenantId, run: &RunId, at: u64, last: u64) {
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let store = h.open().await;
        let (t, run) = (t.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            let needle = store
                .search(&t, &run, &query(&format!("needle {at}"), None, 10))
                .await
                .unwrap()
                .entries;
            let hay = store
                .search(&t, &run, &query("hay bale", None, 10_000))
                .await
                .unwrap()
                .entries;
            (needle, hay)
        }));
    }
    for task in tasks {
        let (needle, hay) = task.await.unwrap();
        assert_eq!(needle.len(), 1, "indexed once: {needle:?}");
        assert_eq!(needle[0].seq, Seq(at));
        let needles = u64::from(at > 1234) + 1;
        assert_eq!(hay.len() as u64, last - needles);
        assert!(hay.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}

pub async fn concurrent_first_searches_index_each_message_once(h: &dyn Harness) {
    let t = TenantId::default_tenant();
    let store = h.open().await;
    let run = new_run(&*store, &t, "fresh").await;
    // A run never searched, longer than one indexing batch: no progress mark yet.
    append_hay(&*store, &t, &run, 1, 2500, 1234).await;
    search_concurrently(h, &t, &run, 1234, 2500).await;
    // Then history past an existing mark: the searchers contend on the mark itself.
    append_hay(&*store, &t, &run, 2501, 2500, 4321).await;
    search_concurrently(h, &t, &run, 4321, 5000).await;
    // A third store sees the same index, with one entry per needle.
    let third = h.open().await;
    assert_eq!(found(&*third, &t, &run, "needle", None).await, [1234, 4321]);
    assert_eq!(
        found(&*third, &t, &run, "hay bale 5000", None).await,
        [5000]
    );
}
