//! Section 9: the response cache (issue 7): hit latency in process on SQLite (target ≤ 50 µs
//! median), what each coalesced follower costs beyond the leader's call, and the call log's
//! append rate (one record per transaction, as `Cache::call` writes it, and batched).
//!
//! The hit is timed two ways: the store's `cache_get` alone (one `UPDATE … RETURNING`), and the
//! whole `Cache::call` a caller makes (authorize, key the body, read, decode, log the hit: two
//! write transactions). Coalescing: a leader whose upstream takes 20 ms with N followers, against
//! the same leader alone; the difference over N is each follower's cost.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_cache::{Answer, Cache, CallPolicy, CallRequest};
use baton_core::key::RequestKey;
use baton_core::{TenantId, Timestamp};
use baton_sqlite::SqliteStore;
use baton_store::{CallOutcome, CallRecord, Store};
use serde_json::json;
use tokio::runtime::Runtime;

use crate::{Report, Target, Unit, median, on_worker};

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let path = dir.join("cache.db");
    let hits = if quick { 500 } else { 20_000 };
    let followers = if quick { 20 } else { 200 };
    let log_n = if quick { 500 } else { 10_000 };
    writeln!(
        out,
        "\n[9] cache: hit latency, coalescing cost and call-log appends on SQLite, in process"
    )?;
    out.flush()?;
    let figures = on_worker(rt, async move {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await?);
        let tenant = TenantId::default_tenant();
        let cache = Arc::new(Cache::new(store.clone(), tenant.clone()));
        let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "What does the incident report say?"}], "max_tokens": 256});
        let versions = BTreeMap::new();
        let request = CallRequest {
            operation: "openai.chat_completions",
            body: &body,
            model: "gpt-4o-mini",
            versions: &versions,
            documents: &[],
        };
        let answer = || async {
            Ok::<_, std::io::Error>(Answer {
                value: "The incident was a DNS outage in one region.".to_owned(),
                model: "gpt-4o-mini".into(),
                usage: baton_core::usage::Usage {
                    input: 1200,
                    output: 40,
                    ..Default::default()
                },
                storable: true,
            })
        };
        cache.call(&request, &CallPolicy::default(), answer).await?;
        let key = cache.key(&request)?;

        let mut store_hits = Vec::with_capacity(hits);
        for _ in 0..hits {
            let t = Instant::now();
            store.cache_get(&tenant, &key).await?;
            store_hits.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let mut call_hits = Vec::with_capacity(hits);
        for _ in 0..hits {
            let t = Instant::now();
            let answered = cache.call(&request, &CallPolicy::default(), answer).await?;
            call_hits.push(t.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(answered.outcome == CallOutcome::CacheHit, "expected hits");
        }

        // Coalescing: a 20 ms upstream, alone and with followers (fresh keys each time).
        let slow = || async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, std::io::Error>(Answer {
                value: "slow".to_owned(),
                model: "gpt-4o-mini".into(),
                usage: baton_core::usage::Usage {
                    input: 10,
                    output: 1,
                    ..Default::default()
                },
                storable: true,
            })
        };
        let run_wave = |n: usize, round: usize| {
            let cache = cache.clone();
            async move {
                let body = json!({"round": round, "n": n});
                let t = Instant::now();
                let mut tasks = tokio::task::JoinSet::new();
                for _ in 0..=n {
                    let (cache, body) = (cache.clone(), body.clone());
                    tasks.spawn(async move {
                        let versions = BTreeMap::new();
                        let request = CallRequest {
                            operation: "bench.coalesce",
                            body: &body,
                            model: "gpt-4o-mini",
                            versions: &versions,
                            documents: &[],
                        };
                        cache
                            .call(&request, &CallPolicy::default(), slow)
                            .await
                            .map(|a| a.outcome)
                    });
                }
                let mut executed = 0;
                while let Some(done) = tasks.join_next().await {
                    if done?? == CallOutcome::Executed {
                        executed += 1;
                    }
                }
                anyhow::ensure!(executed == 1, "{executed} executions for one key");
                Ok::<f64, anyhow::Error>(t.elapsed().as_secs_f64() * 1e3)
            }
        };
        let mut alone = Vec::new();
        let mut crowd = Vec::new();
        for round in 0..5 {
            alone.push(run_wave(0, round * 2).await?);
            crowd.push(run_wave(followers, round * 2 + 1).await?);
        }
        let per_follower_ms = (median(&crowd) - median(&alone)) / followers as f64;

        // The call log: one record per transaction, then batches of 1,000.
        let record = |i: usize| CallRecord {
            at: Timestamp::now(),
            operation: "bench.log".into(),
            request_hash: RequestKey([(i % 251) as u8; 32]),
            model: "gpt-4o-mini".into(),
            input_tokens: 100,
            output_tokens: 10,
            cost_usd: Some(0.0001),
            outcome: CallOutcome::Executed,
            latency_ms: 5,
            overlapped: false,
        };
        let t = Instant::now();
        for i in 0..log_n {
            store.log_calls(&tenant, &[record(i)]).await?;
        }
        let single_rate = log_n as f64 / t.elapsed().as_secs_f64();
        let batch: Vec<CallRecord> = (0..1_000).map(record).collect();
        let rounds = log_n / 1_000 + 1;
        let t = Instant::now();
        for _ in 0..rounds {
            store.log_calls(&tenant, &batch).await?;
        }
        let batch_rate = (rounds * 1_000) as f64 / t.elapsed().as_secs_f64();
        Ok((
            median(&store_hits),
            median(&call_hits),
            per_follower_ms,
            median(&alone),
            median(&crowd),
            single_rate,
            batch_rate,
        ))
    })?;
    let (store_hit, call_hit, per_follower, alone, crowd, single_rate, batch_rate) = figures;
    writeln!(
        out,
        "  hit: store {store_hit:.1} µs median, Cache::call {call_hit:.1} µs median (key, read, decode, log: {hits} hits)"
    )?;
    writeln!(
        out,
        "  coalescing: one 20 ms call alone {alone:.1} ms, with {followers} followers {crowd:.1} ms: {:.3} ms a follower (each logs its own call)",
        per_follower
    )?;
    writeln!(
        out,
        "  call log: {single_rate:.0} records/s one per transaction, {batch_rate:.0} records/s in batches of 1,000"
    )?;
    report.figure(
        "cache_hit_store_us",
        "cache hit, store read (ms)",
        store_hit / 1e3,
        Unit::Millis,
        Some(Target::AtMost(0.05)),
    );
    report.figure(
        "cache_hit_call_us",
        "cache hit, whole Cache::call (ms)",
        call_hit / 1e3,
        Unit::Millis,
        None,
    );
    report.figure(
        "coalesce_per_follower_ms",
        "coalescing cost per follower",
        per_follower,
        Unit::Millis,
        None,
    );
    report.figure(
        "call_log_single",
        "call log, one record per transaction",
        single_rate,
        Unit::PerSecond("records"),
        None,
    );
    report.figure(
        "call_log_batch",
        "call log, batches of 1,000",
        batch_rate,
        Unit::PerSecond("records"),
        None,
    );
    out.flush()?;
    Ok(())
}
