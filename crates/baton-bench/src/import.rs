//! Section 6: importing the shared corpus, then recall on its largest run (issue 4).
//!
//! The corpus is `../shared/corpus` beside the workspace. Each round imports all of it into a
//! fresh SQLite file for a fresh tenant through the pipeline `baton import` runs: the directory
//! walked in path order, each file read and its path made absolute, its format detected from
//! its content (files that match none are passed over), parsed, each transcript redacted and
//! turned into a `NewImport` (`Transcript::to_import`: redaction, token counts, rolling
//! digests), and the file's imports stored by `Store::import` in one transaction. Token counts
//! are made with the counter `baton import` would use (`--tokenizer auto`: the vocabulary of
//! the transcript's first model, `o200k_base` without one), so the times include
//! tokenization; the first round also decodes the vocabularies, once for the process. The clock
//! runs from the walk to the last commit (opening the store is outside it); each part is also
//! timed on its own, per file, so the total can be attributed. Medians of rounds are reported.
//!
//! Then, on the last round's database, recall on the run with the most messages: the first
//! `Store::search` (which indexes the whole run), repeated searches for phrases taken from
//! the run's own messages at several seqs and for one phrase that is in none of them, and
//! `read_range` of one seq. A missing corpus skips the section with one line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use baton_core::tokens::TokenCounter;
use baton_core::{RunId, Seq, TenantId, tokens};
use baton_sqlite::SqliteStore;
use baton_store::{
    Digest, Error as StoreError, Imported, Reimport, SearchQuery, Store, search_rows,
};
use baton_tokens::{Encoding, TokenizerChoice};
use serde_json::json;
use tokio::runtime::Runtime;

use crate::import_cli;
use crate::tokens::Reference;
use crate::{Report, Target, Unit, list, median, ms, on_worker, percentile, thousands};

/// The shared corpus of real transcripts, beside the workspace.
pub(crate) const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus");

/// A phrase the recall searches look for that no message holds (checked: it must find nothing).
const ABSENT: &str = "qzxv baton bench absent phrase";

/// How many sampled messages give phrases to search for.
const SAMPLES: u64 = 5;

/// How much of the section to do.
#[derive(Clone, Copy)]
struct ImportSizes {
    rounds: usize,
    searches: usize,
    reads: usize,
}

impl ImportSizes {
    fn new(quick: bool) -> Self {
        if quick {
            ImportSizes {
                rounds: 1,
                searches: 20,
                reads: 20,
            }
        } else {
            ImportSizes {
                rounds: 5,
                searches: 200,
                reads: 200,
            }
        }
    }
}

/// Where one round's time went, summed over files.
#[derive(Clone, Copy, Default)]
struct Parts {
    /// Listing the corpus.
    walk: Duration,
    /// `std::fs::read` and `canonicalize`.
    read: Duration,
    /// `baton_import::detect`.
    detect: Duration,
    /// `baton_import::parse`.
    parse: Duration,
    /// `Transcript::to_import`: redaction, tokenization, digests.
    prepare: Duration,
    /// `Store::import`, one transaction per file.
    store: Duration,
    /// Everything, end to end.
    total: Duration,
}

impl Parts {
    /// The CPU work between the bytes and the store: detect, parse, `to_import`.
    fn cpu(&self) -> Duration {
        self.detect + self.parse + self.prepare
    }
}

/// What one round imported.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    files: usize,
    /// Files that detect as no format.
    not_transcripts: usize,
    /// Files whose import the store refused (a source that diverged from an earlier file's).
    rejected: usize,
    bytes: u64,
    transcripts: usize,
    messages_read: u64,
    tool_calls: u64,
    redactions: usize,
    /// Transcripts that became new runs.
    created: usize,
    /// Transcripts whose source an earlier file already held (the same session id).
    already: usize,
    messages_stored: u64,
}

struct Round {
    parts: Parts,
    counts: Counts,
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    rt: &Runtime,
    dir: &Path,
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let sizes = ImportSizes::new(quick);
    let Ok(corpus) = std::fs::canonicalize(CORPUS) else {
        writeln!(out, "\nimport: skipped (corpus not found at {CORPUS})")?;
        report.details.insert(
            "import".into(),
            json!({ "skipped": "corpus not found", "path": CORPUS }),
        );
        out.flush()?;
        return Ok(());
    };
    writeln!(
        out,
        "\n[6] import: the corpus at {}, {} round{}, each into a fresh database file and tenant; then recall on its largest run",
        corpus.display(),
        sizes.rounds,
        if sizes.rounds == 1 { "" } else { "s" }
    )?;
    out.flush()?;

