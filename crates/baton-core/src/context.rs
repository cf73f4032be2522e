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
//!
//! **A budget held by clipping.** A compaction cuts only between protocol units and always keeps
//! the unit the model is answering, so one unit larger than the budget (a parallel batch of tool
//! results, a huge file written) would leave the context over it whatever the strategy does.
//! [`Context::fit`] clips such content *in the assembled context only*: the largest tool results,
//! tool-call inputs and texts are cut down to a common size (their head and tail kept, the middle
//! replaced by a line naming the seq to recall), until the context fits. History is untouched,
//! tool-call ids and pairing are untouched, thinking blocks (whose signatures a provider checks)
//! are never clipped. When even the smallest clipping cannot fit — the rules, the working state
//! and the newest unit alone exceed the budget — the context says so with the numbers
//! ([`OverBudget`]).

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
    /// The seqs whose content [`Context::fit`] clipped to hold its budget.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clipped: Vec<Seq>,
    /// Set by [`Context::fit`] when even clipping cannot hold the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_budget: Option<OverBudget>,
}

/// A context that cannot be brought within its budget, and why: what it must carry whatever is
/// clipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OverBudget {
    /// The budget.
    pub budget: u64,
    /// The context's tokens, clipped as far as it goes.
    pub tokens: u64,
    /// The preamble's tokens: rules, goal, working state, pinned messages.
    pub preamble: u64,
    /// The tokens of the last message of the tail, clipped as far as it goes.
    pub newest: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the context needs {} tokens, over its budget of {}: the preamble (rules, goal, working state, pinned messages) takes {} and the newest message {} even clipped",
            self.tokens, self.budget, self.preamble, self.newest
        )
    }
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
    /// The tokens its rendering takes: as its compaction measured them with the run's tokenizer
    /// (`state_tokens` in the version's meta), else the byte estimate.
    pub tokens: u64,
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
        let tokens = s.state_tokens().unwrap_or_else(|| {
            u64::from(tokens::estimate_text(&render_state(s.coverage, &claims)))
        });
        ContextSummary {
            id: s.id,
            coverage: s.coverage,
            claims,
            tokens,
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
        clipped: Vec::new(),
        over_budget: None,
    };
    context.tokens = context.preamble_tokens() + context.tail_tokens();
    context
}

