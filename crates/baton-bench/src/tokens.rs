//! Section 7: how far the byte-based token proxy is from the real vocabularies, on the corpus
//! (issue 5, item 1).
//!
//! Every message of the shared corpus (`../shared/corpus`, read and parsed as section 6 does:
//! `baton_import::detect`, then `parse`; no redaction) is counted with `ByteEstimate`,
//! `o200k_base` and `cl100k_base`, each through `TokenCounter::count_message`, so all three
//! add the same structure overhead and differ only in how text becomes tokens. For each real
//! vocabulary it reports the proxy's total ratio (the sum of its counts over the sum of the
//! real ones: above 1 it overcounts), and the median and p90 of the per-message relative error
//! `|proxy − real| / real` over the messages of at least 20 real tokens (below that the
//! overhead dominates and one token is a large share). There are no targets: the issue asks
//! for the proxy's error to be reported. Each counter's throughput is in MiB per second of
//! message JSON (the form a history row stores), each pass over all messages timed alone,
//! medians of rounds; decoding a vocabulary (what its first use in a process costs) is timed
//! apart. baton counts with `bpe-openai` (issue 17, item 7); `tiktoken-rs`, the port of
//! OpenAI's tiktoken baton counted with before, counts the same messages in the same run, and
//! the section prints both throughputs, their ratio, and how many messages the two count
//! differently (target 0). `--quick` counts every sixth file. A missing corpus skips the section
//! with one line.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use baton_core::Message;
use baton_core::tokens::{ByteEstimate, TokenCounter};
use baton_tokens::{Encoding, Tiktoken};
use serde_json::json;

use crate::import::{CORPUS, walk};
use crate::{Report, Target, Unit, list, median, ms, percentile, thousands};

/// Messages with fewer real tokens than this are left out of the per-message error.
const MIN_REAL: u32 = 20;

/// One message: where it came from, its JSON size, and its count by each counter.
struct Counted {
    format: &'static str,
    json_bytes: usize,
    /// `ByteEstimate`, `o200k_base`, `cl100k_base`.
    tokens: [u32; 3],
}

