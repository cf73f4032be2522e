//! The working state: merging newly extracted claims into the current ones.
//!
//! A run's working state is the claim list of its active summary. Each compaction extracts
//! claims from the messages it covers and [`merge`]s them into the state it builds on, so
//! nothing the state held is silently lost and nothing a message said is promoted beyond what
//! it said:
//!
//! | kind | rule |
//! |---|---|
//! | goal | the base's goal if it has one, else the first new one: one goal |
//! | constraint | union, deduplicated by exact text (earliest seq kept); never dropped |
//! | verified, failed approach, artifact, note | union, deduplicated by exact text (earliest seq) |
//! | hypothesis | kept, unless a verified finding or failed approach at or after it refutes it |
//! | pending | kept, unless a later new verified finding or failed approach mentions it |
//! | next step | only the latest |
//!
//! **Refutation.** A claim *refutes* a hypothesis when it is a verified finding or a failed
//! approach citing the hypothesis's seq or a later one, it shares at least two significant
//! words with it (four letters or more, not a stop word such as `probably` or `cause`), and
//! it holds a negation or refutation marker (`not`, `isn't`, `wasn't`, `ruled out`, `no
//! longer`, `refuted`, `disproved`, `instead`). A refuted hypothesis is not kept as a
//! hypothesis: in its place the state holds a [`ClaimKind::FailedApproach`] claim
//! `refuted: <hypothesis> (by seq N)` citing the refuting claim's seq `N` — a belief that
//! turned out wrong is an approach that failed, and the continuation sees both what was
//! believed and the evidence that changed it. The earliest refuting claim is named. A
//! hypothesis never becomes [`ClaimKind::Verified`]: only a sentence that itself states a
//! checked result is a finding. Claims that record a refutation (`refuted: …`) refute nothing
//! themselves.
//!
//! **Pending operations.** The merge sees claims, not messages. A pending claim (a tool call
//! with no result yet, written `<tool> <input>`) is resolved when a *new* verified finding or
//! failed approach cites a later seq and its text contains the pending claim's text (the
//! extractor writes a finding's evidence and a failure as `<tool> <input>…`, so an answered
//! call mentions itself). Since a cut never separates a call from its result, pending claims
//! only come from calls the source never answered.
//!
//! **Pins.** A claim citing a pinned seq is always kept, unchanged, whatever the rules above
//! say.
//!
//! The result is ordered by [`ClaimKind::ALL`], then seq, then text, so it is deterministic;
//! and merging the same new claims again changes nothing (`merge(&merge(b, n), n) ==
//! merge(b, n)`).
//!
//! ```
//! use baton_compact::state::merge;
//! use baton_core::{Claim, ClaimKind, Seq};
//!
//! let claim = |kind, text: &str, seq| Claim { kind, text: text.into(), source_seq: Seq(seq) };
//! let base = [
//!     claim(ClaimKind::Constraint, "Read-only: never write to production.", 1),
//!     claim(ClaimKind::Hypothesis, "The bug is probably in the cache layer.", 4),
//! ];
//! let new = vec![claim(
//!     ClaimKind::Verified,
//!     "The cache layer is not the cause; the root cause is the serializer.",
//!     9,
//! )];
//! let state = merge(&base, new, &[]);
//! assert_eq!(state[0].text, "Read-only: never write to production.");
//! assert_eq!(state[1].kind, ClaimKind::Verified);
//! assert_eq!(state[2].kind, ClaimKind::FailedApproach);
//! assert_eq!(state[2].text, "refuted: The bug is probably in the cache layer. (by seq 9)");
//! assert_eq!(state[2].source_seq, Seq(9));
//! assert!(state.iter().all(|c| c.kind != ClaimKind::Hypothesis));
//! ```

pub(crate) mod detect;

use std::collections::HashMap;

use baton_core::{Claim, ClaimKind, Seq};

/// The prefix of the claim that records a refuted hypothesis.
pub const REFUTED_PREFIX: &str = "refuted: ";

