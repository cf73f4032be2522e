//! Section 12: baton's gateway against the LiteLLM proxy (issue: the gateway), side by side in
//! one run on loopback, with the same mock upstream and the same client.
//!
//! baton's side: `baton_server::serve` on a temp-file SQLite store, on a tokio runtime of its own
//! in this process, its OpenAI upstream the mock of the LiteLLM peer
//! (`../shared/peers/litellm_proxy_bench.py`: `Mock`, a fixed `chat.completion` on Python's
//! `ThreadingHTTPServer`, counting calls). The client is the peer's own (`load`: keep-alive
//! `http.client` connections on threads; `burst`: identical requests released at a barrier),
//! driven by `gateway_driver.py` beside this file, which serves the mock and measures: cache hits
//! (one identical body) and misses (distinct bodies) at concurrency 16, the peer's, and at
//! concurrency 1, and the same client's round trips to the mock itself and to a no-op loopback
//! server (this module's: a fixed answer, no work). What the gateway adds is its latency less
//! that of the server it stands in for: a hit against the no-op server, a miss against the mock.
//! Then bursts of 50 identical concurrent requests for keys not cached, the mock delayed 200 ms:
//! the upstream calls they cause (target 1: in-flight dedup).
//!
//! LiteLLM's side: the peer script itself, run in the peers' virtual environment (made as the
//! compaction section makes it, `litellm[proxy]` installed from PyPI when absent), with its
//! exact in-memory cache on and `LITELLM_LOCAL_MODEL_COST_MAP=True` (offline). Its figures are
//! set beside baton's: requests per second on hits and misses (target: baton ≥ 10×), the
//! latency it adds at concurrency 16 (against the no-op server and the mock as measured above),
//! and its upstream calls per burst.
//!
//! The peer's mock writes its headers and body in two writes, so with Nagle's algorithm on
//! each call waited about 40 ms for the client's delayed ACK, which capped any proxy in front of
//! it near 400 misses per second. Both sides run it with `TCP_NODELAY` on
//! (`Mock.disable_nagle_algorithm`; the peer script itself is otherwise run as it is), which
//! changes no byte it sends. The miss ratio is still printed beside the mock's own rate over
//! LiteLLM's misses, and the hit rates beside the Python client's rate against the no-op server,
//! since both bound what any gateway can show here.
//!
//! The Python client tops out near 2,600 req/s here, below what the gateway serves, so the
//! same targets are also loaded by `wrk` (Debian's package; issue 18, item 8), driven by the
//! same driver while its mock runs: 64 connections on 2 threads for hits (one body) and misses
//! (a distinct body per request, from wrk's Lua), beside the no-op server's and the mock's own
//! rates under the same generator, then 1 connection for the p99 a hit adds. Without `wrk` on
//! `PATH` those lines are skipped with one line. LiteLLM's proxy gets the same wrk hits and
//! misses from inside the peer script's run, once its own loads are done (`PEER_WITH_WRK`).
//!
//! A missing `python3` or peer script skips the section with one line; a missing or broken
//! LiteLLM skips its side with one line. `--quick` runs baton's side small and skips LiteLLM.

use std::io::{BufRead as _, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use baton_core::TenantId;
use baton_server::{AppState, Config};
use baton_sqlite::SqliteStore;
use baton_store::Store;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::{Report, Target, Unit};

/// The directory of the peer scripts.
const PEERS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/peers");

/// The LiteLLM peer, inside [`PEERS_DIR`].
const PEER_SCRIPT: &str = "litellm_proxy_bench.py";

/// Runs the peer script's `main` with `Mock.disable_nagle_algorithm = True`; `argv[1]` is the
/// peers directory, the rest the script's own arguments.
const PEER_WITH_NODELAY: &str = "import sys; sys.path.insert(0, sys.argv[1]); \
import litellm_proxy_bench as peer; peer.Mock.disable_nagle_algorithm = True; \
sys.argv = [peer.__file__] + sys.argv[2:]; peer.main()";

/// [`PEER_WITH_NODELAY`], and before the peer's first burst (its proxy up, its own loads done)
/// the same wrk loads as baton's hits and misses against its proxy (`wrk_peer` in
/// `gateway_driver.py`), written as JSON to `$BATON_WRK_OUT`.
const PEER_WITH_WRK: &str = r#"
import sys, os, json
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.environ["BATON_DRIVER_DIR"])
import litellm_proxy_bench as peer, gateway_driver as driver
peer.Mock.disable_nagle_algorithm = True
burst = peer.burst
def first_wrk(port, n, text):
    out = os.environ["BATON_WRK_OUT"]
    if not os.path.exists(out):
        res = driver.wrk_peer(os.environ["BATON_WRK"], int(os.environ["BATON_WRK_SECONDS"]),
                              int(os.environ["BATON_WRK_RUNS"]), peer, port)
        with open(out, "w") as f:
            json.dump(res, f)
    return burst(port, n, text)
