//! Protocol units and safe cut points.
//!
//! An assistant turn that issues tool calls and every tool result that answers them form one
//! *protocol unit*: a compaction may drop or keep a unit, never half of one, or the next API
//! call carries a `tool_result` whose `tool_use` is gone (a 400 from every provider).
//!
//! A *cut* at seq `c` drops (summarizes) every message with seq `≤ c` and keeps the rest.
//! A cut is *safe* when:
//! - no tool call and any of its results lie on different sides of it;
//! - no *dangling* tool call (one with no result yet) is on the dropped side, because its
//!   result may still arrive and would land on the kept side alone;
//! - no *orphan* tool result (one answering a call that appears nowhere) is on the kept side.
//!
//! [`ProtocolMap::analyze`] reads the protocol events of a window of history (the messages after
//! the active summary's coverage, in order) in one pass; [`ProtocolMap::safe_cut_at_or_before`]
//! then answers "where may I cut, at or before this seq?" in time proportional to the distance.
//! Only this module builds a [`SafeCut`].
//!
//! ```
//! use baton_core::{ContentBlock, Message, Role, Seq};
//! use baton_core::units::{ProtocolEvents, ProtocolMap};
//!
//! let call = Message { role: Role::Assistant, content: vec![ContentBlock::ToolUse {
//!     id: "t1".into(), name: "ls".into(), input: serde_json::json!({}) }] };
//! let answer = Message { role: Role::User, content: vec![ContentBlock::ToolResult {
//!     tool_use_id: "t1".into(), content: vec![], is_error: false }] };
//! let window = [
//!     ProtocolEvents::of(Seq(1), &Message::text(Role::User, "list files")),
//!     ProtocolEvents::of(Seq(2), &call),
//!     ProtocolEvents::of(Seq(3), &answer),
//! ];
//! let map = ProtocolMap::analyze(Seq::ZERO, &window);
//! assert!(!map.is_safe(Seq(2)));                       // would split t1 from its result
//! assert_eq!(map.safe_cut_at_or_before(Seq(2)).unwrap().seq(), Seq(1));
//! assert_eq!(map.units().len(), 2);                    // [1] and [2, 3]
//! ```

use std::collections::HashMap;

use serde::Serialize;

use crate::{Message, Seq};

/// The tool-call ids one message opens and answers: all that protocol analysis needs.
///
/// Stores keep these beside each history row so analysis never parses message bodies.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ProtocolEvents {
    /// The message's seq.
    pub seq: Seq,
    /// Ids of the tool calls the message makes.
    pub uses: Vec<String>,
    /// Ids of the tool calls the message answers.
    pub results: Vec<String>,
}

impl ProtocolEvents {
    /// The events of `message`, stored at `seq`.
    pub fn of(seq: Seq, message: &Message) -> Self {
        ProtocolEvents {
            seq,
            uses: message.tool_use_ids().map(str::to_owned).collect(),
            results: message.tool_result_ids().map(str::to_owned).collect(),
        }
    }
}

/// A cut point proven safe by [`ProtocolMap`]. Messages with seq at or before it may be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SafeCut(Seq);

impl SafeCut {
    /// The last seq on the dropped side.
    pub fn seq(self) -> Seq {
        self.0
    }
}

/// A run of messages that must be kept or dropped together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Unit {
    /// The first seq of the unit.
    pub first: Seq,
    /// The last seq of the unit.
    pub last: Seq,
    /// Whether the unit is still waiting for a tool result (it ends the window, and no cut may
    /// follow it yet).
    pub open: bool,
}

/// Something wrong with the tool-call pairing of a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// A tool result whose call appears nowhere in the window. It may never sit on the kept side
    /// of a cut.
    OrphanResult {
        /// Where the result is.
        seq: Seq,
        /// The call id it names.
        tool_use_id: String,
    },
    /// A tool call with no result yet. Normal at the very end of a live run; a sign of an
    /// interrupted or broken transcript anywhere else.
    DanglingUse {
        /// Where the call is.
        seq: Seq,
        /// Its id.
        tool_use_id: String,
    },
    /// A tool result that comes before the call it answers (every provider rejects a
    /// conversation where a `tool_result` precedes its `tool_use`).
    ResultBeforeUse {
        /// Where the early result is.
        seq: Seq,
        /// The call id it names.
        tool_use_id: String,
    },
    /// A tool call id issued by more than one call.
    DuplicateUse {
        /// The later call.
        seq: Seq,
        /// The repeated id.
        tool_use_id: String,
    },
}

/// Which cut points of a window are safe, and why the others are not.
#[derive(Clone, Debug)]
pub struct ProtocolMap {
    /// `seqs[k]` is the seq of boundary `k`: `start` for `k = 0`, else the seq of message `k-1`.
    seqs: Vec<Seq>,
    /// `safe[k]`: whether dropping the first `k` messages of the window is safe.
    safe: Vec<bool>,
    problems: Vec<Problem>,
}

#[derive(Default)]
struct Span {
    first_use: Option<usize>,
    last_use: Option<usize>,
    first_result: Option<usize>,
    last_result: Option<usize>,
}

impl ProtocolMap {
    /// Analyzes the messages that follow `start` (the coverage already summarized, or
    /// [`Seq::ZERO`]), given in increasing seq order.
    pub fn analyze(start: Seq, window: &[ProtocolEvents]) -> Self {
        Self::analyze_by(start, window, |e| e)
    }

