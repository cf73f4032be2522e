//! The writer (issue 16, item 2): a write waiting on SQLite's lock holds no tokio worker,
//! writes queued together commit together, each with its own outcome, and a lone write runs
//! where its caller is.

use std::time::{Duration, Instant};

use baton_core::{Message, Role, RunId, Seq, TenantId};
use baton_sqlite::SqliteStore;
use baton_store::{Error, ImportRejection, NewEntry, NewImport, NewRun, Origin, Reimport, Store};

fn entry(text: &str) -> NewEntry {
    NewEntry::estimated(Message::text(Role::User, text))
}

fn import(key: &str, texts: &[&str]) -> NewImport {
    let origin = Origin {
        source_key: key.into(),
        path: format!("{key}.jsonl"),
        format: "test".into(),
        ..Origin::default()
    };
    NewImport::new(
        None,
        origin,
        texts.iter().map(|t| entry(t)).collect(),
        vec![],
    )
}

/// Another process's write transaction on the file: SQLite's one write lock, held until
/// dropped.
fn hold_write_lock(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waiting_on_another_process_lock_holds_no_worker() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let t = TenantId::default_tenant();
    let run = store.create_run(&t, &NewRun::default()).await.unwrap().id;

    let lock = hold_write_lock(&path);
    let started = Instant::now();
    // The caller's own timeout fires while the writer thread waits on the lock: under a lock
    // held in place (`block_in_place`), the append would return only once the lock is free.
    let waited = tokio::time::timeout(
        Duration::from_millis(200),
        store.append(&t, &run, &[entry("queued")]),
    )
    .await;
    assert!(
        waited.is_err(),
        "the append returned while the lock was held"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // Readers are not held up either (WAL), on the same runtime.
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(0));
    drop(lock);
    // The queued write was not lost with its caller: it commits once the lock is free, first.
    let next = store.append(&t, &run, &[entry("next")]).await.unwrap();
    assert_eq!(next, [Seq(2)]);
    let texts: Vec<String> = store
        .read_range(&t, &run, Seq(1), None)
        .await
        .unwrap()
        .iter()
        .map(|e| e.message.plain_text())
        .collect();
    assert_eq!(texts, ["queued", "next"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queued_together_commit_together_and_a_failing_one_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let t = TenantId::default_tenant();
    let run = store.create_run(&t, &NewRun::default()).await.unwrap().id;
    let cancelled = store.create_run(&t, &NewRun::default()).await.unwrap().id;
    store.cancel_run(&t, &cancelled).await.unwrap();
    let imported = store
        .import(&t, vec![import("edited", &["a", "b"])], Reimport::No)
        .await
        .unwrap();
    let edited = imported[0].id().clone();

    // While another process holds the lock, every write below queues; when it lets go, the
    // writer thread takes them together and commits them in one transaction.
    let lock = hold_write_lock(&path);
    let mut appends = Vec::new();
    for i in 0..20 {
        let (store, t, run) = (store.clone(), t.clone(), run.clone());
        appends.push(tokio::spawn(async move {
            store.append(&t, &run, &[entry(&format!("m{i}"))]).await
        }));
    }
    let refused = {
        let (store, t, run) = (store.clone(), t.clone(), cancelled.clone());
        tokio::spawn(async move { store.append(&t, &run, &[entry("late")]).await })
    };
    // A file whose first transcript is new and whose second was edited since its import: the
    // job writes a run, then fails, and its savepoint takes the run back.
    let half = {
        let (store, t) = (store.clone(), t.clone());
        let file = vec![import("fresh", &["x"]), import("edited", &["z", "y", "w"])];
        tokio::spawn(async move { store.import(&t, file, Reimport::AppendNew).await })
    };
    let duplicate = {
        let (store, t, id) = (store.clone(), t.clone(), run.clone());
        let new = NewRun {
            id: Some(id),
            ..NewRun::default()
        };
        tokio::spawn(async move { store.create_run(&t, &new).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(lock);

    let mut seqs = Vec::new();
    for append in appends {
        seqs.extend(append.await.unwrap().unwrap());
    }
    seqs.sort();
    assert_eq!(
        seqs,
        (1..=20).map(Seq).collect::<Vec<_>>(),
        "gap-free, none lost"
    );
    let err = refused.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::RunNotActive { .. }), "{err}");
    let err = half.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::Import(ImportRejection::Diverged { .. })),
        "{err}"
    );
    let err = duplicate.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::RunExists { .. }), "{err}");

    // Reopened: the twenty appends are there, nothing of the failed ones.
    drop(store);
    let store = SqliteStore::open(&path).await.unwrap();
    assert_eq!(store.run(&t, &run).await.unwrap().last_seq, Seq(20));
    assert_eq!(store.run(&t, &cancelled).await.unwrap().last_seq, Seq(0));
    assert_eq!(store.run(&t, &edited).await.unwrap().last_seq, Seq(2));
    let runs: Vec<RunId> = store
        .list_runs(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        runs,
        [run, cancelled, edited],
        "the fresh transcript's run rolled back"
    );
}

