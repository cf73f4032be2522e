//! API keys: found by hash only while live, listed per tenant, revoked one by one or a whole
//! tenant at once, never stored as text.

use baton_core::Timestamp;

use super::{Harness, tenant};
use crate::Error;
use crate::keys::{KeyHash, NewApiKey, Revoke, generate};

fn at(secs: i64) -> Timestamp {
    Timestamp(1_800_000_000_000 + secs * 1000)
}

pub async fn api_keys_authenticate_their_tenant_until_revoked(h: &dyn Harness) {
    let store = h.open().await;
    let (acme, other) = (tenant("acme"), tenant("other"));
    let a1 = generate().unwrap();
    let a2 = generate().unwrap();
    let o1 = generate().unwrap();
    for (k, t, label, s) in [
        (&a1, &acme, Some("ci"), 0),
        (&a2, &acme, None, 1),
        (&o1, &other, None, 2),
    ] {
        let made = store
            .create_api_key(&NewApiKey {
                id: &k.id,
                hash: k.hash,
                tenant: t,
                label,
                now: at(s),
            })
            .await
            .unwrap();
        assert_eq!((&made.id, &made.tenant), (&k.id, t));
    }
    // A second key with a taken id is refused, and changes nothing.
    let clash = store
        .create_api_key(&NewApiKey {
            id: &a1.id,
            hash: KeyHash::of("something else"),
            tenant: &other,
            label: None,
            now: at(3),
        })
        .await;
    assert!(matches!(clash, Err(Error::InvalidKey { .. })), "{clash:?}");

    let store = h.open().await;
    let found = store.authenticate(&a1.hash).await.unwrap().unwrap();
    assert_eq!(
        (found.tenant, found.label.as_deref()),
        (acme.clone(), Some("ci"))
    );
    assert_eq!(
        store
            .authenticate(&KeyHash::of(&a1.key[..a1.key.len() - 1]))
            .await
            .unwrap(),
        None
    );
    let listed: Vec<String> = store
        .api_keys(Some(&acme))
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, vec![a1.id.clone(), a2.id.clone()]);
    assert_eq!(store.api_keys(None).await.unwrap().len(), 3);

    // One key, by id: once.
    assert_eq!(
        store
            .revoke_api_keys(Revoke::Id(&a1.id), at(10))
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        store
            .revoke_api_keys(Revoke::Id(&a1.id), at(11))
            .await
            .unwrap(),
        0
    );
    assert_eq!(store.authenticate(&a1.hash).await.unwrap(), None);
    assert!(store.authenticate(&a2.hash).await.unwrap().is_some());
    // A whole tenant: its live keys, no one else's.
    assert_eq!(
        store
            .revoke_api_keys(Revoke::Tenant(&acme), at(12))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.authenticate(&a2.hash).await.unwrap(), None);
    assert!(store.authenticate(&o1.hash).await.unwrap().is_some());

    let store = h.open().await;
    let keys = store.api_keys(Some(&acme)).await.unwrap();
    assert_eq!(
        keys.iter().map(|k| k.revoked_at).collect::<Vec<_>>(),
        vec![Some(at(10)), Some(at(12))]
    );
}
