//! The agent loop against the scripted provider over HTTP, in both wire formats: tool loops,
//! parallel calls, the read-only constraint enforced after many compactions (seed 003's case),
//! bad tool calls answered as errors, and a provider failure that leaves the run resumable.

use std::sync::Arc;

use baton_compact::Settings as Compaction;
use baton_compact::strategies::Structured;
use baton_compact::{Offline, Strategy};
use baton_core::prices::PriceTable;
use baton_core::tokens::ByteEstimate;
use baton_core::{ContentBlock, Role, RunId, Seq, TenantId};
use baton_provider::scripted::{Script, ScriptedServer};
use baton_provider::{Provider, Secret};
use baton_runtime::Compactor;
use baton_runtime::agent::{Agent, AgentError, Quiet, Settings, TurnEnd};
use baton_runtime::tools::Toolbox;
use baton_sqlite::SqliteStore;
use baton_store::{NewRun, Store};
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug)]
enum Wire {
    Anthropic,
    OpenAi,
}

fn client(wire: Wire, server: &ScriptedServer) -> Arc<dyn Provider> {
    match wire {
        Wire::Anthropic => {
            let mut c = baton_provider::anthropic::Config::new("claude-test");
            c.api_key = Some(Secret::new("sk-ant-test"));
            c.base_url = server.anthropic_url();
            c.max_retries = 0;
            Arc::new(baton_provider::anthropic::Client::new(c).unwrap())
        }
        Wire::OpenAi => {
            let mut c = baton_provider::openai::Config::new("gpt-test");
            c.base_url = server.openai_url();
            c.max_retries = 0;
            Arc::new(baton_provider::openai::Client::new(c).unwrap())
        }
    }
}

struct Setup {
    dir: tempfile::TempDir,
    store: SqliteStore,
    tenant: TenantId,
    run: RunId,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(
        dir.path().join("work/notes.txt"),
        "the cache is stale\n".repeat(40),
    )
    .unwrap();
    let store = SqliteStore::open(dir.path().join("b.db")).await.unwrap();
    let tenant = TenantId::default_tenant();
    let run = store
        .create_run(&tenant, &NewRun::default())
        .await
        .unwrap()
        .id;
    Setup {
        dir,
        store,
        tenant,
        run,
    }
}

fn turns(value: Value) -> Script {
    Script::from_json(&json!({ "turns": value }).to_string()).unwrap()
}

async fn run_turn(
    s: &Setup,
    provider: &dyn Provider,
    strategy: &dyn Strategy,
    text: Option<&str>,
    read_only: bool,
) -> Result<TurnEnd, AgentError> {
    let tools = Toolbox::standard();
    let (compaction, prices) = (Compaction::default(), PriceTable::defaults());
    let agent = Agent {
        store: &s.store,
        tenant: &s.tenant,
        run: &s.run,
        provider,
        tools: &tools,
        compactor: Compactor {
            strategy,
            summarizer: &Offline,
            settings: &compaction,
            clear: Default::default(),
            prices: &prices,
            counter: &ByteEstimate,
            force: false,
            dry_run: false,
        },
        counter: &ByteEstimate,
        settings: Settings {
            workdir: s.dir.path().join("work"),
            max_tokens: 1024,
            max_steps: 200,
        },
    };
    if read_only {
        agent
            .constrain("Solo lectura: this run is read-only.", true)
            .await?;
    }
    match text {
        Some(text) => agent.say(text, &mut Quiet).await,
        None => agent.resume(&mut Quiet).await,
    }
}

