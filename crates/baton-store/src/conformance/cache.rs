//! The response cache's entries (served until they expire, per tenant, never when corrupt),
//! flights (one leader among concurrent claimers, one taker of an expired lease, only the
//! current token acts) and the call log.

use std::time::Duration;

use baton_core::Timestamp;
use baton_core::key::RequestKey;

use super::{Harness, tenant};
use crate::{CallOutcome, CallRecord, Error, Flight, Lookup, NewCacheEntry};

fn key(n: u8) -> RequestKey {
    RequestKey([n; 32])
}

fn entry<'a>(k: RequestKey, body: &'a [u8], ttl: Duration) -> NewCacheEntry<'a> {
    NewCacheEntry {
        key: k,
        operation: "openai.chat_completions",
        body,
        ttl,
    }
}

const HOUR: Duration = Duration::from_secs(3600);

fn hit(lookup: Lookup) -> crate::CacheEntry {
    match lookup {
        Lookup::Hit(e) => e,
        other => panic!("expected a hit, got {other:?}"),
    }
}

pub async fn cache_entries_are_served_until_they_expire_and_count_hits(h: &dyn Harness) {
    let store = h.open().await;
    let t = tenant("acme");
    assert_eq!(store.cache_get(&t, &key(1)).await.unwrap(), Lookup::Miss);
    store
        .cache_put(&t, &entry(key(1), br#"{"answer":1}"#, HOUR))
        .await
        .unwrap();
    let first = hit(store.cache_get(&t, &key(1)).await.unwrap());
    assert_eq!(
        (first.body.as_slice(), first.hits, first.operation.as_str()),
        (&br#"{"answer":1}"#[..], 0, "openai.chat_completions"),
        "reading an entry counts no hit"
    );
    assert!(first.expires_at > first.created_at);
    store.count_hits(&t, &key(1), 1).await.unwrap();
    drop(store);

    let store = h.open().await;
    assert_eq!(hit(store.cache_get(&t, &key(1)).await.unwrap()).hits, 1);
    // Hits logged as calls are counted with them; other outcomes and other keys are not.
    let call = |key, outcome| CallRecord {
        at: Timestamp::now(),
        operation: "openai.chat_completions".into(),
        request_hash: key,
        model: "gpt-4o-mini".into(),
        input_tokens: 1,
        output_tokens: 1,
        cost_usd: None,
        outcome,
        latency_ms: 1,
        overlapped: false,
    };
    let calls = [
        call(key(1), CallOutcome::CacheHit),
        call(key(1), CallOutcome::Executed),
        call(key(1), CallOutcome::CacheHit),
        call(key(3), CallOutcome::CacheHit),
    ];
    store.log_calls(&t, &calls).await.unwrap();
    assert_eq!(hit(store.cache_get(&t, &key(1)).await.unwrap()).hits, 3);
    // A fresh result replaces the entry.
    store
        .cache_put(&t, &entry(key(1), br#"{"answer":2}"#, HOUR))
        .await
        .unwrap();
    let replaced = hit(store.cache_get(&t, &key(1)).await.unwrap());
    assert_eq!(
        (replaced.body.as_slice(), replaced.hits),
        (&br#"{"answer":2}"#[..], 0)
    );

    // An entry past its TTL is a miss, and pruning removes it.
    store
        .cache_put(&t, &entry(key(2), b"{}", Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.cache_get(&t, &key(2)).await.unwrap(), Lookup::Miss);
    assert_eq!(store.cache_prune(&t).await.unwrap(), 1);
    assert_eq!(store.cache_prune(&t).await.unwrap(), 0);
    hit(store.cache_get(&t, &key(1)).await.unwrap());

    // A zero TTL is refused and writes nothing.
    let err = store
        .cache_put(&t, &entry(key(3), b"{}", Duration::ZERO))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCache { .. }), "{err}");
    assert!(err.to_string().contains("TTL"), "{err}");
    assert_eq!(store.cache_get(&t, &key(3)).await.unwrap(), Lookup::Miss);
}

pub async fn the_cache_is_isolated_by_tenant_whatever_the_key(h: &dyn Harness) {
    let store = h.open().await;
    let (a, b) = (tenant("tenant-a"), tenant("tenant-b"));
    store
        .cache_put(&a, &entry(key(7), b"a's secret", HOUR))
        .await
        .unwrap();
    // B names A's exact key and gets nothing.
    assert_eq!(store.cache_get(&b, &key(7)).await.unwrap(), Lookup::Miss);
    // B's own entry under that key does not touch A's.
    store
        .cache_put(&b, &entry(key(7), b"b's", HOUR))
        .await
        .unwrap();
    assert_eq!(
        hit(store.cache_get(&a, &key(7)).await.unwrap()).body,
        b"a's secret"
    );
    assert_eq!(
        hit(store.cache_get(&b, &key(7)).await.unwrap()).body,
        b"b's"
    );
    // Flights and the call log are per tenant too.
    let lead = store
        .claim_flight(&a, &key(7), "worker-a", HOUR)
        .await
        .unwrap();
    assert!(matches!(lead, Flight::Leader { token: 1, .. }), "{lead:?}");
    let other = store
        .claim_flight(&b, &key(7), "worker-b", HOUR)
        .await
        .unwrap();
    assert!(
        matches!(other, Flight::Leader { token: 1, .. }),
        "{other:?}"
    );
    assert!(!store.release_flight(&b, &key(8), 1).await.unwrap());
}

pub async fn a_corrupt_entry_is_reported_removed_and_never_served(h: &dyn Harness) {
    let store = h.open().await;
    let t = tenant("acme");
    store
        .cache_put(&t, &entry(key(9), br#"{"ok":true}"#, HOUR))
        .await
        .unwrap();
    h.corrupt_cache_bodies().await;
    let store = h.open().await;
    match store.cache_get(&t, &key(9)).await.unwrap() {
        Lookup::Corrupt { detail } => assert!(detail.contains("SHA-256"), "{detail}"),
        other => panic!("expected a corrupt entry, got {other:?}"),
    }
    assert_eq!(store.cache_get(&t, &key(9)).await.unwrap(), Lookup::Miss);
}

pub async fn concurrent_claimers_have_one_leader(h: &dyn Harness) {
    let t = tenant("acme");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = h.open().await;
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            store
                .claim_flight(&t, &key(4), &format!("worker-{i}"), HOUR)
                .await
                .unwrap()
        }));
    }
    let mut leaders = Vec::new();
    let mut held = 0;
    for task in tasks {
        match task.await.unwrap() {
            Flight::Leader { token, took_over } => leaders.push((token, took_over)),
            Flight::Held { owner, .. } => {
                assert!(owner.starts_with("worker-"));
                held += 1;
            }
        }
    }
    assert_eq!((leaders.as_slice(), held), (&[(1, false)][..], 15));
    let store = h.open().await;
    assert!(!store.release_flight(&t, &key(4), 2).await.unwrap());
    assert!(store.renew_flight(&t, &key(4), 1, HOUR).await.unwrap());
    assert!(store.release_flight(&t, &key(4), 1).await.unwrap());
    assert!(!store.release_flight(&t, &key(4), 1).await.unwrap());
    // The next claim is a fresh flight with the next token: the released holder's token
    // can never match it.
    let again = store.claim_flight(&t, &key(4), "late", HOUR).await.unwrap();
    assert_eq!(
        again,
        Flight::Leader {
            token: 2,
            took_over: false
        }
    );
    assert!(!store.renew_flight(&t, &key(4), 1, HOUR).await.unwrap());
    assert!(!store.release_flight(&t, &key(4), 1).await.unwrap());
    assert!(store.renew_flight(&t, &key(4), 2, HOUR).await.unwrap());
    let err = store
        .claim_flight(&t, &key(5), "w", Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidCache { .. }), "{err}");
}

pub async fn an_expired_lease_goes_to_one_claimer_with_a_higher_token(h: &dyn Harness) {
    let t = tenant("acme");
    let store = h.open().await;
    let first = store
        .claim_flight(&t, &key(6), "stalled", Duration::from_millis(60))
        .await
        .unwrap();
    assert!(matches!(first, Flight::Leader { token: 1, .. }));
    // Renewed while alive…
    assert!(
        store
            .renew_flight(&t, &key(6), 1, Duration::from_millis(60))
            .await
            .unwrap()
    );
    tokio::time::sleep(Duration::from_millis(120)).await;
    // …then let go: of eight claimers, one takes over.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = h.open().await;
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            store
                .claim_flight(&t, &key(6), &format!("rescuer-{i}"), HOUR)
                .await
                .unwrap()
        }));
    }
    let mut leaders = Vec::new();
    for task in tasks {
        if let Flight::Leader { token, took_over } = task.await.unwrap() {
            leaders.push((token, took_over));
        }
    }
    assert_eq!(leaders, [(2, true)]);
    // The stalled holder can neither renew nor release any more.
    assert!(!store.renew_flight(&t, &key(6), 1, HOUR).await.unwrap());
    assert!(!store.release_flight(&t, &key(6), 1).await.unwrap());
    assert!(store.release_flight(&t, &key(6), 2).await.unwrap());
}

