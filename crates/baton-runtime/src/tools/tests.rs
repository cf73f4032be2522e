//! Each tool on a real temporary directory (and `recall` on a real SQLite store): what it does,
//! and the bad inputs it answers with an error the model can read.

use std::path::Path;

use baton_core::{Message, Role, RunId, TenantId};
use baton_sqlite::SqliteStore;
use baton_store::{NewEntry, NewRun, Store};
use serde_json::json;

use super::*;

struct Fixture {
    dir: tempfile::TempDir,
    store: SqliteStore,
    tenant: TenantId,
    run: RunId,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("b.db")).await.unwrap();
    let tenant = TenantId::default_tenant();
    let run = store
        .create_run(&tenant, &NewRun::default())
        .await
        .unwrap()
        .id;
    std::fs::create_dir_all(dir.path().join("work/src")).unwrap();
    std::fs::write(
        dir.path().join("work/src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("work/notes.txt"), "todo: retry budget\n").unwrap();
    Fixture {
        dir,
        store,
        tenant,
        run,
    }
}

impl Fixture {
    fn workdir(&self) -> std::path::PathBuf {
        self.dir.path().join("work")
    }

    async fn call(&self, name: &str, input: serde_json::Value) -> Result<String, String> {
        let workdir = self.workdir();
        let ctx = ToolContext {
            workdir: &workdir,
            store: &self.store,
            tenant: &self.tenant,
            run: &self.run,
        };
        Toolbox::standard()
            .get(name)
            .unwrap()
            .call(&input, &ctx)
            .await
    }
}

#[test]
fn paths_stay_inside_the_working_directory() {
    let w = Path::new("/w");
    assert_eq!(resolve(w, "a/b.txt").unwrap(), Path::new("/w/a/b.txt"));
    assert_eq!(resolve(w, "./a/../b").unwrap(), Path::new("/w/b"));
    assert_eq!(resolve(w, "/w/x").unwrap(), Path::new("/w/x"));
    for bad in ["../etc/passwd", "a/../../x", "/etc/passwd"] {
        let err = resolve(w, bad).unwrap_err();
        assert!(
            err.contains("outside the working directory"),
            "{bad}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_read_listed_searched_written_and_edited() {
    let f = fixture().await;
    assert!(
        f.call("read_file", json!({"path": "src/main.rs"}))
            .await
            .unwrap()
            .contains("println!")
    );
    assert_eq!(
        f.call("list_dir", json!({"path": "."})).await.unwrap(),
        "notes.txt\nsrc/"
    );
    assert_eq!(
        f.call("grep", json!({"pattern": "retry"})).await.unwrap(),
        "notes.txt:1: todo: retry budget"
    );
    assert_eq!(
        f.call("grep", json!({"pattern": "nothing-here"}))
            .await
            .unwrap(),
        "no match"
    );
    f.call(
        "write_file",
        json!({"path": "out/new.txt", "content": "hello"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("out/new.txt")).unwrap(),
        "hello"
    );
    f.call(
        "edit_file",
        json!({"path": "notes.txt", "old_string": "retry", "new_string": "token"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.workdir().join("notes.txt")).unwrap(),
        "todo: token budget\n"
    );
    // Bad inputs come back as errors the model reads.
    let missing = f.call("read_file", json!({})).await.unwrap_err();
    assert_eq!(missing, "invalid arguments: \"path\" is required");
    let wrong = f.call("read_file", json!({"path": 7})).await.unwrap_err();
    assert!(
        wrong.starts_with("invalid arguments: \"path\" must be a string"),
        "{wrong}"
    );
    assert!(
        f.call("read_file", json!({"path": "../b.db"}))
            .await
            .unwrap_err()
            .contains("outside")
    );
    assert!(
        f.call("read_file", json!({"path": "nope.txt"}))
            .await
            .unwrap_err()
            .starts_with("nope.txt: ")
    );
    let twice = f
        .call(
            "edit_file",
            json!({"path": "src/main.rs", "old_string": "\n", "new_string": ""}),
        )
        .await
        .unwrap_err();
    assert!(twice.contains("occurs 3 times"), "{twice}");
    let regex = f.call("grep", json!({"pattern": "("})).await.unwrap_err();
    assert!(regex.starts_with("invalid arguments: pattern: "), "{regex}");
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_with_a_timeout_and_an_output_cap() {
    let f = fixture().await;
    let out = f
        .call(
            "run_command",
            json!({"command": "echo hi; echo oops >&2; exit 3"}),
        )
        .await
        .unwrap();
    assert_eq!(out, "exit 3\nhi\n\n[stderr]\noops\n");
    let slow = f
        .call(
            "run_command",
            json!({"command": "sleep 5", "timeout_secs": 1}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        slow,
        "run_command: no exit within 1 s; the command was killed"
    );
    let big = f
        .call(
            "run_command",
            json!({"command": "head -c 100000 /dev/zero | tr '\\\\0' x"}),
        )
        .await
        .unwrap();
    assert!(big.len() < OUTPUT_CAP + 100, "{}", big.len());
    assert!(
        big.ends_with("more bytes cut]"),
        "{}",
        &big[big.len() - 40..]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn recall_reads_originals_back() {
    let f = fixture().await;
    f.store
        .append(
            &f.tenant,
            &f.run,
            &[
                NewEntry::estimated(Message::text(
                    Role::User,
                    "The deploy key is in vault path ops/deploy.",
                )),
                NewEntry::estimated(Message::text(Role::Assistant, "Noted.")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        f.call("recall", json!({"seq": 1})).await.unwrap(),
        "[seq 1 user]\nThe deploy key is in vault path ops/deploy."
    );
    assert!(
        f.call("recall", json!({"from": 1, "to": 2}))
            .await
            .unwrap()
            .contains("[seq 2 assistant]\nNoted.")
    );
    assert!(
        f.call("recall", json!({"pattern": "vault path"}))
            .await
            .unwrap()
            .starts_with("[seq 1 user]")
    );
    assert_eq!(
        f.call("recall", json!({"seq": 9})).await.unwrap(),
        "no message matches"
    );
    assert!(
        f.call("recall", json!({}))
            .await
            .unwrap_err()
            .starts_with("invalid arguments")
    );
}