    let mut rounds = Vec::new();
    let mut last = None;
    for round in 0..sizes.rounds {
        let path = dir.join(format!("import-{round}.db"));
        let tenant = TenantId::new(format!("bench-import-{round}"))?;
        let (store, result) = on_worker(rt, {
            let (path, corpus, tenant) = (path.clone(), corpus.clone(), tenant.clone());
            async move {
                let store = SqliteStore::open(path).await?;
                let result = import_corpus(&store, &tenant, &corpus, &baton_counter).await?;
                Ok((store, result))
            }
        })?;
        if let Some(first) = rounds.first().map(|r: &Round| r.counts) {
            ensure!(
                first == result.counts,
                "import bench: round {round} imported different counts from round 0"
            );
        }
        rounds.push(result);
        if round + 1 == sizes.rounds {
            last = Some((store, tenant));
        } else {
            drop(store);
            remove_database(&path);
        }
    }
    let Some((store, tenant)) = last else {
        bail!("import bench: no rounds");
    };
    let Some(counts) = rounds.first().map(|r| r.counts) else {
        bail!("import bench: no rounds");
    };

    let secs = |f: fn(&Parts) -> Duration| -> Vec<f64> {
        rounds.iter().map(|r| f(&r.parts).as_secs_f64()).collect()
    };
    let totals = secs(|p| p.total);
    let total = median(&totals);
    let cpu = median(&secs(Parts::cpu));
    let part_ms = |f: fn(&Parts) -> Duration| median(&secs(f)) * 1e3;
    let mib = counts.bytes as f64 / (1024.0 * 1024.0);
    let mib_per_s = mib / total;
    let msgs_per_s = counts.messages_stored as f64 / total;
    let parse_mib_per_s = mib / cpu;
    writeln!(
        out,
        "    rounds: {} s; median {total:.2} s = {mib_per_s:.1} MiB/s, {} msg/s stored",
        list(&totals, |s| format!("{s:.2}")),
        thousands(msgs_per_s)
    )?;
    writeln!(
        out,
        "    {} files, {mib:.1} MiB: {} not transcripts, {} refused by the store; {} transcripts -> {} runs created, {} already imported from an earlier file (same session); {} messages read, {} stored; {} tool calls; {} secrets redacted",
        counts.files,
        counts.not_transcripts,
        counts.rejected,
        counts.transcripts,
        counts.created,
        counts.already,
        thousands(counts.messages_read as f64),
        thousands(counts.messages_stored as f64),
        thousands(counts.tool_calls as f64),
        counts.redactions
    )?;
    writeln!(
        out,
        "    where the time goes (medians): walk {:.1} ms, read {:.1} ms, detect {:.1} ms, parse {:.1} ms, to_import (redact, tokenize, digests) {:.1} ms, Store::import {:.1} ms",
        part_ms(|p| p.walk),
        part_ms(|p| p.read),
        part_ms(|p| p.detect),
        part_ms(|p| p.parse),
        part_ms(|p| p.prepare),
        part_ms(|p| p.store),
    )?;
    writeln!(
        out,
        "    detect + parse + to_import alone: {:.1} ms = {parse_mib_per_s:.1} MiB/s",
        cpu * 1e3
    )?;
    // A reference in the same run: this pipeline counting with tiktoken-rs, as baton did when
    // the issue measured 2.20 s; then the binary a user runs, against the issue's own binary.
    let counters: Arc<Counters> = Arc::new(tiktoken_counters()?);
    let mut baseline_rounds = Vec::new();
    for round in 0..sizes.rounds {
        let path = dir.join(format!("import-baseline-{round}.db"));
        let tenant = TenantId::new(format!("bench-import-baseline-{round}"))?;
        let counted = on_worker(rt, {
            let (path, corpus, tenant) = (path.clone(), corpus.clone(), tenant.clone());
            let counters = counters.clone();
            async move {
                let store = SqliteStore::open(path).await?;
                import_corpus(&store, &tenant, &corpus, &*counters).await
            }
        })?;
        remove_database(&path);
        ensure!(
            counted.counts == counts,
            "import bench: the baseline imported different counts"
        );
        baseline_rounds.push(counted.parts.total.as_secs_f64());
    }
    let baseline = median(&baseline_rounds);
    writeln!(
        out,
        "    today's pipeline counting with tiktoken-rs (a reference: it shares every later speed-up but the tokenizer's): rounds {} s; median {baseline:.2} s",
        list(&baseline_rounds, |s| format!("{s:.2}"))
    )?;
    let binary = match import_cli::binary() {
        Some(baton) => {
            let issue = import_cli::issue_binary();
            let (runs, issue_runs) = import_cli::binary_rounds(
                &baton,
                issue.as_deref(),
                dir,
                &corpus,
                (sizes.rounds, counts.messages_stored),
            )?;
            let rounds = (&runs[..], &issue_runs[..]);
            Some(import_cli::print_rounds(
                out, report, rounds, baseline, total,
            )?)
        }
        None => {
            writeln!(
                out,
                "    `baton import` binary: skipped (none beside the bench; build it with `cargo build --release -p baton-cli`)"
            )?;
            None
        }
    };
    out.flush()?;