/// The section: prints its lines and adds its figures.
pub(crate) fn section(
    quick: bool,
    report: &mut Report,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let Ok(corpus) = std::fs::canonicalize(CORPUS) else {
        writeln!(out, "\ntokens: skipped (corpus not found at {CORPUS})")?;
        report.details.insert(
            "tokens".into(),
            json!({ "skipped": "corpus not found", "path": CORPUS }),
        );
        out.flush()?;
        return Ok(());
    };
    let rounds = if quick { 1 } else { 3 };
    let every = if quick { 6 } else { 1 };
    writeln!(
        out,
        "\n[7] tokens: every message of the corpus at {}{}, counted by the byte proxy, o200k_base and cl100k_base; {rounds} round{}",
        corpus.display(),
        if every == 1 {
            String::new()
        } else {
            format!(" (every {every}th file)")
        },
        if rounds == 1 { "" } else { "s" }
    )?;
    out.flush()?;

    let messages = corpus_messages(&corpus, every)?;
    let sizes: Vec<usize> = messages
        .iter()
        .map(|(_, m)| serde_json::to_string(m).map(|s| s.len()))
        .collect::<Result<_, _>>()?;
    let json_bytes: usize = sizes.iter().sum();
    let mib = json_bytes as f64 / (1024.0 * 1024.0);

    // Decoding a vocabulary happens once per process, on its first count (section 6 already
    // paid it here): timed apart, on fresh copies.
    let start = Instant::now();
    std::hint::black_box(tiktoken_rs::o200k_base()?);
    let o200k_load = ms(start.elapsed());
    let start = Instant::now();
    std::hint::black_box(tiktoken_rs::cl100k_base()?);
    let load_ms = [o200k_load, ms(start.elapsed())];
    for encoding in [Encoding::O200k, Encoding::Cl100k] {
        std::hint::black_box(Tiktoken::new(encoding).count_text("warm up"));
    }

    let bytes = ByteEstimate;
    let o200k = Tiktoken::new(Encoding::O200k);
    let cl100k = Tiktoken::new(Encoding::Cl100k);
    let reference_o200k = Reference {
        name: "tiktoken-rs o200k_base",
        bpe: tiktoken_rs::o200k_base()?,
    };
    let reference_cl100k = Reference {
        name: "tiktoken-rs cl100k_base",
        bpe: tiktoken_rs::cl100k_base()?,
    };
    let counters: [&dyn TokenCounter; 5] =
        [&bytes, &o200k, &cl100k, &reference_o200k, &reference_cl100k];
    let mut seconds = [const { Vec::new() }; 5];
    let mut all = vec![[0u32; 5]; messages.len()];
    for _ in 0..rounds {
        for (k, counter) in counters.iter().enumerate() {
            let start = Instant::now();
            for ((_, message), slot) in messages.iter().zip(&mut all) {
                slot[k] = counter.count_message(message);
            }
            seconds[k].push(start.elapsed().as_secs_f64());
        }
    }
    let counts: Vec<[u32; 3]> = all.iter().map(|c| [c[0], c[1], c[2]]).collect();
    let differ = [
        all.iter().filter(|c| c[1] != c[3]).count(),
        all.iter().filter(|c| c[2] != c[4]).count(),
    ];
    let counted: Vec<Counted> = messages
        .iter()
        .zip(&sizes)
        .zip(&counts)
        .map(|(((format, _), size), tokens)| Counted {
            format,
            json_bytes: *size,
            tokens: *tokens,
        })
        .collect();
    let formats = {
        let mut f: Vec<&'static str> = counted.iter().map(|c| c.format).collect();
        f.sort_unstable();
        f.dedup();
        f
    };
    let total = |k: usize| counted.iter().map(|c| u64::from(c.tokens[k])).sum::<u64>();
    let totals = [total(0), total(1), total(2)];
    writeln!(
        out,
        "    {} messages, {mib:.1} MiB of message JSON ({} formats); totals: proxy {}, o200k_base {}, cl100k_base {} tokens",
        thousands(counted.len() as f64),
        formats.len(),
        thousands(totals[0] as f64),
        thousands(totals[1] as f64),
        thousands(totals[2] as f64),
    )?;

    let mut details = json!({
        "corpus": corpus.display().to_string(),
        "every_nth_file": every,
        "rounds": rounds,
        "messages": counted.len(),
        "message_json_bytes": json_bytes,
        "min_real_tokens": MIN_REAL,
        "totals": { "bytes": totals[0], "o200k_base": totals[1], "cl100k_base": totals[2] },
        "vocabulary_load_ms": { "o200k_base": load_ms[0], "cl100k_base": load_ms[1] },
    });
    for (k, name, key_ratio, key_median, key_p90) in [
        (
            1,
            "o200k_base",
            "tokens_proxy_ratio_o200k",
            "tokens_proxy_error_median_o200k",
            "tokens_proxy_error_p90_o200k",
        ),
        (
            2,
            "cl100k_base",
            "tokens_proxy_ratio_cl100k",
            "tokens_proxy_error_median_cl100k",
            "tokens_proxy_error_p90_cl100k",
        ),
    ] {
        let ratio = totals[0] as f64 / totals[k] as f64;
        let errors: Vec<f64> = counted
            .iter()
            .filter(|c| c.tokens[k] >= MIN_REAL)
            .map(|c| relative_error(c.tokens[0], c.tokens[k]))
            .collect();
        let (med, p90) = (median(&errors), percentile(&errors, 0.9));
        let by_format: Vec<(&str, f64)> = formats
            .iter()
            .map(|f| {
                let of = |i: usize| {
                    counted
                        .iter()
                        .filter(|c| c.format == *f)
                        .map(|c| u64::from(c.tokens[i]))
                        .sum::<u64>()
                };
                (*f, of(0) as f64 / of(k) as f64)
            })
            .collect();
        writeln!(
            out,
            "    proxy vs {name}: total ratio {ratio:.3} (proxy/real); per message (>= {MIN_REAL} real tokens, {} of them), |proxy - real| / real: median {:.1}%, p90 {:.1}%",
            thousands(errors.len() as f64),
            med * 100.0,
            p90 * 100.0
        )?;
        writeln!(
            out,
            "      total ratio by format: {}",
            list(&by_format, |(f, r)| format!("{f} {r:.3}"))
        )?;
        report.figure(
            key_ratio,
            format!("7 proxy/{name} tokens, corpus total"),
            ratio,
            Unit::Ratio,
            None,
        );
        report.figure(
            key_median,
            format!("7 proxy error vs {name}: median (fraction)"),
            med,
            Unit::Ratio,
            None,
        );
        report.figure(
            key_p90,
            format!("7 proxy error vs {name}: p90 (fraction)"),
            p90,
            Unit::Ratio,
            None,
        );
        details[name] = json!({
            "total_ratio": ratio,
            "error_median": med,
            "error_p90": p90,
            "messages_in_error": errors.len(),
            "total_ratio_by_format": by_format.iter().map(|(f, r)| (f.to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
        });
    }

    let per_s: Vec<f64> = seconds.iter().map(|s| mib / median(s)).collect();
    writeln!(
        out,
        "    throughput (MiB/s of message JSON, median): proxy {:.0}, o200k_base {:.1}, cl100k_base {:.1}; tiktoken-rs: o200k_base {:.1}, cl100k_base {:.1}; decoding a tiktoken-rs vocabulary: o200k_base {:.0} ms, cl100k_base {:.0} ms",
        per_s[0], per_s[1], per_s[2], per_s[3], per_s[4], load_ms[0], load_ms[1]
    )?;
    let speedup = [per_s[1] / per_s[3], per_s[2] / per_s[4]];
    writeln!(
        out,
        "    baton (bpe-openai) vs tiktoken-rs: o200k_base {:.1}x, cl100k_base {:.1}x faster; messages counted differently: o200k_base {}, cl100k_base {} of {} (target 0) {}",
        speedup[0],
        speedup[1],
        differ[0],
        differ[1],
        thousands(all.len() as f64),
        if differ == [0, 0] { "PASS" } else { "MISS" }
    )?;
    for (k, key, name) in [
        (0, "tokens_o200k_speedup_vs_tiktoken_rs", "o200k_base"),
        (1, "tokens_cl100k_speedup_vs_tiktoken_rs", "cl100k_base"),
    ] {
        report.figure(
            key,
            format!("7 token counting, {name}: baton over tiktoken-rs"),
            speedup[k],
            Unit::Ratio,
            None,
        );
    }
    report.figure(
        "tokens_counted_differently",
        "7 messages counted differently from tiktoken-rs (target 0)",
        (differ[0] + differ[1]) as f64,
        Unit::Count("messages"),
        Some(Target::AtMost(0.0)),
    );
    details["tiktoken_rs"] = json!({
        "mib_per_s": { "o200k_base": per_s[3], "cl100k_base": per_s[4] },
        "speedup": { "o200k_base": speedup[0], "cl100k_base": speedup[1] },
        "messages_counted_differently": { "o200k_base": differ[0], "cl100k_base": differ[1] },
    });
    for (k, key, name) in [
        (0, "tokens_bytes_mib_per_s", "bytes proxy"),
        (1, "tokens_o200k_mib_per_s", "o200k_base"),
        (2, "tokens_cl100k_mib_per_s", "cl100k_base"),
    ] {
        report.figure(
            key,
            format!("7 token counting, {name}"),
            per_s[k],
            Unit::PerSecond("MiB"),
            None,
        );
    }
    // What one append of one message can cost: each message timed alone, the slowest kept.
    let slowest = counted
        .iter()
        .zip(&messages)
        .map(|(c, (_, m))| (time_one(&o200k, m), c.json_bytes))
        .max();
    if let Some((took, size)) = slowest {
        writeln!(
            out,
            "    the slowest message to count with o200k_base: {:.2} ms ({:.1} KiB of JSON)",
            ms(took),
            size as f64 / 1024.0,
        )?;
        details["slowest_message"] = json!({ "o200k_ms": ms(took), "json_bytes": size });
    }
    details["mib_per_s"] = json!({
        "bytes": per_s[0],
        "o200k_base": per_s[1],
        "cl100k_base": per_s[2],
    });
    writeln!(
        out,
        "    tokens section took {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    report.details.insert("tokens".into(), details);
    out.flush()?;
    Ok(())
}

/// Every message of every `every`th transcript file of the corpus, with its format's name.
fn corpus_messages(corpus: &Path, every: usize) -> anyhow::Result<Vec<(&'static str, Message)>> {
    let mut files = Vec::new();
    walk(corpus, &mut files)?;
    let mut messages = Vec::new();
    for file in files.iter().step_by(every) {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let Some(format) = baton_import::detect(&bytes) else {
            continue;
        };
        let transcripts = baton_import::parse(format, &bytes)
            .with_context(|| format!("parsing {} as {}", file.display(), format.name()))?;
        for transcript in transcripts {
            messages.extend(
                transcript
                    .messages
                    .into_iter()
                    .map(|m| (format.name(), m.message)),
            );
        }
    }
    Ok(messages)
}

/// tiktoken's own counting (`tiktoken-rs`), the reference baton's counts must equal; also the
/// counter of issue 17's baseline import pipeline (`import.rs`).
pub(crate) struct Reference {
    pub(crate) name: &'static str,
    pub(crate) bpe: tiktoken_rs::CoreBPE,
}

impl TokenCounter for Reference {
    fn name(&self) -> &str {
        self.name
    }

    fn count_text(&self, text: &str) -> u32 {
        u32::try_from(self.bpe.encode_ordinary(text).len()).unwrap_or(u32::MAX)
    }
}

/// `|estimate − real| / real`.
fn relative_error(estimate: u32, real: u32) -> f64 {
    (f64::from(estimate) - f64::from(real)).abs() / f64::from(real)
}

/// One count of one message, timed.
fn time_one(counter: &dyn TokenCounter, message: &Message) -> Duration {
    let start = Instant::now();
    std::hint::black_box(counter.count_message(message));
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_error_is_symmetric_in_sign() {
        assert_eq!(relative_error(120, 100), 0.2);
        assert_eq!(relative_error(80, 100), 0.2);
        assert_eq!(relative_error(100, 100), 0.0);
    }
}