/// Seed 003's case: "read-only" said at step 1; after eighty steps and several compactions the
/// model asks to write, and the executor refuses, the file untouched, the constraint still in
/// the request the model gets.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_constraint_holds_at_step_80_after_compactions() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let s = setup().await;
        let mut script: Vec<Value> = (0..79)
            .map(|_| json!({"reply": {"text": "Reading again.", "tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]}}))
            .collect();
        script.push(json!({"reply": {"text": "Now I will fix it.", "tool_calls": [{"name": "write_file", "input": {"path": "notes.txt", "content": "fixed"}}]}}));
        script.push(json!({"expect": {"contains": "read-only"}, "reply": {"text": "I cannot write: the run is read-only."}}));
        let server = ScriptedServer::start(turns(json!(script))).unwrap();
        let provider = client(wire, &server);
        let structured = Structured {
            threshold: 3_000,
            keep_recent: 4,
            keep_tokens: None,
        };
        let end = run_turn(
            &s,
            &*provider,
            &structured,
            Some("Find why the cache is stale."),
            true,
        )
        .await
        .unwrap();
        assert_eq!(end, TurnEnd::Answered, "{wire:?}");
        assert_eq!(server.remaining_turns(), 0, "{wire:?}: every turn used");
        let versions = s.store.summaries(&s.tenant, &s.run).await.unwrap();
        assert!(
            versions.len() >= 3,
            "{wire:?}: {} compactions",
            versions.len()
        );
        assert_eq!(
            std::fs::read_to_string(s.dir.path().join("work/notes.txt")).unwrap(),
            "the cache is stale\n".repeat(40),
            "{wire:?}: the file is untouched"
        );
        let history = s
            .store
            .read_range(&s.tenant, &s.run, Seq(1), None)
            .await
            .unwrap();
        let refused = history.iter().flat_map(|e| &e.message.content).any(|b| {
            matches!(b, ContentBlock::ToolResult { is_error: true, content, .. }
                if matches!(&content[0], ContentBlock::Text { text } if text.starts_with("refused: this run is read-only")))
        });
        assert!(refused, "{wire:?}");
        // Every request the server received passed its protocol checks (or the run would
        // have failed), and the last one still carried the constraint.
        let last = server.requests().pop().unwrap();
        assert!(last.body.to_string().contains("read-only"), "{wire:?}");
        assert_eq!(history.last().unwrap().message.role, Role::Assistant);
    }
}

/// Parallel calls are answered in order, each result its own message (the Anthropic wire merges
/// them into one user message; the server checks both wires).
#[tokio::test(flavor = "multi_thread")]
async fn parallel_and_bad_tool_calls_are_answered_in_order() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let s = setup().await;
        let script = turns(json!([
            {"reply": {"tool_calls": [
                {"name": "list_dir", "input": {"path": "."}},
                {"name": "read_file", "input": {"path": 7}},
                {"name": "delete_everything", "input": {}}
            ]}},
            {"expect": {"contains": "unknown tool"}, "reply": {"text": "Done."}}
        ]));
        let server = ScriptedServer::start(script).unwrap();
        let provider = client(wire, &server);
        let none = baton_compact::strategies::NoCompaction;
        let end = run_turn(&s, &*provider, &none, Some("Look around."), false)
            .await
            .unwrap();
        assert_eq!(end, TurnEnd::Answered);
        let history = s
            .store
            .read_range(&s.tenant, &s.run, Seq(3), Some(Seq(5)))
            .await
            .unwrap();
        assert!(history.iter().all(|e| e.message.content.len() == 1));
        let texts: Vec<(bool, String)> = history
            .iter()
            .flat_map(|e| &e.message.content)
            .map(|b| match b {
                ContentBlock::ToolResult {
                    is_error, content, ..
                } => match &content[0] {
                    ContentBlock::Text { text } => (*is_error, text.clone()),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts[0], (false, "notes.txt".to_owned()), "{wire:?}");
        assert!(
            texts[1].0 && texts[1].1.contains("\"path\" must be a string"),
            "{texts:?}"
        );
        assert!(
            texts[2].0 && texts[2].1.starts_with("unknown tool \"delete_everything\""),
            "{texts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_failure_writes_nothing_and_the_run_resumes() {
    let s = setup().await;
    let broken =
        ScriptedServer::start(turns(json!([{"reply": {"raw": "this is not json"}}]))).unwrap();
    let provider = client(Wire::Anthropic, &broken);
    let none = baton_compact::strategies::NoCompaction;
    let err = run_turn(&s, &*provider, &none, Some("Hello?"), false)
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::Provider(_)), "{err}");
    assert_eq!(
        s.store.run(&s.tenant, &s.run).await.unwrap().last_seq,
        Seq(1),
        "only the user's message"
    );
    let truncated =
        ScriptedServer::start(turns(json!([{"reply": {"text": "cut", "truncate": true}}])))
            .unwrap();
    let provider = client(Wire::OpenAi, &truncated);
    assert!(run_turn(&s, &*provider, &none, None, false).await.is_err());
    assert_eq!(
        s.store.run(&s.tenant, &s.run).await.unwrap().last_seq,
        Seq(1)
    );
    let good = ScriptedServer::start(turns(json!([{"reply": {"text": "Hello."}}]))).unwrap();
    let provider = client(Wire::Anthropic, &good);
    assert_eq!(
        run_turn(&s, &*provider, &none, None, false).await.unwrap(),
        TurnEnd::Answered
    );
    assert_eq!(
        s.store.run(&s.tenant, &s.run).await.unwrap().last_seq,
        Seq(2)
    );
}

/// A side-effecting call recorded as started but never answered (the process died while it
/// ran) is answered as interrupted on resume, not run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_started_side_effect_is_not_run_twice_on_resume() {
    let s = setup().await;
    let script = turns(json!([
        {"reply": {"tool_calls": [{"name": "run_command", "input": {"command": "echo again >> count.txt"}}]}},
        {"expect": {"contains": "interrupted"}, "reply": {"text": "It may have run already; I will check."}}
    ]));
    let server = ScriptedServer::start(script).unwrap();
    let provider = client(Wire::Anthropic, &server);
    // The first model call happens; before the tool runs, the "process" stops: simulate by
    // running one step by hand: append the user's message and the model's call, mark it started.
    let none = baton_compact::strategies::NoCompaction;
    let tools = Toolbox::standard();
    let (compaction, prices) = (Compaction::default(), PriceTable::defaults());
    let agent = Agent {
        store: &s.store,
        tenant: &s.tenant,
        run: &s.run,
        provider: &*provider,
        tools: &tools,
        compactor: Compactor {
            strategy: &none,
            summarizer: &Offline,
            settings: &compaction,
            clear: Default::default(),
            prices: &prices,
            counter: &ByteEstimate,
            force: false,
            dry_run: false,
        },
        counter: &ByteEstimate,
        settings: Settings {
            workdir: s.dir.path().join("work"),
            max_tokens: 1024,
            max_steps: 1,
        },
    };
    // One step: the model call (max_steps 1 stops before the tools run).
    assert_eq!(
        agent.say("Count.", &mut Quiet).await.unwrap(),
        TurnEnd::StepLimit
    );
    let history = s
        .store
        .read_range(&s.tenant, &s.run, Seq(2), Some(Seq(2)))
        .await
        .unwrap();
    let id = history[0].message.tool_use_ids().next().unwrap().to_owned();
    assert!(s.store.start_tool(&s.tenant, &s.run, &id).await.unwrap());
    let agent = Agent {
        settings: Settings {
            max_steps: 10,
            ..agent.settings.clone()
        },
        ..agent
    };
    assert_eq!(agent.resume(&mut Quiet).await.unwrap(), TurnEnd::Answered);
    assert!(
        !s.dir.path().join("work/count.txt").exists(),
        "not run twice"
    );
}

/// The model-backed summarizer: a bad reply gets one retry with the error; a good one is
/// installed with its token cost; two bad ones skip the compaction and the run goes on.
#[tokio::test(flavor = "multi_thread")]
async fn the_model_summarizer_retries_once_then_gives_up() {
    use baton_runtime::summarizer::ModelSummarizer;
    use baton_runtime::{Outcome, compact};
    let s = setup().await;
    for i in 0..6 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        s.store
            .append(
                &s.tenant,
                &s.run,
                &[baton_store::NewEntry::estimated(baton_core::Message::text(
                    role,
                    format!("message {i}: {}", "detail ".repeat(60)),
                ))],
            )
            .await
            .unwrap();
    }
    let script = turns(json!([
        {"when": {"tools": false}, "reply": {"text": "Here is the summary: it went well."}},
        {"when": {"tools": false}, "expect": {"contains": "cannot be installed"},
         "reply": {"text": "```json\n[{\"kind\":\"lesson\",\"text\":\"finish the work before the demo\",\"source_seq\":1}]\n```"}},
        {"when": {"tools": false}, "reply": {"text": "[{\"kind\":\"goal\",\"text\":\"x\",\"source_seq\":99}]"}},
        {"when": {"tools": false}, "reply": {"text": "still not json"}}
    ]));
    let server = ScriptedServer::start(script).unwrap();
    let provider = client(Wire::Anthropic, &server);
    let summarizer = ModelSummarizer::new(provider.clone(), 1024);
    let strategy = baton_compact::strategies::Summarize {
        threshold: 100,
        keep_recent: 2,
        keep_tokens: None,
        instructions: None,
    };
    // A threshold this small would leave the state a cap of 20 tokens: give it room.
    let compaction = Compaction {
        state: baton_compact::executor::StateCap {
            share: 0.2,
            max_tokens: Some(4_000),
        },
        ..Compaction::default()
    };
    let prices = PriceTable::defaults();
    let compactor = Compactor {
        strategy: &strategy,
        summarizer: &summarizer,
        settings: &compaction,
        clear: Default::default(),
        prices: &prices,
        counter: &ByteEstimate,
        force: true,
        dry_run: false,
    };
    let outcome = compact(&s.store, &s.tenant, &s.run, &compactor)
        .await
        .unwrap();
    let Outcome::Compacted(c) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(c.summarizer_tokens > 0, "its cost is recorded");
    let summary = s
        .store
        .summary(&s.tenant, c.summary_id.unwrap())
        .await
        .unwrap();
    assert!(
        summary
            .claims
            .iter()
            .any(|c| c.kind == baton_core::ClaimKind::Lesson
                && c.text == "finish the work before the demo"),
        "{:#?}",
        summary.claims
    );
    // The exact lists are there whatever the model wrote: the user's instruction, verbatim.
    assert!(
        summary
            .claims
            .iter()
            .any(|c| c.kind == baton_core::ClaimKind::Instruction
                && c.text.starts_with("message 0: detail")),
        "{:#?}",
        summary.claims
    );
    // Two bad replies: the compaction fails, nothing installed.
    s.store
        .append(
            &s.tenant,
            &s.run,
            &[baton_store::NewEntry::estimated(baton_core::Message::text(
                Role::User,
                "more ".repeat(400),
            ))],
        )
        .await
        .unwrap();
    let err = compact(&s.store, &s.tenant, &s.run, &compactor)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("two replies could not be installed"),
        "{err}"
    );
    // The two failed replies cost tokens all the same, and the error carries them.
    let baton_runtime::Error::Summarize(failed) = &err else {
        panic!("{err:?}")
    };
    assert!(failed.tokens() > 0, "{failed:?}");
    assert_eq!(s.store.summaries(&s.tenant, &s.run).await.unwrap().len(), 1);
}