    let split = on_worker(rt, {
        let corpus = corpus.clone();
        async move { split_to_import(&corpus) }
    })?;
    writeln!(
        out,
        "    to_import's parts, timed alone once: redaction {:.1} ms, digests (JSON + SHA-256 per message) {:.1} ms, tokenization {:.1} ms (the byte proxy instead: {:.1} ms), cloning the messages {:.1} ms",
        ms(split.redact),
        ms(split.digest),
        ms(split.tokenize),
        ms(split.estimate),
        ms(split.clone),
    )?;
    out.flush()?;

    report.figure(
        "import_corpus_seconds",
        format!("6 import corpus ({mib:.1} MiB, median)"),
        total,
        Unit::Seconds,
        Some(Target::AtMost(10.0)),
    );
    report.figure(
        "import_mib_per_s",
        "6 import throughput",
        mib_per_s,
        Unit::PerSecond("MiB"),
        None,
    );
    report.figure(
        "import_messages_per_s",
        "6 import, messages stored",
        msgs_per_s,
        Unit::PerSecond("msg"),
        None,
    );
    report.figure(
        "import_parse_mib_per_s",
        "6 detect + parse + to_import alone (CPU)",
        parse_mib_per_s,
        Unit::PerSecond("MiB"),
        None,
    );
    let mut details = json!({
        "baseline_rounds_s": baseline_rounds,
        "baseline_s": baseline,
        "binary_s": binary,
        "corpus": corpus.display().to_string(),
        "rounds": sizes.rounds,
        "rounds_s": totals,
        "files": counts.files,
        "files_not_transcripts": counts.not_transcripts,
        "files_refused": counts.rejected,
        "bytes": counts.bytes,
        "mib": mib,
        "transcripts": counts.transcripts,
        "runs_created": counts.created,
        "transcripts_already_imported": counts.already,
        "messages_read": counts.messages_read,
        "messages_stored": counts.messages_stored,
        "tool_calls": counts.tool_calls,
        "redactions": counts.redactions,
        "median_ms": {
            "walk": part_ms(|p| p.walk),
            "read": part_ms(|p| p.read),
            "detect": part_ms(|p| p.detect),
            "parse": part_ms(|p| p.parse),
            "to_import": part_ms(|p| p.prepare),
            "store_import": part_ms(|p| p.store),
        },
        "to_import_parts_ms": {
            "redact": ms(split.redact),
            "digest": ms(split.digest),
            "tokenize": ms(split.tokenize),
            "estimate": ms(split.estimate),
            "clone": ms(split.clone),
        },
    });

