//! The ledger against a model, over random interleavings of begin, heartbeat, complete, fail
//! and the clock moving past leases, with several workers holding stale fences. After every
//! step the invariants hold: at most one fence can act (the highest issued); status moves only
//! forward (`running → completed`, `running → failed`, `failed → running`, `running →
//! running` with a higher fence); a completed operation never changes its result; every
//! successful publish came from the current fence. Each case works on a key of its own in one
//! database, so the suite runs on a server as well as on a file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;

use super::Harness;
use crate::{Begin, Fenced, OpStatus, Publish, Store};

#[derive(Clone, Debug)]
enum Step {
    Begin { worker: u8, other_request: bool },
    Heartbeat { fence: u8 },
    Complete { fence: u8, value: u8 },
    Fail { fence: u8, retryable: bool },
    Wait { secs: u8 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..4, proptest::bool::weighted(0.1)).prop_map(|(worker, other_request)| Step::Begin { worker, other_request }),
        2 => (0u8..5).prop_map(|fence| Step::Heartbeat { fence }),
        2 => (0u8..5, any::<u8>()).prop_map(|(fence, value)| Step::Complete { fence, value }),
        2 => (0u8..5, any::<bool>()).prop_map(|(fence, retryable)| Step::Fail { fence, retryable }),
        2 => (1u8..15).prop_map(|secs| Step::Wait { secs }),
    ]
}

const LEASE: Duration = Duration::from_secs(10);

/// What the model says the record is.
#[derive(Clone, Debug, Default)]
struct Model {
    exists: bool,
    hash: Option<RequestKey>,
    status: Option<OpStatus>,
    fence: u64,
    lease_until: i64,
    retryable: bool,
    result: Option<serde_json::Value>,
}

fn allowed(from: Option<OpStatus>, to: OpStatus, fence_grew: bool) -> bool {
    use OpStatus::*;
    match (from, to) {
        (None, Running) => true,
        (Some(a), b) if a == b => true,
        (Some(Running), Completed | Failed) => true,
        (Some(Failed), Running) => fence_grew,
        _ => false,
    }
}