peer.burst = first_wrk
sys.argv = [peer.__file__] + sys.argv[2:]
peer.main()
"#;

/// The client side of baton's measurement.
const DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/gateway_driver.py");

/// How long the driver may take, from its start to its figures.
const DRIVER_TIMEOUT: Duration = Duration::from_secs(600);

/// Seconds of each wrk load (1 with `--quick`).
const WRK_SECONDS: u64 = 5;

/// How long the LiteLLM peer may take, proxy start-up (up to 240 s) included.
const PEER_TIMEOUT: Duration = Duration::from_secs(600);

/// Identical concurrent requests per burst, and the mock's delay meanwhile.
const BURST: usize = 50;
const BURST_DELAY_MS: u64 = 200;

/// What the no-op server answers every request with: the mock's body, so both clients read as
/// many bytes.
const NOOP_BODY: &str = r#"{"id": "chatcmpl-mock", "object": "chat.completion", "created": 1700000000, "model": "mock-gpt", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello from the mock upstream."}}], "usage": {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}}"#;

/// How much to measure.
#[derive(Clone, Copy)]
struct Sizes {
    /// Repetitions of every measurement (medians are reported).
    runs: usize,
    /// Requests per measurement at concurrency 16.
    requests: usize,
    /// Requests per measurement at concurrency 1.
    sequential: usize,
    /// Requests per measurement that reaches the mock (misses, direct round trips), at
    /// concurrency 16 and 1.
    miss_requests: usize,
    miss_sequential: usize,
    /// Requests per measurement of the LiteLLM peer (about 45/s on hits, 26/s on misses).
    peer_requests: usize,
    /// Seconds of each wrk load.
    wrk_seconds: u64,
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let sizes = if quick {
        Sizes {
            runs: 1,
            requests: 200,
            sequential: 100,
            miss_requests: 200,
            miss_sequential: 20,
            peer_requests: 0,
            wrk_seconds: 1,
        }
    } else {
        Sizes {
            runs: 3,
            requests: 3_000,
            sequential: 1_000,
            miss_requests: 1_500,
            miss_sequential: 200,
            peer_requests: 400,
            wrk_seconds: WRK_SECONDS,
        }
    };
    writeln!(
        out,
        "\n[12] gateway: baton vs the LiteLLM proxy (exact in-memory cache), one mock upstream and one Python client on loopback; {} run{} of {} hits and {} misses at concurrency 16, {} and {} at 1 (medians), bursts of {BURST} identical requests",
        sizes.runs,
        if sizes.runs == 1 { "" } else { "s" },
        sizes.requests,
        sizes.miss_requests,
        sizes.sequential,
        sizes.miss_sequential,
    )?;
    out.flush()?;
    let peers = Path::new(PEERS_DIR);
    if !peers.join(PEER_SCRIPT).is_file() {
        writeln!(
            out,
            "    skipped: the peer script is not at {}",
            peers.join(PEER_SCRIPT).display()
        )?;
        return Ok(());
    }
    if Command::new("python3").arg("--version").output().is_err() {
        writeln!(out, "    skipped: python3 is not installed")?;
        return Ok(());
    }

