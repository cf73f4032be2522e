//! What a strategy sees: the run's current context as sizes and tool-call ids, never bodies.

use baton_core::units::{ProtocolMap, SafeCut};
use baton_core::{Cleared, EntryMeta, Seq, Summary};

use crate::plan::STUB_TOKENS;

/// A run's current context, as planning sees it: the active summary (if any), the messages
/// after its coverage with their stored token counts and tool-call ids, the pinned seqs, and
/// the tokens the preamble takes (rules, goal, summary claims, pinned messages).
///
/// Building a view analyzes the tail's protocol units once; every question a strategy asks
/// afterwards (where is it safe to cut, how many tokens lie before a seq) is answered from that,
/// so planning costs O(tail) and reads no message body.
#[derive(Debug)]
pub struct HistoryView<'a> {
    summary: Option<&'a Summary>,
    tail: &'a [EntryMeta],
    pins: &'a [Seq],
    fixed_tokens: u64,
    cleared: Option<Cleared>,
    map: ProtocolMap,
    /// `prefix[i]`: tokens of `tail[..i]` as the context counts them (cleared results at a
    /// stub's size).
    prefix: Vec<u64>,
}

impl<'a> HistoryView<'a> {
    /// A view of `tail` (the entries after `summary`'s coverage, in seq order) under
    /// `summary`, with `fixed_tokens` for everything the context carries besides the tail.
    pub fn new(
        summary: Option<&'a Summary>,
        tail: &'a [EntryMeta],
        pins: &'a [Seq],
        fixed_tokens: u64,
    ) -> Self {
        let start = summary.map_or(Seq::ZERO, |s| s.coverage);
        let map = ProtocolMap::analyze_by(start, tail, |m| &m.events);
        let mut view = HistoryView {
            summary,
            tail,
            pins,
            fixed_tokens,
            cleared: None,
            map,
            prefix: Vec::new(),
        };
        view.sum_tokens();
        view
    }

    /// The same view where the run already shows the tool results `cleared` names as stubs.
    pub fn with_cleared(mut self, cleared: Option<Cleared>) -> Self {
        self.cleared = cleared;
        self.sum_tokens();
        self
    }

    fn sum_tokens(&mut self) {
        let mut prefix = Vec::with_capacity(self.tail.len() + 1);
        let mut sum = 0u64;
        prefix.push(0);
        for m in self.tail {
            sum += self.counted(m, self.cleared);
            prefix.push(sum);
        }
        self.prefix = prefix;
    }

    /// `m`'s tokens in a context that clears as `cleared` says.
    fn counted(&self, m: &EntryMeta, cleared: Option<Cleared>) -> u64 {
        match cleared {
            Some(c) if self.clearable(m, c.through, c.min_tokens) => {
                STUB_TOKENS.min(u64::from(m.tokens))
            }
            _ => u64::from(m.tokens),
        }
    }

    /// Whether a clear of tool results through `through` of at least `min_tokens` shows `m`'s
    /// results as a stub: a message with tool results, old and large enough, and not pinned.
    pub fn clearable(&self, m: &EntryMeta, through: Seq, min_tokens: u32) -> bool {
        m.seq() <= through
            && m.tokens >= min_tokens
            && !m.events.results.is_empty()
            && !self.pins.contains(&m.seq())
    }

    /// Whether the context already shows `m`'s tool results as a stub.
    pub fn is_cleared(&self, m: &EntryMeta) -> bool {
        self.cleared
            .is_some_and(|c| self.clearable(m, c.through, c.min_tokens))
    }

    /// Tokens of the whole context were it to clear as `cleared` says.
    pub fn tokens_with_cleared(&self, cleared: Cleared) -> u64 {
        self.fixed_tokens
            + self
                .tail
                .iter()
                .map(|m| self.counted(m, Some(cleared)))
                .sum::<u64>()
    }

    /// What the run's context already clears.
    pub fn cleared(&self) -> Option<Cleared> {
        self.cleared
    }

    /// The active summary.
    pub fn summary(&self) -> Option<&'a Summary> {
        self.summary
    }

    /// The last seq the active summary covers (0 without one).
    pub fn coverage(&self) -> Seq {
        self.summary.map_or(Seq::ZERO, |s| s.coverage)
    }

    /// The messages after the coverage.
    pub fn tail(&self) -> &'a [EntryMeta] {
        self.tail
    }

    /// The pinned seqs of the run.
    pub fn pins(&self) -> &'a [Seq] {
        self.pins
    }

    /// Tokens of everything but the tail: rules, goal, summary claims, pinned messages.
    pub fn fixed_tokens(&self) -> u64 {
        self.fixed_tokens
    }

    /// Tokens of the tail.
    pub fn tail_tokens(&self) -> u64 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Tokens of the whole context.
    pub fn tokens(&self) -> u64 {
        self.fixed_tokens + self.tail_tokens()
    }

    /// How many tail messages have seq `≤ cut`.
    pub fn count_through(&self, cut: Seq) -> usize {
        self.tail.partition_point(|m| m.seq() <= cut)
    }

    /// Tokens of the tail messages with seq `≤ cut`.
    pub fn tokens_through(&self, cut: Seq) -> u64 {
        self.prefix[self.count_through(cut)]
    }

    /// Tokens of the tail messages after `cut`.
    pub fn tokens_after(&self, cut: Seq) -> u64 {
        self.tail_tokens() - self.tokens_through(cut)
    }

    /// The seq of the message that has `n` messages after it in the tail (the cut that keeps
    /// the last `n`), or `None` when the tail has `n` messages or fewer.
    pub fn seq_keeping_last(&self, n: usize) -> Option<Seq> {
        let len = self.tail.len();
        (len > n).then(|| self.tail[len - n - 1].seq())
    }

    /// The nearest safe cut at or before `desired` that drops at least one message.
    pub fn safe_cut_at_or_before(&self, desired: Seq) -> Option<SafeCut> {
        self.map
            .safe_cut_at_or_before(desired)
            .filter(|c| c.seq() > self.coverage())
    }

    /// The safe cuts that drop at least one message and keep at least one, in seq order.
    pub fn safe_cuts(&self) -> impl Iterator<Item = SafeCut> + '_ {
        let last = self.tail.last().map(EntryMeta::seq);
        self.tail
            .iter()
            .map(EntryMeta::seq)
            .filter(move |seq| Some(*seq) != last && self.map.is_safe(*seq))
            .filter_map(|seq| self.map.safe_cut_at_or_before(seq))
    }

    /// The protocol analysis of the tail.
    pub fn protocol(&self) -> &ProtocolMap {
        &self.map
    }
}
