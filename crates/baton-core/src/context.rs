//! Context assembly: what the next model call receives.
//!
//! `context = rules + goal + active summary (claims through its coverage) + pinned messages it
//! covers + every message after the coverage, in order.` Messages that arrived while a summary
//! was being written have seqs above its coverage, so they are always in the tail: nothing is
//! lost to a slow summarizer. A message the user pinned is never compacted away: when a summary
//! covers it, the preamble carries it whole. When the run says so ([`Cleared`],
//! set by the `clear-tool-results` strategy), large old tool results in the tail are shown as a stub naming
//! the tool, the seq and how to recall the original; history keeps every original.
//!
//! Assembly is pure. The store reads the run, the active summary and the tail by index (never
//! the whole history) and hands them to [`assemble`].

use serde::Serialize;

use crate::units::{Problem, ProtocolEvents, ProtocolMap};
use crate::{
    Claim, ClaimKind, Cleared, ContentBlock, Entry, Message, Role, Run, RunId, Seq, Summary,
    SummaryId, tokens,
};

/// An assembled context.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Context {
    /// The run it was assembled for.
    pub run: RunId,
    /// The run's standing rules.
    pub rules: Option<String>,
    /// The run's goal.
    pub goal: Option<String>,
    /// The active summary, with its claims grouped by kind.
    pub summary: Option<ContextSummary>,
    /// Pinned messages the summary covers, in seq order: carried whole in the preamble.
    pub pinned: Vec<Entry>,
    /// Every message after the summary's coverage, in seq order (old tool results stubbed where
    /// the summary clears them).
    pub messages: Vec<Entry>,
    /// The seqs whose tool results are shown as a stub.
    pub cleared: Vec<Seq>,
    /// Tool-pairing problems in the tail (orphan results, dangling calls), so a caller can see
    /// why a provider might refuse this context.
    pub problems: Vec<Problem>,
    /// Estimated tokens of everything above.
    pub tokens: u64,
}

/// The summary part of a context.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContextSummary {
    /// The summary version.
    pub id: SummaryId,
    /// The last seq it covers.
    pub coverage: Seq,
    /// Its claims, grouped by kind in [`ClaimKind::ALL`] order, original order within a kind.
    pub claims: Vec<Claim>,
}

/// Builds the context of `run` from its active summary and the messages after its coverage.
///
/// `tail` must be exactly the entries with seq greater than the summary's coverage (or all
/// entries when there is no summary), in order.
pub fn assemble(run: &Run, summary: Option<&Summary>, tail: Vec<Entry>) -> Context {
    assemble_pinned(run, summary, tail, Vec::new(), &[])
}

/// [`assemble`], with the run's pinned seqs (`pins`) and the pinned messages the summary covers
/// (`pinned`: entries with seq at or below its coverage, in order; pinned messages in the tail
/// are in the tail already, and their tool results are never shown as a stub).
pub fn assemble_pinned(
    run: &Run,
    summary: Option<&Summary>,
    mut tail: Vec<Entry>,
    pinned: Vec<Entry>,
    pins: &[Seq],
) -> Context {
    let cleared = run
        .cleared
        .map(|c| clear_tool_results(&mut tail, c, pins))
        .unwrap_or_default();
    let summary = summary.map(|s| {
        let mut claims = s.claims.clone();
        claims.sort_by_key(|c| ClaimKind::ALL.iter().position(|k| *k == c.kind));
        ContextSummary {
            id: s.id,
            coverage: s.coverage,
            claims,
        }
    });
    let start = summary.as_ref().map_or(Seq::ZERO, |s| s.coverage);
    let events: Vec<ProtocolEvents> = tail
        .iter()
        .map(|e| ProtocolEvents::of(e.seq, &e.message))
        .collect();
    let problems = ProtocolMap::analyze(start, &events).problems().to_vec();
    let mut context = Context {
        run: run.id.clone(),
        rules: run.rules.clone(),
        goal: run.goal.clone(),
        summary,
        pinned,
        messages: tail,
        cleared,
        problems,
        tokens: 0,
    };
    let preamble = context
        .preamble()
        .map_or(0, |m| u64::from(tokens::estimate_message(&m)));
    context.tokens = preamble
        + context
            .messages
            .iter()
            .map(|e| u64::from(e.tokens))
            .sum::<u64>();
    context
}

