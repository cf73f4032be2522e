//! The facade's examples run as CI runs them: `agent_loop` on its own temporary SQLite file,
//! `gateway_client` against `baton serve`'s service on a loopback port with a real key.
//! `cargo test` builds the examples next to this test binary; the test runs them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

use baton::store::keys;
use baton::{TenantId, Timestamp};

/// The built example `name`, beside this test's own binary (`target/<profile>/examples/`).
fn example(name: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let path: PathBuf = profile.join("examples").join(name);
    assert!(
        path.is_file(),
        "{} not built (cargo test builds the examples)",
        path.display()
    );
    Command::new(path)
}

#[track_caller]
fn succeeded(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn agent_loop_appends_compacts_and_assembles() {
    let stdout = succeeded(&example("agent_loop").output().unwrap());
    assert!(stdout.contains("compacted through seq"), "{stdout}");
    // The task, then 30 turns of a tool call and its result: history keeps all of them.
    assert!(
        stdout.contains("history: 61 messages, all kept"),
        "{stdout}"
    );
}

#[test]
fn gateway_client_talks_to_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, key) = rt.block_on(async {
        let store = baton::open(dir.path().join("served.db").to_str().unwrap())
            .await
            .unwrap();
        let made = keys::generate().unwrap();
        let tenant = TenantId::default_tenant();
        let new = keys::NewApiKey {
            id: &made.id,
            hash: made.hash,
            tenant: &tenant,
            label: Some("example"),
            now: Timestamp::now(),
        };
        store.create_api_key(&new).await.unwrap();
        let state = baton_server::AppState::new(Arc::clone(&store), Default::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(baton_server::serve(listener, state, std::future::pending()));
        (addr, made.key)
    });
    let out = example("gateway_client")
        .env("BATON_URL", format!("http://{addr}"))
        .env("BATON_KEY", &key)
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(stdout.contains("appended seqs [1,2]"), "{stdout}");
    assert!(stdout.contains("context of 2 messages"), "{stdout}");
    drop(rt);
}
