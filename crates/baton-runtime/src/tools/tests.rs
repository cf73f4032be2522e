//! Each tool on a real temporary directory (and `recall` on a real SQLite store): what it does,
//! and the bad inputs it answers with an error the model can read.

use std::time::{Duration, Instant};

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
    let dir = tempfile::tempdir().unwrap();
    let w = &dir.path().canonicalize().unwrap();
    assert_eq!(resolve(w, "a/b.txt").unwrap(), w.join("a/b.txt"));
    assert_eq!(resolve(w, "./a/../b").unwrap(), w.join("b"));
    let inside = w.join("x");
    assert_eq!(resolve(w, inside.to_str().unwrap()).unwrap(), inside);
    for bad in ["../etc/passwd", "a/../../x", "/etc/passwd"] {
        let err = resolve(w, bad).unwrap_err();
        assert!(
            err.contains("outside the working directory"),
            "{bad}: {err}"
        );
    }
}

/// A symbolic link inside the working directory that points out of it does not let a tool
/// out: reading, writing and editing through it are refused, naming the path, and the file
/// outside is untouched. Links that stay inside work.
#[tokio::test(flavor = "multi_thread")]
async fn symbolic_links_do_not_lead_out_of_the_working_directory() {
    let f = fixture().await;
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "the secret\n").unwrap();
    std::os::unix::fs::symlink("../outside", f.workdir().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), f.workdir().join("secret")).unwrap();
    std::os::unix::fs::symlink(outside.join("new.txt"), f.workdir().join("dangling")).unwrap();
    std::os::unix::fs::symlink("src", f.workdir().join("code")).unwrap();
    let calls = [
        (
            "read_file",
            json!({"path": "link/secret.txt"}),
            "link/secret.txt",
        ),
        ("read_file", json!({"path": "secret"}), "secret"),
        (
            "write_file",
            json!({"path": "link/secret.txt", "content": "x"}),
            "link/secret.txt",
        ),
        (
            "write_file",
            json!({"path": "link/sub/new.txt", "content": "x"}),
            "link/sub/new.txt",
        ),
        (
            "write_file",
            json!({"path": "dangling", "content": "x"}),
            "dangling",
        ),
        (
            "edit_file",
            json!({"path": "link/secret.txt", "old_string": "secret", "new_string": "x"}),
            "link/secret.txt",
        ),
        ("list_dir", json!({"path": "link"}), "link"),
        ("grep", json!({"pattern": "secret", "path": "link"}), "link"),
    ];
    for (tool, input, path) in calls {
        let err = f.call(tool, input).await.unwrap_err();
        assert!(
            err.starts_with(&format!("{path}: refused: ")),
            "{tool} {path}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "the secret\n"
    );
    assert!(!outside.join("new.txt").exists());
    assert!(!outside.join("sub").exists());
    // A link that stays inside is followed.
    assert!(
        f.call("read_file", json!({"path": "code/main.rs"}))
            .await
            .unwrap()
            .contains("println!")
    );
}

/// `grep` walks without following links (a loop `a -> .` would never end, a link may lead out),
/// skips files over the cap (and says how many), and skips FIFOs instead of blocking on them.
#[tokio::test(flavor = "multi_thread")]
async fn grep_follows_no_links_and_skips_big_and_special_files() {
    let f = fixture().await;
    let outside = f.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("o.txt"), "retry from outside\n").unwrap();
    std::os::unix::fs::symlink(".", f.workdir().join("a")).unwrap();
    std::os::unix::fs::symlink("../outside", f.workdir().join("out")).unwrap();
    std::os::unix::fs::symlink(outside.join("o.txt"), f.workdir().join("o.txt")).unwrap();
    let big = format!("retry\n{}", "x".repeat(GREP_FILE_CAP as usize));
    std::fs::write(f.workdir().join("big.log"), big).unwrap();
    let fifo = f.workdir().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let found = tokio::time::timeout(
        Duration::from_secs(20),
        f.call("grep", json!({"pattern": "retry"})),
    )
    .await
    .expect("grep finished")
    .unwrap();
    assert_eq!(
        found,
        "notes.txt:1: todo: retry budget\n[1 files over 1024 KiB not searched]"
    );
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
    // The output cap holds for each stream, and says how much was cut.
    let big = f
        .call(
            "run_command",
            json!({"command": "head -c 100000 /dev/zero | tr '\\\\0' x"}),
        )
        .await
        .unwrap();
    assert!(big.len() < OUTPUT_CAP + 100, "{}", big.len());
    assert!(
        big.ends_with("more bytes of stdout cut]"),
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

/// Whether process `pid` is gone (a zombie, killed and waiting to be reaped, counts as gone).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

#[track_caller]
fn assert_gone_soon(pid: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} survived the kill: {:?}",
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The timeout kills the command's whole process group, not only `sh`: a grandchild that
/// would run on (`sleep 37`) is killed too. So is it when the call is dropped (a cancelled
/// turn).
#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_or_a_cancelled_call_kills_every_process_of_the_command() {
    let f = fixture().await;
    let err = f
        .call(
            "run_command",
            json!({"command": "sleep 37 & echo $! > grandchild.pid; wait; echo x", "timeout_secs": 1}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        "run_command: no exit within 1 s; the command was killed"
    );
    let pid = std::fs::read_to_string(f.workdir().join("grandchild.pid")).unwrap();
    assert_gone_soon(pid.trim());

    let pid_file = f.workdir().join("cancelled.pid");
    let call = f.call(
        "run_command",
        json!({"command": "sleep 38 & echo $! > cancelled.pid; wait"}),
    );
    let dropped = tokio::time::timeout(Duration::from_millis(1500), call).await;
    assert!(dropped.is_err(), "the call was still running: {dropped:?}");
    let pid = std::fs::read_to_string(pid_file).unwrap();
    assert_gone_soon(pid.trim());
}

/// A command writing far more than a pipe holds to stderr (and to stdout) finishes; both
/// streams are read at once, each kept up to the cap.
#[tokio::test(flavor = "multi_thread")]
async fn heavy_stderr_neither_deadlocks_nor_grows_without_bound() {
    let f = fixture().await;
    let out = f
        .call(
            "run_command",
            json!({"command": "yes e | head -c 300000 >&2; yes o | head -c 300000; echo done >&2", "timeout_secs": 20}),
        )
        .await
        .unwrap();
    assert!(out.starts_with("exit 0\no\no\n"), "{}", &out[..40]);
    assert!(out.contains("more bytes of stdout cut]"), "{}", out.len());
    assert!(out.contains("more bytes of stderr cut]"), "{}", out.len());
    assert!(out.len() < OUTPUT_CAP + 100, "{}", out.len());
    let err_only = f
        .call(
            "run_command",
            json!({"command": "yes e | head -c 300000 >&2; echo done", "timeout_secs": 20}),
        )
        .await
        .unwrap();
    assert!(
        err_only.starts_with("exit 0\ndone\n\n[stderr]\ne\ne\n"),
        "{}",
        &err_only[..40]
    );
    assert!(
        // stdout's "done\n" leaves the rest of the cap to stderr.
        err_only.contains(&format!(
            "[… {} more bytes of stderr cut]",
            300_000 - (OUTPUT_CAP - 5)
        )),
        "{}",
        &err_only[err_only.len() - 80..]
    );
}