/// Replaces the content of each large old tool result in `tail` by a stub; returns the seqs
/// changed. The `tool_result` blocks stay (with their ids), so the tool-call pairing the
/// provider checks is untouched.
fn clear_tool_results(tail: &mut [Entry], cleared: Cleared, pins: &[Seq]) -> Vec<Seq> {
    let names: std::collections::HashMap<String, String> = tail
        .iter()
        .flat_map(|e| &e.message.content)
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, .. } => Some((id.clone(), name.clone())),
            _ => None,
        })
        .collect();
    let mut changed = Vec::new();
    for entry in tail.iter_mut() {
        if entry.seq > cleared.through
            || entry.tokens < cleared.min_tokens
            || pins.contains(&entry.seq)
        {
            continue;
        }
        let (seq, tokens) = (entry.seq, entry.tokens);
        let mut stubbed = false;
        for block in &mut entry.message.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            {
                let tool = names.get(tool_use_id).map_or("a tool", String::as_str);
                *content = vec![ContentBlock::Text {
                    text: stub_text(tool, seq, tokens),
                }];
                stubbed = true;
            }
        }
        if stubbed {
            entry.tokens = tokens::estimate_message(&entry.message);
            changed.push(seq);
        }
    }
    changed
}

/// What a cleared tool result says instead of its content.
pub fn stub_text(tool: &str, seq: Seq, tokens: u32) -> String {
    format!(
        "[cleared to save context: the result of {tool} at seq {seq} ({tokens} tokens); recall seq {seq} for the original]"
    )
}

impl Context {
    /// The system message that carries rules, goal and summary, if any of them is set.
    pub fn preamble(&self) -> Option<Message> {
        let mut text = String::new();
        if let Some(rules) = &self.rules {
            text.push_str("# Rules\n");
            text.push_str(rules.trim_end());
            text.push_str("\n\n");
        }
        if let Some(goal) = &self.goal {
            text.push_str("# Goal\n");
            text.push_str(goal.trim_end());
            text.push_str("\n\n");
        }
        if let Some(summary) = &self.summary {
            text.push_str(&format!(
                "# Summary of messages 1 to {} (recall any seq for the original)\n",
                summary.coverage
            ));
            let mut current = None;
            for claim in &summary.claims {
                if current != Some(claim.kind) {
                    text.push_str(&format!("## {}\n", claim.kind));
                    current = Some(claim.kind);
                }
                text.push_str(&format!("- {} [seq {}]\n", claim.text, claim.source_seq));
            }
        }
        if !self.pinned.is_empty() {
            text.push_str("\n# Pinned messages (kept whole)\n");
            for entry in &self.pinned {
                text.push_str(&format!(
                    "## seq {} ({})\n{}\n",
                    entry.seq,
                    entry.message.role.as_str(),
                    render_blocks(&entry.message.content)
                ));
            }
        }
        if text.is_empty() {
            return None;
        }
        Some(Message::text(Role::System, text.trim_end()))
    }

    /// The messages the next model call receives: the preamble, then the tail.
    pub fn to_messages(&self) -> Vec<Message> {
        self.preamble()
            .into_iter()
            .chain(self.messages.iter().map(|e| e.message.clone()))
            .collect()
    }
}