    let wrk = on_path("wrk");
    let Some(baton) = measure_baton(dir, peers, sizes, wrk.as_deref())? else {
        writeln!(
            out,
            "    skipped: the gateway answers 404 to POST /v1/chat/completions (no route yet)"
        )?;
        return Ok(());
    };
    let baton = Baton::of(&baton)?;
    let sanity = &baton.raw["sanity"];
    writeln!(
        out,
        "    two identical requests: x-baton-cache {}, {} upstream call(s)",
        sanity["x_baton_cache"], sanity["upstream_calls_for_2_identical"]
    )?;
    writeln!(
        out,
        "    baton   hits {:>8.0} req/s, p50 {:.2} ms, p99 {:.2} ms | misses {:>8.0} req/s, p50 {:.2} ms, p99 {:.2} ms",
        baton.hits.rps,
        baton.hits.p50,
        baton.hits.p99,
        baton.misses.rps,
        baton.misses.p50,
        baton.misses.p99
    )?;
    writeln!(
        out,
        "    same client, no gateway: no-op server {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms; mock {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms (what this client reaches with no gateway between)",
        baton.noop.rps,
        baton.noop.p50,
        baton.noop.p99,
        baton.mock.rps,
        baton.mock.p50,
        baton.mock.p99
    )?;
    writeln!(
        out,
        "    added by baton at concurrency 1: hit p50 {:+.2} ms, p99 {:+.2} ms (vs the no-op server); miss p50 {:+.2} ms, p99 {:+.2} ms (vs the mock)",
        baton.hits_c1.p50 - baton.noop_c1.p50,
        baton.hits_c1.p99 - baton.noop_c1.p99,
        baton.misses_c1.p50 - baton.mock_c1.p50,
        baton.misses_c1.p99 - baton.mock_c1.p99,
    )?;
    writeln!(
        out,
        "    added by baton at concurrency 16: hit p50 {:+.2} ms, p99 {:+.2} ms; miss p50 {:+.2} ms, p99 {:+.2} ms",
        baton.hits.p50 - baton.noop.p50,
        baton.hits.p99 - baton.noop.p99,
        baton.misses.p50 - baton.mock.p50,
        baton.misses.p99 - baton.mock.p99,
    )?;
    writeln!(
        out,
        "    burst of {BURST} identical uncached requests, upstream delayed {BURST_DELAY_MS} ms: {} upstream call(s) (median), {} of {} answered 200; {} errors in the loads",
        baton.burst_calls, baton.burst_ok, baton.burst_requests, baton.errors
    )?;
    let hit_added_p99 = baton.hits_c1.p99 - baton.noop_c1.p99;
    report.figure(
        "gateway_hit_rps",
        "12 gateway hits, concurrency 16",
        baton.hits.rps,
        Unit::PerSecond("req"),
        None,
    );
    report.figure(
        "gateway_miss_rps",
        "12 gateway misses, concurrency 16",
        baton.misses.rps,
        Unit::PerSecond("req"),
        None,
    );
    report.figure(
        "gateway_miss_rps_vs_mock",
        "12 gateway misses vs the mock alone (req/s ratio)",
        baton.misses.rps / baton.mock.rps,
        Unit::Ratio,
        None,
    );
    report.figure(
        "gateway_hit_added_p50_ms",
        "12 gateway hit: added p50 (concurrency 1)",
        baton.hits_c1.p50 - baton.noop_c1.p50,
        Unit::Millis,
        None,
    );
    report.figure(
        "gateway_hit_added_p99_ms",
        "12 gateway hit: added p99 (concurrency 1)",
        hit_added_p99,
        Unit::Millis,
        Some(Target::AtMost(1.0)),
    );
    report.figure(
        "gateway_miss_added_p50_ms",
        "12 gateway miss: added p50 (concurrency 1)",
        baton.misses_c1.p50 - baton.mock_c1.p50,
        Unit::Millis,
        None,
    );
    report.figure(
        "gateway_miss_added_p99_ms",
        "12 gateway miss: added p99 (concurrency 1)",
        baton.misses_c1.p99 - baton.mock_c1.p99,
        Unit::Millis,
        None,
    );
    report.figure(
        "gateway_burst_upstream_calls",
        format!("12 gateway upstream calls per {BURST}-burst"),
        baton.burst_calls,
        Unit::Count("calls"),
        Some(Target::AtMost(1.0)),
    );
    report.details.insert("gateway".into(), baton.raw.clone());
    match &wrk {
        Some(_) => print_wrk(out, report, &baton.raw["wrk"])?,
        None => writeln!(
            out,
            "    wrk (native load generator): skipped, not on PATH (`apt-get install wrk`)"
        )?,
    }

