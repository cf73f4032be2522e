//! The offline extractive summarizer: deterministic, no model.
//!
//! [`extract`] pulls claims out of the messages a compaction covers, each citing the seq of the
//! message it came from; [`Offline::write`] merges them into the active summary's claims with
//! [`crate::state::merge`]. Nothing is paraphrased: constraints, findings, hypotheses and plans
//! are sentences copied verbatim, and artifacts are the exact paths, URLs and commands (found
//! by the same detector the retention audit counts with).
//!
//! | kind | what is taken |
//! |---|---|
//! | goal | the first user request: its text, whitespace collapsed, cut to about 200 characters (harness text such as caveats and environment blocks is skipped; a slash command's arguments count) |
//! | constraint | every user sentence (not harness text) with an imperative marker (`never`, `don't`, `must`, `only`, `read-only`, `no <word>`, `without`, `avoid`, `always`, `solo lectura`, `nunca`…), verbatim |
//! | verified | every assistant sentence stating a checked result (`confirmed`, `verified`, `root cause`, `tests pass`, `is not the cause`, `ruled out`, `turned out`…), without hedges or conditions, verbatim; when tool results came right before it, it cites the last of them and names the call as its evidence |
//! | hypothesis | every assistant sentence with a hedge (`probably`, `maybe`, `might`, `I suspect`, `likely`, `could be`…), verbatim |
//! | failed approach | each tool result that is an error or whose output reports a failure: `<tool> <input>: <error line>` |
//! | artifact | each distinct path (`path src/main.rs`), URL (`url https://…`) and command run (`command cargo test`), citing where it first appears |
//! | pending | each tool call with no result among the messages: `<tool> <input>` |
//! | next step | the last plan sentence (`next`, `I will`, `I'll`, `let me`, `then`) of the last assistant message with text |
//!
//! Sentences come from text blocks only (never thinking), outside fenced code and injected
//! `<system-reminder>` blocks, and at most 500 characters long.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use baton_core::{Claim, ClaimKind, ContentBlock, Entry, Role, Seq};

use super::{SummarizeError, Summarizer, SummaryRequest, Written};
use crate::audit::scan::{self, Fact};
use crate::state::{self, detect};

/// The most characters of a goal, a failed approach or a pending operation's text.
const SHORT_CHARS: usize = 200;

/// The deterministic extractive summarizer: no model, no IO, the same claims for the same
/// messages. It ignores [`SummaryRequest::instructions`], which are for model-backed
/// summarizers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Offline;

impl Offline {
    /// Writes the claims for `request`, synchronously: the base's claims merged with the
    /// claims [`extract`]ed from the messages through the cut ([`crate::state::merge`], which
    /// keeps every claim citing a pinned seq). Every new claim cites a seq of `request.old` at
    /// or before `request.cut`.
    pub fn write(&self, request: &SummaryRequest<'_>) -> Written {
        let base = request.base.map_or(&[][..], |b| b.claims.as_slice());
        let through = request.old.partition_point(|e| e.seq <= request.cut);
        let new = extract(&request.old[..through]);
        Written {
            claims: state::merge(base, new, request.pins),
            input_tokens: 0,
            output_tokens: 0,
        }
    }
}

#[async_trait]
impl Summarizer for Offline {
    fn name(&self) -> &str {
        "offline"
    }

    fn calls_a_model(&self) -> bool {
        false
    }

    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<Written, SummarizeError> {
        Ok(self.write(request))
    }
}