/// The thread a write job ran on, through the backend's own write path.
async fn writer_thread_of(store: &SqliteStore) -> String {
    use baton_store::backend::Backend;
    store
        .write(|_tx| {
            Box::pin(async move {
                Ok(std::thread::current()
                    .name()
                    .unwrap_or("unnamed")
                    .to_owned())
            })
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_write_runs_where_its_caller_is_and_a_contended_one_on_the_writer_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let store = SqliteStore::open(&path).await.unwrap();

    // Nothing queued, the connection and SQLite's lock free: no thread hop.
    let lone = writer_thread_of(&store).await;
    assert_ne!(lone, "baton-sqlite-writer", "a lone write hopped threads");

    // Another process holds the write lock: the caller does not wait for it, the thread does.
    let lock = hold_write_lock(&path);
    let contended = {
        let store = store.clone();
        tokio::spawn(async move { writer_thread_of(&store).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(lock);
    assert_eq!(contended.await.unwrap(), "baton-sqlite-writer");

    // And once the lock is free again, the next lone write is back on its caller's thread.
    assert_ne!(writer_thread_of(&store).await, "baton-sqlite-writer");
}

#[test]
fn writes_from_many_threads_and_runtimes_racing_another_process_are_gap_free() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = multi.block_on(SqliteStore::open(&path)).unwrap();
    let t = TenantId::default_tenant();
    let run = multi
        .block_on(store.create_run(&t, &NewRun::default()))
        .unwrap()
        .id;

    // Another process takes SQLite's write lock now and then, so some writes start at once on
    // their caller's thread and others queue behind the lock.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.busy_timeout(Duration::from_secs(30)).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                conn.execute_batch("BEGIN IMMEDIATE").unwrap();
                std::thread::sleep(Duration::from_millis(2));
                conn.execute_batch("COMMIT").unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    // Tasks on the multi-thread runtime, and plain threads each on a current-thread runtime.
    let tasks: Vec<_> = (0..16)
        .map(|w| {
            let (store, t, run) = (store.clone(), t.clone(), run.clone());
            multi.spawn(async move {
                for i in 0..60 {
                    store
                        .append(&t, &run, &[entry(&format!("task {w} {i}"))])
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let (store, t, run) = (store.clone(), t.clone(), run.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                for i in 0..60 {
                    rt.block_on(store.append(&t, &run, &[entry(&format!("thread {w} {i}"))]))
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        multi.block_on(task).unwrap();
    }
    for thread in threads {
        thread.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    other.join().unwrap();

    let stored = multi
        .block_on(store.read_range(&t, &run, Seq(1), None))
        .unwrap();
    let seqs: Vec<Seq> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=1200).map(Seq).collect::<Vec<_>>(), "gap-free");
    let mut texts: Vec<String> = stored.iter().map(|e| e.message.plain_text()).collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), 1200, "each write stored once");
}