/// The next working state, from the current one (`base`, the active summary's claims) and the
/// claims extracted from the newly covered messages. `pins` are the run's pinned seqs. See
/// the module docs for the rules.
pub fn merge(base: &[Claim], new: Vec<Claim>, pins: &[Seq]) -> Vec<Claim> {
    let pinned = |c: &Claim| pins.contains(&c.source_seq);
    let all: Vec<&Claim> = base.iter().chain(&new).collect();
    let of = |kind: ClaimKind| all.iter().copied().filter(move |c| c.kind == kind);
    let mut out: Vec<Claim> = Vec::new();

    // Goal: the base's (a pinned one counts), else the first new one.
    let base_goals: Vec<&Claim> = base.iter().filter(|c| c.kind == ClaimKind::Goal).collect();
    let goal = if base_goals.is_empty() {
        earliest(
            new.iter()
                .filter(|c| c.kind == ClaimKind::Goal && !pinned(c)),
        )
    } else {
        earliest(base_goals.into_iter().filter(|c| !pinned(c)))
    };
    out.extend(goal.cloned());

    // Unions, deduplicated by exact text.
    for kind in [
        ClaimKind::Constraint,
        ClaimKind::Verified,
        ClaimKind::FailedApproach,
        ClaimKind::Artifact,
        ClaimKind::Note,
    ] {
        out.extend(dedupe(of(kind)));
    }

    // Hypotheses: each one is kept unless a finding or a failure at or after it refutes it.
    let refuters: Vec<Claim> = dedupe(
        all.iter()
            .copied()
            .filter(|c| matches!(c.kind, ClaimKind::Verified | ClaimKind::FailedApproach))
            .filter(|c| !c.text.starts_with(REFUTED_PREFIX)),
    );
    let mut standing = Vec::new();
    for hypothesis in of(ClaimKind::Hypothesis) {
        let refuter = refuters
            .iter()
            .filter(|r| r.source_seq >= hypothesis.source_seq)
            .filter(|r| detect::refutes(&r.text, &hypothesis.text))
            .min_by_key(|r| r.source_seq);
        match refuter {
            Some(r) => out.push(Claim {
                kind: ClaimKind::FailedApproach,
                text: format!(
                    "{REFUTED_PREFIX}{} (by seq {})",
                    hypothesis.text, r.source_seq
                ),
                source_seq: r.source_seq,
            }),
            None => standing.push(hypothesis),
        }
    }
    out.extend(dedupe(standing.into_iter()));

    // Pending operations: each one is kept unless a later new claim reports on it.
    let answered = |p: &Claim| {
        new.iter().any(|c| {
            matches!(c.kind, ClaimKind::Verified | ClaimKind::FailedApproach)
                && c.source_seq > p.source_seq
                && c.text.contains(&p.text)
        })
    };
    out.extend(dedupe(of(ClaimKind::Pending).filter(|p| !answered(p))));

    // Next step: the latest.
    let next = of(ClaimKind::NextStep)
        .filter(|c| !pinned(c))
        .max_by(|a, b| (a.source_seq, &a.text).cmp(&(b.source_seq, &b.text)));
    out.extend(next.cloned());

    // The same text may now appear twice (a refutation recorded again): keep the earliest.
    let mut out = dedupe(out.iter());

    // Pinned claims, unchanged.
    for claim in all.iter().copied().filter(|c| pinned(c)) {
        if !out.contains(claim) {
            out.push(claim.clone());
        }
    }

    out.sort_by(|a, b| {
        (kind_rank(a.kind), a.source_seq, &a.text).cmp(&(kind_rank(b.kind), b.source_seq, &b.text))
    });
    out
}

/// The earliest claim by (seq, text).
fn earliest<'a>(claims: impl Iterator<Item = &'a Claim>) -> Option<&'a Claim> {
    claims.min_by(|a, b| (a.source_seq, &a.text).cmp(&(b.source_seq, &b.text)))
}

/// One claim per kind and exact text, citing the earliest seq; in first-seen order.
fn dedupe<'a>(claims: impl Iterator<Item = &'a Claim>) -> Vec<Claim> {
    let mut out: Vec<Claim> = Vec::new();
    let mut index: HashMap<(ClaimKind, &'a str), usize> = HashMap::new();
    for claim in claims {
        match index.get(&(claim.kind, claim.text.as_str())) {
            Some(&i) => {
                if claim.source_seq < out[i].source_seq {
                    out[i].source_seq = claim.source_seq;
                }
            }
            None => {
                index.insert((claim.kind, claim.text.as_str()), out.len());
                out.push(claim.clone());
            }
        }
    }
    out
}

fn kind_rank(kind: ClaimKind) -> usize {
    ClaimKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(ClaimKind::ALL.len())
}

#[cfg(test)]
mod tests;
