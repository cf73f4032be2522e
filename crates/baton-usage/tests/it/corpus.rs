//! The reports over the shared corpus, against an independent reading of the same files.
//!
//! The oracle here reads each JSONL line with `serde_json` alone and applies the counting rules
//! directly (Claude Code: the last row per `message.id` + `requestId`, per `message.id` without
//! a request id, once across files, a subagent's responses its parent's `agent_progress` lines
//! repeat included; Codex: each `token_count` whose totals changed); the reports are built from
//! `baton-import`'s usage records. Their days and sessions must agree to the token.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use baton_core::Timestamp;
use baton_core::prices::PriceTable;
use baton_import::Format;
use baton_usage::{Entry, Options, Period, dedupe, report, root_session, sessions};
use serde_json::Value;

/// The corpus directory, or `None` (with a message) when it is absent.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus"
    ));
    if dir.is_dir() {
        return Some(dir);
    }
    println!("skipping: corpus not found at {}", dir.display());
    None
}

/// The `.jsonl` files of a corpus folder: name and bytes, sorted by name.
pub fn files(dir: &str) -> Vec<(String, Vec<u8>)> {
    let Some(root) = corpus_dir() else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(root.join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Every usage record `baton-import` reads from `files`, as report entries: a subagent's
/// under its parent's session (the part of its session id before `/`).
pub fn entries(files: &[(String, Vec<u8>)], format: Format) -> Vec<Entry> {
    let mut out = Vec::new();
    for (_, bytes) in files {
        for t in baton_import::parse(format, bytes).unwrap() {
            let session = root_session(t.source_session_id.as_deref().unwrap_or(""));
            for u in &t.usage {
                out.push(Entry {
                    record: u.record.clone(),
                    session: session.to_owned(),
                    project: t.project.clone(),
                    agent: format.name().to_owned(),
                });
            }
        }
    }
    dedupe(out)
}

/// (input, output, cache writes, cache reads) per key.
type Sums = BTreeMap<String, [u64; 4]>;

/// The oracle's per-day and per-session sums of Claude Code files.
fn claude_oracle(files: &[(String, Vec<u8>)]) -> (Sums, Sums, usize) {
    // key → (day, session, counts), the last row of a file, the larger copy across files.
    let mut kept: HashMap<String, (String, String, [u64; 4])> = HashMap::new();
    for (_, bytes) in files {
        let mut in_file: HashMap<String, (String, String, [u64; 4])> = HashMap::new();
        for line in std::str::from_utf8(bytes).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            // An assistant line, or a progress line repeating a subagent's response.
            let (m, request, timestamp) = match v["type"].as_str() {
                Some("assistant") => (&v["message"], &v["requestId"], &v["timestamp"]),
                Some("progress") if v["data"]["type"] == "agent_progress" => {
                    let outer = &v["data"]["message"];
                    (&outer["message"], &outer["requestId"], &outer["timestamp"])
                }
                _ => continue,
            };
            let u = &m["usage"];
            if !u.is_object() {
                continue;
            }
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            let counts = [
                n("input_tokens"),
                n("output_tokens"),
                n("cache_creation_input_tokens"),
                n("cache_read_input_tokens"),
            ];
            if m["model"] == "<synthetic>" && counts.iter().sum::<u64>() == 0 {
                continue;
            }
            let key = match (m["id"].as_str(), request.as_str()) {
                (Some(m), Some(r)) => format!("{m}:{r}"),
                (Some(m), None) => m.to_owned(),
                (None, _) => format!("line:{}", v["uuid"]),
            };
            let day = timestamp.as_str().unwrap()[..10].to_owned();
            let session = v["sessionId"].as_str().unwrap_or("").to_owned();
            in_file.insert(key, (day, session, counts));
        }
        for (key, row) in in_file {
            match kept.get(&key) {
                Some(k) if k.2.iter().sum::<u64>() >= row.2.iter().sum::<u64>() => {}
                _ => {
                    kept.insert(key, row);
                }
            }
        }
    }
    let (mut days, mut sessions) = (Sums::new(), Sums::new());
    for (day, session, counts) in kept.values() {
        for (sums, key) in [(&mut days, day), (&mut sessions, session)] {
            let slot = sums.entry(key.clone()).or_default();
            for (sum, n) in slot.iter_mut().zip(counts) {
                *sum += n;
            }
        }
    }
    (days, sessions, kept.len())
}

fn sums_of(rows: &[baton_usage::Row]) -> Sums {
    rows.iter()
        .map(|r| {
            (
                r.period.clone(),
                [
                    r.input_tokens,
                    r.output_tokens,
                    r.cache_creation_tokens,
                    r.cache_read_tokens,
                ],
            )
        })
        .collect()
}

#[test]
fn claude_code_days_and_sessions_match_an_independent_reading_of_the_files() {
    let files = files("claude-code-jsonl");
    if files.is_empty() {
        return;
    }
    let entries = entries(&files, Format::ClaudeCode);
    let (days, by_session, responses) = claude_oracle(&files);
    assert_eq!(entries.len(), responses, "one record per response");
    let o = Options::new(PriceTable::defaults());
    assert_eq!(sums_of(&report(&entries, Period::Daily, &o).rows), days);
    assert_eq!(sums_of(&sessions(&entries, &o).rows), by_session);
    assert!(
        entries
            .iter()
            .all(|e| e.record.at.is_some() && !e.record.estimated)
    );
}

#[test]
fn codex_usage_is_each_changed_token_count() {
    let files = files("codex-rollout-jsonl");
    if files.is_empty() {
        return;
    }
    let entries = entries(&files, Format::Codex);
    let mut expected = [0u64; 3];
    let mut records = 0;
    for (_, bytes) in &files {
        let mut previous = Value::Null;
        for line in std::str::from_utf8(bytes).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            let info = &v["payload"]["info"];
            if v["payload"]["type"] != "token_count" || !info.is_object() {
                continue;
            }
            if info["total_token_usage"] == previous {
                continue;
            }
            previous = info["total_token_usage"].clone();
            let last = &info["last_token_usage"];
            let n = |k: &str| last[k].as_u64().unwrap();
            expected[0] += n("input_tokens") - n("cached_input_tokens");
            expected[1] += n("output_tokens");
            expected[2] += n("cached_input_tokens");
            records += 1;
        }
    }
    assert_eq!(entries.len(), records);
    let got = entries.iter().fold([0u64; 3], |mut acc, e| {
        acc[0] += e.record.usage.input;
        acc[1] += e.record.usage.output;
        acc[2] += e.record.usage.cache_read;
        acc
    });
    assert_eq!(got, expected);
    assert!(entries.iter().all(|e| {
        e.record
            .model
            .as_deref()
            .is_some_and(|m| m.starts_with("gpt-5"))
    }));
    let priced = report(
        &entries,
        Period::Daily,
        &Options::new(PriceTable::defaults()),
    );
    assert!(
        priced
            .rows
            .iter()
            .all(|r| r.unpriced_models.is_empty() && r.total_cost > 0.0)
    );
    assert!(
        entries
            .iter()
            .all(|e| e.record.at.is_some_and(|t| t > Timestamp(0)))
    );
}
