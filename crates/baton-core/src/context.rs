//! Context assembly: what the next model call receives.
//!
//! `context = rules + goal + active summary (claims through its coverage) + every message after
//! the coverage, in order.` Messages that arrived while a summary was being written have seqs
//! above its coverage, so they are always in the tail: nothing is lost to a slow summarizer.
//!
//! Assembly is pure. The store reads the run, the active summary and the tail by index (never
//! the whole history) and hands them to [`assemble`].

use serde::Serialize;

use crate::units::{Problem, ProtocolEvents, ProtocolMap};
use crate::{Claim, ClaimKind, Entry, Message, Role, Run, RunId, Seq, Summary, SummaryId, tokens};

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
    /// Every message after the summary's coverage, in seq order.
    pub messages: Vec<Entry>,
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
        messages: tail,
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
}
