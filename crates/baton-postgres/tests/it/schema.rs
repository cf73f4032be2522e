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
    // Passwords holding URL delimiters: the driver reads the user info up to the first '@'.
    for url in [
        "postgres://u:hunter/2@h:5432/db",
        "postgres://u:hunter?2@h/db",
        "postgres://u:hun#ter2@h/db?schema=s",
    ] {
        let shown = redact(url);
        assert!(
            !shown.contains("hunter") && !shown.contains("hun#"),
            "{url} -> {shown}"
        );
        assert!(shown.starts_with("postgres://u:***@h"), "{shown}");
    }
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

#[tokio::test]
async fn a_version_1_schema_is_migrated_and_its_history_becomes_searchable() {
    use baton_core::{ContentBlock, RunId};
    use baton_store::SearchKind;
    use baton_store::conformance::found;
    let schema = TempSchema::new();
    let raw = schema.raw().await;
    let t = TenantId::default_tenant();
    // What baton 1 made: its schema, at version 1, with rows appended before search existed.
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\"; SET search_path = \"{0}\";
         CREATE TABLE baton_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL);
         INSERT INTO baton_schema VALUES (1, 0);
         {1}",
        schema.name,
        include_str!("../../migrations/0001_init.sql")
    ))
    .await
    .unwrap();
    raw.execute(
        "INSERT INTO tenants (id, created_at) VALUES ($1, 0)",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    // Two runs, so the backfill crosses runs; more rows than one backfill batch.
    for (pk, id) in [(1i64, "old"), (2, "other")] {
        raw.execute(
            "INSERT INTO runs (pk, tenant_id, id, status, last_seq, created_at)
             VALUES ($1, $2, $3, 'active', 1200, 0)",
            &[&pk, &t.as_str(), &id],
        )
        .await
        .unwrap();
    }
    let result = Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: "t1".into(),
            content: vec![ContentBlock::Text {
                text: "config/net.toml:3: retry_budget = 4".into(),
            }],
            is_error: false,
        }],
    };
    for pk in [1i64, 2] {
        for seq in 1..=1200i64 {
            let message = match seq {
                1 => Message::text(Role::User, "Find where the Retry Budget is set."),
                1200 if pk == 1 => result.clone(),
                _ => Message::text(Role::Assistant, format!("step {seq} of run {pk}")),
            };
            raw.execute(
                "INSERT INTO history (run_pk, seq, tokens, tool_uses, tool_results, created_at, message)
                 VALUES ($1, $2, 5, NULL, NULL, 0, $3)",
                &[&pk, &seq, &serde_json::to_string(&message).unwrap()],
            )
            .await
            .unwrap();
        }
    }
    let store = schema.store().await;
    assert!(store.migrate().await.unwrap().is_empty());
    assert_eq!(
        store.doctor().await.unwrap().schema_version,
        baton_postgres::SCHEMA_VERSION
    );
    let (run, other) = (RunId::new("old").unwrap(), RunId::new("other").unwrap());
    let tool_result = Some(SearchKind::ToolResult);
    assert_eq!(
        found(&store, &t, &run, "retry budget", None).await,
        [1, 1200]
    );
    assert_eq!(
        found(&store, &t, &run, "retry budget", tool_result).await,
        [1200]
    );
    assert_eq!(
        found(&store, &t, &run, "step 1001 of run 1", None).await,
        [1001]
    );
    assert_eq!(
        found(&store, &t, &other, "step 999 of run 2", None).await,
        [999]
    );
    let indexed: i64 = raw
        .query_one(
            &format!("SELECT COUNT(*) FROM \"{}\".history_search", schema.name),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexed, 2400, "every old message, exactly once");
}

