//! Text a backend keeps as text: a NUL character (`\u0000`) in it is refused alike everywhere,
//! before anything is written (issue 20, item 3: PostgreSQL cannot store one, SQLite could);
//! messages, stored as JSON, keep theirs.

use std::time::Duration;

use baton_core::key::RequestKey;
use baton_core::{Message, Role, Seq, TenantId, Timestamp};

use super::{Harness, new_run, run_id, text};
use crate::keys::{KeyHash, NewApiKey};
use crate::{Error, NewImport, NewRun, OpStatus, Origin, Publish, Reimport};

#[track_caller]
fn refused<T: std::fmt::Debug>(outcome: Result<T, Error>, field: &str) {
    match outcome {
        Err(e @ Error::InvalidText { .. }) => {
            let message = e.to_string();
            assert!(message.starts_with(&format!("{field}: ")), "{message}");
            assert!(message.contains("byte 6"), "{message}");
        }
        other => panic!("expected {field} to be refused for its NUL, got {other:?}"),
    }
}

pub async fn text_with_a_nul_is_refused_alike_everywhere(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "nul").await;
    let nul = "before\0after";

    let with = |goal: Option<&str>, rules: Option<&str>| NewRun {
        id: Some(run_id("nul-run")),
        goal: goal.map(str::to_owned),
        rules: rules.map(str::to_owned),
    };
    refused(store.create_run(&t, &with(Some(nul), None)).await, "goal");
    refused(store.create_run(&t, &with(None, Some(nul))).await, "rules");
    let entry = text(Role::User, "read-only");
    let constraint = store.add_constraint(&t, &run, &entry, nul, true).await;
    refused(constraint, "constraint");
    refused(
        store.start_tool(&t, &run, "tool_a\0b").await,
        "tool call id",
    );

    let (now, lease, keep) = (
        Timestamp(1_800_000_000_000),
        Duration::from_secs(10),
        Duration::from_secs(3600),
    );
    let hash = RequestKey([3; 32]);
    let begun = store
        .begin(&t, "op", &hash, "worker\0a", lease, keep, now)
        .await;
    refused(begun, "lease owner");
    assert!(store.operation(&t, "op").await.unwrap().is_none());
    store
        .begin(&t, "op", &hash, "w1", lease, keep, now)
        .await
        .unwrap();
    let fail = Publish::Fail {
        error: nul,
        retryable: false,
    };
    refused(store.publish(&t, "op", 1, fail, false, now).await, "error");

    let label = Some(nul);
    let key = NewApiKey {
        id: "000000000001",
        hash: KeyHash::of("k"),
        tenant: &t,
        label,
        now,
    };
    refused(store.create_api_key(&key).await, "api key label");

    let origin = Origin {
        source_key: "src-1".into(),
        path: nul.into(),
        format: "test".into(),
        ..Origin::default()
    };
    let import = NewImport::new(None, origin, vec![text(Role::User, "hi")], vec![]);
    refused(store.import(&t, vec![import], Reimport::No).await, "path");

    // A message keeps its NUL: it is stored as JSON, where it is escaped.
    let message = Message::text(Role::User, nul);
    store
        .append(&t, &run, &[crate::NewEntry::estimated(message.clone())])
        .await
        .unwrap();

    // Reopened: nothing refused was written, and what was accepted is there.
    drop(store);
    let store = h.open().await;
    let runs: Vec<_> = store.list_runs(&t).await.unwrap();
    assert_eq!(runs.len(), 1, "only the first run: {runs:?}");
    assert_eq!(
        runs[0].last_seq,
        Seq(1),
        "the refused constraint appended nothing"
    );
    assert!(store.constraints(&t, &run).await.unwrap().is_empty());
    assert!(store.started_tools(&t, &run).await.unwrap().is_empty());
    assert!(store.api_keys(Some(&t)).await.unwrap().is_empty());
    let (op, attempts) = store.operation(&t, "op").await.unwrap().unwrap();
    assert_eq!((op.status, op.error), (OpStatus::Running, None));
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].outcome, None,
        "the refused fail closed no attempt"
    );
    let stored = store.read_range(&t, &run, Seq(1), None).await.unwrap();
    assert_eq!(stored[0].message, message);
    // The worker can still publish a failure it can store.
    let fail = Publish::Fail {
        error: "before after",
        retryable: false,
    };
    let op = store
        .publish(&t, "op", 1, fail, false, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(op.error.as_deref(), Some("before after"));
}