    if quick {
        writeln!(out, "    litellm: skipped (--quick)")?;
        out.flush()?;
        return Ok(());
    }
    writeln!(
        out,
        "    litellm: running the peer ({} runs of {} requests; litellm[proxy] is installed into the peers' venv first when missing, once, in minutes)",
        sizes.runs, sizes.peer_requests
    )?;
    out.flush()?;
    let peer = match run_peer(peers, sizes, wrk.as_deref()) {
        Ok(peer) => peer,
        Err(why) => {
            writeln!(out, "    litellm: skipped ({why})")?;
            return Ok(());
        }
    };
    let litellm = match Peer::of(&peer) {
        Ok(side) => side,
        Err(why) => {
            writeln!(out, "    litellm: skipped ({why:#})")?;
            return Ok(());
        }
    };
    writeln!(
        out,
        "    litellm {} hits {:>8.1} req/s, p50 {:.2} ms, p99 {:.2} ms | misses {:>8.1} req/s, p50 {:.2} ms, p99 {:.2} ms; {} upstream calls per {BURST}-burst",
        peer["litellm"].as_str().unwrap_or("?"),
        litellm.hits.rps,
        litellm.hits.p50,
        litellm.hits.p99,
        litellm.misses.rps,
        litellm.misses.p50,
        litellm.misses.p99,
        litellm.burst_calls,
    )?;
    writeln!(
        out,
        "    added by litellm at concurrency 16: hit p50 {:+.2} ms, p99 {:+.2} ms; miss p50 {:+.2} ms, p99 {:+.2} ms",
        litellm.hits.p50 - baton.noop.p50,
        litellm.hits.p99 - baton.noop.p99,
        litellm.misses.p50 - baton.mock.p50,
        litellm.misses.p99 - baton.mock.p99,
    )?;
    let (hit_ratio, miss_ratio) = (
        baton.hits.rps / litellm.hits.rps,
        baton.misses.rps / litellm.misses.rps,
    );
    writeln!(
        out,
        "    baton / litellm: hits {hit_ratio:.1}x, misses {miss_ratio:.1}x; the ceilings of this client and mock: the no-op server's rate is {:.1}x litellm's hits, the mock's own {:.1}x its misses (baton's misses reach {:.0}% of the mock's rate)",
        baton.noop.rps / litellm.hits.rps,
        baton.mock.rps / litellm.misses.rps,
        100.0 * baton.misses.rps / baton.mock.rps,
    )?;
    report.figure(
        "gateway_hit_rps_vs_litellm",
        "12 gateway hits vs LiteLLM (req/s ratio)",
        hit_ratio,
        Unit::Ratio,
        Some(Target::AtLeast(10.0)),
    );
    report.figure(
        "gateway_miss_rps_vs_litellm",
        "12 gateway misses vs LiteLLM (req/s ratio)",
        miss_ratio,
        Unit::Ratio,
        Some(Target::AtLeast(10.0)),
    );
    report.figure(
        "litellm_hit_added_p99_ms",
        "12 LiteLLM hit: added p99 (concurrency 16)",
        litellm.hits.p99 - baton.noop.p99,
        Unit::Millis,
        None,
    );
    report.figure(
        "litellm_burst_upstream_calls",
        format!("12 LiteLLM upstream calls per {BURST}-burst"),
        litellm.burst_calls,
        Unit::Count("calls"),
        None,
    );
    if wrk.is_some() {
        print_wrk_peer(out, report, &baton.raw["wrk"], &peer["wrk"])?;
    }
    report.details.insert("gateway_litellm".into(), peer);
    out.flush()?;
    Ok(())
}

