//! Continuity probes: after a compaction, is what the continuation needs still in its context?
//!
//! Three questions about a compaction through `cut`, asked of the claims of the new summary
//! and the tail the context keeps:
//!
//! - **constraints**: every constraint sentence the user wrote at or before the cut (found as
//!   the offline extractor finds them) is present verbatim in a claim's text or in the tail.
//!   A working state that loses "read-only" lets the next step write.
//! - **findings**: the last verified finding at or before the cut (the extractor's detection)
//!   is present verbatim in a claim's text or in the tail: the continuation knows the current
//!   conclusion.
//! - **sources**: every claim's `source_seq` is a message of the history (from 1 to its last
//!   seq), so recall can expand it.
//!
//! Each is reported as a [`Share`], kept of total; replay sums them per strategy.
//!
//! ```
//! use baton_compact::probes::probe;
//! use baton_core::{Claim, ClaimKind, Entry, Message, Role, Seq, Timestamp};
//!
//! let entry = |seq, role, text: &str| Entry {
//!     seq: Seq(seq), message: Message::text(role, text), tokens: 10, created_at: Timestamp(0),
//! };
//! let history = [
//!     entry(1, Role::User, "Find the leak. Do not restart the server."),
//!     entry(2, Role::Assistant, "Confirmed: the cache grows without bound."),
//!     entry(3, Role::User, "Good."),
//! ];
//! let claims = [Claim::new(ClaimKind::Constraint, "Do not restart the server.", Seq(1))];
//! let probes = probe(&history, Seq(2), &claims, &history[2..]);
//! assert_eq!((probes.constraints.kept, probes.constraints.total), (1, 1));
//! assert_eq!((probes.findings.kept, probes.findings.total), (0, 1)); // the finding was lost
//! assert_eq!((probes.sources.kept, probes.sources.total), (1, 1));
//! ```

use baton_core::{Claim, Entry, Seq};
use serde::{Deserialize, Serialize};

use crate::audit::Share;
use crate::audit::scan;
use crate::state::detect;

/// What a compaction kept of what the continuation needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probes {
    /// The user's constraint sentences through the cut, present verbatim.
    pub constraints: Share,
    /// The last verified finding through the cut, present verbatim (total 0 when there was
    /// none).
    pub findings: Share,
    /// Claims whose `source_seq` resolves to a message of the history.
    pub sources: Share,
}

impl std::ops::Add for Probes {
    type Output = Probes;

    fn add(self, other: Probes) -> Probes {
        Probes {
            constraints: self.constraints + other.constraints,
            findings: self.findings + other.findings,
            sources: self.sources + other.sources,
        }
    }
}

impl std::ops::AddAssign for Probes {
    fn add_assign(&mut self, other: Probes) {
        *self = *self + other;
    }
}

/// Probes a compaction through `cut` of `history` (the run's entries in seq order) whose
/// context is now `claims` (the new summary's) and `tail` (the entries kept whole: after the
/// cut, and pinned ones).
pub fn probe(history: &[Entry], cut: Seq, claims: &[Claim], tail: &[Entry]) -> Probes {
    let mut present_in = String::new();
    for claim in claims {
        present_in.push_str(&claim.text);
        present_in.push('\n');
    }
    for entry in tail {
        scan::visible_text(&entry.message, &mut present_in);
    }
    let covered = &history[..history.partition_point(|e| e.seq <= cut)];

    let mut constraints: Vec<&str> = covered
        .iter()
        .flat_map(|e| detect::constraints(&e.message))
        .collect();
    constraints.sort_unstable();
    constraints.dedup();
    let kept = constraints
        .iter()
        .filter(|c| present_in.contains(**c))
        .count();

    let finding = covered
        .iter()
        .rev()
        .find_map(|e| detect::findings(&e.message).last().copied());

    let last = history.last().map_or(Seq::ZERO, |e| e.seq);
    let resolvable = claims
        .iter()
        .filter(|c| c.source_seq > Seq::ZERO && c.source_seq <= last)
        .count();

    Probes {
        constraints: share(kept, constraints.len()),
        findings: match finding {
            Some(f) => share(usize::from(present_in.contains(f)), 1),
            None => Share::default(),
        },
        sources: share(resolvable, claims.len()),
    }
}

fn share(kept: usize, total: usize) -> Share {
    Share {
        kept: u32::try_from(kept).unwrap_or(u32::MAX),
        total: u32::try_from(total).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests;
