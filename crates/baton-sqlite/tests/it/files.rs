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

/// The history of the version-10 runs below: `(run pk, messages as JSON)`. Run 1 opens with
/// a command's markup, then the instruction; run 2's instruction is longer than a title.
fn version_10_history() -> Vec<(i64, Vec<String>)> {
    let json = |m: Message| serde_json::to_string(&m).unwrap();
    vec![
        (
            1,
            vec![
                json(Message::text(
                    Role::User,
                    "<command-name>/init</command-name>",
                )),
                json(Message::text(Role::Assistant, "ok")),
                json(Message::text(
                    Role::User,
                    "\n  Fix the flaky parser test  \nthen run it twice",
                )),
            ],
        ),
        (
            2,
            vec![json(Message::text(
                Role::User,
                "Refactor the token counter so that it never allocates on the hot path and keeps the same counts as before",
            ))],
        ),
    ]
}

// issue 17, item 6: a database imported before version 11 gets projects and titles.
#[tokio::test]
async fn a_version_10_file_gets_projects_and_titles_and_can_delete_runs() {
    use baton_core::RunId;
    use baton_store::conformance::found;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let t = TenantId::default_tenant();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for sql in [
            include_str!("../../migrations/0001_init.sql"),
            include_str!("../../migrations/0002_search.sql"),
            include_str!("../../migrations/0003_import.sql"),
            include_str!("../../migrations/0004_compaction.sql"),
            include_str!("../../migrations/0005_agent.sql"),
            include_str!("../../migrations/0006_cache.sql"),
            include_str!("../../migrations/0007_ledger.sql"),
            include_str!("../../migrations/0008_api_keys.sql"),
            include_str!("../../migrations/0009_ledger_by_key.sql"),
            include_str!("../../migrations/0010_usage.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch("PRAGMA application_id = 1650553966; PRAGMA user_version = 10;")
            .unwrap();
        conn.execute(
            "INSERT INTO tenants (id, created_at) VALUES (?1, 0)",
            [t.as_str()],
        )
        .unwrap();
        for (pk, messages) in version_10_history() {
            conn.execute(
                "INSERT INTO runs (pk, tenant_id, id, status, last_seq, created_at)
                 VALUES (?1, ?2, ?3, 'active', ?4, 0)",
                rusqlite::params![pk, t.as_str(), format!("run-{pk}"), messages.len() as i64],
            )
            .unwrap();
            for (i, m) in messages.iter().enumerate() {
                conn.execute(
                    "INSERT INTO history (run_pk, seq, tokens, created_at, message)
                     VALUES (?1, ?2, 5, 0, ?3)",
                    rusqlite::params![pk, i as i64 + 1, m],
                )
                .unwrap();
            }
            conn.execute(
                "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, models,
                     first_at, last_at, redactions, skipped_lines, side_branches,
                     side_branch_messages, source_messages, source_digest, imported_at, updated_at)
                 VALUES (?1, ?2, ?3, '/logs/x.jsonl', 'claude-code', '[]',
                     '2026-01-01T10:00:00Z', '2026-01-01T11:00:00Z', 0, 0, 0, 0, ?4, ?5, 0, 0)",
                rusqlite::params![
                    pk,
                    t.as_str(),
                    format!("key-{pk}"),
                    messages.len() as i64,
                    "0".repeat(64)
                ],
            )
            .unwrap();
        }
        // Only run 1's usage names its project.
        conn.execute(
            "INSERT INTO usage_records (tenant_id, id, run_pk, session, project, agent, at, input,
                 output, cache_write_5m, cache_write_1h, cache_read, estimated)
             VALUES (?1, 'r1', 1, 's', '/home/me/code/parser', 'claude-code', 5, 1, 1, 0, 0, 0, 0)",
            [t.as_str()],
        )
        .unwrap();
        // Run 2 was searched: its index rows exist under version 10's FTS table.
        conn.execute_batch(
            "INSERT INTO history_search (id, run_pk, seq, kind, part) VALUES (1, 2, 1, 'text', 0);
             INSERT INTO history_search_words (rowid, body) VALUES (1, 'refactor the token counter');
             INSERT INTO search_progress VALUES (2, 1);",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    let (one, two) = (RunId::new("run-1").unwrap(), RunId::new("run-2").unwrap());
    let o1 = store.run_report(&t, &one).await.unwrap().origin.unwrap();
    assert_eq!(o1.project.as_deref(), Some("/home/me/code/parser"));
    assert_eq!(o1.title.as_deref(), Some("Fix the flaky parser test"));
    let o2 = store.run_report(&t, &two).await.unwrap().origin.unwrap();
    assert_eq!(o2.project, None);
    // Cut at 80 characters, trailing space trimmed, as `baton_import::title_of` cuts.
    assert_eq!(
        o2.title.as_deref(),
        Some("Refactor the token counter so that it never allocates on the hot path and keeps…")
    );
    // The index was rebuilt empty, and the first search fills it again.
    assert_eq!(found(&store, &t, &two, "token counter", None).await, [1]);
    // The deletion path works on a migrated file, words and all.
    store.delete_run(&t, &two).await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let words: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM history_search_words WHERE history_search_words MATCH 'counter'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(words, 0);
    let err = conn.execute("DELETE FROM history", []).unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

// issue 16: a version-12 ledger (every attempt in `attempts`) moves its live attempts into the
// operations' rows and answers as before.
#[tokio::test]
async fn a_version_12_ledger_keeps_its_answers_with_the_live_attempt_in_the_row() {
    use baton_store::conformance::{VERSION_12_LEDGER, the_version_12_ledger_reads_the_same};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        for sql in [
            include_str!("../../migrations/0001_init.sql"),
            include_str!("../../migrations/0002_search.sql"),
            include_str!("../../migrations/0003_import.sql"),
            include_str!("../../migrations/0004_compaction.sql"),
            include_str!("../../migrations/0005_agent.sql"),
            include_str!("../../migrations/0006_cache.sql"),
            include_str!("../../migrations/0007_ledger.sql"),
            include_str!("../../migrations/0008_api_keys.sql"),
            include_str!("../../migrations/0009_ledger_by_key.sql"),
            include_str!("../../migrations/0010_usage.sql"),
            include_str!("../../migrations/0011_runs.sql"),
            include_str!("../../migrations/0012_deleted_sources.sql"),
        ] {
            conn.execute_batch(sql).unwrap();
        }
        conn.execute_batch("PRAGMA application_id = 1650553966; PRAGMA user_version = 12;")
            .unwrap();
        let hash = format!("X'{}'", "01".repeat(32));
        conn.execute_batch(&VERSION_12_LEDGER.replace("HASH", &hash))
            .unwrap();
    }
    let store = SqliteStore::open(&path).await.unwrap();
    the_version_12_ledger_reads_the_same(&store).await;
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 13);
}
