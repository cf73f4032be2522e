//! What the agent loop keeps: constraints (a pinned message plus a record the executor reads)
//! and started tool calls (claimed once, whatever races for them).

use baton_core::{Message, Role, RunStatus, Seq, TenantId};

use super::{Harness, new_run, text};
use crate::{Error, NewEntry};

pub async fn constraints_are_pinned_messages_the_executor_can_read(h: &dyn Harness) {
    let store = h.open().await;
    let t = TenantId::default_tenant();
    let run = new_run(&*store, &t, "c").await;
    store
        .append(&t, &run, &[text(Role::User, "hello")])
        .await
        .unwrap();
    let entry = NewEntry::estimated(Message::text(Role::User, "Constraint: read-only."));
    let c = store
        .add_constraint(&t, &run, &entry, "read-only", true)
        .await
        .unwrap();
    assert_eq!(
        (c.seq, c.read_only, c.text.as_str()),
        (Seq(2), true, "read-only")
    );
    let note = NewEntry::estimated(Message::text(Role::User, "Constraint: answer in Spanish."));
    store
        .add_constraint(&t, &run, &note, "answer in Spanish", false)
        .await
        .unwrap();
    drop(store);

    let store = h.open().await;
    let all = store.constraints(&t, &run).await.unwrap();
    let seen: Vec<_> = all.iter().map(|c| (c.seq, c.read_only)).collect();
    assert_eq!(seen, [(Seq(2), true), (Seq(3), false)]);
    assert_eq!(store.pins(&t, &run).await.unwrap(), [Seq(2), Seq(3)]);
    let history = store
        .read_range(&t, &run, Seq(2), Some(Seq(2)))
        .await
        .unwrap();
    assert_eq!(history[0].message.plain_text(), "Constraint: read-only.");
    // Another tenant sees no such run; a cancelled run takes no constraint.
    let other = TenantId::new("other-tenant").unwrap();
    assert!(store.constraints(&other, &run).await.is_err());
    store.cancel_run(&t, &run).await.unwrap();
    let err = store
        .add_constraint(&t, &run, &entry, "read-only", true)
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
        store.constraints(&t, &run).await.unwrap().len(),
        2,
        "nothing written"
    );
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(3));
}

pub async fn a_started_tool_call_is_claimed_once(h: &dyn Harness) {
    let t = TenantId::default_tenant();
    let store = h.open().await;
    let run = new_run(&*store, &t, "tools").await;
    assert!(store.start_tool(&t, &run, "call-1").await.unwrap());
    assert!(!store.start_tool(&t, &run, "call-1").await.unwrap());
    // Racing claims on separate connections: exactly one wins.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = h.open().await;
        let (t, run) = (t.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            store.start_tool(&t, &run, "call-2").await.unwrap()
        }));
    }
    let mut wins = 0;
    for task in tasks {
        if task.await.unwrap() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    drop(store);
    let store = h.open().await;
    let mut started = store.started_tools(&t, &run).await.unwrap();
    started.sort();
    assert_eq!(started, ["call-1", "call-2"]);
}