/// Replaces the content of each large old tool result in `tail` by a stub; returns the seqs
/// changed. The `tool_result` blocks stay (with their ids), so the tool-call pairing the
/// provider checks is untouched. Pinned messages (`pins`) keep theirs.
pub fn clear_tool_results(tail: &mut [Entry], cleared: Cleared, pins: &[Seq]) -> Vec<Seq> {
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
    /// The system message that carries rules, goal, the working state and the pinned messages,
    /// if any of them is set.
    pub fn preamble(&self) -> Option<Message> {
        let mut text = self.preamble_head();
        if let Some(summary) = &self.summary {
            text.push_str(&render_state(summary.coverage, &summary.claims));
        }
        text.push_str(&self.preamble_pinned());
        if text.is_empty() {
            return None;
        }
        Some(Message::text(Role::System, text.trim_end()))
    }

    fn preamble_head(&self) -> String {
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
        text
    }

    fn preamble_pinned(&self) -> String {
        let mut text = String::new();
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
        text
    }

    /// Tokens of the preamble: rules, goal and pinned messages estimated, the working state as
    /// its version measured it ([`ContextSummary::tokens`]).
    pub fn preamble_tokens(&self) -> u64 {
        let mut rest = self.preamble_head();
        rest.push_str(&self.preamble_pinned());
        let state = self.summary.as_ref().map_or(0, |s| s.tokens);
        if rest.is_empty() && state == 0 {
            return 0;
        }
        u64::from(tokens::estimate_message(&Message::text(
            Role::System,
            rest.trim_end(),
        ))) + state
    }

    /// Tokens of the tail, as stored (clipped or stubbed messages as counted after).
    pub fn tail_tokens(&self) -> u64 {
        self.messages.iter().map(|e| u64::from(e.tokens)).sum()
    }

    /// Everything the next model call receives, as plain text: the preamble, then each message
    /// of the tail under a `## seq N (role)` line, tool calls and results described as the
    /// preamble describes pinned ones. What `baton context` prints, and what probes search.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(preamble) = self.preamble() {
            out.push_str(&preamble.plain_text());
            out.push_str("\n\n");
        }
        for entry in &self.messages {
            out.push_str(&format!(
                "## seq {} ({})\n{}\n\n",
                entry.seq,
                entry.message.role.as_str(),
                render_blocks(&entry.message.content)
            ));
        }
        out
    }

    /// The messages the next model call receives: the preamble, then the tail.
    pub fn to_messages(&self) -> Vec<Message> {
        self.preamble()
            .into_iter()
            .chain(self.messages.iter().map(|e| e.message.clone()))
            .collect()
    }

    /// Brings the context within `budget` tokens by clipping the largest contents of the tail
    /// (see the module docs); returns whether it fits. Does nothing to a context that fits.
    ///
    /// ```
    /// use baton_core::{context, ContentBlock, Entry, Message, Role, Run, RunId, RunStatus, Seq, TenantId, Timestamp};
    /// let run = Run { id: RunId::new("r")?, tenant: TenantId::default_tenant(), status: RunStatus::Active,
    ///     goal: None, rules: None, active_summary_id: None, last_seq: Seq(1), cleared: None, created_at: Timestamp(0) };
    /// let message = Message::text(Role::User, "log line\n".repeat(5_000));
    /// let tokens = baton_core::tokens::estimate_message(&message);
    /// let mut ctx = context::assemble(&run, None, vec![Entry { seq: Seq(1), message, tokens, created_at: Timestamp(0) }]);
    /// assert!(ctx.tokens > 8_000);
    /// assert!(ctx.fit(2_000));
    /// assert!(ctx.tokens <= 2_000);
    /// assert_eq!(ctx.clipped, [Seq(1)]);
    /// assert!(ctx.messages[0].message.plain_text().contains("recall seq 1 for the original"));
    /// # Ok::<(), baton_core::Error>(())
    /// ```
    pub fn fit(&mut self, budget: u64) -> bool {
        if self.tokens <= budget {
            return true;
        }
        let preamble = self.preamble_tokens();
        let sizes: Vec<(u64, usize)> = self
            .messages
            .iter()
            .map(|e| (u64::from(e.tokens), clippable_chars(&e.message.content)))
            .collect();
        // The tokens of every message were its clippable blocks cut to `cap` characters.
        let total_at = |cap: usize| -> u64 {
            preamble
                + sizes
                    .iter()
                    .zip(&self.messages)
                    .map(|((tokens, chars), e)| {
                        clipped_tokens(*tokens, *chars, &e.message.content, cap)
                    })
                    .sum::<u64>()
        };
        let largest = self
            .messages
            .iter()
            .flat_map(|e| e.message.content.iter())
            .map(largest_clippable)
            .max()
            .unwrap_or(0);
        if largest <= MIN_CLIP_CHARS {
            self.over_budget = Some(self.over(budget, preamble));
            return false;
        }
        // The largest common cap at which everything fits, by bisection (the total only grows
        // with the cap).
        let (mut lo, mut hi) = (MIN_CLIP_CHARS, largest);
        if total_at(lo) > budget {
            hi = lo;
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if total_at(mid) <= budget {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let cap = lo;
        for entry in &mut self.messages {
            let chars = clippable_chars(&entry.message.content);
            let tokens =
                clipped_tokens(u64::from(entry.tokens), chars, &entry.message.content, cap);
            if clip_blocks(&mut entry.message.content, cap, entry.seq) {
                entry.tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
                self.clipped.push(entry.seq);
            }
        }
        self.tokens = preamble + self.tail_tokens();
        if self.tokens > budget {
            self.over_budget = Some(self.over(budget, preamble));
            return false;
        }
        true
    }

    fn over(&self, budget: u64, preamble: u64) -> OverBudget {
        OverBudget {
            budget,
            tokens: self.tokens,
            preamble,
            newest: self.messages.last().map_or(0, |e| u64::from(e.tokens)),
        }
    }
}

/// Nothing is clipped below this many characters (half kept at each end).
const MIN_CLIP_CHARS: usize = 400;

/// The size of a block's largest clippable text: a text, a tool result's text, a string in a
/// tool call's input. Thinking is never clipped (providers check its signature).
fn largest_clippable(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text } => text.len(),
        ContentBlock::ToolResult { content, .. } => {
            content.iter().map(largest_clippable).max().unwrap_or(0)
        }
        ContentBlock::ToolUse { input, .. } => largest_string(input),
        _ => 0,
    }
}

fn largest_string(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(items) => items.iter().map(largest_string).max().unwrap_or(0),
        serde_json::Value::Object(map) => map.values().map(largest_string).max().unwrap_or(0),
        _ => 0,
    }
}

/// Every clippable string's length, summed: what a message's token count is spread over.
fn clippable_chars(blocks: &[ContentBlock]) -> usize {
    fn strings(value: &serde_json::Value) -> usize {
        match value {
            serde_json::Value::String(s) => s.len(),
            serde_json::Value::Array(items) => items.iter().map(strings).sum(),
            serde_json::Value::Object(map) => map.values().map(strings).sum(),
            _ => 0,
        }
    }
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::ToolResult { content, .. } => clippable_chars(content),
            ContentBlock::ToolUse { input, .. } => strings(input),
            _ => 0,
        })
        .sum()
}

