//! `baton ops`: the idempotency ledger from the command line, and `ops run`, a command run
//! under it.
//!
//! A conflict with the stored state exits 3 with its own message, and with `--json` prints
//! `{"error": {"kind": "conflict", "code", "message"}, "operation": {…}}` (as `main` prints
//! every error); the codes are `mismatch`, `in_progress`, `fenced_out` and `failed`.

use std::io::Write;
use std::process::Stdio;

use anyhow::Context as _;
use baton_core::Timestamp;
use baton_core::key::{KeyInput, RequestKey, request_key};
use baton_store::ledger::{DEFAULT_RETENTION, downstream_key};
use baton_store::{Begin, Fenced, OpStatus, Operation, Publish};
use baton_view::{Begun, BegunOutcome, OperationDetail, OperationList, OperationView};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use crate::args::{OpsBeginArgs, OpsCommand, OpsRunArgs};
use crate::env::{Env, print_json};
use crate::exit::{InvalidInput, NotFound, OpConflict};

/// The most of a command's stdout kept as its result (64 KiB); past it the result says the
/// output was truncated and how long it was.
pub const RESULT_CAP: usize = 64 * 1024;

/// The most of a command's stderr read for its error: its end.
const ERROR_CAP: usize = 4 * 1024;

/// A command run by `ops run` that failed: baton exits with the command's own code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CommandFailed {
    /// The command's exit code (128 + N after signal N).
    pub code: u8,
    /// What happened.
    pub message: String,
}

/// What a successful command's stdout is stored as: its JSON when it is JSON and whole, else
/// `{"stdout": text}`, with `"truncated": true` and `"stdout_bytes"` past [`RESULT_CAP`].
fn stored_output(stdout: &[u8], more: u64) -> Value {
    if stdout.len() <= RESULT_CAP {
        let text = String::from_utf8_lossy(stdout).trim().to_owned();
        return serde_json::from_str::<Value>(&text).unwrap_or_else(|_| json!({ "stdout": text }));
    }
    let mut cut = RESULT_CAP;
    while cut > 0 && std::str::from_utf8(&stdout[..cut]).is_err() {
        cut -= 1;
    }
    let text = String::from_utf8_lossy(&stdout[..cut]).into_owned();
    json!({ "stdout": text, "truncated": true, "stdout_bytes": stdout.len() as u64 + more })
}

/// Records the command's failure under `fence`.
async fn publish_failure(
    env: &Env,
    args: &OpsRunArgs,
    fence: u64,
    error: &str,
) -> anyhow::Result<Result<Operation, Fenced>> {
    let error: String = error.chars().take(ERROR_CAP).collect();
    Ok(env
        .store
        .publish(
            &env.tenant,
            &args.key,
            fence,
            Publish::Fail {
                error: &error,
                retryable: args.retryable,
            },
            args.paid,
            Timestamp::now(),
        )
        .await?)
}

/// Runs one `baton ops` command.
pub async fn run(env: &Env, command: OpsCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        OpsCommand::Begin(args) => begin(env, args, out).await,
        OpsCommand::Heartbeat(args) => {
            let r = env
                .store
                .heartbeat(
                    &env.tenant,
                    &args.key,
                    args.fence,
                    args.lease,
                    Timestamp::now(),
                )
                .await?;
            fenced(env, &args.key, r, out)
        }
        OpsCommand::Complete(args) => {
            let result: Value = serde_json::from_str(&args.result)
                .map_err(|e| InvalidInput(format!("--result is not JSON: {e}")))?;
            let r = env
                .store
                .publish(
                    &env.tenant,
                    &args.key,
                    args.fence,
                    Publish::Complete(&result),
                    args.paid,
                    Timestamp::now(),
                )
                .await?;
            fenced(env, &args.key, r, out)
        }
        OpsCommand::Fail(args) => {
            let r = env
                .store
                .publish(
                    &env.tenant,
                    &args.key,
                    args.fence,
                    Publish::Fail {
                        error: &args.error,
                        retryable: args.retryable,
                    },
                    args.paid,
                    Timestamp::now(),
                )
                .await?;
            fenced(env, &args.key, r, out)
        }
        OpsCommand::Show(arg) => {
            let (op, attempts) = env
                .store
                .operation(&env.tenant, &arg.key)
                .await?
                .ok_or_else(|| NotFound(format!("operation {:?} not found", arg.key)))?;
            if env.json {
                return print_json(out, &OperationDetail::of(&env.tenant, &op, &attempts));
            }
            print_op(out, &op)?;
            for a in &attempts {
                writeln!(
                    out,
                    "  attempt fence {} by {}: started {}, {}{}{}",
                    a.fence,
                    a.owner,
                    a.started_at,
                    match (a.outcome, a.ended_at) {
                        (Some(o), Some(at)) => format!("{} at {at}", o.as_str()),
                        _ => "open".to_owned(),
                    },
                    if a.paid { ", paid call made" } else { "" },
                    a.result
                        .as_ref()
                        .map(|r| format!(", tried to publish {r}"))
                        .unwrap_or_default(),
                )?;
            }
            Ok(())
        }
        OpsCommand::List(args) => {
            let status = match args.status.as_deref() {
                None => None,
                Some(s) => Some(OpStatus::parse(s).ok_or_else(|| {
                    InvalidInput(format!(
                        "--status {s:?}: expected pending, running, completed or failed"
                    ))
                })?),
            };
            let ops = env.store.operations(&env.tenant, status).await?;
            if env.json {
                return print_json(out, &OperationList::of(&env.tenant, &ops));
            }
            for op in &ops {
                print_op(out, op)?;
            }
            Ok(())
        }
        OpsCommand::Prune => {
            let n = env
                .store
                .prune_operations(&env.tenant, Timestamp::now())
                .await?;
            if env.json {
                return print_json(out, &json!({ "pruned": n }));
            }
            writeln!(out, "pruned {n} operations past their retention")?;
            Ok(())
        }
        OpsCommand::Run(args) => run_command(env, args, out).await,
    }
}