/// The parts of an [`Agent`] a test keeps while it builds agents with other settings.
struct Parts {
    tools: Toolbox,
    compaction: Compaction,
    prices: PriceTable,
    none: baton_compact::strategies::NoCompaction,
}

impl Parts {
    fn new() -> Self {
        Parts {
            tools: Toolbox::standard(),
            compaction: Compaction::default(),
            prices: PriceTable::defaults(),
            none: baton_compact::strategies::NoCompaction,
        }
    }

    fn agent<'a>(
        &'a self,
        s: &'a Setup,
        provider: &'a dyn Provider,
        max_steps: usize,
    ) -> Agent<'a> {
        Agent {
            store: &s.store,
            tenant: &s.tenant,
            run: &s.run,
            provider,
            tools: &self.tools,
            compactor: Compactor {
                strategy: &self.none,
                summarizer: &Offline,
                settings: &self.compaction,
                clear: Default::default(),
                counter: &ByteEstimate,
                prices: &self.prices,
                force: false,
                dry_run: false,
            },
            counter: &ByteEstimate,
            settings: Settings {
                workdir: s.dir.path().join("work"),
                max_tokens: 1024,
                max_steps,
            },
        }
    }
}

/// Issue 15, item 4: the model writes what only a model can (a rejected design, a problem's
/// cause and fix, a file's intent, a lesson, a next step with its rationale); baton merges the
/// exact lists read from the transcript into it, so a model that answers only partly drops
/// nothing exact.
#[tokio::test(flavor = "multi_thread")]
async fn the_model_summary_carries_the_exact_lists_whatever_it_wrote() {
    use baton_core::{ClaimKind, ContentBlock, Message, Status};
    use baton_runtime::summarizer::ModelSummarizer;
    use baton_runtime::{Outcome, compact};
    let s = setup().await;
    let todo = |status: &str| {
        json!({"todos": [
            {"content": "Rewrite the retry loop", "activeForm": "Rewriting", "status": status},
            {"content": "Add a test", "activeForm": "Adding", "status": "pending"},
        ]})
    };
    let messages = vec![
        Message::text(Role::User, "fix the retries; never push to main"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "p".into(),
                name: "TodoWrite".into(),
                input: todo("in_progress"),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "p".into(),
                content: vec![ContentBlock::Text {
                    text: "Todos have been modified successfully.".into(),
                }],
                is_error: false,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "e".into(),
                name: "Edit".into(),
                input: json!({"file_path": "/w/src/retry.rs", "old_string": "a", "new_string": "b"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "e".into(),
                content: vec![ContentBlock::Text {
                    text: "The file /w/src/retry.rs has been updated.".into(),
                }],
                is_error: false,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "t".into(),
                name: "Bash".into(),
                input: json!({"command": "cargo test retry"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "t".into(),
                content: vec![ContentBlock::Text {
                    text: "Exit code 101\nthread 'retry' panicked at src/retry.rs:9: timeout"
                        .into(),
                }],
                is_error: true,
            }],
        },
        Message::text(Role::User, "no global lock, use a per-key one"),
        Message::text(
            Role::Assistant,
            format!("Understood. {}", "detail ".repeat(80)),
        ),
        Message::text(Role::User, "go on"),
    ];
    for m in messages {
        s.store
            .append(&s.tenant, &s.run, &[baton_store::NewEntry::estimated(m)])
            .await
            .unwrap();
    }
    let good = r#"[
        {"kind":"rejected","text":"a global lock: the user asked for a per-key one","source_seq":8},
        {"kind":"problem","text":"`cargo test retry` times out: the backoff never resets; fix: reset on success","status":"unresolved","subject":"cargo test retry","source_seq":7},
        {"kind":"file","text":"/w/src/retry.rs — the backoff state moves into the loop","status":"modified","subject":"/w/src/retry.rs","source_seq":4},
        {"kind":"lesson","text":"the tests run with a 2 s timeout","source_seq":7},
        {"kind":"next_step","text":"reset the backoff on success — that is what the timeout shows","source_seq":9}
    ]"#;
    let partial = r#"[{"kind":"next_step","text":"write the test","source_seq":9}]"#;
    let script = turns(json!([
        {"when": {"tools": false}, "reply": {"text": good}},
        {"when": {"tools": false}, "reply": {"text": partial}},
    ]));
    let server = ScriptedServer::start(script).unwrap();
    let provider = client(Wire::Anthropic, &server);
    let summarizer = ModelSummarizer::new(provider.clone(), 1024);
    let strategy = baton_compact::strategies::Summarize {
        threshold: 100,
        keep_recent: 1,
        keep_tokens: None,
        instructions: None,
    };
    // A threshold this small would leave the state a cap of 20 tokens: give it room.
    let compaction = Compaction {
        state: baton_compact::executor::StateCap {
            share: 0.2,
            max_tokens: Some(4_000),
        },
        ..Compaction::default()
    };
    let prices = PriceTable::defaults();
    let compactor = Compactor {
        strategy: &strategy,
        summarizer: &summarizer,
        settings: &compaction,
        clear: Default::default(),
        prices: &prices,
        counter: &ByteEstimate,
        force: true,
        dry_run: false,
    };
    let Outcome::Compacted(first) = compact(&s.store, &s.tenant, &s.run, &compactor)
        .await
        .unwrap()
    else {
        panic!("expected a compaction")
    };
    let claims = s
        .store
        .summary(&s.tenant, first.summary_id.unwrap())
        .await
        .unwrap()
        .claims;
    let has = |kind: ClaimKind, text: &str| claims.iter().any(|c| c.kind == kind && c.text == text);
    // What only the model writes…
    assert!(
        has(
            ClaimKind::Rejected,
            "a global lock: the user asked for a per-key one"
        ),
        "{claims:#?}"
    );
    assert!(has(ClaimKind::Lesson, "the tests run with a 2 s timeout"));
    assert!(has(
        ClaimKind::NextStep,
        "reset the backoff on success — that is what the timeout shows"
    ));
    assert!(has(
        ClaimKind::File,
        "/w/src/retry.rs — the backoff state moves into the loop"
    ));
    let problem = claims
        .iter()
        .find(|c| c.kind == ClaimKind::Problem)
        .unwrap();
    assert!(
        problem.text.contains("fix: reset on success"),
        "{problem:?}"
    );
    assert_eq!(problem.status, Some(Status::Unresolved));
    // …and what baton read from the transcript.
    assert!(has(
        ClaimKind::Instruction,
        "fix the retries; never push to main"
    ));
    assert!(has(
        ClaimKind::Instruction,
        "no global lock, use a per-key one"
    ));
    assert!(claims.iter().any(|c| c.kind == ClaimKind::Task
        && c.status == Some(Status::InProgress)
        && c.text == "Rewrite the retry loop"));
    assert!(has(ClaimKind::Command, "cargo test retry"));

    // A partial answer on the next compaction drops nothing exact.
    s.store
        .append(
            &s.tenant,
            &s.run,
            &[baton_store::NewEntry::estimated(Message::text(
                Role::Assistant,
                "working",
            ))],
        )
        .await
        .unwrap();
    s.store
        .append(
            &s.tenant,
            &s.run,
            &[baton_store::NewEntry::estimated(Message::text(
                Role::User,
                "continue",
            ))],
        )
        .await
        .unwrap();
    let Outcome::Compacted(second) = compact(&s.store, &s.tenant, &s.run, &compactor)
        .await
        .unwrap()
    else {
        panic!("expected a second compaction")
    };
    let claims = s
        .store
        .summary(&s.tenant, second.summary_id.unwrap())
        .await
        .unwrap()
        .claims;
    let has = |kind: ClaimKind, text: &str| claims.iter().any(|c| c.kind == kind && c.text == text);
    assert!(
        has(
            ClaimKind::Instruction,
            "fix the retries; never push to main"
        ),
        "{claims:#?}"
    );
    assert!(has(
        ClaimKind::Rejected,
        "a global lock: the user asked for a per-key one"
    ));
    assert!(has(
        ClaimKind::File,
        "/w/src/retry.rs — the backoff state moves into the loop"
    ));
    assert!(
        claims
            .iter()
            .any(|c| c.kind == ClaimKind::Problem && c.status == Some(Status::Unresolved))
    );
    assert!(has(ClaimKind::NextStep, "write the test"));
}

/// Each message of the run: its role and, for a tool result, the first words of its text.
async fn shape(s: &Setup) -> Vec<String> {
    let history = s
        .store
        .read_range(&s.tenant, &s.run, Seq(1), None)
        .await
        .unwrap();
    history
        .iter()
        .map(|e| match &e.message.content[..] {
            [ContentBlock::ToolResult { content, .. }] => match &content[0] {
                ContentBlock::Text { text } => {
                    let line = text.lines().next().unwrap_or("");
                    format!("result: {}", line.split(':').next().unwrap())
                }
                other => panic!("{other:?}"),
            },
            _ if e.message.tool_use_ids().next().is_some() => {
                format!(
                    "{} calls {}",
                    e.message.role.as_str(),
                    e.message.tool_use_ids().count()
                )
            }
            _ => e.message.role.as_str().to_owned(),
        })
        .collect()
}

/// Issue 6 review: a turn that stopped at the step limit right after the model's reply left
/// its calls unanswered, and the next user message landed between the calls and their results
/// (every later request was a 400). Now `say` answers them first: the read-only tool is run,
/// the unstarted write is answered "cancelled by the user" and not run.
#[tokio::test(flavor = "multi_thread")]
async fn the_user_speaking_after_unanswered_calls_answers_them_first() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let s = setup().await;
        let script = turns(json!([
            {"reply": {"tool_calls": [
                {"name": "read_file", "input": {"path": "notes.txt"}},
                {"name": "write_file", "input": {"path": "out.txt", "content": "x"}}
            ]}},
            {"expect": {"contains": "cancelled by the user"}, "reply": {"text": "Understood."}}
        ]));
        let server = ScriptedServer::start(script).unwrap();
        let provider = client(wire, &server);
        let parts = Parts::new();
        let end = parts
            .agent(&s, &*provider, 1)
            .say("Look.", &mut Quiet)
            .await
            .unwrap();
        assert_eq!(end, TurnEnd::StepLimit, "{wire:?}");
        let end = parts
            .agent(&s, &*provider, 10)
            .say("Go on, but do not write.", &mut Quiet)
            .await
            .unwrap();
        assert_eq!(end, TurnEnd::Answered, "{wire:?}");
        assert_eq!(
            shape(&s).await,
            [
                "user",
                "assistant calls 2",
                "result: the cache is stale",
                "result: cancelled by the user",
                "user",
                "assistant"
            ],
            "{wire:?}"
        );
        assert!(!s.dir.path().join("work/out.txt").exists(), "{wire:?}");
        assert_eq!(server.remaining_turns(), 0, "{wire:?}");
    }
}