/// Characters a string of `len` keeps when clipped to `cap` (the note included).
fn kept_chars(len: usize, cap: usize) -> usize {
    if len <= cap {
        len
    } else {
        cap + CLIP_NOTE_CHARS
    }
}

/// About how long the note that replaces a clipped middle is.
const CLIP_NOTE_CHARS: usize = 110;

/// A message's tokens with its clippable strings cut to `cap`: its stored count scaled by the
/// characters kept (the count is spread evenly over its characters).
fn clipped_tokens(tokens: u64, chars: usize, blocks: &[ContentBlock], cap: usize) -> u64 {
    if chars == 0 {
        return tokens;
    }
    fn kept(value: &serde_json::Value, cap: usize) -> usize {
        match value {
            serde_json::Value::String(s) => kept_chars(s.len(), cap),
            serde_json::Value::Array(items) => items.iter().map(|v| kept(v, cap)).sum(),
            serde_json::Value::Object(map) => map.values().map(|v| kept(v, cap)).sum(),
            _ => 0,
        }
    }
    fn kept_blocks(blocks: &[ContentBlock], cap: usize) -> usize {
        blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => kept_chars(text.len(), cap),
                ContentBlock::ToolResult { content, .. } => kept_blocks(content, cap),
                ContentBlock::ToolUse { input, .. } => kept(input, cap),
                _ => 0,
            })
            .sum()
    }
    let after = kept_blocks(blocks, cap).min(chars);
    if after == chars {
        return tokens;
    }
    (tokens as u128 * after as u128).div_ceil(chars as u128) as u64
}

/// Cuts every clippable string of `blocks` longer than `cap` to its head and tail; returns
/// whether anything changed.
fn clip_blocks(blocks: &mut [ContentBlock], cap: usize, seq: Seq) -> bool {
    fn clip_value(value: &mut serde_json::Value, cap: usize, seq: Seq) -> bool {
        match value {
            serde_json::Value::String(s) => match clip_text(s, cap, seq) {
                Some(clipped) => {
                    *s = clipped;
                    true
                }
                None => false,
            },
            // Every value is visited (no short circuit): each one over the cap is clipped.
            serde_json::Value::Array(items) => {
                items
                    .iter_mut()
                    .map(|v| clip_value(v, cap, seq))
                    .filter(|&clipped| clipped)
                    .count()
                    > 0
            }
            serde_json::Value::Object(map) => {
                map.values_mut()
                    .map(|v| clip_value(v, cap, seq))
                    .filter(|&clipped| clipped)
                    .count()
                    > 0
            }
            _ => false,
        }
    }
    let mut changed = false;
    for block in blocks {
        changed |= match block {
            ContentBlock::Text { text } => match clip_text(text, cap, seq) {
                Some(clipped) => {
                    *text = clipped;
                    true
                }
                None => false,
            },
            ContentBlock::ToolResult { content, .. } => clip_blocks(content, cap, seq),
            ContentBlock::ToolUse { input, .. } => clip_value(input, cap, seq),
            _ => false,
        };
    }
    changed
}