    /// [`analyze`](Self::analyze) over any records that carry their events (`events` reads
    /// them), so a caller holding messages' metadata need not copy their events out first.
    pub fn analyze_by<'w, T>(
        start: Seq,
        window: &'w [T],
        events: impl Fn(&'w T) -> &'w ProtocolEvents,
    ) -> Self {
        let n = window.len();
        let at = |i: usize| events(&window[i]);
        let mut spans: HashMap<&str, Span> = HashMap::new();
        // Ids by first appearance: problems at one seq come out in this order, not the map's.
        let mut order: Vec<&str> = Vec::new();
        let mut problems = Vec::new();
        for (i, events) in window.iter().map(&events).enumerate() {
            for id in &events.uses {
                let span = spans.entry(id.as_str()).or_insert_with(|| {
                    order.push(id);
                    Span::default()
                });
                if span.first_use.is_some() {
                    problems.push(Problem::DuplicateUse {
                        seq: events.seq,
                        tool_use_id: id.clone(),
                    });
                }
                span.first_use.get_or_insert(i);
                span.last_use = Some(i);
            }
            for id in &events.results {
                let span = spans.entry(id.as_str()).or_insert_with(|| {
                    order.push(id);
                    Span::default()
                });
                span.first_result.get_or_insert(i);
                span.last_result = Some(i);
            }
        }

        // unsafe_from_to[k] += 1 / -1 marks boundaries [a, b] as unsafe, summed by prefix.
        let mut delta = vec![0i64; n + 2];
        let mut mark = |from: usize, to: usize| {
            if from <= to {
                delta[from] += 1;
                delta[to + 1] -= 1;
            }
        };
        for id in &order {
            let span = &spans[id];
            match (
                span.first_use,
                span.last_use,
                span.first_result,
                span.last_result,
            ) {
                (Some(u0), Some(u1), Some(r0), Some(r1)) => {
                    if r0 < u0 {
                        problems.push(Problem::ResultBeforeUse {
                            seq: at(r0).seq,
                            tool_use_id: (*id).to_owned(),
                        });
                    }
                    // Every occurrence of the id must sit on one side: boundaries strictly inside
                    // the span of all its occurrences are unsafe.
                    let lo = u0.min(r0);
                    let hi = u1.max(r1);
                    mark(lo + 1, hi);
                }
                (Some(u0), Some(u1), None, None) => {
                    // Dangling: the call may not be dropped, its result could still arrive.
                    mark(u0 + 1, n);
                    problems.push(Problem::DanglingUse {
                        seq: at(u1).seq,
                        tool_use_id: (*id).to_owned(),
                    });
                }
                (None, None, Some(_), Some(r1)) => {
                    // Orphan: the result may not be kept.
                    mark(0, r1);
                    for (i, events) in window.iter().map(&events).enumerate().take(r1 + 1) {
                        if events.results.iter().any(|r| r == id) {
                            problems.push(Problem::OrphanResult {
                                seq: at(i).seq,
                                tool_use_id: (*id).to_owned(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        problems.sort_by_key(|p| match p {
            Problem::OrphanResult { seq, .. }
            | Problem::DanglingUse { seq, .. }
            | Problem::ResultBeforeUse { seq, .. }
            | Problem::DuplicateUse { seq, .. } => *seq,
        });

        let mut seqs = Vec::with_capacity(n + 1);
        seqs.push(start);
        seqs.extend(window.iter().map(|e| events(e).seq));
        let mut safe = Vec::with_capacity(n + 1);
        let mut depth = 0i64;
        for d in delta.iter().take(n + 1) {
            depth += d;
            safe.push(depth == 0);
        }
        ProtocolMap {
            seqs,
            safe,
            problems,
        }
    }

    /// Whether a cut at `cut` is safe. A seq outside the window (before `start` or after the last
    /// message) is not a cut point of this window and is never safe.
    pub fn is_safe(&self, cut: Seq) -> bool {
        match self.seqs.binary_search(&cut) {
            Ok(k) => self.safe[k],
            Err(_) => false,
        }
    }

    /// The nearest safe cut at or before `desired`, if any. A desired seq beyond the window is
    /// clamped to its last message. `None` means no cut at or before `desired` is safe: the caller
    /// should not compact rather than break the conversation.
    pub fn safe_cut_at_or_before(&self, desired: Seq) -> Option<SafeCut> {
        let upto = match self.seqs.binary_search(&desired) {
            Ok(k) => k,
            Err(0) => return None,
            Err(k) => k - 1,
        };
        (0..=upto)
            .rev()
            .find(|&k| self.safe[k])
            .map(|k| SafeCut(self.seqs[k]))
    }

    /// The window's protocol units, in order.
    pub fn units(&self) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut begin = 1;
        for k in 1..self.seqs.len() {
            if self.safe[k] {
                units.push(Unit {
                    first: self.seqs[begin],
                    last: self.seqs[k],
                    open: false,
                });
                begin = k + 1;
            }
        }
        if begin < self.seqs.len() {
            units.push(Unit {
                first: self.seqs[begin],
                last: self.seqs[self.seqs.len() - 1],
                open: true,
            });
        }
        units
    }

    /// Orphan results, dangling calls, results before their call and reused ids found in the
    /// window, by seq.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Why a cut at `cut` is not safe, in one line, or `None` when it is.
    pub fn explain(&self, cut: Seq) -> Option<String> {
        if self.is_safe(cut) {
            return None;
        }
        if self.seqs.binary_search(&cut).is_err() {
            return Some(format!(
                "seq {cut} is not in the window after seq {}",
                self.seqs[0]
            ));
        }
        let nearest = self
            .safe_cut_at_or_before(cut)
            .map(|c| format!("the nearest safe cut at or before it is {}", c.seq()))
            .unwrap_or_else(|| "no cut at or before it is safe".to_owned());
        Some(format!(
            "cut at seq {cut} would separate a tool_use from its tool_result; {nearest}"
        ))
    }
}

#[cfg(test)]
mod tests;
