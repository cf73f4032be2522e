//! What PostgreSQL's schema adds: refusing strangers' schemas and newer versions, migrating
//! once under concurrent connects, append-only history below the API, URL handling.

use baton_core::{Message, Role, Seq, TenantId};
use baton_postgres::{PgStore, SCHEMA_VERSION, redact};
use baton_store::{Error, NewEntry, NewRun, Store};

use crate::support::{TempSchema, server_url, with_schema};

#[tokio::test]
async fn connect_migrates_once_and_again_is_a_no_op() {
    let schema = TempSchema::new();
    let store = schema.store().await;
    assert!(
        store.migrate().await.unwrap().is_empty(),
        "already up to date"
    );
    let doctor = store.doctor().await.unwrap();
    assert_eq!(doctor.schema_version, SCHEMA_VERSION);
    assert!(
        doctor.server_version.starts_with("PostgreSQL"),
        "{}",
        doctor.server_version
    );
    assert!(
        doctor
            .settings
            .iter()
            .any(|(k, _)| k == "synchronous_commit")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_workers_connecting_to_a_new_schema_all_succeed() {
    let schema = TempSchema::new();
    let connects: Vec<_> = (0..8)
        .map(|_| {
            let url = schema.url.clone();
            tokio::spawn(async move { PgStore::connect(&url).await.map(|_| ()) })
        })
        .collect();
    for c in connects {
        c.await.unwrap().unwrap();
    }
    let raw = schema.raw().await;
    let rows = raw
        .query(
            &format!("SELECT version FROM \"{}\".baton_schema", schema.name),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        SCHEMA_VERSION as usize,
        "each migration applied exactly once"
    );
}

#[tokio::test]
async fn a_schema_holding_other_tables_is_refused_and_left_alone() {
    let schema = TempSchema::new();
    let raw = schema.raw().await;
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\"; CREATE TABLE \"{0}\".songs (title text)",
        schema.name
    ))
    .await
    .unwrap();
    let err = PgStore::connect(&schema.url).await.unwrap_err();
    assert!(matches!(err, Error::NotABatonDatabase { .. }), "{err}");
    let tables: i64 = raw
        .query_one(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema.name],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let schema = TempSchema::new();
    drop(schema.store().await);
    let raw = schema.raw().await;
    raw.execute(
        &format!(
            "INSERT INTO \"{}\".baton_schema VALUES ({}, 0)",
            schema.name,
            SCHEMA_VERSION + 1
        ),
        &[],
    )
    .await
    .unwrap();
    let err = PgStore::connect(&schema.url).await.unwrap_err();
    assert!(matches!(err, Error::SchemaTooNew { .. }), "{err}");
}

#[tokio::test]
async fn history_rows_cannot_be_updated_or_deleted_even_with_raw_sql() {
    let schema = TempSchema::new();
    let store = schema.store().await;
    let t = TenantId::default_tenant();
    let run = store.create_run(&t, &NewRun::default()).await.unwrap();
    store
        .append(
            &t,
            &run.id,
            &[NewEntry::estimated(Message::text(Role::User, "keep me"))],
        )
        .await
        .unwrap();
    let raw = schema.raw().await;
    for sql in [
        "UPDATE {}.history SET message = '{{}}'",
        "DELETE FROM {}.history",
        "TRUNCATE {}.history CASCADE",
    ] {
        let err = raw
            .batch_execute(&sql.replace("{}", &format!("\"{}\"", schema.name)))
            .await
            .unwrap_err();
        assert!(format!("{err:?}").contains("append-only"), "{sql}: {err:?}");
    }
    let entries = store.read_range(&t, &run.id, Seq(1), None).await.unwrap();
    assert_eq!(entries[0].message.plain_text(), "keep me");
}

#[tokio::test]
async fn two_schemas_on_one_server_are_separate_deployments() {
    let (a, b) = (TempSchema::new(), TempSchema::new());
    let (sa, sb) = (a.store().await, b.store().await);
    let t = TenantId::default_tenant();
    sa.create_run(&t, &NewRun::default()).await.unwrap();
    assert!(matches!(
        sb.list_runs(&t).await.unwrap_err(),
        Error::UnknownTenant { .. }
    ));
}

#[test]
fn urls_are_checked_and_passwords_never_shown() {
    assert_eq!(
        redact("postgres://bob:hunter2@db:5432/x"),
        "postgres://bob:***@db:5432/x"
    );
    assert_eq!(
        redact("postgres://db/x?user=bob&password=hunter2"),
        "postgres://db/x?user=bob&password=***"
    );
    let err = PgStore::connect_without_migrating(&with_schema(
        "postgres://bob:hunter2@127.0.0.1/x",
        "Bad-Name",
    ))
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("schema \"Bad-Name\"") && !text.contains("hunter2"),
        "{text}"
    );
    let err =
        PgStore::connect_without_migrating("postgres://bob:hunter2@127.0.0.1/x?sslmode=sometimes")
            .unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    // Port 1 on loopback: nothing listens there.
    let err = PgStore::connect("postgres://postgres:secret@127.0.0.1:1/test?connect_timeout=2")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Unavailable { .. }), "{text}");
    assert!(
        text.contains("127.0.0.1:1") && !text.contains("secret"),
        "{text}"
    );
    let _ = server_url();
}
