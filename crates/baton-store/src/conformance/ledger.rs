//! The idempotency ledger: one acquirer per key, fences that fence out a worker whose lease
//! was taken over, a completed result that never changes, attempts kept for audit.

use std::time::Duration;

use baton_core::Timestamp;
use baton_core::key::RequestKey;
use serde_json::json;

use super::{Harness, tenant};
use crate::{AttemptOutcome, Begin, Error, Fenced, OpStatus, Operation, Publish};

const LEASE: Duration = Duration::from_secs(10);
const KEEP: Duration = Duration::from_secs(24 * 3600);

fn hash(n: u8) -> RequestKey {
    RequestKey([n; 32])
}

fn t(secs: i64) -> Timestamp {
    Timestamp(1_800_000_000_000 + secs * 1000)
}

fn acquired(b: Begin) -> (Operation, bool) {
    match b {
        Begin::Acquired {
            operation,
            takeover,
        } => (operation, takeover),
        other => panic!("expected to acquire, got {other:?}"),
    }
}

fn fenced_out(r: Result<Operation, Fenced>) -> Operation {
    match r {
        Err(Fenced::Out { operation, .. }) => operation,
        other => panic!("expected fenced out, got {other:?}"),
    }
}

pub async fn begin_creates_once_then_answers_from_the_record(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    let (op, takeover) = acquired(
        store
            .begin(&ten, "charge-42", &hash(1), "w1", LEASE, KEEP, t(0))
            .await
            .unwrap(),
    );
    assert_eq!(
        (op.status, op.fence, takeover),
        (OpStatus::Running, 1, false)
    );
    assert_eq!(op.lease_owner.as_deref(), Some("w1"));
    assert_eq!(op.lease_expires_at, Some(t(10)));
    // Another worker, same request, lease live: in progress.
    match store
        .begin(&ten, "charge-42", &hash(1), "w2", LEASE, KEEP, t(5))
        .await
        .unwrap()
    {
        Begin::InProgress(o) => assert_eq!((o.fence, o.lease_owner.as_deref()), (1, Some("w1"))),
        other => panic!("{other:?}"),
    }
    // The same key with another request: a mismatch, whatever the status.
    match store
        .begin(&ten, "charge-42", &hash(2), "w2", LEASE, KEEP, t(5))
        .await
        .unwrap()
    {
        Begin::Mismatch { operation, given } => {
            assert_eq!((operation.request_hash, given), (hash(1), hash(2)));
        }
        other => panic!("{other:?}"),
    }
    let done = store
        .publish(
            &ten,
            "charge-42",
            1,
            Publish::Complete(&json!({"charge": "ch_1"})),
            true,
            t(6),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (done.status, done.result.clone()),
        (OpStatus::Completed, Some(json!({"charge": "ch_1"})))
    );
    drop(store);

    let store = h.open().await;
    match store
        .begin(&ten, "charge-42", &hash(1), "w3", LEASE, KEEP, t(100))
        .await
        .unwrap()
    {
        Begin::Completed(o) => assert_eq!(o.result, Some(json!({"charge": "ch_1"}))),
        other => panic!("{other:?}"),
    }
    // A completed result never changes, even for the fence that completed it.
    let again = fenced_out(
        store
            .publish(
                &ten,
                "charge-42",
                1,
                Publish::Complete(&json!("other")),
                false,
                t(101),
            )
            .await
            .unwrap(),
    );
    assert_eq!(again.result, Some(json!({"charge": "ch_1"})));
    let (op, attempts) = store.operation(&ten, "charge-42").await.unwrap().unwrap();
    assert_eq!(op.result, Some(json!({"charge": "ch_1"})));
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (attempts[0].fence, attempts[0].outcome, attempts[0].paid),
        (1, Some(AttemptOutcome::Completed), true)
    );
    // Tenants do not see each other's operations.
    assert!(
        store
            .operation(&tenant("other"), "charge-42")
            .await
            .unwrap()
            .is_none()
    );
    acquired(
        store
            .begin(
                &tenant("other"),
                "charge-42",
                &hash(2),
                "w",
                LEASE,
                KEEP,
                t(0),
            )
            .await
            .unwrap(),
    );
}

