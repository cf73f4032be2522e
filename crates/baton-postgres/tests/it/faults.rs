//! The connection drops mid-transaction: the operation fails clearly, nothing is half-written,
//! and the next operation reconnects (issue 3, "Network fault").

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

/// Issue 20 item 9: a statement the server refuses is reported (and so logged) with the
/// server's message, its SQLSTATE code and the constraint and table it names, not as `db
/// error`; and never with the row's values, which the server puts in its DETAIL.
#[tokio::test]
async fn a_refused_statement_names_the_server_message_code_and_constraint_not_the_values() {
    let schema = TempSchema::new();
    let store = schema.store().await;
    let t = TenantId::default_tenant();
    let raw = schema.raw().await;
    raw.batch_execute(&format!(
        "ALTER TABLE \"{}\".runs ADD CONSTRAINT goal_is_short CHECK (length(goal) < 20)",
        schema.name
    ))
    .await
    .unwrap();
    let secret = "a goal that quotes a customer's card number 4111-1111";
    let err = store
        .create_run(
            &t,
            &NewRun {
                id: None,
                goal: Some(secret.to_owned()),
                rules: None,
            },
        )
        .await
        .unwrap_err();
    // What every printer of the error sees: its own text and every cause's.
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        text.push_str(" | ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    assert!(!text.contains("db error"), "{text}");
    assert!(text.contains("violates check constraint"), "{text}");
    assert!(text.contains("SQLSTATE 23514"), "{text}");
    assert!(text.contains("constraint goal_is_short"), "{text}");
    assert!(text.contains("table ") && text.contains(".runs"), "{text}");
    assert!(
        !text.contains("4111"),
        "a row's values reached the error: {text}"
    );
    assert_eq!(err.code(), "backend");

    // A missing relation: the server's message and code.
    raw.batch_execute(&format!("DROP TABLE \"{}\".pins", schema.name))
        .await
        .unwrap();
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
    let err = store.pins(&t, &run.id).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("does not exist"), "{text}");
    assert!(text.contains("SQLSTATE 42P01"), "{text}");
}