    details["runs_list"] = runs_list(rt, store.clone(), tenant.clone(), sizes, report, out)?;
    let recall = recall(rt, store, tenant, sizes, report, out)?;
    details["recall"] = recall;
    writeln!(
        out,
        "    import section took {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    report.details.insert("import".into(), details);
    out.flush()?;
    Ok(())
}

/// `runs list` on the imported corpus, as a person runs it (issue 17: reports on the imported
/// corpus under 100 ms): the first page of 50 by last activity, and the whole listing by cost.
fn runs_list(
    rt: &Runtime,
    store: SqliteStore,
    tenant: TenantId,
    sizes: ImportSizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<serde_json::Value> {
    let reads = sizes.searches.min(50);
    let (first, all, runs) = on_worker(rt, async move {
        let page = baton_store::RunQuery {
            sort: baton_store::RunSort::Last,
            limit: Some(50),
            ..Default::default()
        };
        let every = baton_store::RunQuery {
            sort: baton_store::RunSort::Cost,
            ..Default::default()
        };
        let (mut first, mut all) = (Vec::new(), Vec::new());
        let mut runs = 0;
        for _ in 0..reads {
            let started = Instant::now();
            store.list_run_summaries(&tenant, &page).await?;
            first.push(started.elapsed().as_secs_f64() * 1e3);
            let started = Instant::now();
            runs = store.list_run_summaries(&tenant, &every).await?.runs.len();
            all.push(started.elapsed().as_secs_f64() * 1e3);
        }
        Ok((first, all, runs))
    })?;
    let (first, all) = (median(&first), median(&all));
    writeln!(
        out,
        "    runs list over the {runs} runs: first page of 50 by last activity {first:.1} ms, all of them by cost {all:.1} ms (medians of {reads})"
    )?;
    report.figure(
        "runs_list_page_ms",
        "6 runs list, a page of 50 (median)",
        first,
        Unit::Millis,
        Some(Target::AtMost(100.0)),
    );
    report.figure(
        "runs_list_all_ms",
        "6 runs list, every run by cost (median)",
        all,
        Unit::Millis,
        Some(Target::AtMost(100.0)),
    );
    Ok(json!({ "runs": runs, "page_of_50_ms": first, "all_by_cost_ms": all }))
}

/// Deletes a database file and its WAL companions; what cannot be deleted is left for the temp
/// directory's cleanup.
fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(name));
    }
}

/// Every file under `dir`, depth first, each directory's entries in name order (as
/// `baton import` walks); symbolic links are not followed.
pub(crate) fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("listing {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), files)?;
        } else if kind.is_file() {
            files.push(entry.path());
        }
    }
    Ok(())
}

/// The token counter for a transcript's first model.
type Counters = dyn Fn(Option<&str>) -> Arc<dyn TokenCounter> + Send + Sync;

/// The counter `baton import --tokenizer auto` uses.
fn baton_counter(model: Option<&str>) -> Arc<dyn TokenCounter> {
    baton_tokens::counter(TokenizerChoice::Auto, model)
}

/// The same vocabularies counted by `tiktoken-rs`, as baton counted before issue 17: the
/// counter of the baseline pipeline.
fn tiktoken_counters()
-> anyhow::Result<impl Fn(Option<&str>) -> Arc<dyn TokenCounter> + Send + Sync + 'static> {
    let o200k: Arc<dyn TokenCounter> = Arc::new(Reference {
        name: "tiktoken-rs o200k_base",
        bpe: tiktoken_rs::o200k_base()?,
    });
    let cl100k: Arc<dyn TokenCounter> = Arc::new(Reference {
        name: "tiktoken-rs cl100k_base",
        bpe: tiktoken_rs::cl100k_base()?,
    });
    Ok(move |model: Option<&str>| {
        match model.map_or(Encoding::O200k, baton_tokens::encoding_for_model) {
            Encoding::O200k => o200k.clone(),
            Encoding::Cl100k => cl100k.clone(),
        }
    })
}

