//! The agents people run, through the gateway (issue 18, item 7): Claude Code itself
//! (`npm @anthropic-ai/claude-code`, `claude -p` with `ANTHROPIC_BASE_URL` at the gateway and
//! non-essential traffic off) and Codex (`npm @openai/codex`, `codex exec` with a model
//! provider whose base URL is the gateway, on the Responses API), in front of the scripted
//! upstream on loopback. Each must complete a tool-using task (the tool really runs, in a
//! folder of the test's own) and its conversation must be captured as a run holding the tool
//! call, its result and the answer.
//!
//! The agents are installed from the npm registry into `target/agents` at pinned versions, once.
//! Never in CI (`CI` set), and skipped with one line when npm is missing or the registry cannot
//! be reached: the test measures the agents against baton, not the network.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_core::{ContentBlock, Seq, TenantId};
use baton_provider::scripted::ScriptedServer;
use serde_json::{Value, json};

use crate::gateway::{gateway, upstream};
use crate::support::{Backend, TestServer};

/// The agents' packages, pinned.
const PACKAGES: [&str; 2] = ["@anthropic-ai/claude-code@2.1.332", "@openai/codex@0.171.0"];

/// The folder holding the installed agents' `node_modules/.bin`, installing them first when
/// needed; `None`, having said why in one line, when they cannot be had here.
fn agents() -> Option<PathBuf> {
    if std::env::var_os("CI").is_some() {
        eprintln!(
            "skipped: the agents' end-to-end tests install from the npm registry, never in CI"
        );
        return None;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/agents");
    let bin = dir.join("node_modules/.bin");
    let have = |bin: &Path| bin.join("claude").is_file() && bin.join("codex").is_file();
    if have(&bin) {
        return Some(bin);
    }
    // The tests run in processes of their own at once: one installs, the others wait for it.
    std::fs::create_dir_all(&dir).ok()?;
    let lock = std::fs::File::create(dir.join(".install-lock")).ok()?;
    lock.lock().ok()?;
    if have(&bin) {
        return Some(bin);
    }
    let installed = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args(PACKAGES)
        .output();
    match installed {
        Ok(out) if out.status.success() && have(&bin) => Some(bin),
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            eprintln!(
                "skipped: npm could not install the agents (registry unreachable?): {}",
                why.lines().last().unwrap_or("")
            );
            None
        }
        Err(e) => {
            eprintln!("skipped: npm is not here to install the agents: {e}");
            None
        }
    }
}

/// The task every agent is given.
const TASK: &str =
    "baton-e2e task: write the answer to six times seven into e2e.txt with the shell";

/// An agent's turns: `rounds` commands with a long output, then the task's own command, then
/// the answer, then short texts for whatever else it asks on the side (a title, a summary).
/// `call` makes the tool calls of a reply that runs a command, in the agent's own tool.
fn turns(rounds: usize, call: impl Fn(String) -> Value) -> Vec<Value> {
    let mut turns = Vec::new();
    let mut after = "baton-e2e task".to_owned();
    for k in 1..=rounds {
        let command = format!(
            "echo round-{k}-output; seq {} {}",
            100_000 * k,
            100_000 * k + 400
        );
        turns.push(json!({"when": {"tools": true, "last_user_contains": after},
                          "reply": {"text": format!("Round {k}."), "tool_calls": call(command)}}));
        after = format!("round-{k}-output");
    }
    let task = "echo baton-e2e-$((6*7)) > e2e.txt && cat e2e.txt".to_owned();
    turns.push(json!({"when": {"tools": true, "last_user_contains": after},
                      "reply": {"text": "Now the file.", "tool_calls": call(task)}}));
    turns.push(
        json!({"when": {"tools": true, "last_user_contains": "baton-e2e-42"},
                      "reply": {"text": "Done: e2e.txt holds baton-e2e-42."}}),
    );
    turns.extend(
        (0..8).map(|_| json!({"when": {"tools": false}, "reply": {"text": "Side answer."}})),
    );
    turns
}

fn claude_turns(rounds: usize) -> Vec<Value> {
    turns(
        rounds,
        |command| json!([{"name": "Bash", "input": {"command": command, "description": "Run a command"}}]),
    )
}

fn codex_turns(rounds: usize) -> Vec<Value> {
    turns(
        rounds,
        |cmd| json!([{"name": "exec_command", "input": {"cmd": cmd}}]),
    )
}

/// A scripted upstream answering `turns`, how many there are, and a gateway in front of it.
async fn stage(turns: Vec<Value>) -> (ScriptedServer, usize, TestServer) {
    let n = turns.len();
    let up = upstream(Value::Array(turns));
    let server = gateway(Backend::Sqlite, &up, |_| {}).await;
    (up, n, server)
}

/// Runs `agent` (given the task, its home and folder set here) in a fresh folder, and checks
/// that it did the task (the command really ran where it works) and that the upstream refused
/// nothing (each request it saw took one of its `turns`): every body the upstream saw.
async fn finish(
    mut agent: tokio::process::Command,
    (up, turns): (&ScriptedServer, usize),
) -> Vec<String> {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = agent
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("CODEX_HOME", home.path())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the agent took more than 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let requests: Vec<String> = up.requests().iter().map(|r| r.text.clone()).collect();
    assert!(
        out.status.success(),
        "{agent:?} failed ({}):\n{stdout}\n{stderr}\nupstream saw {requests:?}",
        out.status
    );
    assert!(stdout.contains("baton-e2e-42"), "{stdout}\n{stderr}");
    assert_eq!(requests.len(), turns - up.remaining_turns(), "{requests:?}");
    let written = std::fs::read_to_string(work.path().join("e2e.txt")).unwrap();
    assert_eq!(written.trim(), "baton-e2e-42");
    requests
}