/// The claims found in `old` (entries in seq order), in the order found, each citing the seq
/// of the entry it came from (a finding cites its evidence). See the module docs for what is
/// taken. Pure and deterministic; never panics.
pub fn extract(old: &[Entry]) -> Vec<Claim> {
    let mut claims = Vec::new();
    let claim = |kind, text: &str, seq| Claim {
        kind,
        text: text.to_owned(),
        source_seq: seq,
    };

    // Every call, by id, and every answered id.
    let mut calls: HashMap<&str, String> = HashMap::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for entry in old {
        for block in &entry.message.content {
            match block {
                ContentBlock::ToolUse { id, name, input } => {
                    calls
                        .entry(id.as_str())
                        .or_insert_with(|| scan::describe_call(name, input));
                }
                ContentBlock::ToolResult { tool_use_id, .. } => {
                    answered.insert(tool_use_id.as_str());
                }
                _ => {}
            }
        }
    }

    if let Some((seq, goal)) = goal(old) {
        claims.push(Claim {
            kind: ClaimKind::Goal,
            text: goal,
            source_seq: seq,
        });
    }

    let mut artifacts: HashSet<String> = HashSet::new();
    // The last tool result since the assistant last wrote: a finding's evidence.
    let mut evidence: Option<(Seq, String)> = None;
    for entry in old {
        let seq = entry.seq;
        let message = &entry.message;
        for sentence in detect::constraints(message) {
            claims.push(claim(ClaimKind::Constraint, sentence, seq));
        }
        if message.role == Role::User && detect::user_texts(message).any(|t| !t.trim().is_empty()) {
            evidence = None;
        }
        for block in &message.content {
            match block {
                ContentBlock::ToolUse { id, .. } if !answered.contains(id.as_str()) => {
                    if let Some(call) = calls.get(id.as_str()) {
                        claims.push(claim(ClaimKind::Pending, call, seq));
                    }
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let call = calls
                        .get(tool_use_id.as_str())
                        .cloned()
                        .unwrap_or_else(|| format!("tool call {tool_use_id}"));
                    let output = result_text(content);
                    let failure = match detect::failure_line(&output) {
                        Some(line) => Some(line),
                        None if *is_error => Some(
                            output
                                .lines()
                                .map(str::trim)
                                .find(|l| !l.is_empty())
                                .unwrap_or("error"),
                        ),
                        None => None,
                    };
                    if let Some(line) = failure {
                        let text = format!("{call}: {line}");
                        claims.push(claim(
                            ClaimKind::FailedApproach,
                            scan::truncate(&text, SHORT_CHARS),
                            seq,
                        ));
                    }
                    evidence = Some((seq, call));
                }
                _ => {}
            }
        }
        let mut wrote = false;
        for text in detect::assistant_texts(message) {
            for sentence in detect::sentences(text) {
                wrote = true;
                if detect::is_hypothesis(sentence) {
                    claims.push(claim(ClaimKind::Hypothesis, sentence, seq));
                } else if detect::is_verified(sentence) {
                    claims.push(match &evidence {
                        Some((at, call)) => Claim {
                            kind: ClaimKind::Verified,
                            text: format!("{sentence} (evidence: {call})"),
                            source_seq: *at,
                        },
                        None => claim(ClaimKind::Verified, sentence, seq),
                    });
                }
            }
        }
        if wrote {
            evidence = None;
        }
        scan::message_facts(message, &mut |fact, text| {
            let text = match fact {
                Fact::Path => format!("path {text}"),
                Fact::Url => format!("url {text}"),
                Fact::Command => format!("command {text}"),
                Fact::Number => return,
            };
            if !artifacts.contains(&text) {
                claims.push(Claim {
                    kind: ClaimKind::Artifact,
                    text: text.clone(),
                    source_seq: seq,
                });
                artifacts.insert(text);
            }
        });
    }

    if let Some((seq, plan)) = next_step(old) {
        claims.push(claim(ClaimKind::NextStep, plan, seq));
    }
    claims
}

/// The first user request: the first user text that is not harness text (or a slash
/// command's arguments), whitespace collapsed, cut at a word boundary to about [`SHORT_CHARS`] characters.
fn goal(old: &[Entry]) -> Option<(Seq, String)> {
    old.iter().find_map(|entry| {
        let text = detect::user_texts(&entry.message).find_map(detect::request)?;
        let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if collapsed.chars().count() <= SHORT_CHARS {
            return Some((entry.seq, collapsed));
        }
        let cut = scan::truncate(&collapsed, SHORT_CHARS);
        let cut = cut.rsplit_once(' ').map_or(cut, |(head, _)| head);
        Some((entry.seq, format!("{cut}…")))
    })
}

/// The last plan sentence of the last assistant message with text.
fn next_step(old: &[Entry]) -> Option<(Seq, &str)> {
    let entry = old.iter().rev().find(|e| {
        detect::assistant_texts(&e.message)
            .flat_map(detect::sentences)
            .next()
            .is_some()
    })?;
    let plan = detect::assistant_texts(&entry.message)
        .flat_map(detect::sentences)
        .filter(|s| detect::is_plan(s))
        .last()?;
    Some((entry.seq, plan))
}

/// The text of a tool result's content, blocks joined by newlines.
fn result_text(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        if let ContentBlock::Text { text } = block {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

#[cfg(test)]
mod tests;
