//! The rules both backends share: what `begin` does with a record, keys.

#![allow(clippy::unwrap_used)]

use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};

use super::*;

fn op(status: OpStatus, lease_until: Option<i64>, retryable: bool) -> Operation {
    Operation {
        id: "id".into(),
        key: "k".into(),
        request_hash: RequestKey([1; 32]),
        status,
        fence: 3,
        lease_owner: Some("w".into()),
        lease_expires_at: lease_until.map(Timestamp),
        result: None,
        error: None,
        retryable,
        created_at: Timestamp(0),
        updated_at: Timestamp(0),
        expires_at: Timestamp(i64::MAX),
    }
}

#[test]
fn begin_decisions() {
    let now = Timestamp(100);
    assert_eq!(
        decide_begin(&op(OpStatus::Completed, None, false), now),
        Decision::Answer
    );
    assert_eq!(
        decide_begin(&op(OpStatus::Running, Some(101), false), now),
        Decision::Answer
    );
    assert_eq!(
        decide_begin(&op(OpStatus::Running, Some(100), false), now),
        Decision::TakeOver,
        "a lease ending now has expired"
    );
    assert_eq!(
        decide_begin(&op(OpStatus::Failed, None, true), now),
        Decision::TakeOver
    );
    assert_eq!(
        decide_begin(&op(OpStatus::Failed, None, false), now),
        Decision::Answer
    );
}

#[test]
fn downstream_keys_are_stable_per_operation_and_tenant() {
    let (a, b) = (TenantId::new("a").unwrap(), TenantId::new("b").unwrap());
    assert_eq!(downstream_key(&a, "k"), downstream_key(&a, "k"));
    assert_ne!(downstream_key(&a, "k"), downstream_key(&b, "k"));
    assert_ne!(downstream_key(&a, "k"), downstream_key(&a, "k2"));
    assert!(downstream_key(&a, "k").starts_with("baton-"));
    assert!(check_key("").is_err() && check_key(&"x".repeat(256)).is_err());
    assert!(check_key("charge-42").is_ok());
}