/// One round: the whole corpus into `store` for `tenant`, one transaction per file.
async fn import_corpus(
    store: &dyn Store,
    tenant: &TenantId,
    corpus: &Path,
    counter_for: &Counters,
) -> anyhow::Result<Round> {
    let mut parts = Parts::default();
    let mut counts = Counts::default();
    let started = Instant::now();
    let mut files = Vec::new();
    walk(corpus, &mut files)?;
    parts.walk = started.elapsed();
    for file in &files {
        counts.files += 1;
        let t = Instant::now();
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let path = std::fs::canonicalize(file)
            .unwrap_or_else(|_| file.clone())
            .display()
            .to_string();
        let t = lap(&mut parts.read, t);
        counts.bytes += bytes.len() as u64;
        let format = baton_import::detect(&bytes);
        let t = lap(&mut parts.detect, t);
        let Some(format) = format else {
            counts.not_transcripts += 1;
            continue;
        };
        let mut transcripts = baton_import::parse(format, &bytes)
            .with_context(|| format!("parsing {} as {}", file.display(), format.name()))?;
        let t = lap(&mut parts.parse, t);
        let mut imports = Vec::with_capacity(transcripts.len());
        for transcript in &mut transcripts {
            let counter = counter_for(transcript.models.first().map(String::as_str));
            let (import, redactions) = transcript.to_import(&path, None, &*counter);
            imports.push(import);
            counts.redactions += redactions;
        }
        let t = lap(&mut parts.prepare, t);
        let outcome = store.import(tenant, imports, Reimport::No).await;
        lap(&mut parts.store, t);
        let outcomes = match outcome {
            Ok(outcomes) => outcomes,
            Err(StoreError::Import(_)) => {
                counts.rejected += 1;
                continue;
            }
            Err(err) => return Err(err).with_context(|| format!("importing {}", file.display())),
        };
        for (transcript, outcome) in transcripts.iter().zip(&outcomes) {
            counts.transcripts += 1;
            counts.messages_read += transcript.messages.len() as u64;
            counts.tool_calls += transcript.tool_calls() as u64;
            match outcome {
                Imported::Created(run) => {
                    counts.created += 1;
                    counts.messages_stored += run.last_seq.0;
                }
                Imported::Extended { appended, .. } => counts.messages_stored += appended,
                Imported::UpToDate(_) | Imported::Grown { .. } => counts.already += 1,
                Imported::Deleted { .. } => bail!("a fresh database holds no deleted run"),
            }
        }
    }
    parts.total = started.elapsed();
    Ok(Round { parts, counts })
}

/// `Transcript::to_import`'s parts, each timed alone over the whole corpus.
struct Split {
    redact: Duration,
    digest: Duration,
    /// With the counter `baton import` picks per transcript.
    tokenize: Duration,
    /// With the byte proxy, for comparison.
    estimate: Duration,
    clone: Duration,
}

/// Parses the corpus (off the clock), then times what `to_import` does to its transcripts,
/// one part at a time: redaction (of copies), the rolling digests, the token counts (and, for
/// comparison, the byte proxy's) and the copy of every message into the import.
fn split_to_import(corpus: &Path) -> anyhow::Result<Split> {
    let mut files = Vec::new();
    walk(corpus, &mut files)?;
    let mut transcripts = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        if let Some(format) = baton_import::detect(&bytes) {
            transcripts.extend(
                baton_import::parse(format, &bytes)
                    .with_context(|| format!("parsing {}", file.display()))?,
            );
        }
    }
    let mut copies = transcripts.clone();
    let start = Instant::now();
    for t in &mut copies {
        std::hint::black_box(t.redact());
    }
    let redact = start.elapsed();
    let messages = || {
        transcripts
            .iter()
            .flat_map(|t| &t.messages)
            .map(|m| &m.message)
    };
    let start = Instant::now();
    for t in &transcripts {
        let mut digest = Digest::empty();
        for m in &t.messages {
            digest = digest.then(&m.message);
        }
        std::hint::black_box(digest);
    }
    let digest = start.elapsed();
    let start = Instant::now();
    for t in &transcripts {
        let counter =
            baton_tokens::counter(TokenizerChoice::Auto, t.models.first().map(String::as_str));
        for m in &t.messages {
            std::hint::black_box(counter.count_message(&m.message));
        }
    }
    let tokenize = start.elapsed();
    let start = Instant::now();
    for m in messages() {
        std::hint::black_box(tokens::estimate_message(m));
    }
    let estimate = start.elapsed();
    let start = Instant::now();
    for m in messages() {
        std::hint::black_box(m.clone());
    }
    let clone = start.elapsed();
    Ok(Split {
        redact,
        digest,
        tokenize,
        estimate,
        clone,
    })
}

/// Adds the time since `since` to `part`; returns now.
fn lap(part: &mut Duration, since: Instant) -> Instant {
    let now = Instant::now();
    *part += now - since;
    now
}

