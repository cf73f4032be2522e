//! Live sessions: a Claude Code or Codex file read while it is still being written.
//!
//! For every line cut of every corpus file (the file truncated after each line; and in the
//! middle of a line, every line of the smaller files and every 16th of the larger), the cut's
//! settled messages must be a prefix of the whole file's settled messages, message for message
//! (equal messages have byte-identical stored JSON: their serde form is deterministic), and so
//! must its settled compactions; its usage records of settled responses must be the whole
//! file's. That is what lets an importer take a session's settled part now and append what
//! follows later, whatever the cut point.
// issue 17: a live session made every later import of it fail.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use baton_import::{Format, ImportedUsage, Transcript};

use crate::claude_code::corpus;

/// Files up to this size are also cut in the middle of every line.
const SMALL: usize = 200_000;

/// A transcript's settled part.
struct Settled {
    id: Option<String>,
    transcript: Transcript,
}

fn settled(ts: Vec<Transcript>) -> Vec<Settled> {
    ts.into_iter()
        .map(|mut t| {
            t.settle();
            Settled {
                id: t.source_session_id.clone(),
                transcript: t,
            }
        })
        .collect()
}

/// The usage records of settled messages: final, as the whole file has them.
fn linked(t: &Transcript) -> impl Iterator<Item = &ImportedUsage> {
    t.usage
        .iter()
        .filter(|u| u.message.is_some_and(|m| m < t.messages.len()))
}

/// The usage records of responses still streaming, past the settled messages: counted now,
/// and replaced by the whole file's larger copy.
fn streaming(t: &Transcript) -> impl Iterator<Item = &ImportedUsage> {
    t.usage
        .iter()
        .filter(|u| u.message.is_some_and(|m| m >= t.messages.len()))
}

/// Why `cut`'s settled state is not a prefix of `full`'s, if it is not.
fn prefix_of(cut: &[Settled], full: &[Settled]) -> Option<String> {
    for c in cut {
        let Some(f) = full.iter().find(|f| f.id == c.id) else {
            return Some(format!("transcript {:?} is not in the whole file", c.id));
        };
        let (a, b) = (&c.transcript, &f.transcript);
        if let Some(at) = (0..a.messages.len())
            .find(|&i| b.messages.get(i).map(|m| &m.message) != Some(&a.messages[i].message))
        {
            return Some(format!(
                "{:?}: settled message {at} of {} is not the whole file's ({} settled)",
                c.id,
                a.messages.len(),
                b.messages.len()
            ));
        }
        if let Some(last) = a.messages.last() {
            let i = a.messages.len() - 1;
            assert_eq!(
                serde_json::to_string(&last.message).unwrap(),
                serde_json::to_string(&b.messages[i].message).unwrap()
            );
        }
        if b.compactions.len() < a.compactions.len()
            || b.compactions[..a.compactions.len()] != a.compactions[..]
        {
            return Some(format!(
                "{:?}: compactions {:?} vs {:?}",
                c.id, a.compactions, b.compactions
            ));
        }
        if let Some(u) = linked(a).find(|u| !linked(b).any(|w| w == *u)) {
            return Some(format!(
                "{:?}: usage record {} differs in the whole file",
                c.id, u.record.id
            ));
        }
        let total = |u: &ImportedUsage| u.record.usage.total();
        if let Some(u) = streaming(a).find(|u| {
            !b.usage
                .iter()
                .any(|w| w.record.id == u.record.id && total(w) >= total(u))
        }) {
            return Some(format!(
                "{:?}: streaming usage record {} has no larger copy in the whole file",
                c.id, u.record.id
            ));
        }
    }
    None
}

fn walk(dir: &str, format: Format) {
    let Some(files) = corpus(dir) else {
        return;
    };
    let cuts = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    for (name, bytes) in &files {
        let whole = settled(baton_import::parse(format, bytes).unwrap());
        let mut points = Vec::new();
        let mut start = 0;
        for (line, end) in bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .enumerate()
        {
            if bytes.len() <= SMALL || line % 16 == 0 {
                points.push(start + (end - start) / 2);
            }
            points.push(end);
            start = end;
        }
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&at) = points.get(k) else { break };
                        cuts.fetch_add(1, Ordering::Relaxed);
                        let cut = baton_import::parse(format, &bytes[..at])
                            .unwrap_or_else(|e| panic!("{name} cut at byte {at}: {e}"));
                        if let Some(why) = prefix_of(&settled(cut), &whole) {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{name} cut at byte {at}: {why}"));
                        }
                    }
                });
            }
        });
    }
    let cuts = cuts.into_inner();
    let failures = failures.into_inner().unwrap();
    assert!(cuts > 0);
    println!("{dir}: {cuts} cuts, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {cuts} cuts failed:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn every_line_cut_of_every_claude_code_file_settles_to_a_prefix_of_the_whole() {
    walk("claude-code-jsonl", Format::ClaudeCode);
}

#[test]
fn every_line_cut_of_every_codex_file_settles_to_a_prefix_of_the_whole() {
    walk("codex-rollout-jsonl", Format::Codex);
}