/// Issue 6 review: Ctrl-C while a tool ran dropped the turn before its result was stored, and
/// a constraint set next landed between the call and its result. Now the constraint answers
/// the calls first (the started command "interrupted", the read-only call run again), and
/// every result stored before the cancel stays.
#[tokio::test(flavor = "multi_thread")]
async fn a_constraint_after_a_cancelled_turn_answers_the_open_calls_first() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let s = setup().await;
        let script = turns(json!([
            {"reply": {"tool_calls": [
                {"name": "write_file", "input": {"path": "out.txt", "content": "written"}},
                {"name": "run_command", "input": {"command": "echo started > started.txt; sleep 30"}},
                {"name": "list_dir", "input": {"path": "."}}
            ]}},
            {"expect": {"contains": "interrupted"}, "reply": {"text": "I will only read from now on."}}
        ]));
        let server = ScriptedServer::start(script).unwrap();
        let provider = client(wire, &server);
        let parts = Parts::new();
        let agent = parts.agent(&s, &*provider, 10);
        let work = s.dir.path().join("work");
        let cancelled = tokio::time::timeout(std::time::Duration::from_secs(20), async {
            let mut quiet = Quiet;
            let turn = agent.say("Write it and check.", &mut quiet);
            tokio::pin!(turn);
            loop {
                tokio::select! {
                    _ = &mut turn => panic!("the turn ended"),
                    _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {
                        if work.join("started.txt").exists() {
                            return;
                        }
                    }
                }
            }
        })
        .await;
        assert!(cancelled.is_ok(), "{wire:?}: the command never started");
        // The write finished before the cancel: its result is stored, whole.
        assert_eq!(
            shape(&s).await,
            [
                "user",
                "assistant calls 3",
                "result: wrote 7 bytes to out.txt"
            ],
            "{wire:?}"
        );
        agent
            .constrain("Read-only from now on.", true)
            .await
            .unwrap();
        assert_eq!(agent.resume(&mut Quiet).await.unwrap(), TurnEnd::Answered);
        assert_eq!(
            shape(&s).await,
            [
                "user",
                "assistant calls 3",
                "result: wrote 7 bytes to out.txt",
                "result: interrupted",
                "result: notes.txt",
                "user",
                "assistant"
            ],
            "{wire:?}"
        );
        assert_eq!(
            std::fs::read_to_string(work.join("out.txt")).unwrap(),
            "written"
        );
        assert_eq!(server.remaining_turns(), 0, "{wire:?}");
    }
}