#[tokio::test]
async fn a_callers_options_parameter_is_kept_beside_the_search_path() {
    let schema = TempSchema::new();
    let url = format!("{}&options=-c%20statement_timeout%3D4321", schema.url);
    let store = PgStore::connect(&url).await.unwrap();
    let doctor = store.doctor().await.unwrap();
    let setting = |name: &str| {
        doctor
            .settings
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(setting("statement_timeout").as_deref(), Some("4321ms"));
    assert_eq!(
        setting("search_path").as_deref(),
        Some(schema.name.as_str())
    );
}

// issue 17, item 6: a schema imported before version 11 gets projects and titles.
#[tokio::test]
async fn a_version_10_schema_gets_projects_and_titles_and_can_delete_runs() {
    use baton_core::RunId;
    use baton_store::conformance::found;
    let schema = TempSchema::new();
    let raw = schema.raw().await;
    let t = TenantId::default_tenant();
    let migrations = [
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
    ];
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\"; SET search_path = \"{0}\";
         CREATE TABLE baton_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL);
         INSERT INTO baton_schema SELECT v, 0 FROM generate_series(1, 10) v;
         {1}",
        schema.name,
        migrations.join("\n")
    ))
    .await
    .unwrap();
    raw.execute(
        "INSERT INTO tenants (id, created_at) VALUES ($1, 0)",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    let json = |m: Message| serde_json::to_string(&m).unwrap();
    let runs: [(i64, Vec<String>); 2] = [
        (
            1,
            vec![
                // A NUL (kept escaped in JSON) that jsonb cannot hold: passed over.
                json(Message::text(Role::User, "a\u{0}b")),
                json(Message::text(
                    Role::User,
                    "<command-name>/init</command-name>",
                )),
                json(Message::text(
                    Role::User,
                    "\n  Fix the flaky parser test  \nthen twice",
                )),
            ],
        ),
        (
            2,
            vec![json(Message::text(
                Role::User,
                "Refactor the token counter so that it never allocates on the hot path and keeps the same counts",
            ))],
        ),
    ];
    for (pk, messages) in &runs {
        let n = messages.len() as i64;
        raw.execute(
            "INSERT INTO runs (pk, tenant_id, id, status, last_seq, created_at)
             VALUES ($1, $2, $3, 'active', $4, 0)",
            &[pk, &t.as_str(), &format!("run-{pk}"), &n],
        )
        .await
        .unwrap();
        for (i, m) in messages.iter().enumerate() {
            raw.execute(
                "INSERT INTO history (run_pk, seq, tokens, created_at, message) VALUES ($1, $2, 5, 0, $3)",
                &[pk, &(i as i64 + 1), m],
            )
            .await
            .unwrap();
        }
        raw.execute(
            "INSERT INTO run_origins (run_pk, tenant_id, source_key, path, format, models,
                 first_at, last_at, redactions, skipped_lines, side_branches,
                 side_branch_messages, source_messages, source_digest, imported_at, updated_at)
             VALUES ($1, $2, $3, '/logs/x.jsonl', 'claude-code', '[]',
                 '2026-01-01T10:00:00Z', '2026-01-01T11:00:00Z', 0, 0, 0, 0, $4, $5, 0, 0)",
            &[pk, &t.as_str(), &format!("key-{pk}"), &n, &"0".repeat(64)],
        )
        .await
        .unwrap();
    }
    raw.execute(
        "INSERT INTO usage_records (tenant_id, id, run_pk, session, project, agent, at, input,
             output, cache_write_5m, cache_write_1h, cache_read, estimated)
         VALUES ($1, 'r1', 1, 's', '/home/me/code/parser', 'claude-code', 5, 1, 1, 0, 0, 0, false)",
        &[&t.as_str()],
    )
    .await
    .unwrap();
    let store = schema.store().await;
    let (one, two) = (RunId::new("run-1").unwrap(), RunId::new("run-2").unwrap());
    let o1 = store.run_report(&t, &one).await.unwrap().origin.unwrap();
    assert_eq!(o1.project.as_deref(), Some("/home/me/code/parser"));
    assert_eq!(o1.title.as_deref(), Some("Fix the flaky parser test"));
    let o2 = store.run_report(&t, &two).await.unwrap().origin.unwrap();
    assert_eq!(o2.project, None);
    assert_eq!(
        o2.title.as_deref(),
        Some("Refactor the token counter so that it never allocates on the hot path and keeps…")
    );
    assert_eq!(found(&store, &t, &two, "token counter", None).await, [1]);
    store.delete_run(&t, &two).await.unwrap();
    let left: i64 = raw
        .query_one(
            &format!("SELECT COUNT(*) FROM \"{}\".history_search", schema.name),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    let err = raw
        .batch_execute(&format!("DELETE FROM \"{}\".history", schema.name))
        .await
        .unwrap_err();
    assert!(
        err.as_db_error().unwrap().message().contains("append-only"),
        "{err}"
    );
}

// issue 16: a version-12 ledger (every attempt in `attempts`) moves its live attempts into the
// operations' rows and answers as before.
#[tokio::test]
async fn a_version_12_ledger_keeps_its_answers_with_the_live_attempt_in_the_row() {
    use baton_store::conformance::{VERSION_12_LEDGER, the_version_12_ledger_reads_the_same};
    let schema = TempSchema::new();
    let raw = schema.raw().await;
    let migrations = [
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
    ];
    let hash = format!("'\\x{}'::bytea", "01".repeat(32));
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{0}\"; SET search_path = \"{0}\";
         CREATE TABLE baton_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL);
         INSERT INTO baton_schema SELECT v, 0 FROM generate_series(1, 12) v;
         {1}
         {2}",
        schema.name,
        migrations.join("\n"),
        VERSION_12_LEDGER.replace("HASH", &hash)
    ))
    .await
    .unwrap();
    let store = schema.store().await;
    assert_eq!(store.doctor().await.unwrap().schema_version, 13);
    the_version_12_ledger_reads_the_same(&store).await;
}
