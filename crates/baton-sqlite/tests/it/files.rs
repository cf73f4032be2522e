//! What SQLite's file adds to the contract: refusing strangers' files and newer schemas,
//! migrating idempotently, and enforcing append-only history below the API too.

use baton_core::{Message, Role, TenantId};
use baton_sqlite::{SCHEMA_VERSION, SqliteStore};
use baton_store::{Error, NewEntry, NewRun, Store};

#[tokio::test]
async fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    let junk = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &junk).unwrap();
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(matches!(err, Error::NotABatonDatabase { .. }), "{err}");
    assert!(err.to_string().contains("not a baton database"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), junk);
}

#[tokio::test]
async fn another_programs_sqlite_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE songs (title TEXT); INSERT INTO songs VALUES ('la');")
            .unwrap();
    }
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(matches!(err, Error::NotABatonDatabase { .. }), "{err}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1, "nothing was added to the stranger's file");
}

#[tokio::test]
async fn a_newer_schema_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    drop(SqliteStore::open(&path).await.unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
            .unwrap();
    }
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found, .. } if found == SCHEMA_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade baton"), "{err}");
}

#[tokio::test]
async fn opening_twice_migrates_once_and_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let t = TenantId::default_tenant();
    let store = SqliteStore::open(&path).await.unwrap();
    let run = store.create_run(&t, &NewRun::default()).await.unwrap();
    drop(store);
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.run(&t, &run.id).await.unwrap().id, run.id);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
}

#[tokio::test]
async fn history_rows_cannot_be_updated_or_deleted_even_with_raw_sql() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let t = TenantId::default_tenant();
    let store = SqliteStore::open(&path).await.unwrap();
    let run = store.create_run(&t, &NewRun::default()).await.unwrap();
    store
        .append(
            &t,
            &run.id,
            &[NewEntry::estimated(Message::text(Role::User, "keep me"))],
        )
        .await
        .unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let update = conn
        .execute("UPDATE history SET message = '{}'", [])
        .unwrap_err();
    assert!(update.to_string().contains("append-only"), "{update}");
    let delete = conn.execute("DELETE FROM history", []).unwrap_err();
    assert!(delete.to_string().contains("append-only"), "{delete}");
    let entries = store
        .read_range(&t, &run.id, baton_core::Seq(1), None)
        .await
        .unwrap();
    assert_eq!(entries[0].message.plain_text(), "keep me");
}

#[tokio::test]
async fn concurrent_first_opens_of_a_new_file_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let opens: Vec<_> = (0..8)
        .map(|_| tokio::spawn(SqliteStore::open(path.clone())))
        .collect();
    for open in opens {
        open.await.unwrap().unwrap();
    }
}

/// The messages a version-1 file holds before search existed: text, a tool call, its result.
fn old_messages() -> Vec<Message> {
    use baton_core::ContentBlock;
    vec![
        Message::text(Role::User, "Find where the Retry Budget is set."),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "t1".into(),
                name: "grep".into(),
                input: serde_json::json!({"pattern": "retry_budget"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "t1".into(),
                content: vec![ContentBlock::Text {
                    text: "config/net.toml:3: retry_budget = 4".into(),
                }],
                is_error: false,
            }],
        },
    ]
}

#[tokio::test]
async fn a_version_1_file_is_migrated_and_its_history_becomes_searchable() {
    use baton_core::{RunId, Seq};
    use baton_store::SearchKind;
    use baton_store::conformance::found;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let t = TenantId::default_tenant();
    {
        // What baton 1 wrote: its schema, its header, rows appended before search existed.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../migrations/0001_init.sql"))
            .unwrap();
        conn.execute_batch("PRAGMA application_id = 1650553966; PRAGMA user_version = 1;")
            .unwrap();
        conn.execute(
            "INSERT INTO tenants (id, created_at) VALUES (?1, 0)",
            [t.as_str()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO runs (pk, tenant_id, id, status, last_seq, created_at)
             VALUES (1, ?1, 'old', 'active', 3, 0)",
            [t.as_str()],
        )
        .unwrap();
        for (i, m) in old_messages().iter().enumerate() {
            let ids = |v: Vec<&str>| (!v.is_empty()).then(|| serde_json::to_string(&v).unwrap());
            conn.execute(
                "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
                 VALUES (1, ?1, 5, ?2, ?3, 0, ?4)",
                rusqlite::params![
                    i as i64 + 1,
                    ids(m.tool_use_ids().collect()),
                    ids(m.tool_result_ids().collect()),
                    serde_json::to_string(m).unwrap()
                ],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&path).await.unwrap();
    {
        // Migrating indexes nothing: the first search of the run does.
        let conn = rusqlite::Connection::open(&path).unwrap();
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM history_search", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
    }
    let run = RunId::new("old").unwrap();
    let tool_result = Some(SearchKind::ToolResult);
    assert_eq!(
        found(&store, &t, &run, "retry budget", None).await,
        [1, 2, 3]
    );
    assert_eq!(
        found(&store, &t, &run, "retry budget", tool_result).await,
        [3]
    );
    // Messages appended after the first search are indexed by the next one.
    store
        .append(
            &t,
            &run,
            &[NewEntry::estimated(Message::text(
                Role::Assistant,
                "The retry budget is 4.",
            ))],
        )
        .await
        .unwrap();
    assert_eq!(
        found(&store, &t, &run, "retry budget is 4", None).await,
        [4]
    );
    assert_eq!(
        store
            .read_range(&t, &run, Seq(1), None)
            .await
            .unwrap()
            .len(),
        4
    );
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    // The index rows are append-only too.
    let err = conn.execute("DELETE FROM history_search", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}