/// Runs `claude -p` against `server`'s gateway, with `headers` beside the baton key (each led
/// by a newline), non-essential traffic off: what the upstream saw.
async fn claude(
    bin: &Path,
    server: &TestServer,
    up: (&ScriptedServer, usize),
    headers: &str,
) -> Vec<String> {
    let mut agent = tokio::process::Command::new(bin.join("claude"));
    agent
        .args([
            "-p",
            TASK,
            "--allowedTools",
            "Bash",
            "--output-format",
            "json",
        ])
        .args(["--model", "claude-sonnet-4-5"])
        .env("ANTHROPIC_BASE_URL", &server.base)
        .env(
            "ANTHROPIC_API_KEY",
            "sk-ant-e2e-test-key-not-real-0000000000",
        )
        .env(
            "ANTHROPIC_CUSTOM_HEADERS",
            format!("x-baton-key: {}{headers}", server.key),
        )
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1");
    finish(agent, up).await
}

/// Runs `codex exec` with a model provider on the Responses API whose base URL is `server`'s
/// gateway and whose headers are baton's key and `headers` (TOML pairs, each led by a comma):
/// what the upstream saw.
async fn codex(
    bin: &Path,
    server: &TestServer,
    up: (&ScriptedServer, usize),
    headers: &str,
) -> Vec<String> {
    let provider = format!(
        r#"model_providers.baton={{name="baton", base_url="{}/v1", wire_api="responses", env_key="BATON_E2E_UPSTREAM_KEY", http_headers={{"x-baton-key"="{}"{headers}}}}}"#,
        server.base, server.key
    );
    let mut agent = tokio::process::Command::new(bin.join("codex"));
    agent
        .args([
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
        ])
        .args(["-m", "gpt-5-codex", "-c", "model_provider=baton", "-c"])
        .arg(&provider)
        .arg(TASK)
        .env(
            "BATON_E2E_UPSTREAM_KEY",
            "sk-e2e-test-key-not-real-0000000000",
        );
    finish(agent, up).await
}

/// Claude Code runs a shell command for its task through the gateway, and the conversation is
/// kept as a run with the call and its result.
#[tokio::test]
async fn claude_code_completes_a_tool_task_through_the_gateway() {
    let Some(bin) = agents() else { return };
    let (up, n, server) = stage(claude_turns(0)).await;
    claude(&bin, &server, (&up, n), "").await;
    captured(&server, "Bash").await;
}

/// Codex runs a shell command for its task through the gateway's Responses API, and the
/// conversation is kept as a run with the call and its result.
#[tokio::test]
async fn codex_completes_a_tool_task_through_the_gateway() {
    let Some(bin) = agents() else { return };
    let (up, n, server) = stage(codex_turns(0)).await;
    codex(&bin, &server, (&up, n), "").await;
    captured(&server, "exec_command").await;
}

/// With managed context on, Claude Code keeps working past a compaction: its commands' outputs
/// take the conversation over the budget, baton sends the upstream its summary in place of the
/// old messages (the upstream sees baton's preamble), and the agent finishes its task with no
/// request refused. The budget is set from a first run's opening request (its system prompt
/// and tools, which are sent as they are) and room for a few outputs, so a new prompt or tool
/// list cannot silently stop the compaction.
#[tokio::test]
async fn claude_code_keeps_working_past_a_managed_compaction() {
    let Some(bin) = agents() else { return };
    let (up, n, server) = stage(claude_turns(0)).await;
    let budget = claude(&bin, &server, (&up, n), "").await[0].len() / 4 + 1_500;
    let (up, n, server) = stage(claude_turns(6)).await;
    let headers = format!("\nx-baton-context: structured\nx-baton-context-budget: {budget}");
    let requests = claude(&bin, &server, (&up, n), &headers).await;
    compacted(&requests, budget);
    captured(&server, "Bash").await;
}

/// The same for Codex, on the Responses API.
#[tokio::test]
async fn codex_keeps_working_past_a_managed_compaction() {
    let Some(bin) = agents() else { return };
    let (up, n, server) = stage(codex_turns(0)).await;
    let budget = codex(&bin, &server, (&up, n), "").await[0].len() / 4 + 1_500;
    let (up, n, server) = stage(codex_turns(6)).await;
    let headers =
        format!(r#", "x-baton-context"="structured", "x-baton-context-budget"="{budget}""#);
    let requests = codex(&bin, &server, (&up, n), &headers).await;
    compacted(&requests, budget);
    captured(&server, "exec_command").await;
}

/// Asserts that some request went upstream compacted: it holds baton's summary.
fn compacted(requests: &[String], budget: usize) {
    let sizes: Vec<usize> = requests.iter().map(String::len).collect();
    assert!(
        requests.iter().any(|r| r.contains("summarized by baton")),
        "no request went upstream compacted at a budget of {budget}; sizes {sizes:?}"
    );
}

/// Waits (up to 5 s) for a run of tenant `acme` holding a call of `tool`, a tool result and
/// the scripted answer.
async fn captured(server: &TestServer, tool: &str) {
    let tenant = TenantId::new("acme").unwrap();
    for _ in 0..100 {
        for run in server.store.list_runs(&tenant).await.unwrap_or_default() {
            let entries = server
                .store
                .read_range(&tenant, &run.id, Seq(1), None)
                .await
                .unwrap();
            let blocks: Vec<&ContentBlock> =
                entries.iter().flat_map(|e| &e.message.content).collect();
            let call = blocks
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { name, .. } if name == tool));
            let result = blocks
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolResult { .. }));
            let answer = serde_json::to_string(&entries)
                .unwrap()
                .contains("Done: e2e.txt holds");
            if call && result && answer {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no captured run holds the {tool} call, its result and the answer");
}