fn print_op(out: &mut dyn Write, op: &Operation) -> anyhow::Result<()> {
    writeln!(
        out,
        "{}  {}  fence {}{}{}{}",
        op.key,
        op.status.as_str(),
        op.fence,
        op.lease_owner
            .as_ref()
            .map(|o| format!(", lease {o}"))
            .unwrap_or_default(),
        op.result
            .as_ref()
            .map(|r| format!(", result {r}"))
            .unwrap_or_default(),
        op.error
            .as_ref()
            .map(|e| format!(
                ", error {e:?}{}",
                if op.retryable { " (retryable)" } else { "" }
            ))
            .unwrap_or_default(),
    )?;
    Ok(())
}

/// A conflict's error, carrying the operation it met (printed beside it with `--json`).
fn conflict(env: &Env, code: &'static str, message: String, op: &Operation) -> anyhow::Result<()> {
    Err(OpConflict {
        code,
        message,
        operation: Box::new(OperationView::of(&env.tenant, op)),
    }
    .into())
}

fn fenced(
    env: &Env,
    key: &str,
    r: Result<Operation, Fenced>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    match r {
        Ok(op) => {
            if env.json {
                return print_json(out, &OperationView::of(&env.tenant, &op));
            }
            print_op(out, &op)
        }
        Err(Fenced::NotFound) => Err(NotFound(format!("operation {key:?} not found")).into()),
        Err(Fenced::Out { operation, given }) => {
            let message = format!(
                "operation {key:?}: fenced out: fence {given} is not the current one ({} is {}, fence {}); nothing was published",
                key,
                operation.status.as_str(),
                operation.fence
            );
            conflict(env, "fenced_out", message, &operation)
        }
    }
}

fn parse_hash(text: &str) -> anyhow::Result<RequestKey> {
    text.parse::<RequestKey>()
        .map_err(|e| InvalidInput(format!("--request-hash: {e}")).into())
}

/// Prints what `begin` found; conflicts become errors.
fn report_begin(env: &Env, key: &str, begun: &Begin, out: &mut dyn Write) -> anyhow::Result<()> {
    match begun {
        Begin::Acquired {
            operation,
            takeover,
        } => {
            if env.json {
                let outcome = if *takeover {
                    BegunOutcome::TookOver
                } else {
                    BegunOutcome::Acquired
                };
                let operation = OperationView::of(&env.tenant, operation);
                return print_json(out, &Begun { outcome, operation });
            }
            writeln!(
                out,
                "{} {key:?} with fence {} (lease until {})",
                if *takeover { "took over" } else { "acquired" },
                operation.fence,
                operation
                    .lease_expires_at
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            )?;
            Ok(())
        }
        Begin::Completed(op) => {
            if env.json {
                let operation = OperationView::of(&env.tenant, op);
                let outcome = BegunOutcome::Completed;
                return print_json(out, &Begun { outcome, operation });
            }
            writeln!(
                out,
                "{key:?} is completed: {}",
                op.result.clone().unwrap_or(Value::Null)
            )?;
            Ok(())
        }
        Begin::InProgress(op) => conflict(
            env,
            "in_progress",
            format!(
                "operation {key:?} is in progress: {} holds fence {} until {}",
                op.lease_owner.as_deref().unwrap_or("?"),
                op.fence,
                op.lease_expires_at
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            ),
            op,
        ),
        Begin::Failed(op) => conflict(
            env,
            "failed",
            format!(
                "operation {key:?} failed and may not be retried: {}",
                op.error.as_deref().unwrap_or("")
            ),
            op,
        ),
        Begin::Mismatch { operation, given } => conflict(
            env,
            "mismatch",
            format!(
                "operation {key:?} was begun with request {}, not {given}: use a new idempotency key to process another request",
                operation.request_hash
            ),
            operation,
        ),
    }
}