/// LiteLLM under the same wrk loads as baton, beside baton's figures.
fn print_wrk_peer(
    out: &mut impl Write,
    report: &mut Report,
    baton: &Value,
    litellm: &Value,
) -> anyhow::Result<()> {
    if litellm.is_null() {
        writeln!(
            out,
            "    litellm under wrk: no figures (its proxy was not loaded)"
        )?;
        return Ok(());
    }
    let (hits, misses) = (
        wrk_median(litellm, "hits", "rps")?,
        wrk_median(litellm, "misses", "rps")?,
    );
    let (baton_hits, baton_misses) = (
        wrk_median(baton, "hits", "rps")?,
        wrk_median(baton, "misses", "rps")?,
    );
    writeln!(
        out,
        "    litellm under the same wrk loads: hits {hits:.0} req/s (p99 {:.1} ms), misses {misses:.0} req/s (p99 {:.1} ms); baton / litellm: hits {:.1}x, misses {:.1}x",
        wrk_median(litellm, "hits", "p99_ms")?,
        wrk_median(litellm, "misses", "p99_ms")?,
        baton_hits / hits,
        baton_misses / misses,
    )?;
    report.figure(
        "gateway_wrk_hit_rps_vs_litellm",
        "12 gateway hits vs LiteLLM under wrk (req/s ratio)",
        baton_hits / hits,
        Unit::Ratio,
        None,
    );
    report.figure(
        "gateway_wrk_miss_rps_vs_litellm",
        "12 gateway misses vs LiteLLM under wrk (req/s ratio)",
        baton_misses / misses,
        Unit::Ratio,
        None,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Figures

/// Medians of one kind of load.
#[derive(Clone, Copy)]
struct Load {
    rps: f64,
    p50: f64,
    p99: f64,
}

impl Load {
    /// The medians the driver (or the peer, whose keys the driver shares) put under `key`.
    fn of(json: &Value, key: &str) -> anyhow::Result<Self> {
        let row = &json[key];
        let get = |field: &str| {
            row[field]
                .as_f64()
                .ok_or_else(|| anyhow!("no {key}.{field} in the figures"))
        };
        Ok(Load {
            rps: get("rps_median")?,
            p50: get("p50_ms_median")?,
            p99: get("p99_ms_median")?,
        })
    }
}

/// baton's figures, from the driver's JSON.
struct Baton {
    hits: Load,
    misses: Load,
    noop: Load,
    mock: Load,
    hits_c1: Load,
    misses_c1: Load,
    noop_c1: Load,
    mock_c1: Load,
    burst_calls: f64,
    burst_ok: u64,
    burst_requests: u64,
    errors: u64,
    raw: Value,
}

impl Baton {
    /// Reads the driver's JSON.
    fn of(json: &Value) -> anyhow::Result<Self> {
        let burst = &json["burst_identical_uncached"];
        let runs = burst["runs"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        let errors = [
            "hits",
            "misses",
            "hits_c1",
            "misses_c1",
            "noop",
            "direct_mock",
        ]
        .iter()
        .map(|k| json[k]["errors"].as_u64().unwrap_or(0))
        .sum();
        Ok(Baton {
            hits: Load::of(json, "hits")?,
            misses: Load::of(json, "misses")?,
            noop: Load::of(json, "noop")?,
            mock: Load::of(json, "direct_mock")?,
            hits_c1: Load::of(json, "hits_c1")?,
            misses_c1: Load::of(json, "misses_c1")?,
            noop_c1: Load::of(json, "noop_c1")?,
            mock_c1: Load::of(json, "direct_mock_c1")?,
            burst_calls: burst["upstream_calls_median"]
                .as_f64()
                .ok_or_else(|| anyhow!("no burst figures from the driver"))?,
            burst_ok: runs.iter().filter_map(|r| r["ok"].as_u64()).sum(),
            burst_requests: runs.iter().filter_map(|r| r["requests"].as_u64()).sum(),
            errors,
            raw: json.clone(),
        })
    }
}

/// LiteLLM's figures, from the peer's JSON.
struct Peer {
    hits: Load,
    misses: Load,
    burst_calls: f64,
}

impl Peer {
    /// Reads the peer's JSON.
    fn of(json: &Value) -> anyhow::Result<Self> {
        if let Some(error) = json["error"].as_str() {
            bail!("the peer reports: {error}");
        }
        Ok(Peer {
            hits: Load::of(json, "identical_c16_cache_hits")?,
            misses: Load::of(json, "distinct_c16_cache_misses")?,
            burst_calls: json["burst50_identical_uncached"]["upstream_calls_median"]
                .as_f64()
                .ok_or_else(|| anyhow!("no burst figures from the peer"))?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The native load generator

/// `name` found in a directory of `PATH`.
fn on_path(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// The median over runs of `field` of the wrk load `name`.
fn wrk_median(wrk: &Value, name: &str, field: &str) -> anyhow::Result<f64> {
    let rows = wrk[name]
        .as_array()
        .ok_or_else(|| anyhow!("no wrk load {name} in the driver's figures"))?;
    if let Some(failed) = rows.iter().find_map(|r| r["failed"].as_str()) {
        bail!("wrk {name} failed: {failed}");
    }
    let values: Vec<f64> = rows
        .iter()
        .map(|r| {
            r[field]
                .as_f64()
                .ok_or_else(|| anyhow!("wrk {name}: no {field}"))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(crate::median(&values))
}

/// The wrk loads (issue 18, item 8): hits and misses at 64 connections against the no-op
/// server's and the mock's own rates under the same generator, and the p99 a hit adds at 1.
fn print_wrk(out: &mut impl Write, report: &mut Report, wrk: &Value) -> anyhow::Result<()> {
    let m = |name: &str, field: &str| wrk_median(wrk, name, field);
    // The gateway's loads' errors are the figure; the baselines' (the Python mock times out
    // under 64 connections) are printed beside it, not counted against the gateway.
    let (mut errors, mut baseline_errors) = (0, 0);
    let mut which = Vec::new();
    for name in [
        "noop",
        "direct_mock",
        "hits",
        "misses",
        "noop_c1",
        "hits_c1",
    ] {
        for row in wrk[name].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let (non_2xx, socket) = (
                row["non_2xx"].as_u64().unwrap_or(0),
                row["socket_errors"].as_u64().unwrap_or(0),
            );
            if non_2xx + socket > 0 {
                which.push(format!(
                    "{name}: {non_2xx} non-2xx, socket {}",
                    row["socket_errors_by_kind"]
                ));
            }
            match name {
                "hits" | "misses" | "hits_c1" => errors += non_2xx + socket,
                _ => baseline_errors += non_2xx + socket,
            }
        }
    }
    let (hits, misses) = (m("hits", "rps")?, m("misses", "rps")?);
    let (noop, mock) = (m("noop", "rps")?, m("direct_mock", "rps")?);
    let added_p99 = m("hits_c1", "p99_ms")? - m("noop_c1", "p99_ms")?;
    writeln!(
        out,
        "    wrk, {} connections on {} threads, {} s a load (medians of runs): baton hits {hits:.0} req/s (p99 {:.2} ms), misses {misses:.0} req/s = {:.2}x the mock's own {mock:.0} req/s; the no-op server {noop:.0} req/s; a hit adds p99 {added_p99:+.2} ms at 1 connection; {errors} non-2xx or socket errors through the gateway ({baseline_errors} in the baselines' own loads)",
        wrk["connections"],
        wrk["threads"],
        wrk["seconds"],
        m("hits", "p99_ms")?,
        misses / mock,
    )?;
    if !which.is_empty() {
        writeln!(out, "      errors by load: {}", which.join("; "))?;
    }
    report.figure(
        "gateway_wrk_hit_rps",
        "12 gateway hits under wrk, 64 connections",
        hits,
        Unit::PerSecond("req"),
        Some(Target::AtLeast(20_000.0)),
    );
    report.figure(
        "gateway_wrk_miss_vs_mock",
        "12 gateway misses vs the mock alone under wrk",
        misses / mock,
        Unit::Ratio,
        Some(Target::AtLeast(0.8)),
    );
    report.figure(
        "gateway_wrk_hit_added_p99_ms",
        "12 gateway hit under wrk: added p99 (1 connection)",
        added_p99,
        Unit::Millis,
        Some(Target::AtMost(1.0)),
    );
    report.figure(
        "gateway_wrk_errors",
        "12 gateway under wrk: non-2xx and socket errors (its loads)",
        errors as f64,
        Unit::Count("errors"),
        Some(Target::AtMost(0.0)),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// baton's side

/// Runs the driver against baton's gateway; `None` when the gateway has no route.
fn measure_baton(
    dir: &Path,
    peers: &Path,
    sizes: Sizes,
    wrk: Option<&Path>,
) -> anyhow::Result<Option<Value>> {
    let stderr_path = dir.join("gateway-driver.err");
    let stderr = std::fs::File::create(&stderr_path).context("creating the driver's log")?;
    let mut child = Command::new("python3")
        .arg(DRIVER)
        .arg("--peers")
        .arg(peers)
        .args(["--runs", &sizes.runs.to_string()])
        .args(["--requests", &sizes.requests.to_string()])
        .args(["--sequential", &sizes.sequential.to_string()])
        .args(["--miss-requests", &sizes.miss_requests.to_string()])
        .args(["--miss-sequential", &sizes.miss_sequential.to_string()])
        .args(["--burst", &BURST.to_string()])
        .args(["--burst-delay-ms", &BURST_DELAY_MS.to_string()])
        .args(match &wrk {
            Some(path) => vec![
                "--wrk".to_owned(),
                path.display().to_string(),
                "--wrk-seconds".to_owned(),
                sizes.wrk_seconds.to_string(),
            ],
            None => vec![],
        })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .context("starting python3 gateway_driver.py")?;
    let measured = drive(dir, &mut child, sizes);
    // The driver exits once it has printed its figures; on an error it is stopped here.
    if measured.is_err() {
        let _ = child.kill();
    }
    let _ = child.wait();
    match measured {
        Ok(json) => Ok(json),
        Err(err) => {
            let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            let last = log.lines().rev().find(|l| !l.trim().is_empty());
            match last {
                Some(line) => Err(err.context(format!("the driver's last words: {}", line.trim()))),
                None => Err(err),
            }
        }
    }
}

/// Talks to a started driver: gives it the gateway it asks for, returns its figures.
fn drive(dir: &Path, child: &mut Child, sizes: Sizes) -> anyhow::Result<Option<Value>> {
    let deadline = Instant::now() + DRIVER_TIMEOUT;
    let stdout = child
        .stdout
        .take()
        .context("the driver's stdout was not piped")?;
    let mut stdin = child
        .stdin
        .take()
        .context("the driver's stdin was not piped")?;
    let lines = read_lines(stdout);
    let hello = next_json(&lines, deadline)?;
    let mock_port = hello["mock_port"]
        .as_u64()
        .ok_or_else(|| anyhow!("the driver sent no mock port: {hello}"))?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the gateway's tokio runtime")?;
    let (stop, stopped) = oneshot::channel::<()>();
    let db = dir.join("gateway.db");
    let (gateway_port, noop_port) = rt.block_on(async move {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).await?);
        let config = Config {
            upstream_openai: Some(format!("http://127.0.0.1:{mock_port}/v1")),
            gateway_tenant: Some(TenantId::new("bench")?),
            ..Config::default()
        };
        let state = AppState::new(store, config)?;
        let gateway = TcpListener::bind("127.0.0.1:0").await?;
        let noop = TcpListener::bind("127.0.0.1:0").await?;
        let ports = (gateway.local_addr()?.port(), noop.local_addr()?.port());
        tokio::spawn(baton_server::serve(gateway, state, async move {
            let _ = stopped.await;
        }));
        tokio::spawn(noop_server(noop));
        anyhow::Ok(ports)
    })?;
    let figures =
        tell(&mut stdin, gateway_port, noop_port).and_then(|()| next_json(&lines, deadline));
    let _ = stop.send(());
    rt.shutdown_timeout(Duration::from_secs(5));
    let figures = figures?;
    let status = figures["sanity"]["status"][0].as_u64();
    match status {
        Some(200) => {}
        Some(404) => return Ok(None),
        _ => bail!(
            "the gateway's first answer: {} (runs: {})",
            figures["sanity"],
            sizes.runs
        ),
    }
    Ok(Some(figures))
}

/// Gives the driver the ports it measures.
fn tell(stdin: &mut ChildStdin, gateway_port: u16, noop_port: u16) -> anyhow::Result<()> {
    writeln!(
        stdin,
        "{}",
        json!({ "gateway_port": gateway_port, "noop_port": noop_port })
    )?;
    stdin.flush()?;
    Ok(())
}

/// The lines of the driver's stdout, read on a thread of their own so waits can time out.
fn read_lines(stdout: std::process::ChildStdout) -> Receiver<String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// The next JSON line of the driver (other lines are skipped), before `deadline`.
fn next_json(lines: &Receiver<String>, deadline: Instant) -> anyhow::Result<Value> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.trim_start().starts_with('{') => {
                return serde_json::from_str(&line)
                    .with_context(|| format!("the driver printed {line:?}"));
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {
                bail!("the driver ran over {} s", DRIVER_TIMEOUT.as_secs())
            }
            Err(RecvTimeoutError::Disconnected) => bail!("the driver exited early"),
        }
    }
}

/// A loopback HTTP/1.1 server that does nothing: every request, read whole, gets the mock's
/// answer. What a client pays for a round trip to any server, the baseline of a hit.
async fn noop_server(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(noop_connection(stream));
    }
}

/// One keep-alive connection of the no-op server.
async fn noop_connection(stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{NOOP_BODY}",
        NOOP_BODY.len()
    );
    let mut stream = tokio::io::BufReader::new(stream);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut length = 0usize;
        loop {
            line.clear();
            if stream.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        body.resize(length, 0);
        stream.read_exact(&mut body).await?;
        stream.get_mut().write_all(response.as_bytes()).await?;
    }
}

// ---------------------------------------------------------------------------------------------
// LiteLLM's side

/// Runs the LiteLLM peer; its JSON, or why it could not.
fn run_peer(peers: &Path, sizes: Sizes, wrk: Option<&Path>) -> Result<Value, String> {
    let python = crate::peers::python_with("litellm, fastapi, uvicorn, backoff", "litellm[proxy]")?;
    let bin = python.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)))
        .map_err(|e| e.to_string())?;
    let output = tempfile::Builder::new()
        .prefix("baton-bench-litellm-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let stdout_path = output.path().join("peer.json");
    let stderr_path = output.path().join("peer.err");
    let stdout = std::fs::File::create(&stdout_path).map_err(|e| e.to_string())?;
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| e.to_string())?;
    // The peer script as it is, run with its mock's TCP_NODELAY on, as baton's side runs it
    // (`gateway_driver.py` says why).
    let wrk_out = output.path().join("wrk.json");
    let mut command = Command::new(&python);
    match wrk {
        Some(wrk) => command
            .arg("-c")
            .arg(PEER_WITH_WRK)
            .env("BATON_WRK", wrk)
            .env("BATON_WRK_OUT", &wrk_out)
            .env("BATON_WRK_SECONDS", sizes.wrk_seconds.to_string())
            .env("BATON_WRK_RUNS", sizes.runs.to_string())
            .env(
                "BATON_DRIVER_DIR",
                Path::new(DRIVER).parent().unwrap_or(Path::new(".")),
            ),
        None => command.arg("-c").arg(PEER_WITH_NODELAY),
    };
    let mut child = command
        .arg(peers)
        .args(["--runs", &sizes.runs.to_string()])
        .args(["--requests", &sizes.peer_requests.to_string()])
        .args(["--burst-delay-ms", &BURST_DELAY_MS.to_string()])
        .env("PATH", path)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_TELEMETRY", "False")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", python.display()))?;
    let deadline = Instant::now() + PEER_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Ok(None) => {
                // SIGINT lets the script's `finally` stop the proxy, which it started in a
                // session of its own; SIGKILL would leave the proxy running.
                let _ = Command::new("kill")
                    .args(["-INT", &child.id().to_string()])
                    .status();
                let grace = Instant::now() + Duration::from_secs(20);
                while Instant::now() < grace && matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the script ran over {} s", PEER_TIMEOUT.as_secs()));
            }
            Err(e) => return Err(format!("waiting for the script: {e}")),
        }
    };
    if !status.success() {
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("the script failed ({status}): {}", last.trim()));
    }
    let text = std::fs::read_to_string(&stdout_path).map_err(|e| e.to_string())?;
    let mut figures: Value =
        serde_json::from_str(&text).map_err(|e| format!("the script's output is not JSON: {e}"))?;
    if wrk.is_some()
        && let Ok(text) = std::fs::read_to_string(&wrk_out)
    {
        figures["wrk"] =
            serde_json::from_str(&text).map_err(|e| format!("wrk's figures are not JSON: {e}"))?;
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_figures_are_read_from_the_peers_json() {
        let load =
            |rps: f64| json!({"rps_median": rps, "p50_ms_median": 360.0, "p99_ms_median": 900.5});
        let peer = json!({
            "identical_c16_cache_hits": load(44.6),
            "distinct_c16_cache_misses": load(26.3),
            "burst50_identical_uncached": {"upstream_calls_median": 50},
        });
        let peer = Peer::of(&peer).unwrap();
        assert_eq!(peer.hits.rps, 44.6);
        assert_eq!(peer.misses.rps, 26.3);
        assert_eq!(peer.hits.p99, 900.5);
        assert_eq!(peer.burst_calls, 50.0);
        let failed = Peer::of(&json!({"error": "proxy did not become ready"}));
        assert!(failed.is_err_and(|e| e.to_string().contains("did not become ready")));
    }

    #[tokio::test]
    async fn the_noop_server_answers_every_request_of_a_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(noop_server(listener));
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let request =
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
        let mut reader = tokio::io::BufReader::new(&mut stream);
        for _ in 0..2 {
            reader
                .get_mut()
                .write_all(request.as_bytes())
                .await
                .unwrap();
            let mut status = String::new();
            reader.read_line(&mut status).await.unwrap();
            assert_eq!(status, "HTTP/1.1 200 OK\r\n");
            let mut line = String::new();
            while line != "\r\n" {
                line.clear();
                reader.read_line(&mut line).await.unwrap();
            }
            let mut body = vec![0; NOOP_BODY.len()];
            reader.read_exact(&mut body).await.unwrap();
            assert_eq!(body, NOOP_BODY.as_bytes());
        }
    }
}
