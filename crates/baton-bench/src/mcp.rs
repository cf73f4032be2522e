//! Section 17: `baton mcp`'s `search` and `recall` (issue 19), per call, in process.
//!
//! Two stores: the shared corpus imported by the real binary (1,057 runs), and a generated
//! one of 100,000 messages (100 runs of 1,000, words drawn from a vocabulary so that queries
//! range from common to rare). Each tool is called through `baton_mcp::Baton::call`, the path
//! an MCP client's call takes after the transport: `search` over every run of the tenant with
//! common, rare and absent words (an absent word is the worst case: no run can stop the
//! search early), `recall` of one message and of a range, at random places. The section prints
//! p50 and p95 of each, against the bars: `recall` p95 < 10 ms, `search` p95 < 60 ms.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use baton_core::{Message, Role, RunId, TenantId};
use baton_store::{NewEntry, NewRun, Store};
use serde_json::{Map, Value, json};

use crate::import::CORPUS;
use crate::{Report, Target, Unit, median, percentile};

/// Words of the generated store: word `i` appears in about one message in `i + 1`.
const VOCABULARY: usize = 2_000;

fn word(i: usize) -> String {
    format!("w{i:04}x")
}

/// A small deterministic generator (xorshift), so every run of the bench stores the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let (runs, per_run, calls) = if quick {
        (10, 100, 10)
    } else {
        (100, 1_000, 60)
    };
    writeln!(
        out,
        "\n[17] mcp: search and recall through baton_mcp::Baton::call, on the corpus and on {} generated messages, {calls} calls of each kind",
        runs * per_run
    )?;
    out.flush()?;
    let tenant = TenantId::default_tenant();
    let corpus = Path::new(CORPUS);
    if let (Some(baton), true) = (crate::import_cli::binary(), corpus.is_dir()) {
        let db = dir.join("mcp-corpus.db");
        crate::import_cli::import(&baton, &db, corpus)?;
        let store: Arc<dyn Store> = Arc::new(rt.block_on(baton_sqlite::SqliteStore::open(&db))?);
        let queries = [
            "error",
            "cargo test",
            "README",
            "permission denied",
            "qqzzyyxx",
        ];
        measure(rt, "corpus", store, &tenant, &queries, calls, report, out)?;
    } else {
        writeln!(
            out,
            "  corpus: skipped (no corpus at {CORPUS} or no baton binary)"
        )?;
    }

    let db = dir.join("mcp-generated.db");
    let store: Arc<dyn Store> = Arc::new(rt.block_on(baton_sqlite::SqliteStore::open(&db))?);
    let started = Instant::now();
    rt.block_on(async {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for r in 0..runs {
            let id = RunId::new(format!("gen-{r:03}"))?;
            let new = NewRun {
                id: Some(id.clone()),
                ..NewRun::default()
            };
            store.create_run(&tenant, &new).await?;
            let mut batch = Vec::with_capacity(per_run);
            for m in 0..per_run {
                // Zipf-like: small word numbers are common, large ones rare.
                let text: Vec<String> = (0..24)
                    .map(|_| {
                        let a = rng.below(VOCABULARY) + 1;
                        word(rng.below(a))
                    })
                    .collect();
                let role = if m % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                batch.push(NewEntry::estimated(Message::text(role, text.join(" "))));
            }
            store.append(&tenant, &id, &batch).await?;
        }
        anyhow::Ok(())
    })?;
    writeln!(
        out,
        "  generated {} messages in {:.1} s",
        runs * per_run,
        started.elapsed().as_secs_f64()
    )?;
    let (common, rare) = (word(0), word(VOCABULARY - 1));
    let queries = [common.as_str(), rare.as_str(), "absentword"];
    measure(
        rt,
        "generated",
        store,
        &tenant,
        &queries,
        calls,
        report,
        out,
    )
}

#[allow(clippy::too_many_arguments)]
fn measure(
    rt: &tokio::runtime::Runtime,
    name: &'static str,
    store: Arc<dyn Store>,
    tenant: &TenantId,
    queries: &[&str],
    calls: usize,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let runs: Vec<(RunId, u64)> = rt
        .block_on(store.list_runs(tenant))?
        .into_iter()
        .filter(|r| r.last_seq.0 > 0)
        .map(|r| (r.id, r.last_seq.0))
        .collect();
    anyhow::ensure!(!runs.is_empty(), "{name}: no runs");
    let mcp = baton_mcp::Baton::new(store, tenant.clone());
    let call = |tool: &str, args: Value| -> anyhow::Result<f64> {
        let Value::Object(args) = args else {
            anyhow::bail!("arguments must be an object");
        };
        let started = Instant::now();
        let answer = rt
            .block_on(mcp.call(tool, Some(Map::clone(&args))))
            .ok_or_else(|| anyhow::anyhow!("no tool {tool}"))?;
        let took = started.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(
            answer.is_error != Some(true),
            "{tool} {args:?}: {:?}",
            answer.content
        );
        Ok(took)
    };
    // The first search builds the listing memo; the figures are of the calls after it.
    call("search", json!({"query": queries[0], "limit": 20}))?;
    let mut searches = Vec::new();
    for i in 0..calls {
        let q = queries[i % queries.len()];
        searches.push(call("search", json!({"query": q, "limit": 20}))?);
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut recalls = Vec::new();
    for i in 0..calls {
        let (run, last) = &runs[rng.below(runs.len())];
        let seq = 1 + rng.below(*last as usize) as u64;
        let args = if i % 2 == 0 {
            json!({"run": run.as_str(), "seq": seq})
        } else {
            json!({"run": run.as_str(), "from": seq, "to": (seq + 19).min(*last)})
        };
        recalls.push(call("recall", args)?);
    }
    for (what, times, key, bar) in [
        ("search", &searches, search_key(name), 60.0),
        ("recall", &recalls, recall_key(name), 10.0),
    ] {
        let p95 = percentile(times, 0.95);
        writeln!(
            out,
            "  {name:<9} {what}: p50 {:.2} ms, p95 {p95:.2} ms over {} runs",
            median(times),
            runs.len()
        )?;
        report.figure(
            key,
            format!("mcp {what} p95, {name}"),
            p95,
            Unit::Millis,
            Some(Target::AtMost(bar)),
        );
    }
    Ok(())
}

fn search_key(name: &str) -> &'static str {
    if name == "corpus" {
        "mcp_search_p95_corpus_ms"
    } else {
        "mcp_search_p95_generated_ms"
    }
}

fn recall_key(name: &str) -> &'static str {
    if name == "corpus" {
        "mcp_recall_p95_corpus_ms"
    } else {
        "mcp_recall_p95_generated_ms"
    }
}
