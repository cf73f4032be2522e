//! An agent's loop on a temporary SQLite file: append each turn, compact when the context
//! grows past a threshold, and assemble the bounded context the next model call would send.
//!
//! Run it with `cargo run -p baton --example agent_loop`. The model here is a stand-in that
//! runs a tool each turn; the storage, compaction and assembly are baton's own.

// An example is a program: its output is what it shows.
#![allow(clippy::print_stdout)]

use baton::compact::Offline;
use baton::compact::executor::Settings;
use baton::compact::strategies::{ClearToolResults, Structured};
use baton::core::ContentBlock;
use baton::core::prices::PriceTable;
use baton::core::tokens::ByteEstimate;
use baton::runtime::{Compactor, Outcome, compact};
use baton::{Message, NewEntry, NewRun, Role, TenantId};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = baton::open(&format!(
        "sqlite://{}",
        dir.path().join("agent.db").display()
    ))
    .await?;
    let tenant = TenantId::default_tenant();
    let new = NewRun {
        goal: Some("make the test suite pass".into()),
        rules: Some("Never push to main.".into()),
        ..NewRun::default()
    };
    let run = store.create_run(&tenant, &new).await?.id;
    let task = Message::text(
        Role::User,
        "Fix the failing tests. Do not touch the database.",
    );
    store
        .append(&tenant, &run, &[NewEntry::estimated(task)])
        .await?;

    // Updates the working state once the context passes 4k tokens, keeping the last 6
    // messages whole.
    let strategy = Structured {
        threshold: 4_000,
        keep_recent: 6,
        keep_tokens: None,
    };
    let (settings, prices) = (Settings::default(), PriceTable::defaults());
    let compactor = Compactor {
        strategy: &strategy,
        summarizer: &Offline,
        settings: &settings,
        clear: ClearToolResults::default(),
        prices: &prices,
        counter: &ByteEstimate,
        force: false,
        dry_run: false,
    };
    let mut compactions = 0;
    for turn in 0..30 {
        // The model asks for a tool; its call and its result are stored before the next step.
        let id = format!("call-{turn}");
        let call = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.clone(),
                name: "bash".into(),
                input: serde_json::json!({ "command": format!("cargo test -p part-{turn}") }),
            }],
        };
        let result = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id,
                content: vec![ContentBlock::Text {
                    text: format!("test part-{turn} ... ok\n").repeat(40),
                }],
                is_error: false,
            }],
        };
        let turn_entries = [NewEntry::estimated(call), NewEntry::estimated(result)];
        store.append(&tenant, &run, &turn_entries).await?;
        // Before the next model call, never inside one: compact if the plan is worth it.
        if let Outcome::Compacted(c) = compact(&*store, &tenant, &run, &compactor).await? {
            compactions += 1;
            println!(
                "turn {turn}: compacted through seq {}: {} -> {} tokens",
                c.cut.map_or(0, |s| s.0),
                c.tokens_before,
                c.tokens_after
            );
        }
    }

    let history = store.run(&tenant, &run).await?.last_seq;
    let context = store.context(&tenant, &run).await?;
    println!(
        "history: {} messages, all kept; context: {} messages after summary {:?}, {} tokens; {compactions} compactions",
        history.0,
        context.messages.len(),
        context.summary.as_ref().map(|s| s.id.0),
        context.tokens,
    );
    anyhow::ensure!(compactions > 0, "the context never grew past the threshold");
    anyhow::ensure!(context.problems.is_empty(), "{:?}", context.problems);
    Ok(())
}