fn record(at: i64, hash: u8, outcome: CallOutcome) -> CallRecord {
    CallRecord {
        at: Timestamp(at),
        operation: "anthropic.messages".into(),
        request_hash: key(hash),
        model: "claude-sonnet-4-5".into(),
        input_tokens: 1200,
        output_tokens: 80,
        cost_usd: Some(0.0048),
        outcome,
        latency_ms: 950,
        overlapped: outcome == CallOutcome::Coalesced,
    }
}

pub async fn the_call_log_keeps_every_call_in_order_per_tenant(h: &dyn Harness) {
    let store = h.open().await;
    let (t, other) = (tenant("acme"), tenant("other"));
    let batch = [
        record(1_000, 1, CallOutcome::Executed),
        record(2_000, 1, CallOutcome::CacheHit),
        record(2_000, 1, CallOutcome::Coalesced),
        record(3_000, 2, CallOutcome::Error),
    ];
    store.log_calls(&t, &batch).await.unwrap();
    let mut unpriced = record(500, 3, CallOutcome::Executed);
    unpriced.cost_usd = None;
    store.log_calls(&t, &[unpriced.clone()]).await.unwrap();
    store.log_calls(&t, &[]).await.unwrap();
    drop(store);

    let store = h.open().await;
    let all = store
        .calls(&t, Timestamp(0), Timestamp(i64::MAX))
        .await
        .unwrap();
    let mut expected = vec![unpriced];
    expected.extend(batch.iter().cloned());
    assert_eq!(all, expected);
    let window = store
        .calls(&t, Timestamp(1_000), Timestamp(3_000))
        .await
        .unwrap();
    assert_eq!(window, batch[..3]);
    assert!(
        store
            .calls(&other, Timestamp(0), Timestamp(i64::MAX))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_stale_holder_never_touches_a_later_flight(h: &dyn Harness) {
    let store = h.open().await;
    let t = tenant("acme");
    let short = Duration::from_millis(40);
    // A holds token 1 and stalls past its lease; B takes over (token 2) and releases.
    assert!(matches!(
        store.claim_flight(&t, &key(11), "a", short).await.unwrap(),
        Flight::Leader { token: 1, .. }
    ));
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(matches!(
        store.claim_flight(&t, &key(11), "b", HOUR).await.unwrap(),
        Flight::Leader {
            token: 2,
            took_over: true
        }
    ));
    assert!(store.release_flight(&t, &key(11), 2).await.unwrap());
    // C claims: token 3. A wakes: its renew and release touch nothing.
    assert!(matches!(
        store.claim_flight(&t, &key(11), "c", HOUR).await.unwrap(),
        Flight::Leader {
            token: 3,
            took_over: false
        }
    ));
    assert!(!store.renew_flight(&t, &key(11), 1, HOUR).await.unwrap());
    assert!(!store.release_flight(&t, &key(11), 1).await.unwrap());
    // C still holds it: D waits.
    assert!(matches!(
        store.claim_flight(&t, &key(11), "d", HOUR).await.unwrap(),
        Flight::Held { .. }
    ));
}