/// One case on its own key of the shared store.
async fn run_case(store: &dyn Store, key: &str, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let t = TenantId::default_tenant();
    let hash = RequestKey([1; 32]);
    let mut now: i64 = 1_800_000_000_000;
    let mut m = Model::default();
    let keep = Duration::from_secs(3600);
    for step in steps {
        let before = m.clone();
        match step {
            Step::Begin {
                worker,
                other_request,
            } => {
                let given = if other_request {
                    RequestKey([2; 32])
                } else {
                    hash
                };
                let got = store
                    .begin(
                        &t,
                        key,
                        &given,
                        &format!("w{worker}"),
                        LEASE,
                        keep,
                        Timestamp(now),
                    )
                    .await
                    .unwrap();
                match got {
                    Begin::Acquired {
                        operation,
                        takeover,
                    } => {
                        prop_assert!(
                            !m.exists || m.hash == Some(given),
                            "acquired with another request"
                        );
                        let takeable = !m.exists
                            || (m.status == Some(OpStatus::Running) && m.lease_until <= now)
                            || (m.status == Some(OpStatus::Failed) && m.retryable);
                        prop_assert!(takeable, "acquired when it should not: {m:?}");
                        prop_assert_eq!(operation.fence, m.fence + 1, "fences grow by one");
                        prop_assert_eq!(takeover, m.exists);
                        m.exists = true;
                        m.hash = Some(operation.request_hash);
                        prop_assert_eq!(operation.request_hash, given);
                        m.status = Some(OpStatus::Running);
                        m.fence = operation.fence;
                        m.lease_until = now + 10_000;
                        m.retryable = false;
                    }
                    Begin::Mismatch { .. } => prop_assert!(m.exists && m.hash != Some(given)),
                    Begin::Completed(op) => {
                        prop_assert_eq!(m.hash, Some(given));
                        prop_assert_eq!(m.status, Some(OpStatus::Completed));
                        prop_assert_eq!(op.result, m.result.clone());
                    }
                    Begin::InProgress(_) => {
                        prop_assert!(m.status == Some(OpStatus::Running) && m.lease_until > now)
                    }
                    Begin::Failed(_) => {
                        prop_assert!(m.status == Some(OpStatus::Failed) && !m.retryable)
                    }
                }
            }
            Step::Heartbeat { fence } => {
                let got = store
                    .heartbeat(&t, key, u64::from(fence), LEASE, Timestamp(now))
                    .await
                    .unwrap();
                let may = m.status == Some(OpStatus::Running) && u64::from(fence) == m.fence;
                match got {
                    Ok(_) => {
                        prop_assert!(may);
                        m.lease_until = now + 10_000;
                    }
                    Err(Fenced::NotFound) => prop_assert!(!m.exists),
                    Err(Fenced::Out { .. }) => prop_assert!(m.exists && !may),
                }
            }
            Step::Complete { fence, value } => {
                let v = json!({ "v": value, "fence": fence });
                let got = store
                    .publish(
                        &t,
                        key,
                        u64::from(fence),
                        Publish::Complete(&v),
                        false,
                        Timestamp(now),
                    )
                    .await
                    .unwrap();
                let may = m.status == Some(OpStatus::Running) && u64::from(fence) == m.fence;
                match got {
                    Ok(op) => {
                        // The publishing fence may repeat its own outcome; nothing changes.
                        let repeat = m.status == Some(OpStatus::Completed)
                            && u64::from(fence) == m.fence
                            && m.result == Some(v.clone());
                        prop_assert!(may || repeat, "published by a stale fence {fence}: {m:?}");
                        prop_assert_eq!(op.result.clone(), Some(v.clone()));
                        m.status = Some(OpStatus::Completed);
                        m.result = Some(v);
                    }
                    Err(Fenced::NotFound) => prop_assert!(!m.exists),
                    Err(Fenced::Out { operation, .. }) => {
                        prop_assert!(m.exists && !may);
                        prop_assert_eq!(
                            operation.result,
                            m.result.clone(),
                            "a result never changes"
                        );
                    }
                }
            }
            Step::Fail { fence, retryable } => {
                let got = store
                    .publish(
                        &t,
                        key,
                        u64::from(fence),
                        Publish::Fail {
                            error: "x",
                            retryable,
                        },
                        false,
                        Timestamp(now),
                    )
                    .await
                    .unwrap();
                let may = m.status == Some(OpStatus::Running) && u64::from(fence) == m.fence;
                match got {
                    Ok(_) => {
                        let repeat = m.status == Some(OpStatus::Failed)
                            && u64::from(fence) == m.fence
                            && m.retryable == retryable;
                        prop_assert!(may || repeat);
                        m.status = Some(OpStatus::Failed);
                        m.retryable = retryable;
                    }
                    Err(Fenced::NotFound) => prop_assert!(!m.exists),
                    Err(Fenced::Out { .. }) => prop_assert!(m.exists && !may),
                }
            }
            Step::Wait { secs } => now += i64::from(secs) * 1000,
        }
        // The stored record agrees with the model, and moved only forward.
        if let Some((op, attempts)) = store.operation(&t, key).await.unwrap() {
            prop_assert_eq!(Some(op.status), m.status);
            prop_assert_eq!(op.fence, m.fence);
            prop_assert_eq!(op.result.clone(), m.result.clone());
            prop_assert!(allowed(before.status, op.status, op.fence > before.fence));
            if before.status == Some(OpStatus::Completed) {
                prop_assert_eq!(op.result, before.result);
            }
            // One attempt per fence issued, and at most one published a result.
            prop_assert_eq!(attempts.len() as u64, m.fence);
            let completed: Vec<u64> = attempts
                .iter()
                .filter(|a| a.outcome == Some(crate::AttemptOutcome::Completed))
                .map(|a| a.fence)
                .collect();
            prop_assert!(completed.len() <= 1);
            // Once completed, the publishing fence's attempt stays completed.
            if op.status == OpStatus::Completed {
                prop_assert_eq!(completed, vec![op.fence]);
            }
        } else {
            prop_assert!(!m.exists);
        }
    }
    Ok(())
}

pub async fn the_ledger_keeps_its_invariants_over_random_interleavings(h: &dyn Harness) {
    let store = h.open().await;
    let handle = tokio::runtime::Handle::current();
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let cases = AtomicU64::new(0);
    let outcome = tokio::task::block_in_place(|| {
        TestRunner::new(config).run(&proptest::collection::vec(step(), 1..40), |steps| {
            let key = format!("op-{}", cases.fetch_add(1, Ordering::Relaxed));
            handle.block_on(run_case(&*store, &key, steps))
        })
    });
    if let Err(failure) = outcome {
        panic!("the ledger broke an invariant: {failure}");
    }
}
