//! Retention on real transcripts: for every corpus transcript of at least 20 messages, the
//! offline working state summarizes the first 70% (cut at the nearest safe point) under a cap of
//! a fifth of what it replaces; every claim cites a seq of the dropped part, the state holds its
//! cap, the constraint probe keeps every constraint, and the retention audit keeps at least 90% of
//! the commands of the dropped part (issue 5, item 4). The audit shares the extractor's
//! detectors, so these are sanity checks; the independent probes are `baton-probes`'.
//! Per-format totals are printed (`cargo test -p baton-compact --test it -- --nocapture`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use baton_compact::audit::{Retention, Share, audit};
use baton_compact::probes::{Probes, probe};
use baton_compact::{Offline, SummaryRequest};
use baton_core::units::{ProtocolEvents, ProtocolMap};
use baton_core::{Entry, Seq, Timestamp, tokens};

/// The corpus root, or `None` (after saying so) when it is absent.
fn corpus_root() -> Option<PathBuf> {
    let root = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    if root.is_dir() {
        Some(root)
    } else {
        println!("skipping: corpus not found at {}", root.display());
        None
    }
}

/// Every file under `root`, sorted.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// What one format's transcripts added up to.
#[derive(Default)]
struct Totals {
    transcripts: usize,
    /// Retention by the claims alone.
    claims: Retention,
    /// Retention by the claims and the tail after the cut.
    context: Retention,
    probes: Probes,
    claim_count: usize,
    claim_tokens: u64,
    dropped_tokens: u64,
}

fn pct(share: Share) -> String {
    match share.ratio() {
        Some(r) => format!("{:5.1}% ({}/{})", r * 100.0, share.kept, share.total),
        None => "    - (0/0)".to_owned(),
    }
}

#[test]
fn offline_structured_keeps_paths_and_commands_on_the_corpus() {
    let Some(root) = corpus_root() else { return };
    let mut totals: BTreeMap<&'static str, Totals> = BTreeMap::new();
    let mut failures = Vec::new();
    for path in files(&root) {
        let bytes = std::fs::read(&path).unwrap();
        let Some(format) = baton_import::detect(&bytes) else {
            continue;
        };
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        for transcript in baton_import::parse(format, &bytes).unwrap() {
            if transcript.messages.len() < 20 {
                continue;
            }
            let entries: Vec<Entry> = (1..)
                .zip(&transcript.messages)
                .map(|(seq, m)| Entry {
                    seq: Seq(seq),
                    tokens: tokens::estimate_message(&m.message),
                    message: m.message.clone(),
                    created_at: Timestamp(0),
                })
                .collect();
            let events: Vec<ProtocolEvents> = entries
                .iter()
                .map(|e| ProtocolEvents::of(e.seq, &e.message))
                .collect();
            let desired = Seq(entries.len() as u64 * 7 / 10);
            let cut = ProtocolMap::analyze(Seq::ZERO, &events)
                .safe_cut_at_or_before(desired)
                .map_or(desired, |c| c.seq());
            let split = entries.partition_point(|e| e.seq <= cut);
            let (dropped, kept) = entries.split_at(split);

            let where_ = format!("{name}#{}", transcript.index);
            let dropped_tokens: u64 = dropped.iter().map(|e| u64::from(e.tokens)).sum();
            let cap = (dropped_tokens / 5).max(2_000);
            let bounded = Offline::state(&SummaryRequest {
                base: None,
                old: dropped,
                cut,
                instructions: None,
                pins: &[],
                cap,
                counter: &tokens::ByteEstimate,
            });
            let claims = bounded.claims;
            for c in &claims {
                assert!(
                    dropped.iter().any(|e| e.seq == c.source_seq),
                    "{where_}: the state cites {} outside the dropped part 1..={cut}: {c:?}",
                    c.source_seq
                );
            }
            assert!(
                bounded.tokens <= cap,
                "{where_}: {} tokens over the cap {cap}",
                bounded.tokens
            );
            let by_claims = audit(dropped, &claims, &[]);
            let in_context = audit(dropped, &claims, kept);
            let probes = probe(&entries, cut, &claims, kept);
            if by_claims.commands.ratio().is_some_and(|r| r < 0.9) {
                failures.push(format!("{where_}: commands {}", pct(by_claims.commands)));
            }
            if probes.constraints.kept != probes.constraints.total
                || probes.sources.kept != probes.sources.total
            {
                failures.push(format!("{where_}: probes {probes:?}"));
            }

            let t = totals.entry(format.name()).or_default();
            t.transcripts += 1;
            t.claims += by_claims;
            t.context += in_context;
            t.probes += probes;
            t.claim_count += claims.len();
            t.claim_tokens += bounded.tokens;
            t.dropped_tokens += dropped_tokens;
        }
    }
    println!("retention of the dropped first 70%, by the claims alone | with the tail:");
    for (format, t) in &totals {
        println!(
            "{format:12} {:2} transcripts, {:5} claims, {:7} claim tokens for {:8} dropped tokens",
            t.transcripts, t.claim_count, t.claim_tokens, t.dropped_tokens
        );
        for (what, alone, with) in [
            ("paths", t.claims.paths, t.context.paths),
            ("commands", t.claims.commands, t.context.commands),
            ("urls", t.claims.urls, t.context.urls),
            ("numbers", t.claims.numbers, t.context.numbers),
        ] {
            println!("    {what:9} {:22} | {}", pct(alone), pct(with));
        }
        println!(
            "    probes: constraints {}, findings {}, sources {}",
            pct(t.probes.constraints),
            pct(t.probes.findings),
            pct(t.probes.sources)
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The claims are a summary, not a copy: on every format they take a small share of what
    // they replace.
    for (format, t) in &totals {
        assert!(
            t.claim_tokens * 4 < t.dropped_tokens,
            "{format}: {} claim tokens for {} dropped",
            t.claim_tokens,
            t.dropped_tokens
        );
    }
}