/// `text` cut to about `cap` characters, its head and tail kept (at line breaks when one is
/// near), the middle replaced by a note naming the seq; `None` when it is short enough. The
/// same text, cap and seq always give the same bytes (the gateway's managed context relies on
/// it to keep a provider's prompt cache).
pub fn clip_text(text: &str, cap: usize, seq: Seq) -> Option<String> {
    if text.len() <= cap {
        return None;
    }
    let half = cap / 2;
    let mut head_end = floor_char(text, half);
    if let Some(nl) = text[..head_end].rfind('\n')
        && nl > half / 2
    {
        head_end = nl + 1;
    }
    let mut tail_start = ceil_char(text, text.len() - half);
    if let Some(nl) = text[tail_start..].find('\n')
        && nl < half / 2
    {
        tail_start += nl + 1;
    }
    let dropped = tail_start - head_end;
    Some(format!(
        "{}\n[… {dropped} characters clipped to fit the context budget; recall seq {seq} for the original …]\n{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The working state as the preamble renders it: one section per claim kind, in
/// [`ClaimKind::ALL`] order, one line per claim with its status and the seq it rests on.
pub fn render_state(coverage: Seq, claims: &[Claim]) -> String {
    let mut text =
        format!("# Working state through seq {coverage} (recall any seq for the original)\n");
    let mut current = None;
    for claim in claims {
        if current != Some(claim.kind) {
            text.push_str(&format!("## {}\n", claim.kind.heading()));
            current = Some(claim.kind);
        }
        text.push_str(&render_claim(claim));
        text.push('\n');
    }
    text
}

/// One claim as the preamble renders it: `- [status] text [seq N]`.
pub fn render_claim(claim: &Claim) -> String {
    match claim.status {
        Some(status) => format!("- [{status}] {} [seq {}]", claim.text, claim.source_seq),
        None => format!("- {} [seq {}]", claim.text, claim.source_seq),
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
            ContentBlock::ToolReference { tool_name } => {
                out.push(format!("(tool {tool_name} made available)"));
            }
            ContentBlock::Opaque { .. } => {
                out.push(format!(
                    "({} block)",
                    block.opaque_type().unwrap_or("vendor")
                ));
            }
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
        let claim = |kind, text: &str, seq| Claim::new(kind, text, Seq(seq));
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
            preamble.contains("## Constraints\n- read-only [seq 1]"),
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

    #[test]
    fn fit_clips_the_largest_tool_results_and_keeps_their_pairing() {
        // A parallel batch: one call message, then eight large results, all one unit.
        let big = "row\n".repeat(3_000);
        let mut tail = vec![tool(2, "a", "bash")];
        let mut calls = vec![];
        for i in 0..8u64 {
            let id = format!("c{i}");
            calls.push(ContentBlock::ToolUse {
                id: id.clone(),
                name: "read_file".into(),
                input: serde_json::json!({"path": format!("f{i}")}),
            });
            tail.push(result(3 + i, &id, &big));
        }
        tail[0].message.content = calls;
        let thinking = Entry {
            seq: Seq(11),
            tokens: 2_000,
            message: Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Thinking {
                    thinking: "t".repeat(8_000),
                    signature: Some("sig".into()),
                }],
            },
            created_at: Timestamp(0),
        };
        tail.push(thinking);
        let mut ctx = assemble(&bare_run(None), Some(&summary(1)), tail);
        assert!(ctx.tokens > 20_000, "{}", ctx.tokens);
        assert!(ctx.fit(6_000));
        assert!(ctx.tokens <= 6_000, "{}", ctx.tokens);
        assert!(ctx.over_budget.is_none());
        assert_eq!(ctx.clipped.len(), 8);
        assert!(ctx.problems.is_empty());
        for (i, entry) in ctx.messages[1..9].iter().enumerate() {
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = &entry.message.content[0]
            else {
                panic!("still a tool result")
            };
            assert_eq!(tool_use_id, &format!("c{i}"));
            let text = render_blocks(content);
            assert!(text.starts_with("row\n"), "{text}");
            assert!(text.contains(&format!("recall seq {} for the original", entry.seq)));
        }
        // Thinking keeps every byte.
        let ContentBlock::Thinking { thinking, .. } = &ctx.messages[9].message.content[0] else {
            panic!("thinking")
        };
        assert_eq!(thinking.len(), 8_000);
    }

    #[test]
    fn fit_says_when_the_budget_cannot_be_held() {
        let mut run = bare_run(None);
        run.rules = Some("rule ".repeat(2_000));
        let mut ctx = assemble(&run, None, vec![entry(1, &"word ".repeat(4_000))]);
        assert!(!ctx.fit(1_000));
        let over = ctx.over_budget.expect("over budget");
        assert_eq!(over.budget, 1_000);
        assert!(over.preamble > 1_000, "{over:?}");
        assert!(over.newest < 400, "{over:?}");
        assert!(
            over.to_string().contains("over its budget of 1000"),
            "{over}"
        );
        // A context that fits is left alone.
        let mut small = assemble(&bare_run(None), None, vec![entry(1, "hi")]);
        let before = small.clone();
        assert!(small.fit(1_000));
        assert_eq!(small, before);
    }

    #[test]
    fn fit_clips_tool_inputs_and_keeps_them_json() {
        let mut call = tool(1, "w", "write_file");
        call.message.content = vec![ContentBlock::ToolUse {
            id: "w".into(),
            name: "write_file".into(),
            input: serde_json::json!({"path": "a.rs", "content": "x".repeat(40_000)}),
        }];
        call.tokens = tokens::estimate_message(&call.message);
        let mut ctx = assemble(&bare_run(None), None, vec![call, result(2, "w", "ok")]);
        assert!(ctx.fit(3_000));
        let ContentBlock::ToolUse { input, .. } = &ctx.messages[0].message.content[0] else {
            panic!("tool use")
        };
        assert_eq!(input["path"], "a.rs");
        assert!(input["content"].as_str().unwrap().len() < 12_500);
        assert!(ctx.problems.is_empty());
    }
}
