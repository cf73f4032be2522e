//! Single-flight under real concurrency on a multi-thread runtime: one execution for many
//! callers, and a cancelled or panicking leader replaced by exactly one follower.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::Group;

type Outcome = Result<u32, String>;

async fn followers(
    group: &Arc<Group<&'static str, Outcome>>,
    runs: &Arc<AtomicUsize>,
    n: usize,
    value: u32,
) -> Vec<tokio::task::JoinHandle<super::Shared<Outcome>>> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (group, runs) = (group.clone(), runs.clone());
        tasks.push(tokio::spawn(async move {
            group
                .run("k", || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(value)
                })
                .await
        }));
    }
    // Let every follower join the slot before the test moves on.
    tokio::time::sleep(Duration::from_millis(50)).await;
    tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_callers_share_one_execution() {
    let group: Arc<Group<&str, Outcome>> = Arc::new(Group::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (group, runs) = (group.clone(), runs.clone());
        tasks.push(tokio::spawn(async move {
            group
                .run("k", || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(7)
                })
                .await
        }));
    }
    let mut ran = 0;
    for task in tasks {
        let shared = task.await.unwrap();
        assert_eq!(shared.value, Ok(7));
        assert!(shared.joined > 1);
        ran += usize::from(shared.ran);
    }
    assert_eq!((runs.load(Ordering::SeqCst), ran), (1, 1));
    assert_eq!(group.in_flight(), 0);
    // A later call starts afresh.
    let again = group.run("k", || async { Ok(8) }).await;
    assert_eq!((again.value, again.ran, again.joined), (Ok(8), true, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_get_the_leaders_error_without_repeating_the_call() {
    let group: Arc<Group<&str, Outcome>> = Arc::new(Group::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let leader = {
        let (group, runs) = (group.clone(), runs.clone());
        tokio::spawn(async move {
            group
                .run("k", || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    Err("upstream: HTTP 500".to_owned())
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let tasks = followers(&group, &runs, 10, 1).await;
    assert_eq!(
        leader.await.unwrap().value,
        Err("upstream: HTTP 500".into())
    );
    for task in tasks {
        let shared = task.await.unwrap();
        assert_eq!(
            (shared.value, shared.ran),
            (Err("upstream: HTTP 500".into()), false)
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_leader_is_replaced_by_exactly_one_follower() {
    let group: Arc<Group<&str, Outcome>> = Arc::new(Group::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let leader = {
        let (group, runs) = (group.clone(), runs.clone());
        tokio::spawn(async move {
            group
                .run("k", || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(0)
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let tasks = followers(&group, &runs, 20, 5).await;
    leader.abort();
    assert!(leader.await.unwrap_err().is_cancelled());
    let mut took_over = 0;
    for task in tasks {
        let shared = task.await.unwrap();
        assert_eq!(
            shared.value,
            Ok(5),
            "followers are not failed by the cancellation"
        );
        took_over += usize::from(shared.ran);
    }
    assert_eq!(took_over, 1);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "the cancelled attempt and one replacement"
    );
    assert_eq!(group.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_leader_is_replaced_by_exactly_one_follower() {
    let group: Arc<Group<&str, Outcome>> = Arc::new(Group::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let leader = {
        let (group, runs) = (group.clone(), runs.clone());
        tokio::spawn(async move {
            group
                .run("k", || async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    panic!("the leader's work panicked");
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let tasks = followers(&group, &runs, 20, 9).await;
    assert!(leader.await.unwrap_err().is_panic());
    let mut took_over = 0;
    for task in tasks {
        let shared = task.await.unwrap();
        assert_eq!(shared.value, Ok(9));
        took_over += usize::from(shared.ran);
    }
    assert_eq!(took_over, 1);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_cancelled_caller_leaves_no_slot_behind() {
    let group: Arc<Group<&str, Outcome>> = Arc::new(Group::new());
    let lone = {
        let group = group.clone();
        tokio::spawn(async move {
            group
                .run("k", || async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(0)
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(group.in_flight(), 1);
    lone.abort();
    let _ = lone.await;
    assert_eq!(group.in_flight(), 0);
}
