//! A real server on 127.0.0.1:0 over a real store (a SQLite file, or a fresh PostgreSQL schema
//! on the server `BATON_TEST_PG` names), with a key for each of two tenants, and a client.

#![allow(dead_code)]

use std::sync::Arc;

use baton_core::{TenantId, Timestamp};
use baton_server::{AppState, Config};
use baton_store::Store;
use baton_store::keys::{NewApiKey, generate};
use serde_json::Value;
use tokio::sync::oneshot;

/// Which store a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server under test.
pub fn pg_url() -> String {
    std::env::var("BATON_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A server running on its own task, stopped (gracefully) when dropped.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Tenant `acme`'s key.
    pub key: String,
    /// Tenant `other`'s key.
    pub other_key: String,
    /// The store, for checking what a request wrote.
    pub store: Arc<dyn Store>,
    /// The state (its metrics, its config).
    pub state: Arc<AppState>,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
    schema: Option<String>,
}

impl TestServer {
    /// A server on `backend` with the default configuration.
    pub async fn start(backend: Backend) -> Self {
        Self::with_config(backend, Config::default()).await
    }

    /// A server on `backend` with `config`.
    pub async fn with_config(backend: Backend, config: Config) -> Self {
        let (store, dir, schema): (Arc<dyn Store>, _, _) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let store = baton_sqlite::SqliteStore::open(&dir.path().join("baton.db"))
                    .await
                    .unwrap();
                (Arc::new(store), Some(dir), None)
            }
            Backend::Postgres => {
                let schema = format!("baton_srv_{}", uuid::Uuid::now_v7().simple());
                let url = format!("{}?schema={schema}", pg_url());
                let store = baton_postgres::PgStore::connect(&url)
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "cannot reach the test PostgreSQL at {} (set BATON_TEST_PG): {e}",
                            pg_url()
                        )
                    });
                (Arc::new(store), None, Some(schema))
            }
        };
        let key = make_key(&*store, "acme").await;
        let other_key = make_key(&*store, "other").await;
        let state = AppState::new(store.clone(), config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(baton_server::serve(listener, state.clone(), async move {
            let _ = stopped.await;
        }));
        TestServer {
            base,
            key,
            other_key,
            store,
            state,
            client: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
            schema,
        }
    }

    /// `path` under the server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `/metrics` as text.
    pub async fn metrics(&self) -> String {
        let response = self.client.get(self.url("/metrics")).send().await.unwrap();
        response.text().await.unwrap()
    }

    /// A request as tenant `acme`.
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, self.url(path))
            .bearer_auth(&self.key)
    }

    /// GET as `acme`, returning the status and the JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        send(self.req(reqwest::Method::GET, path)).await
    }

    /// POST JSON as `acme`, returning the status and the JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        send(self.req(reqwest::Method::POST, path).json(&body)).await
    }

    /// PUT JSON as `acme`.
    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        send(self.req(reqwest::Method::PUT, path).json(&body)).await
    }

    /// Stops the server gracefully and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(schema) = self.schema.take() {
            if std::thread::panicking() {
                eprintln!("left schema {schema} behind for inspection");
                return;
            }
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build()
                else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok((client, conn)) =
                        tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await
                    {
                        tokio::spawn(conn);
                        let _ = client
                            .batch_execute(&format!(
                                "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
                            ))
                            .await;
                    }
                });
            })
            .join();
        }
    }
}

/// Makes a key for `tenant` straight in the store; returns the key.
pub async fn make_key(store: &dyn Store, tenant: &str) -> String {
    let made = generate().unwrap();
    store
        .create_api_key(&NewApiKey {
            id: &made.id,
            hash: made.hash,
            tenant: &TenantId::new(tenant).unwrap(),
            label: None,
            now: Timestamp::now(),
        })
        .await
        .unwrap();
    made.key
}

/// Sends, returning the status and the body as JSON (`Value::Null` when it is not JSON).
pub async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts `body` is a problem of `kind` with `status`.
#[track_caller]
pub fn assert_problem(got: &(u16, Value), status: u16, kind: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(
        got.1["type"],
        format!("urn:baton:problem:{kind}"),
        "{}",
        got.1
    );
    assert_eq!(got.1["status"], status);
    assert!(got.1["detail"].as_str().is_some_and(|d| !d.is_empty()));
}

/// Expands each listed async test `fn name(backend: Backend)` into `name::sqlite` and
/// `name::postgres` tests.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$name($crate::support::Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    super::$name($crate::support::Backend::Postgres).await;
                }
            }
        )*
    };
}

/// The Python packages the contract and client-compatibility tests use, pinned.
pub const PYTHON_PACKAGES: &[&str] = &[
    "schemathesis==4.32.5",
    "openai==3.57.0",
    "anthropic==2.16.0",
];

/// A virtual environment with [`PYTHON_PACKAGES`], made on first use under the target
/// directory (`target/test-venv`, or `BATON_TEST_VENV`) and reused after. `None`, with a
/// message on stderr, when it cannot be made (no `python3`, no network) outside CI; in CI
/// (`CI` set) that is a failure, since these tests must run there.
pub fn python_venv() -> Option<std::path::PathBuf> {
    static VENV: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    let made = VENV.get_or_init(|| {
        let dir = std::env::var_os("BATON_TEST_VENV").map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv"),
            std::path::PathBuf::from,
        );
        let python = dir.join("bin/python");
        let stamp = dir.join("baton-packages.txt");
        let wanted = PYTHON_PACKAGES.join("\n");
        if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
            return Ok(python);
        }
        let run = |cmd: &mut std::process::Command| -> Result<(), String> {
            let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr)))
            }
        };
        if !python.exists() {
            run(std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir))?;
        }
        run(std::process::Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(PYTHON_PACKAGES))?;
        std::fs::write(&stamp, wanted).map_err(|e| e.to_string())?;
        Ok(python)
    });
    match made {
        Ok(python) => Some(python.clone()),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("CI: the Python test environment cannot be made: {e}")
        }
        Err(e) => {
            eprintln!("skipped: the Python test environment cannot be made ({e})");
            None
        }
    }
}