/// A message's blocks as plain text, for the preamble (tool blocks described, not sent as tool
/// blocks, so a pinned half of a tool call never breaks the pairing a provider checks).
fn render_blocks(blocks: &[ContentBlock]) -> String {
    let mut out = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text { text } => out.push(text.clone()),
            ContentBlock::Thinking { thinking, .. } => out.push(thinking.clone()),
            ContentBlock::RedactedThinking { .. } => {}
            ContentBlock::ToolUse { name, input, .. } => {
                out.push(format!("(tool call {name} {input})"));
            }
            ContentBlock::ToolResult { content, .. } => {
                out.push(format!("(tool result) {}", render_blocks(content)));
            }
            ContentBlock::Image { .. } => out.push("(image)".to_owned()),
            ContentBlock::Document { title, .. } => {
                out.push(format!("(document {})", title.as_deref().unwrap_or("")));
            }
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunStatus, TenantId, Timestamp};

    fn entry(seq: u64, text: &str) -> Entry {
        let message = Message::text(Role::User, text);
        Entry {
            seq: Seq(seq),
            tokens: tokens::estimate_message(&message),
            message,
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn claims_are_grouped_by_kind_and_the_tail_follows() {
        let run = Run {
            id: RunId::new("r-1").unwrap(),
            tenant: TenantId::default_tenant(),
            status: RunStatus::Active,
            goal: Some("find the bug".into()),
            rules: Some("read-only".into()),
            active_summary_id: Some(SummaryId(2)),
            last_seq: Seq(5),
            cleared: None,
            created_at: Timestamp(0),
        };
        let claim = |kind, text: &str, seq| Claim {
            kind,
            text: text.into(),
            source_seq: Seq(seq),
        };
        let summary = Summary {
            id: SummaryId(2),
            run: run.id.clone(),
            coverage: Seq(4),
            previous_id: Some(SummaryId(1)),
            claims: vec![
                claim(ClaimKind::Verified, "db resolves", 3),
                claim(ClaimKind::Constraint, "read-only", 1),
            ],
            meta: None,
            created_at: Timestamp(0),
        };
        let ctx = assemble(&run, Some(&summary), vec![entry(5, "check TLS")]);
        let kinds: Vec<_> = ctx
            .summary
            .as_ref()
            .unwrap()
            .claims
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(kinds, [ClaimKind::Constraint, ClaimKind::Verified]);
        let preamble = ctx.preamble().unwrap().plain_text();
        assert!(
            preamble.contains("## constraint\n- read-only [seq 1]"),
            "{preamble}"
        );
        assert_eq!(ctx.to_messages().len(), 2);
        assert!(ctx.tokens > u64::from(ctx.messages[0].tokens));
    }

    fn tool(seq: u64, id: &str, name: &str) -> Entry {
        let message = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: id.into(),
                name: name.into(),
                input: serde_json::json!({"path": "big.log"}),
            }],
        };
        Entry {
            seq: Seq(seq),
            tokens: tokens::estimate_message(&message),
            message,
            created_at: Timestamp(0),
        }
    }

    fn result(seq: u64, id: &str, body: &str) -> Entry {
        let message = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: id.into(),
                content: vec![ContentBlock::Text { text: body.into() }],
                is_error: false,
            }],
        };
        Entry {
            seq: Seq(seq),
            tokens: tokens::estimate_message(&message),
            message,
            created_at: Timestamp(0),
        }
    }

    fn bare_run(cleared: Option<Cleared>) -> Run {
        Run {
            id: RunId::new("r").unwrap(),
            tenant: TenantId::default_tenant(),
            status: RunStatus::Active,
            goal: None,
            rules: None,
            active_summary_id: Some(SummaryId(1)),
            last_seq: Seq(6),
            cleared,
            created_at: Timestamp(0),
        }
    }

    fn summary(coverage: u64) -> Summary {
        Summary {
            id: SummaryId(1),
            run: RunId::new("r").unwrap(),
            coverage: Seq(coverage),
            previous_id: None,
            claims: vec![],
            meta: None,
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn cleared_tool_results_become_stubs_and_keep_their_pairing() {
        let big = "log line\n".repeat(200);
        let tail = vec![
            tool(2, "a", "read_file"),
            result(3, "a", &big),
            tool(4, "b", "bash"),
            result(5, "b", "ok"),
            tool(6, "c", "bash"),
            result(7, "c", &big),
        ];
        let before: u64 = tail.iter().map(|e| u64::from(e.tokens)).sum();
        let cleared = Cleared {
            through: Seq(6),
            min_tokens: 100,
        };
        let ctx = assemble(&bare_run(Some(cleared)), Some(&summary(1)), tail);
        // Seq 3 is big and old: stubbed. Seq 5 is small, seq 7 is after `through`: whole.
        assert_eq!(ctx.cleared, [Seq(3)]);
        let stub = ctx.messages[1].message.content[0].clone();
        let ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        } = stub
        else {
            panic!("still a tool result")
        };
        assert_eq!(tool_use_id, "a");
        assert_eq!(
            content,
            [ContentBlock::Text {
                text: stub_text(
                    "read_file",
                    Seq(3),
                    tokens::estimate_message(&result(3, "a", &big).message)
                )
            }]
        );
        assert!(ctx.problems.is_empty(), "{:?}", ctx.problems);
        assert!(ctx.messages[5].message.plain_text().is_empty());
        let after: u64 = ctx.messages.iter().map(|e| u64::from(e.tokens)).sum();
        assert!(after + 400 < before, "{after} vs {before}");
    }

    #[test]
    fn pinned_messages_a_summary_covers_are_carried_whole() {
        let pinned = vec![entry(1, "never touch production"), tool(2, "a", "deploy")];
        let ctx = assemble_pinned(
            &bare_run(None),
            Some(&summary(3)),
            vec![entry(4, "go")],
            pinned,
            &[Seq(1), Seq(2)],
        );
        let preamble = ctx.preamble().unwrap().plain_text();
        assert!(
            preamble.contains(
                "# Pinned messages (kept whole)\n## seq 1 (user)\nnever touch production"
            ),
            "{preamble}"
        );
        assert!(
            preamble.contains("(tool call deploy {\"path\":\"big.log\"})"),
            "{preamble}"
        );
        // The preamble is text: no tool block in the messages sent, so no pairing to break.
        assert_eq!(ctx.to_messages().len(), 2);
        assert!(ctx.problems.is_empty());
    }
}