pub async fn an_expired_lease_is_taken_over_and_the_late_worker_fenced_out(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    acquired(
        store
            .begin(&ten, "op", &hash(1), "slow", LEASE, KEEP, t(0))
            .await
            .unwrap(),
    );
    // A heartbeat keeps it alive past its first lease…
    let beat = store
        .heartbeat(&ten, "op", 1, LEASE, t(8))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(beat.lease_expires_at, Some(t(18)));
    assert!(matches!(
        store
            .begin(&ten, "op", &hash(1), "rescuer", LEASE, KEEP, t(15))
            .await
            .unwrap(),
        Begin::InProgress(_)
    ));
    // …then the worker pauses past it, and a rescuer takes over with the next fence.
    let (op, takeover) = acquired(
        store
            .begin(&ten, "op", &hash(1), "rescuer", LEASE, KEEP, t(19))
            .await
            .unwrap(),
    );
    assert_eq!(
        (op.fence, takeover, op.lease_owner.as_deref()),
        (2, true, Some("rescuer"))
    );
    // The paused worker wakes: it can neither renew nor publish.
    fenced_out(store.heartbeat(&ten, "op", 1, LEASE, t(20)).await.unwrap());
    let late = json!({"from": "slow"});
    fenced_out(
        store
            .publish(&ten, "op", 1, Publish::Complete(&late), true, t(21))
            .await
            .unwrap(),
    );
    let done = store
        .publish(
            &ten,
            "op",
            2,
            Publish::Complete(&json!({"from": "rescuer"})),
            true,
            t(22),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.result, Some(json!({"from": "rescuer"})));
    let (_, attempts) = store.operation(&ten, "op").await.unwrap().unwrap();
    let seen: Vec<_> = attempts
        .iter()
        .map(|a| (a.owner.as_str(), a.fence, a.outcome, a.paid))
        .collect();
    assert_eq!(
        seen,
        [
            ("slow", 1, Some(AttemptOutcome::FencedOut), true),
            ("rescuer", 2, Some(AttemptOutcome::Completed), true),
        ],
        "two paid calls after a lost lease are visible"
    );
    assert_eq!(
        attempts[0].result,
        Some(late),
        "kept for audit, never published"
    );
    // Unknown keys.
    assert_eq!(
        store.heartbeat(&ten, "nope", 1, LEASE, t(0)).await.unwrap(),
        Err(Fenced::NotFound)
    );
}

pub async fn failures_are_retried_only_when_retryable(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    acquired(
        store
            .begin(&ten, "a", &hash(1), "w1", LEASE, KEEP, t(0))
            .await
            .unwrap(),
    );
    let failed = store
        .publish(
            &ten,
            "a",
            1,
            Publish::Fail {
                error: "HTTP 503",
                retryable: true,
            },
            true,
            t(1),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (failed.status, failed.error.as_deref(), failed.retryable),
        (OpStatus::Failed, Some("HTTP 503"), true)
    );
    let (op, takeover) = acquired(
        store
            .begin(&ten, "a", &hash(1), "w2", LEASE, KEEP, t(2))
            .await
            .unwrap(),
    );
    assert_eq!((op.fence, takeover, op.error), (2, true, None));
    store
        .publish(
            &ten,
            "a",
            2,
            Publish::Fail {
                error: "card declined",
                retryable: false,
            },
            false,
            t(3),
        )
        .await
        .unwrap()
        .unwrap();
    match store
        .begin(&ten, "a", &hash(1), "w3", LEASE, KEEP, t(4))
        .await
        .unwrap()
    {
        Begin::Failed(o) => assert_eq!((o.error.as_deref(), o.fence), (Some("card declined"), 2)),
        other => panic!("{other:?}"),
    }
    let listed = store
        .operations(&ten, Some(OpStatus::Failed))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        store
            .operations(&ten, Some(OpStatus::Running))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn concurrent_begins_and_takeovers_have_one_winner(h: &dyn Harness) {
    let ten = tenant("acme");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = h.open().await;
        let ten = ten.clone();
        tasks.push(tokio::spawn(async move {
            store
                .begin(&ten, "race", &hash(1), &format!("w{i}"), LEASE, KEEP, t(0))
                .await
                .unwrap()
        }));
    }
    let mut winners = 0;
    for task in tasks {
        if let Begin::Acquired { .. } = task.await.unwrap() {
            winners += 1;
        }
    }
    assert_eq!(winners, 1);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = h.open().await;
        let ten = ten.clone();
        tasks.push(tokio::spawn(async move {
            store
                .begin(&ten, "race", &hash(1), &format!("r{i}"), LEASE, KEEP, t(60))
                .await
                .unwrap()
        }));
    }
    let mut fences = Vec::new();
    for task in tasks {
        if let Begin::Acquired { operation, .. } = task.await.unwrap() {
            fences.push(operation.fence);
        }
    }
    assert_eq!(fences, [2], "one takeover, with the next fence");
}

