//! Compaction against a real SQLite file: pins survive any strategy, dry runs
//! write nothing, a summary that does not shrink anything is refused, a lost race writes
//! nothing, and the logging decorator around the executor hears about what was installed.

use std::sync::Arc;

use baton_compact::Settings;
use baton_compact::strategies::{Sliding, Structured};
use baton_compact::trigger::Skip;
use baton_compact::{Offline, Plan, Strategy, strategy_fn};
use baton_core::prices::PriceTable;
use baton_core::tokens::ByteEstimate;
use baton_core::{Claim, ClaimKind, ContentBlock, Message, Role, RunId, Seq, TenantId};
use baton_runtime::{Compactor, Outcome, compact};
use baton_sqlite::SqliteStore;
use baton_store::{Candidate, NewEntry, NewRun, Rejection, Store};

struct Fixture {
    _dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    tenant: TenantId,
    run: RunId,
}

async fn fixture(turns: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("b.db")).await.unwrap());
    let tenant = TenantId::default_tenant();
    let run = store
        .create_run(&tenant, &NewRun::default())
        .await
        .unwrap()
        .id;
    let mut entries = vec![NewEntry::estimated(Message::text(
        Role::User,
        "Deploy the fix. Do not touch the production database.",
    ))];
    for i in 0..turns {
        let id = format!("c{i}");
        entries.push(NewEntry::estimated(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.clone(),
                name: "bash".into(),
                input: serde_json::json!({"command": format!("make test-{i}")}),
            }],
        }));
        entries.push(NewEntry::estimated(Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id,
                content: vec![ContentBlock::Text {
                    text: format!("ok {i}\n").repeat(200),
                }],
                is_error: false,
            }],
        }));
    }
    entries.push(NewEntry::estimated(Message::text(Role::Assistant, "done")));
    store.append(&tenant, &run, &entries).await.unwrap();
    Fixture {
        _dir: dir,
        store,
        tenant,
        run,
    }
}