/// Phrases to search for, from the search words of messages sampled across a run (one list
/// of `search_rows` bodies per message): from each message, the first two adjacent words of one
/// body, reading each body from its middle on (wrapping), that are both plain words of 3 to 24
/// letters, one of at least 5; then the first phrase's longer word alone. No phrase twice.
fn pick_patterns(messages: &[Vec<String>]) -> Vec<String> {
    let plain = |w: &str| (3..=24).contains(&w.len()) && w.chars().all(char::is_alphabetic);
    let mut patterns: Vec<String> = Vec::new();
    let mut single = None;
    for bodies in messages {
        // Within one body: a phrase never spans two kinds of text, and parts overlap.
        let found = bodies.iter().find_map(|body| {
            let words: Vec<&str> = body.split(' ').collect();
            let n = words.len();
            (0..n.saturating_sub(1))
                .map(|i| (i + n / 2) % (n - 1))
                .map(|i| (words[i], words[i + 1]))
                .find(|(a, b)| plain(a) && plain(b) && a.len().max(b.len()) >= 5 && a != b)
        });
        if let Some((a, b)) = found {
            let phrase = format!("{a} {b}");
            if !patterns.contains(&phrase) {
                single.get_or_insert(if a.len() >= b.len() { a } else { b }.to_owned());
                patterns.push(phrase);
            }
        }
    }
    if let Some(word) = single.filter(|w| !patterns.contains(w)) {
        patterns.push(word);
    }
    patterns
}

