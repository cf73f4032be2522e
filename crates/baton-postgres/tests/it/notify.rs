//! Flight waiters are woken by `LISTEN/NOTIFY` as soon as the holder is done (issue 3), and a
//! wait without a notification, or without a listener, still ends after `at_most`.

use std::time::{Duration, Instant};

use baton_core::TenantId;
use baton_core::key::RequestKey;
use baton_postgres::PgStore;
use baton_store::{CacheStore, Flight, NewCacheEntry};

use crate::support::{TempSchema, fresh_schema, server_url, with_schema};

fn tenant(name: &str) -> TenantId {
    TenantId::new(name).unwrap()
}

fn key(n: u8) -> RequestKey {
    RequestKey([n; 32])
}

fn entry(k: RequestKey) -> NewCacheEntry<'static> {
    NewCacheEntry {
        key: k,
        operation: "openai.chat_completions",
        body: br#"{"answer":42}"#,
        ttl: Duration::from_secs(3600),
    }
}

const LEASE: Duration = Duration::from_secs(60);

async fn lead(store: &PgStore, t: &TenantId, k: &RequestKey) -> u64 {
    match store.claim_flight(t, k, "holder", LEASE).await.unwrap() {
        Flight::Leader { token, .. } => token,
        held => panic!("expected to lead, got {held:?}"),
    }
}

/// Waits on `waiter` in a task; the task's result is how long the wait took.
fn wait_in_task(
    waiter: &PgStore,
    t: &TenantId,
    k: RequestKey,
    at_most: Duration,
) -> tokio::task::JoinHandle<Duration> {
    let (waiter, t) = (waiter.clone(), t.clone());
    tokio::spawn(async move {
        let started = Instant::now();
        waiter.wait_flight(&t, &k, at_most).await;
        started.elapsed()
    })
}

/// Returns once `waiter`'s listener is up: a wait is woken by `notifier`'s puts, well before
/// its `at_most`.
async fn until_listening(waiter: &PgStore, notifier: &PgStore) {
    let t = tenant("warmup");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        let wait = wait_in_task(waiter, &t, key(0xee), Duration::from_secs(1));
        while !wait.is_finished() {
            notifier.cache_put(&t, &entry(key(0xee))).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if wait.await.unwrap() < Duration::from_millis(800) {
            return;
        }
    }
    panic!("the waiter's listener never woke it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_wakes_a_waiter_in_another_process() {
    let schema = TempSchema::new();
    // Two pools, as two processes would have.
    let (holder, waiter) = (schema.store().await, schema.store().await);
    until_listening(&waiter, &holder).await;
    let t = tenant("acme");
    let token = lead(&holder, &t, &key(1)).await;

    let wait = wait_in_task(&waiter, &t, key(1), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished(), "the wait ended before the release");
    assert!(holder.release_flight(&t, &key(1), token).await.unwrap());
    let waited = wait.await.unwrap();
    assert!(
        waited < Duration::from_secs(2),
        "the waiter slept {waited:?} after the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_put_wakes_a_waiter_even_when_the_schema_name_is_long() {
    // 63 bytes: the channel name is shortened with a hash (see `flight_channel`).
    let mut name = fresh_schema();
    name.push('_');
    while name.len() < 63 {
        name.push('x');
    }
    let schema = TempSchema {
        url: with_schema(&server_url(), &name),
        name,
    };
    let (holder, waiter) = (schema.store().await, schema.store().await);
    until_listening(&waiter, &holder).await;
    let t = tenant("acme");
    lead(&holder, &t, &key(2)).await;

    let wait = wait_in_task(&waiter, &t, key(2), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!wait.is_finished(), "the wait ended before the put");
    holder.cache_put(&t, &entry(key(2))).await.unwrap();
    let waited = wait.await.unwrap();
    assert!(
        waited < Duration::from_secs(2),
        "the waiter slept {waited:?} after the put"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_its_notification_a_wait_lasts_at_most() {
    let schema = TempSchema::new();
    let (holder, waiter) = (schema.store().await, schema.store().await);
    let t = tenant("acme");
    let at_most = Duration::from_millis(400);

    // The first wait starts the listener, and does not wait longer for it.
    let waited = wait_in_task(&waiter, &t, key(3), at_most).await.unwrap();
    assert!(
        waited >= at_most && waited < Duration::from_secs(2),
        "{waited:?}"
    );

    until_listening(&waiter, &holder).await;
    let token = lead(&holder, &t, &key(3)).await;
    let wait = wait_in_task(&waiter, &t, key(3), at_most);
    // Not its notification: another key, another tenant's same key, a release that released
    // nothing (a stale token).
    let other = lead(&holder, &t, &key(4)).await;
    assert!(holder.release_flight(&t, &key(4), other).await.unwrap());
    holder
        .cache_put(&tenant("other"), &entry(key(3)))
        .await
        .unwrap();
    assert!(!holder.release_flight(&t, &key(3), token + 1).await.unwrap());
    let waited = wait.await.unwrap();
    assert!(
        waited >= at_most && waited < Duration::from_secs(2),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_listener_falls_back_to_polling_and_reconnects() {
    let schema = TempSchema::new();
    let (holder, waiter) = (schema.store().await, schema.store().await);
    until_listening(&waiter, &holder).await;

    let killer = schema.raw().await;
    let killed: i64 = killer
        .query_one(
            "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE query = $1 AND datname = current_database()",
            &[&format!("LISTEN baton_flights_{}", schema.name)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1, "the listener's backend was not found");

    // Waiting never fails: without a listener it sleeps `at_most`.
    let t = tenant("acme");
    let at_most = Duration::from_millis(300);
    let waited = wait_in_task(&waiter, &t, key(5), at_most).await.unwrap();
    assert!(
        waited >= at_most && waited < Duration::from_secs(2),
        "{waited:?}"
    );

    // A later wait opens a new listener.
    until_listening(&waiter, &holder).await;
    let token = lead(&holder, &t, &key(5)).await;
    let wait = wait_in_task(&waiter, &t, key(5), Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(holder.release_flight(&t, &key(5), token).await.unwrap());
    let waited = wait.await.unwrap();
    assert!(waited < Duration::from_secs(2), "{waited:?}");
}