pub async fn expired_records_are_pruned_never_reused(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    let keep = Duration::from_secs(60);
    acquired(
        store
            .begin(&ten, "k", &hash(1), "w", LEASE, keep, t(0))
            .await
            .unwrap(),
    );
    store
        .publish(&ten, "k", 1, Publish::Complete(&json!(1)), false, t(1))
        .await
        .unwrap()
        .unwrap();
    // Past its retention but not pruned: still the same record.
    assert!(matches!(
        store
            .begin(&ten, "k", &hash(1), "w", LEASE, keep, t(120))
            .await
            .unwrap(),
        Begin::Completed(_)
    ));
    assert_eq!(store.prune_operations(&ten, t(30)).await.unwrap(), 0);
    assert_eq!(store.prune_operations(&ten, t(120)).await.unwrap(), 1);
    assert!(store.operation(&ten, "k").await.unwrap().is_none());
    let (op, _) = acquired(
        store
            .begin(&ten, "k", &hash(1), "w2", LEASE, keep, t(121))
            .await
            .unwrap(),
    );
    assert_eq!(
        op.fence, 2,
        "a new operation on a pruned key starts above its fences"
    );
    // A worker of the pruned operation (fence 1) can neither renew nor publish into it.
    fenced_out(store.heartbeat(&ten, "k", 1, LEASE, t(122)).await.unwrap());
    fenced_out(
        store
            .publish(
                &ten,
                "k",
                1,
                Publish::Complete(&json!("stale")),
                false,
                t(122),
            )
            .await
            .unwrap(),
    );
    // An operation past its retention but held by a live lease is not pruned, and a
    // heartbeat keeps its retention at least as long as its lease.
    acquired(
        store
            .begin(
                &ten,
                "live",
                &hash(1),
                "w",
                LEASE,
                Duration::from_secs(5),
                t(200),
            )
            .await
            .unwrap(),
    );
    let beat = store
        .heartbeat(&ten, "live", 1, Duration::from_secs(60), t(204))
        .await
        .unwrap()
        .unwrap();
    assert!(beat.expires_at >= t(264), "{beat:?}");
    // At t(210) "k" (past its retention, its lease gone) goes; "live" stays.
    assert_eq!(store.prune_operations(&ten, t(210)).await.unwrap(), 1);
    assert!(store.operation(&ten, "live").await.unwrap().is_some());
    // Bad inputs write nothing.
    for (key, lease) in [("", LEASE), ("x\ny", LEASE), ("ok", Duration::ZERO)] {
        let err = store
            .begin(&ten, key, &hash(1), "w", lease, keep, t(0))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidLedger { .. }), "{err}");
    }
    assert_eq!(store.operations(&ten, None).await.unwrap().len(), 1);
}

pub async fn a_repeated_publish_by_the_publishing_fence_changes_nothing(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    acquired(
        store
            .begin(&ten, "r", &hash(1), "w", LEASE, KEEP, t(0))
            .await
            .unwrap(),
    );
    let result = json!({"sent": true});
    let first = store
        .publish(&ten, "r", 1, Publish::Complete(&result), true, t(1))
        .await
        .unwrap()
        .unwrap();
    // The reply was lost; the worker publishes the same outcome again: the record as it stands.
    let again = store
        .publish(&ten, "r", 1, Publish::Complete(&result), true, t(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again, first);
    // Another outcome from the same fence is refused, and the publishing attempt keeps its
    // record: who published, and that it was completed.
    fenced_out(
        store
            .publish(
                &ten,
                "r",
                1,
                Publish::Fail {
                    error: "late",
                    retryable: false,
                },
                false,
                t(3),
            )
            .await
            .unwrap(),
    );
    let (op, attempts) = store.operation(&ten, "r").await.unwrap().unwrap();
    assert_eq!(op.result, Some(result));
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (
            attempts[0].outcome,
            attempts[0].owner.as_str(),
            attempts[0].error.clone()
        ),
        (Some(AttemptOutcome::Completed), "w", None)
    );
}

