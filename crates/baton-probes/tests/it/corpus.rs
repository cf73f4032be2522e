//! Structural facts of the probes on every Claude Code and Codex file of the shared corpus
//! (`../shared/corpus`; each test says so and passes when it is absent):
//!
//! - the instructions found per transcript are what a count over the raw JSONL gives, by other
//!   means than the spec's (Claude Code: the user lines not marked `isMeta`, which is how the
//!   harness marks a command's expansion; Codex: the `user_message` events);
//! - the full history rendered as text, probed against itself at its last seq, keeps every
//!   item of every kind (so each key is really in the message it comes from), and so does
//!   `coverage`;
//! - the source agent's compaction points match the raw file's, and Claude Code's own summary
//!   is set beside the history it replaced (printed: `cargo test -p baton-probes --test it --
//!   corpus --nocapture`).

use std::path::{Path, PathBuf};

use baton_core::{ContentBlock, Entry, Seq};
use baton_import::{Format, Transcript, detect, parse};
use baton_probes::{Kind, compaction_points, coverage, history_of, instructions, probe};
use serde_json::Value;

/// The corpus root, or `None` (after saying so) when it is absent.
fn corpus_root() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if root.is_dir() {
        Some(root)
    } else {
        println!("skipping: corpus not found at {}", root.display());
        None
    }
}

/// Every Claude Code and Codex file of the corpus with its bytes and transcripts.
fn sessions(root: &Path) -> Vec<(PathBuf, Vec<u8>, Vec<Transcript>)> {
    let mut out = Vec::new();
    for dir in ["claude-code-jsonl", "codex-rollout-jsonl"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap();
            let format = detect(&bytes).unwrap_or_else(|| panic!("{}: no format", path.display()));
            assert!(matches!(format, Format::ClaudeCode | Format::Codex));
            let transcripts = parse(format, &bytes).unwrap();
            out.push((path, bytes, transcripts));
        }
    }
    assert!(out.len() >= 30, "only {} sessions in the corpus", out.len());
    out
}

