//! The connection drops mid-transaction: the operation fails clearly, nothing is half-written,
//! and the next operation reconnects (issue 3, "Network fault"). A statement the server refuses
//! is reported with its code and constraint, never with the values it carried (issue 20, 9).

use baton_core::{Message, Role, Seq, TenantId};
use baton_store::{NewEntry, NewRun, Store};

use crate::support::TempSchema;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_backend_fails_the_operation_and_the_next_one_reconnects() {
    let schema = TempSchema::new();
    let store = schema.store().await;
    let t = TenantId::default_tenant();
    let run = store
        .create_run(
            &t,
            &NewRun {
                id: None,
                goal: None,
                rules: None,
            },
        )
        .await
        .unwrap();
    store
        .append(
            &t,
            &run.id,
            &[NewEntry::estimated(Message::text(Role::User, "before"))],
        )
        .await
        .unwrap();

    // Hold the run's row lock from outside, so baton's next append blocks inside its
    // transaction; then kill baton's backends while it waits.
    let mut blocker = schema.raw().await;
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        &format!(
            "SELECT 1 FROM \"{}\".runs WHERE id = $1 FOR UPDATE",
            schema.name
        ),
        &[&run.id.as_str()],
    )
    .await
    .unwrap();

    let batch: Vec<_> = (0..50)
        .map(|i| NewEntry::estimated(Message::text(Role::User, format!("lost {i}"))))
        .collect();
    let appender = {
        let store = store.clone();
        let (t, id) = (t.clone(), run.id.clone());
        tokio::spawn(async move { store.append(&t, &id, &batch).await })
    };
    let killer = schema.raw().await;
    let killed = loop {
        let n: i64 = killer
            .query_one(
                "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = 'baton' AND wait_event_type = 'Lock' AND datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            break n;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(killed >= 1);
    let err = appender.await.unwrap().unwrap_err();
    assert!(
        err.to_string().starts_with("database"),
        "clear error: {err}"
    );
    tx.rollback().await.unwrap();

    // Nothing of the failed batch is there, and the next operation works on a new connection.
    let entries = store.read_range(&t, &run.id, Seq(1), None).await.unwrap();
    assert_eq!(entries.len(), 1);
    let seqs = store
        .append(
            &t,
            &run.id,
            &[NewEntry::estimated(Message::text(Role::User, "after"))],
        )
        .await
        .unwrap();
    assert_eq!(seqs, vec![Seq(2)], "no seq was burnt by the failed batch");
}

#[tokio::test]
async fn a_refused_statement_names_its_code_and_constraint_never_its_values() {
    let schema = TempSchema::new();
    let store = schema.store().await;
    let sql = format!(
        "ALTER TABLE \"{}\".runs ADD CONSTRAINT no_secret_goals CHECK (goal NOT LIKE '%secret%')",
        schema.name
    );
    schema.raw().await.batch_execute(&sql).await.unwrap();
    let new = NewRun {
        id: None,
        goal: Some("the secret is hunter2".into()),
        rules: None,
    };
    let err = store
        .create_run(&TenantId::default_tenant(), &new)
        .await
        .unwrap_err();
    // As logged: the error's text, its chain and its debug form alike.
    let chain = {
        let mut all = format!("{err} | {err:?}");
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            all.push_str(&format!(" | {cause} | {cause:?}"));
            source = cause.source();
        }
        all
    };
    for part in [
        "23514",
        "no_secret_goals",
        "table runs",
        "violates check constraint",
    ] {
        assert!(chain.contains(part), "{part:?} missing from {chain}");
    }
    assert!(!chain.contains("hunter2"), "a value leaked: {chain}");
}