/// A side effect whose outcome the ledger recorded, but whose result message was never
/// appended (the process died in between), is answered from the record on resume and not run
/// again; a side effect that runs normally leaves its outcome in the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_side_effect_is_answered_from_the_ledger_not_run_again() {
    use baton_runtime::agent::tool_operation_key;
    use baton_store::{Begin, LedgerStore, OpStatus, Publish};

    let s = setup().await;
    let script = turns(json!([
        {"reply": {"tool_calls": [{"name": "run_command", "input": {"command": "echo once >> count.txt"}}]}},
        {"expect": {"contains": "recorded: wrote once"}, "reply": {"tool_calls": [{"name": "write_file", "input": {"path": "b.txt", "content": "b"}}]}},
        {"reply": {"text": "Done."}}
    ]));
    let server = ScriptedServer::start(script).unwrap();
    let provider = client(Wire::Anthropic, &server);
    let none = baton_compact::strategies::NoCompaction;
    let tools = Toolbox::standard();
    let (compaction, prices) = (Compaction::default(), PriceTable::defaults());
    let agent = Agent {
        store: &s.store,
        tenant: &s.tenant,
        run: &s.run,
        provider: &*provider,
        tools: &tools,
        compactor: Compactor {
            strategy: &none,
            summarizer: &Offline,
            settings: &compaction,
            clear: Default::default(),
            prices: &prices,
            counter: &ByteEstimate,
            force: false,
            dry_run: false,
        },
        counter: &ByteEstimate,
        settings: Settings {
            workdir: s.dir.path().join("work"),
            max_tokens: 1024,
            max_steps: 1,
        },
    };
    assert_eq!(
        agent.say("Count.", &mut Quiet).await.unwrap(),
        TurnEnd::StepLimit
    );
    let history = s
        .store
        .read_range(&s.tenant, &s.run, Seq(2), Some(Seq(2)))
        .await
        .unwrap();
    let id = history[0].message.tool_use_ids().next().unwrap().to_owned();
    // The "previous process" ran the command and recorded its outcome, then died before
    // appending the result message.
    let key = tool_operation_key(&s.run, &id);
    let now = baton_core::Timestamp::now();
    let hour = std::time::Duration::from_secs(3600);
    let Begin::Acquired { operation, .. } = s
        .store
        .begin(
            &s.tenant,
            &key,
            &baton_core::key::RequestKey([0; 32]),
            "dead",
            hour,
            hour,
            now,
        )
        .await
        .unwrap()
    else {
        panic!("expected to acquire");
    };
    s.store
        .publish(
            &s.tenant,
            &key,
            operation.fence,
            Publish::Complete(&json!({"text": "recorded: wrote once", "is_error": false})),
            false,
            now,
        )
        .await
        .unwrap()
        .unwrap();
    let agent = Agent {
        settings: Settings {
            max_steps: 10,
            ..agent.settings.clone()
        },
        ..agent
    };
    assert_eq!(agent.resume(&mut Quiet).await.unwrap(), TurnEnd::Answered);
    assert!(
        !s.dir.path().join("work/count.txt").exists(),
        "the recorded side effect was not run again"
    );
    // The write ran once, under the ledger, and its outcome is recorded.
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("work/b.txt")).unwrap(),
        "b"
    );
    let done = s
        .store
        .operations(&s.tenant, Some(OpStatus::Completed))
        .await
        .unwrap();
    assert_eq!(done.len(), 2, "{done:?}");
    assert!(
        done.iter()
            .all(|op| op.key.starts_with(&format!("tool:{}:", s.run)))
    );
}