fn name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The history as one text, each message rendered the way a context carries a message as
/// text (`baton_core::context`'s preamble: tool calls as their name and JSON input).
fn render(history: &[Entry]) -> String {
    fn blocks(out: &mut String, content: &[ContentBlock]) {
        for block in content {
            match block {
                ContentBlock::Text { text } => out.push_str(text),
                ContentBlock::Thinking { thinking, .. } => out.push_str(thinking),
                ContentBlock::ToolUse { name, input, .. } => {
                    out.push_str(&format!("(tool call {name} {input})"));
                }
                ContentBlock::ToolResult { content, .. } => {
                    out.push_str("(tool result) ");
                    blocks(out, content);
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    let mut out = String::new();
    for entry in history {
        out.push_str(&format!(
            "## seq {} ({})\n",
            entry.seq,
            entry.message.role.as_str()
        ));
        blocks(&mut out, &entry.message.content);
    }
    out
}

/// The seqs of the results of plan tool calls.
fn plan_results(history: &[Entry]) -> Vec<Seq> {
    const PLAN_TOOLS: [&str; 4] = ["TodoWrite", "update_plan", "TaskCreate", "TaskUpdate"];
    let mut ids: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for entry in history {
        for block in &entry.message.content {
            match block {
                ContentBlock::ToolUse { id, name, .. } if PLAN_TOOLS.contains(&name.as_str()) => {
                    ids.push(id);
                }
                ContentBlock::ToolResult { tool_use_id, .. }
                    if ids.contains(&tool_use_id.as_str()) =>
                {
                    out.push(entry.seq);
                }
                _ => {}
            }
        }
    }
    out
}

fn last(history: &[Entry]) -> Seq {
    history.last().map_or(Seq::ZERO, |e| e.seq)
}

/// A Claude Code file's typed messages counted from the raw lines: user lines of the main
/// branch's side (`isSidechain` as the last message line has it) not marked `isMeta` or
/// `isCompactSummary`, one per text block that is a command echo or is not harness text.
fn raw_claude_code_count(bytes: &[u8]) -> usize {
    let lines: Vec<Value> = bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    let flag = |l: &Value, key: &str| l.get(key).and_then(Value::as_bool).unwrap_or(false);
    let kind = |l: &Value| {
        l.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let messages: Vec<&Value> = lines
        .iter()
        .filter(|l| matches!(kind(l).as_str(), "user" | "assistant"))
        .collect();
    let side = messages
        .iter()
        .rev()
        .find(|l| !flag(l, "isSidechain"))
        .or(messages.last())
        .is_some_and(|l| flag(l, "isSidechain"));
    let mut count = 0;
    for line in messages {
        if kind(line) != "user"
            || flag(line, "isSidechain") != side
            || flag(line, "isMeta")
            || flag(line, "isCompactSummary")
        {
            continue;
        }
        let texts: Vec<String> = match &line["message"]["content"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str().map(str::to_owned))
                .collect(),
            _ => vec![],
        };
        for text in texts {
            let mut text = text;
            while let (Some(a), Some(b)) = (
                text.find("<system-reminder>"),
                text.find("</system-reminder>"),
            ) {
                if b < a {
                    break;
                }
                text.replace_range(a..b + "</system-reminder>".len(), "");
            }
            let text = text.trim();
            let harness = [
                "<",
                "Caveat:",
                "[Request interrupted",
                "This session is being continued",
            ];
            if text.contains("<command-name>")
                || (!text.is_empty() && !harness.iter().any(|h| text.starts_with(h)))
            {
                count += 1;
            }
        }
    }
    count
}

/// A Codex rollout's typed messages: its non-empty `user_message` events.
fn raw_codex_count(bytes: &[u8]) -> usize {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .filter(|l| l["type"] == "event_msg" && l["payload"]["type"] == "user_message")
        .filter(|l| {
            l["payload"]["message"]
                .as_str()
                .is_some_and(|m| !m.trim().is_empty())
        })
        .count()
}

#[test]
fn instructions_per_file_match_a_count_of_the_raw_lines() {
    let Some(root) = corpus_root() else { return };
    let mut total = 0;
    for (path, bytes, transcripts) in sessions(&root) {
        assert_eq!(transcripts.len(), 1, "{}", path.display());
        let transcript = &transcripts[0];
        let history = history_of(transcript);
        let found = instructions(&history, last(&history));
        let raw = match transcript.format {
            Format::ClaudeCode => raw_claude_code_count(&bytes),
            _ => raw_codex_count(&bytes),
        };
        let texts: Vec<String> = found.iter().map(|i| i.key()).collect();
        assert_eq!(found.len(), raw, "{}: found {texts:#?}", name(&path));
        total += found.len();
    }
    println!("{total} instructions in the corpus");
    assert!(total > 50, "{total}");
}

#[test]
fn the_full_history_probed_against_itself_keeps_every_item() {
    let Some(root) = corpus_root() else { return };
    let (mut instructions, mut plans, mut files, mut problems) = (0, 0, 0, 0);
    for (path, _, transcripts) in sessions(&root) {
        for transcript in &transcripts {
            let history = history_of(transcript);
            let text = render(&history);
            let p = probe(&history, last(&history), &text);
            // The one exception: a slash command with arguments is keyed as typed, `/name
            // args`, and its echo holds the two apart in tags; both must be in it.
            for miss in &p.misses {
                let echo = history[miss.seq.0 as usize - 1].message.plain_text();
                let (command, args) = miss.key.split_once(' ').unwrap_or((&miss.key, ""));
                assert!(
                    miss.kind == Kind::Instruction
                        && echo.contains(&format!("<command-name>{command}</command-name>"))
                        && echo.contains(args.split_whitespace().next().unwrap_or("")),
                    "{}: {p}",
                    name(&path)
                );
            }
            let commands = p.misses.len();
            assert_eq!(p.instructions.kept + commands, p.instructions.total);
            assert_eq!(
                p.plan_items.kept,
                p.plan_items.total,
                "{}: {p}",
                name(&path)
            );
            assert_eq!(
                p.modified_files.kept,
                p.modified_files.total,
                "{}",
                name(&path)
            );
            assert_eq!(
                p.unresolved_problems.kept,
                p.unresolved_problems.total,
                "{}",
                name(&path)
            );
            let c = coverage(&history, last(&history), &text);
            assert_eq!(c.paths.kept, c.paths.total, "{}: {c}", name(&path));
            assert_eq!(c.commands.kept, c.commands.total, "{}: {c}", name(&path));
            println!(
                "{:<90} {p}",
                name(&path),
                p = p.to_string().lines().next().unwrap()
            );
            instructions += p.instructions.total;
            // The plans of the corpus end done: probe at each plan call's result too, against
            // the history up to it.
            for cut in plan_results(&history) {
                let upto = &history[..cut.0 as usize];
                let p = probe(upto, cut, &render(upto));
                assert_eq!(
                    p.plan_items.kept,
                    p.plan_items.total,
                    "{} @{cut}: {p}",
                    name(&path)
                );
                plans += p.plan_items.total;
            }
            files += p.modified_files.total;
            problems += p.unresolved_problems.total;
        }
    }
    println!(
        "corpus: {instructions} instructions, {plans} plan items in progress (at each plan \
         call), {files} modified files, {problems} problems unresolved at the end"
    );
    // Not vacuous: every kind finds items in the corpus.
    assert!(
        instructions > 50 && files > 50 && problems > 5,
        "{files} {problems}"
    );
    assert!(plans >= 10, "{plans}");
}

#[test]
fn claude_code_compactions_beside_the_history_they_replaced() {
    let Some(root) = corpus_root() else { return };
    let mut points = 0;
    println!(
        "{:<70} {:>5} {:>8} {:>8} {:>8} {:>10}",
        "session", "seq", "paths", "commands", "messages", "chars"
    );
    for (path, bytes, transcripts) in sessions(&root) {
        let transcript = &transcripts[0];
        let raw = bytes
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .filter(|l| l["isCompactSummary"] == true || l["type"] == "compacted")
            .count();
        let found = compaction_points(transcript);
        let before_any = transcript
            .compactions
            .iter()
            .filter(|c| c.after_messages == 0)
            .count();
        assert_eq!(found.len() + before_any, raw, "{}", name(&path));
        let history = history_of(transcript);
        for point in found {
            assert!(point.seq <= last(&history), "{}", name(&path));
            let Some(summary) = &point.summary else {
                continue;
            };
            assert!(!summary.trim().is_empty());
            let c = coverage(&history, point.seq, summary);
            println!(
                "{:<70} {:>5} {:>8} {:>8} {:>8} {:>10}",
                name(&path),
                point.seq.0,
                c.paths.to_string(),
                c.commands.to_string(),
                c.user_messages.to_string(),
                summary.len()
            );
            for miss in c.misses.iter().filter(|m| m.kind == Kind::Path) {
                println!("    path not named: {} (seq {})", miss.key, miss.seq);
            }
            points += 1;
        }
    }
    assert!(points >= 4, "{points} compaction points with a summary");
}