fn compactor<'a>(
    strategy: &'a dyn Strategy,
    settings: &'a Settings,
    prices: &'a PriceTable,
) -> Compactor<'a> {
    Compactor {
        strategy,
        summarizer: &Offline,
        settings,
        clear: Default::default(),
        prices,
        counter: &ByteEstimate,
        force: false,
        dry_run: false,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pinned_message_survives_a_sliding_window() {
    let f = fixture(20).await;
    f.store.pin(&f.tenant, &f.run, Seq(1)).await.unwrap();
    let (settings, prices) = (Settings::default(), PriceTable::defaults());
    let sliding = Sliding { keep_last: 4 };
    let outcome = compact(
        &*f.store,
        &f.tenant,
        &f.run,
        &compactor(&sliding, &settings, &prices),
    )
    .await
    .unwrap();
    let Outcome::Compacted(c) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(c.cut.unwrap() >= Seq(37));
    let ctx = f.store.context(&f.tenant, &f.run).await.unwrap();
    assert_eq!(ctx.pinned.len(), 1);
    assert!(
        ctx.preamble()
            .unwrap()
            .plain_text()
            .contains("Do not touch the production database.")
    );
    // The record counts the pinned message in the context after, and measures the context the
    // way assembly does.
    assert_eq!(c.messages_after, ctx.messages.len() + ctx.pinned.len());
    assert_eq!(c.tokens_after, ctx.tokens);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_writes_nothing_and_the_log_hears_only_real_compactions() {
    let f = fixture(20).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("compactions.jsonl");
    let strategy = Structured {
        threshold: 1_000,
        keep_recent: 4,
        keep_tokens: None,
    };
    let settings = Settings {
        log: Some(log.clone()),
        ..Settings::default()
    };
    let prices = PriceTable::defaults();
    let mut c = compactor(&strategy, &settings, &prices);
    c.dry_run = true;
    let outcome = compact(&*f.store, &f.tenant, &f.run, &c).await.unwrap();
    let Outcome::Planned { claims, compaction } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(claims.iter().any(|c| c.kind == ClaimKind::Instruction
        && c.text.contains("Do not touch the production database.")));
    assert_eq!(compaction.summary_id, None);
    assert!(
        f.store
            .summaries(&f.tenant, &f.run)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!log.exists(), "a dry run logs nothing");

    c.dry_run = false;
    let Outcome::Compacted(done) = compact(&*f.store, &f.tenant, &f.run, &c).await.unwrap() else {
        panic!("expected a compaction")
    };
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["summary_id"], done.summary_id.unwrap().0);
    assert_eq!(lines[0]["state_tokens"], done.state_tokens);
    let summary = f
        .store
        .summary(&f.tenant, done.summary_id.unwrap())
        .await
        .unwrap();
    let meta = summary.meta.unwrap();
    assert_eq!(meta["tokens_after"], done.tokens_after);
    assert_eq!(meta["state_tokens"], done.state_tokens);
    // The context counts the state as its version measured it.
    let ctx = f.store.context(&f.tenant, &f.run).await.unwrap();
    assert_eq!(ctx.summary.unwrap().tokens, done.state_tokens);
    // A log that cannot be written does not fail the compaction.
    let broken = Settings {
        log: Some(dir.path().join("no/such/dir/log.jsonl")),
        ..Settings::default()
    };
    let mut c = compactor(&strategy, &broken, &prices);
    c.force = true;
    let outcome = compact(&*f.store, &f.tenant, &f.run, &c).await.unwrap();
    assert!(!matches!(outcome, Outcome::Conflict(_)), "{outcome:?}");
}

/// A summarizer that writes more than it was given.
struct Verbose;

#[async_trait::async_trait]
impl baton_compact::Summarizer for Verbose {
    fn name(&self) -> &str {
        "verbose"
    }
    async fn summarize(
        &self,
        request: &baton_compact::SummaryRequest<'_>,
    ) -> Result<baton_compact::Written, baton_compact::SummarizeError> {
        let claims = (0..400)
            .map(|i| {
                Claim::new(
                    ClaimKind::Note,
                    format!("note {i}: a long restatement of everything said so far"),
                    request.cut,
                )
            })
            .collect();
        Ok(baton_compact::Written {
            claims,
            input_tokens: 0,
            output_tokens: 0,
        })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_summary_that_does_not_shrink_anything_is_refused() {
    let f = fixture(4).await;
    let summarize = baton_compact::strategies::Summarize {
        threshold: 0,
        keep_recent: 2,
        keep_tokens: None,
        instructions: None,
    };
    // A cap large enough that the bound keeps every note the summarizer wrote.
    let settings = Settings {
        state: baton_compact::executor::StateCap {
            share: 0.2,
            max_tokens: Some(100_000),
        },
        ..Settings::default()
    };
    let prices = PriceTable::defaults();
    let mut c = compactor(&summarize, &settings, &prices);
    c.summarizer = &Verbose;
    let outcome = compact(&*f.store, &f.tenant, &f.run, &c).await.unwrap();
    let Outcome::Refused { reason, plan, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(plan, "summarize");
    assert!(matches!(reason, Skip::SummaryNotSmaller { .. }), "{reason}");
    assert!(
        f.store
            .summaries(&f.tenant, &f.run)
            .await
            .unwrap()
            .is_empty(),
        "nothing installed"
    );
    // --force does not skip it: it guards what was written, not when to compact.
    c.force = true;
    let outcome = compact(&*f.store, &f.tenant, &f.run, &c).await.unwrap();
    assert!(matches!(outcome, Outcome::Refused { .. }), "{outcome:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_race_writes_nothing() {
    let f = fixture(20).await;
    let (settings, prices) = (Settings::default(), PriceTable::defaults());
    // The strategy plans on the state it read; meanwhile another writer installs a version.
    let store = f.store.clone();
    let (tenant, run) = (f.tenant.clone(), f.run.clone());
    let racing = strategy_fn("racing", move |view| {
        let through = view.safe_cut_at_or_before(Seq(10)).unwrap();
        let (store, tenant, run) = (store.clone(), tenant.clone(), run.clone());
        std::thread::spawn(move || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(async move {
                    let _ = store
                        .install_summary(
                            &tenant,
                            &run,
                            &Candidate {
                                base: None,
                                cut: Seq(5),
                                claims: vec![],
                                meta: None,
                            },
                        )
                        .await
                        .unwrap();
                })
        })
        .join()
        .unwrap();
        Plan::Drop { through }
    });
    let outcome = compact(
        &*f.store,
        &f.tenant,
        &f.run,
        &compactor(&racing, &settings, &prices),
    )
    .await
    .unwrap();
    assert!(
        matches!(
            outcome,
            Outcome::Conflict(Rejection::StaleBase { expected: None, .. })
        ),
        "{outcome:?}"
    );
    let versions = f.store.summaries(&f.tenant, &f.run).await.unwrap();
    assert_eq!(versions.len(), 1, "only the other writer's version");
    assert_eq!(versions[0].coverage, Seq(5));
}