async fn begin(env: &Env, args: OpsBeginArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let hash = parse_hash(&args.request_hash)?;
    let begun = env
        .store
        .begin(
            &env.tenant,
            &args.key,
            &hash,
            &args.owner,
            args.lease,
            args.retention,
            Timestamp::now(),
        )
        .await?;
    report_begin(env, &args.key, &begun, out)
}

/// `ops run`: begin; if acquired, run the command with heartbeats and publish what it did.
async fn run_command(env: &Env, args: OpsRunArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let owner = args
        .owner
        .clone()
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let body = json!({ "argv": args.command });
    let hash = request_key(&KeyInput {
        tenant: &env.tenant,
        operation: "ops.run",
        body: &body,
        versions: &Default::default(),
        documents: &[],
    })?;
    let begun = env
        .store
        .begin(
            &env.tenant,
            &args.key,
            &hash,
            &owner,
            args.lease,
            DEFAULT_RETENTION,
            Timestamp::now(),
        )
        .await?;
    let Begin::Acquired { operation, .. } = &begun else {
        return report_begin(env, &args.key, &begun, out);
    };
    let fence = operation.fence;
    // The command runs under a supervisor (this binary, see `supervise`) that kills the
    // command's whole process group when baton dies, so no copy outlives its lease holder.
    let supervisor = std::env::current_exe()
        .context("finding the baton binary to supervise the command")
        .and_then(|exe| {
            tokio::process::Command::new(exe)
                .arg(crate::supervise::ARG)
                .arg(std::process::id().to_string())
                .arg("--")
                .args(&args.command)
                .env("BATON_OP_KEY", &args.key)
                .env("BATON_FENCE", fence.to_string())
                .env(
                    "BATON_IDEMPOTENCY_KEY",
                    downstream_key(&env.tenant, &args.key),
                )
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .context("starting the command's supervisor")
        });
    let mut child = match supervisor {
        Ok(child) => child,
        Err(e) => {
            // Recorded at once: the key must not stay running until its lease ends.
            let error = format!("{e:#}");
            let _ = publish_failure(env, &args, fence, &error).await?;
            return Err(e.context(format!("operation {:?}", args.key)));
        }
    };
    let mut stdout = child.stdout.take().context("the command's stdout")?;
    let mut stderr = child.stderr.take().context("the command's stderr")?;
    let read_out = async {
        let mut buf = Vec::new();
        let _ = (&mut stdout)
            .take(RESULT_CAP as u64 + 1)
            .read_to_end(&mut buf)
            .await;
        let rest = tokio::io::copy(&mut stdout, &mut tokio::io::sink())
            .await
            .unwrap_or(0);
        (buf, rest)
    };
    let read_err = async {
        // The end of stderr says why a command failed: keep its last ERROR_CAP bytes.
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match stderr.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    tail.extend_from_slice(&chunk[..n]);
                    if tail.len() > 2 * ERROR_CAP {
                        tail.drain(..tail.len() - ERROR_CAP);
                    }
                }
            }
        }
        if tail.len() > ERROR_CAP {
            tail.drain(..tail.len() - ERROR_CAP);
        }
        tail
    };
    let work = async {
        let (o, e, status) = tokio::join!(read_out, read_err, child.wait());
        (o, e, status)
    };
    tokio::pin!(work);
    let mut beat = tokio::time::interval(args.lease / 3);
    beat.tick().await;
    let ((stdout, more), stderr, status) = loop {
        tokio::select! {
            done = &mut work => break done,
            _ = beat.tick() => {
                if let Ok(Err(_)) = env.store.heartbeat(&env.tenant, &args.key, fence, args.lease, Timestamp::now()).await {
                    tracing::warn!(key = %args.key, fence, "lost the lease while the command runs; its outcome will not be published");
                }
            }
        }
    };
    let status = status.context("waiting for the command")?;
    let published = if status.success() {
        let result = stored_output(&stdout, more);
        env.store
            .publish(
                &env.tenant,
                &args.key,
                fence,
                Publish::Complete(&result),
                args.paid,
                Timestamp::now(),
            )
            .await?
    } else {
        let code = crate::supervise::exit_code(&status);
        // Bytes that are not UTF-8 and NUL characters (which the store does not keep in an
        // error) become U+FFFD, so a command's failure is always recorded.
        let tail = String::from_utf8_lossy(&stderr).replace('\0', "\u{fffd}");
        let error = format!(
            "{} (exit status {code})",
            tail.trim().lines().last().unwrap_or("no output on stderr")
        );
        let r = publish_failure(env, &args, fence, &error).await?;
        if r.is_ok() {
            // The failure is recorded and printed (with --json, as the operation's one object).
            fenced(env, &args.key, r, out)?;
            return Err(CommandFailed {
                code,
                message: format!("operation {:?}: the command failed: {error}", args.key),
            }
            .into());
        }
        r
    };
    fenced(env, &args.key, published, out)
}