pub async fn the_attempts_log_keeps_every_end_its_time_payment_and_error(h: &dyn Harness) {
    let store = h.open().await;
    let ten = tenant("acme");
    let keep = Duration::from_secs(60);
    let (s, tn) = (&store, &ten);
    let begin = move |owner: &'static str, at| async move {
        let b = s.begin(tn, "k", &hash(1), owner, LEASE, keep, at).await;
        acquired(b.unwrap()).0
    };
    // The first worker fails retryably after a paid call; the second takes the failure over,
    // then loses its lease to the third.
    assert_eq!(begin("w1", t(0)).await.fence, 1);
    let flaky = Publish::Fail {
        error: "flaky",
        retryable: true,
    };
    store
        .publish(&ten, "k", 1, flaky, true, t(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(begin("w2", t(3)).await.fence, 2);
    assert_eq!(begin("w3", t(14)).await.fence, 3);
    // The second wakes and publishes after a paid call: fenced out, kept for audit.
    let late = json!({"from": "w2"});
    fenced_out(
        store
            .publish(&ten, "k", 2, Publish::Complete(&late), true, t(15))
            .await
            .unwrap(),
    );
    let beat = store.heartbeat(&ten, "k", 3, LEASE, t(16)).await.unwrap();
    assert_eq!(beat.unwrap().lease_expires_at, Some(t(26)));
    let done = json!({"from": "w3"});
    store
        .publish(&ten, "k", 3, Publish::Complete(&done), true, t(17))
        .await
        .unwrap()
        .unwrap();
    fenced_out(store.heartbeat(&ten, "k", 3, LEASE, t(18)).await.unwrap());
    let (op, attempts) = store.operation(&ten, "k").await.unwrap().unwrap();
    assert_eq!(
        (op.status, op.fence, op.result),
        (OpStatus::Completed, 3, Some(done))
    );
    let attempt = |owner: &str, fence, (started, ended), outcome, result, error: Option<&str>| {
        crate::Attempt {
            owner: owner.to_owned(),
            fence,
            started_at: t(started),
            ended_at: Some(t(ended)),
            outcome: Some(outcome),
            paid: true,
            result,
            error: error.map(str::to_owned),
        }
    };
    assert_eq!(
        attempts,
        [
            attempt("w1", 1, (0, 2), AttemptOutcome::Failed, None, Some("flaky")),
            attempt(
                "w2",
                2,
                (3, 15),
                AttemptOutcome::FencedOut,
                Some(late),
                None
            ),
            attempt("w3", 3, (14, 17), AttemptOutcome::Completed, None, None),
        ]
    );
    // Pruned with its attempts; the key's next operation starts above every old fence.
    assert_eq!(store.prune_operations(&ten, t(100)).await.unwrap(), 1);
    assert!(store.operation(&ten, "k").await.unwrap().is_none());
    assert_eq!(begin("w4", t(101)).await.fence, 4);
    let (_, attempts) = store.operation(&ten, "k").await.unwrap().unwrap();
    let seen: Vec<_> = attempts
        .iter()
        .map(|a| (a.owner.as_str(), a.fence))
        .collect();
    assert_eq!(seen, [("w4", 4)]);
}

/// Ledger rows as schema version 12 kept them (every attempt in `attempts`), for the backends'
/// migration tests: `HASH` stands for the blob literal of 32 bytes of 1 (each backend spells it
/// its own way), flags are `'0'`/`'1'`, which both read as their own type. Tenant `acme`: one
/// operation running, one completed, one failed retryably, one completed after a fenced-out
/// attempt, one running after a lost lease.
pub const VERSION_12_LEDGER: &str = "
INSERT INTO operations (tenant_id, key, id, request_hash, status, fence, lease_owner,
    lease_expires_at, result, error, retryable, created_at, updated_at, expires_at) VALUES
    ('acme', 'running', 'id-1', HASH, 'running', 1, 'w1', 20000, NULL, NULL, '0', 1000, 1000, 900000),
    ('acme', 'completed', 'id-2', HASH, 'completed', 1, 'w1', NULL, '{\"n\":1}', NULL, '0', 1000, 2000, 900000),
    ('acme', 'retry', 'id-3', HASH, 'failed', 1, 'w1', NULL, NULL, 'flaky', '1', 1000, 2000, 900000),
    ('acme', 'fenced', 'id-4', HASH, 'completed', 2, 'w2', NULL, '{\"from\":\"w2\"}', NULL, '0', 1000, 5000, 900000),
    ('acme', 'lost', 'id-5', HASH, 'running', 2, 'w2', 30000, NULL, NULL, '0', 1000, 3000, 900000);
INSERT INTO attempts (tenant_id, key, owner, fence, started_at, ended_at, outcome, paid, result,
    error) VALUES
    ('acme', 'running', 'w1', 1, 1000, NULL, NULL, '0', NULL, NULL),
    ('acme', 'completed', 'w1', 1, 1000, 2000, 'completed', '1', NULL, NULL),
    ('acme', 'retry', 'w1', 1, 1000, 2000, 'failed', '1', NULL, 'flaky'),
    ('acme', 'fenced', 'w1', 1, 1000, 4500, 'fenced_out', '1', '{\"from\":\"w1\"}', NULL),
    ('acme', 'fenced', 'w2', 2, 3000, 5000, 'completed', '0', NULL, NULL),
    ('acme', 'lost', 'w1', 1, 1000, 3000, 'lease_lost', '0', NULL, NULL),
    ('acme', 'lost', 'w2', 2, 3000, NULL, NULL, '0', NULL, NULL);
";

/// Checks a store migrated from [`VERSION_12_LEDGER`] answers `operation()` as version 12 did,
/// and that its operations go on: the running one completes, the lost one is taken over.
pub async fn the_version_12_ledger_reads_the_same(store: &dyn crate::Store) {
    use crate::Attempt;
    let ten = tenant("acme");
    let ms = Timestamp;
    let op = |key: &str, status, fence, owner: &str, lease: Option<i64>, updated| Operation {
        id: String::new(),
        key: key.to_owned(),
        request_hash: hash(1),
        status,
        fence,
        lease_owner: Some(owner.to_owned()),
        lease_expires_at: lease.map(ms),
        result: None,
        error: None,
        retryable: false,
        created_at: ms(1000),
        updated_at: ms(updated),
        expires_at: ms(900_000),
    };
    let attempt = |owner: &str, fence, started, ended: Option<i64>, outcome, paid| Attempt {
        owner: owner.to_owned(),
        fence,
        started_at: ms(started),
        ended_at: ended.map(ms),
        outcome,
        paid,
        result: None,
        error: None,
    };
    use AttemptOutcome::{Completed, Failed, FencedOut, LeaseLost};
    let expected = [
        (
            op("completed", OpStatus::Completed, 1, "w1", None, 2000),
            vec![attempt("w1", 1, 1000, Some(2000), Some(Completed), true)],
        ),
        (
            op("fenced", OpStatus::Completed, 2, "w2", None, 5000),
            vec![
                attempt("w1", 1, 1000, Some(4500), Some(FencedOut), true),
                attempt("w2", 2, 3000, Some(5000), Some(Completed), false),
            ],
        ),
        (
            op("lost", OpStatus::Running, 2, "w2", Some(30000), 3000),
            vec![
                attempt("w1", 1, 1000, Some(3000), Some(LeaseLost), false),
                attempt("w2", 2, 3000, None, None, false),
            ],
        ),
        (
            op("retry", OpStatus::Failed, 1, "w1", None, 2000),
            vec![attempt("w1", 1, 1000, Some(2000), Some(Failed), true)],
        ),
        (
            op("running", OpStatus::Running, 1, "w1", Some(20000), 1000),
            vec![attempt("w1", 1, 1000, None, None, false)],
        ),
    ];
    for (n, (mut want, mut attempts)) in expected.into_iter().enumerate() {
        let key = want.key.clone();
        want.id = format!("id-{}", [2, 4, 5, 3, 1][n]);
        match key.as_str() {
            "completed" => want.result = Some(json!({"n": 1})),
            "fenced" => {
                want.result = Some(json!({"from": "w2"}));
                attempts[0].result = Some(json!({"from": "w1"}));
            }
            "retry" => {
                (want.error, want.retryable) = (Some("flaky".to_owned()), true);
                attempts[0].error = Some("flaky".to_owned());
            }
            _ => {}
        }
        let got = store.operation(&ten, &key).await.unwrap();
        assert_eq!(got, Some((want, attempts)), "{key}");
    }
    // The migrated operations go on: the running one completes, the lost one's lease (expired)
    // is taken over, its attempt moving to the log as lost.
    let v = json!(2);
    store
        .publish(&ten, "running", 1, Publish::Complete(&v), true, ms(6000))
        .await
        .unwrap()
        .unwrap();
    let b = store
        .begin(&ten, "lost", &hash(1), "w3", LEASE, KEEP, ms(40000))
        .await;
    assert_eq!(acquired(b.unwrap()).0.fence, 3);
    let (_, a) = store.operation(&ten, "running").await.unwrap().unwrap();
    assert_eq!(
        a,
        [attempt("w1", 1, 1000, Some(6000), Some(Completed), true)]
    );
    let (_, a) = store.operation(&ten, "lost").await.unwrap().unwrap();
    let seen: Vec<_> = a.iter().map(|a| (a.fence, a.ended_at, a.outcome)).collect();
    assert_eq!(
        seen,
        [
            (1, Some(ms(3000)), Some(LeaseLost)),
            (2, Some(ms(40000)), Some(LeaseLost)),
            (3, None, None)
        ]
    );
}