/// Recall on the imported run with the most messages.
fn recall(
    rt: &Runtime,
    store: SqliteStore,
    tenant: TenantId,
    sizes: ImportSizes,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<serde_json::Value> {
    let found = on_worker(rt, async move {
        let runs = store.list_runs(&tenant).await?;
        let Some(run) = runs.iter().max_by_key(|r| r.last_seq) else {
            bail!("recall bench: the import made no runs");
        };
        let (id, last) = (run.id.clone(), run.last_seq.0);
        ensure!(last > 0, "recall bench: the largest run is empty");
        let all = store.read_range(&tenant, &id, Seq(1), None).await?;
        let mut json_bytes = 0;
        for entry in &all {
            json_bytes += serde_json::to_string(&entry.message)?.len();
        }
        let tool_calls: usize = all.iter().map(|e| e.message.tool_use_ids().count()).sum();
        drop(all);

        let mut sampled = Vec::new();
        for k in 1..=SAMPLES {
            let seq = Seq((last * k / (SAMPLES + 1)).max(1));
            for entry in store.read_range(&tenant, &id, seq, Some(seq)).await? {
                let bodies = search_rows(&entry.message)
                    .into_iter()
                    .map(|r| r.body)
                    .collect();
                sampled.push(bodies);
            }
        }
        let mut patterns = pick_patterns(&sampled);
        ensure!(
            !patterns.is_empty(),
            "recall bench: no searchable words in the sampled messages of run {id}"
        );
        patterns.push(ABSENT.to_owned());
        Ok(Found {
            store,
            tenant,
            id,
            last,
            json_bytes,
            tool_calls,
            patterns,
        })
    })?;
    writeln!(
        out,
        "    recall on the largest run, {}: {} messages, {:.1} MiB of message JSON, {} tool calls",
        found.id,
        thousands(found.last as f64),
        found.json_bytes as f64 / (1024.0 * 1024.0),
        thousands(found.tool_calls as f64)
    )?;
    out.flush()?;

    let patterns = found.patterns.clone();
    let run = json!({
        "id": found.id.as_str(),
        "messages": found.last,
        "message_json_bytes": found.json_bytes,
        "tool_calls": found.tool_calls,
    });
    let (first_ms, first_hits, search_ms, hits, read_ms) = on_worker(rt, async move {
        let Found {
            store,
            tenant,
            id,
            last,
            patterns,
            ..
        } = found;
        let search = |pattern: &str| {
            let query = SearchQuery::new(pattern, 20);
            let (store, tenant, id) = (&store, &tenant, &id);
            async move {
                let start = Instant::now();
                let entries = store.search(tenant, id, &query).await?.entries;
                Ok::<_, anyhow::Error>((ms(start.elapsed()), entries.len()))
            }
        };
        let (first_ms, first_hits) = search(&patterns[0]).await?;
        let mut search_ms = vec![Vec::new(); patterns.len()];
        let mut hits = vec![0; patterns.len()];
        for i in 0..sizes.searches {
            let k = i % patterns.len();
            let (took, n) = search(&patterns[k]).await?;
            search_ms[k].push(took);
            hits[k] = n;
        }
        let mut read_ms = Vec::new();
        for i in 0..sizes.reads as u64 {
            let seq = Seq(1 + i * 7_919 % last);
            let start = Instant::now();
            let entries = store.read_range(&tenant, &id, seq, Some(seq)).await?;
            read_ms.push(ms(start.elapsed()));
            ensure!(
                entries.len() == 1,
                "recall bench: reading seq {seq} of run {id} gave {} entries",
                entries.len()
            );
        }
        Ok((first_ms, first_hits, search_ms, hits, read_ms))
    })?;
    let absent = patterns.len() - 1;
    ensure!(
        first_hits > 0 && hits[..absent].iter().all(|h| *h > 0) && hits[absent] == 0,
        "recall bench: patterns {patterns:?} found {hits:?} entries; expected some for each but the last"
    );
    let all_ms: Vec<f64> = search_ms.iter().flatten().copied().collect();
    let (med, p90) = (median(&all_ms), percentile(&all_ms, 0.9));
    let read_med = median(&read_ms);
    writeln!(
        out,
        "    first search (indexes the whole run): {first_ms:.1} ms; then {} searches, limit 20, over {} patterns: median {med:.3} ms, p90 {p90:.3} ms",
        all_ms.len(),
        patterns.len()
    )?;
    writeln!(
        out,
        "    per pattern (entries found: median ms): {}",
        list(&(0..patterns.len()).collect::<Vec<_>>(), |k| format!(
            "{:?} {}: {:.3}",
            patterns[*k],
            hits[*k],
            median(&search_ms[*k])
        ))
    )?;
    writeln!(
        out,
        "    read_range of one seq: median {read_med:.3} ms, p90 {:.3} ms",
        percentile(&read_ms, 0.9)
    )?;
    report.figure(
        "recall_first_search_ms",
        "6 recall, first search (indexes the run)",
        first_ms,
        Unit::Millis,
        None,
    );
    report.figure(
        "recall_search_median_ms",
        "6 recall, search on the largest run: median",
        med,
        Unit::Millis,
        Some(Target::AtMost(10.0)),
    );
    report.figure(
        "recall_search_p90_ms",
        "6 recall, search on the largest run: p90",
        p90,
        Unit::Millis,
        None,
    );
    report.figure(
        "recall_read_seq_median_ms",
        "6 recall by seq (read_range of one): median",
        read_med,
        Unit::Millis,
        None,
    );
    Ok(json!({
        "run": run,
        "patterns": patterns,
        "hits": hits,
        "pattern_median_ms": search_ms.iter().map(|v| median(v)).collect::<Vec<_>>(),
        "searches": all_ms.len(),
        "first_search_ms": first_ms,
        "read_seq_median_ms": read_med,
    }))
}

/// The largest run and what to search it for.
struct Found {
    store: SqliteStore,
    tenant: TenantId,
    id: RunId,
    last: u64,
    json_bytes: usize,
    tool_calls: usize,
    patterns: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(texts: &[&str]) -> Vec<Vec<String>> {
        texts.iter().map(|t| vec![t.to_string()]).collect()
    }

    #[test]
    fn patterns_are_adjacent_plain_words_from_each_message() {
        let picked = pick_patterns(&bodies(&[
            "a b 42 cargo build release x",
            "id 0x1f parser expects token",
            "ok no",
            "",
        ]));
        // From the middle word on: "cargo build" in the first, "parser expects" in the
        // second; nothing usable in the last two; then the first phrase's longer word alone.
        assert_eq!(picked, ["cargo build", "parser expects", "cargo"]);
    }

    #[test]
    fn patterns_wrap_around_and_are_not_repeated() {
        let picked = pick_patterns(&bodies(&[
            "lexer emits newline 1 2 3 4",
            "lexer emits newline 1 2 3 4",
        ]));
        assert_eq!(picked, ["lexer emits", "lexer"]);
    }

    #[test]
    fn a_phrase_never_spans_two_bodies() {
        let picked = pick_patterns(&[vec!["1 build".into(), "release 2".into()]]);
        assert!(picked.is_empty(), "{picked:?}");
    }
}
