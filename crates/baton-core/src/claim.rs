//! Summary claims: the body of a summary version, and their structural validation.
//!
//! A candidate summary is a list of claims. Each names its kind, says one thing, and cites the
//! history seq it rests on. Whether that seq exists in the run and lies at or before the cut is
//! checked by the store inside the install transaction; everything that can be checked without
//! the store is checked here.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Seq;

/// What a claim is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// The current objective.
    Goal,
    /// A constraint the user set, in their words.
    Constraint,
    /// A fact backed by an observation.
    Verified,
    /// Something believed but not yet shown.
    Hypothesis,
    /// Something tried that did not work.
    FailedApproach,
    /// An operation started and not known to be finished.
    Pending,
    /// A file, URL or other artifact worth coming back to.
    Artifact,
    /// What to do next.
    NextStep,
    /// Anything else.
    Note,
}

impl ClaimKind {
    /// Every kind, in the order context assembly groups them.
    pub const ALL: [ClaimKind; 9] = [
        ClaimKind::Goal,
        ClaimKind::Constraint,
        ClaimKind::Verified,
        ClaimKind::Hypothesis,
        ClaimKind::FailedApproach,
        ClaimKind::Pending,
        ClaimKind::Artifact,
        ClaimKind::NextStep,
        ClaimKind::Note,
    ];

    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Goal => "goal",
            ClaimKind::Constraint => "constraint",
            ClaimKind::Verified => "verified",
            ClaimKind::Hypothesis => "hypothesis",
            ClaimKind::FailedApproach => "failed_approach",
            ClaimKind::Pending => "pending",
            ClaimKind::Artifact => "artifact",
            ClaimKind::NextStep => "next_step",
            ClaimKind::Note => "note",
        }
    }
}

impl fmt::Display for ClaimKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One statement of a summary, with the history seq it rests on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// What the claim is about.
    pub kind: ClaimKind,
    /// The statement, non-empty.
    pub text: String,
    /// The seq of the message it rests on.
    pub source_seq: Seq,
}

/// Why a candidate summary or its cut was refused. Every variant names the offending value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvalidCandidate {
    /// The candidate is not a JSON list of well-formed claims.
    #[error("candidate: {detail}")]
    Malformed {
        /// What was wrong, naming the claim index where there is one.
        detail: String,
    },
    /// A claim's text is empty or only whitespace.
    #[error("candidate: claim {index}: text is empty")]
    EmptyText {
        /// The claim's position in the list, from 0.
        index: usize,
    },
    /// A claim cites seq 0 or a seq that is not in the run.
    #[error("candidate: claim {index}: source_seq {source_seq} is not a message of this run")]
    SourceNotFound {
        /// The claim's position in the list, from 0.
        index: usize,
        /// The cited seq.
        source_seq: Seq,
    },
    /// A claim cites a seq after the cut: the summary would rest on what it does not cover.
    #[error("candidate: claim {index}: source_seq {source_seq} is after the cut {cut}")]
    SourceAfterCut {
        /// The claim's position in the list, from 0.
        index: usize,
        /// The cited seq.
        source_seq: Seq,
        /// The cut.
        cut: Seq,
    },
    /// The base summary is not a summary of this run.
    #[error("base summary {base} does not belong to this run")]
    BaseNotInRun {
        /// The named base.
        base: crate::SummaryId,
    },
    /// A summary version to activate is not a version of this run.
    #[error("summary {id} is not a version of this run")]
    VersionNotInRun {
        /// The named version.
        id: crate::SummaryId,
    },
    /// The cut does not extend the base's coverage.
    #[error("cut {cut} does not extend the base's coverage {coverage}")]
    CutNotBeyondBase {
        /// The requested cut.
        cut: Seq,
        /// What the base already covers.
        coverage: Seq,
    },
    /// The cut names a seq the run does not have.
    #[error("cut {cut} is not a message of this run (last seq is {last})")]
    CutNotFound {
        /// The requested cut.
        cut: Seq,
        /// The run's last seq.
        last: Seq,
    },
    /// The cut would split a protocol unit.
    #[error("cut {cut} is not a safe cut point: {detail}")]
    UnsafeCut {
        /// The requested cut.
        cut: Seq,
        /// Why, and the nearest safe cut.
        detail: String,
    },
}

/// Parses a candidate summary: a JSON list of claims, or an object `{"claims": [...]}`.
///
/// ```
/// let claims = baton_core::claim::parse_candidate(
///     r#"[{"kind": "constraint", "text": "read-only", "source_seq": 1}]"#).unwrap();
/// assert_eq!(claims[0].source_seq, baton_core::Seq(1));
/// assert!(baton_core::claim::parse_candidate(r#"[{"kind": "rumor", "text": "x", "source_seq": 1}]"#).is_err());
/// ```
pub fn parse_candidate(json: &str) -> Result<Vec<Claim>, InvalidCandidate> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| InvalidCandidate::Malformed {
            detail: format!("not valid JSON: {e}"),
        })?;
    let list = match value {
        serde_json::Value::Array(list) => list,
        serde_json::Value::Object(mut map) if map.len() == 1 && map.contains_key("claims") => {
            match map.remove("claims") {
                Some(serde_json::Value::Array(list)) => list,
                _ => {
                    return Err(InvalidCandidate::Malformed {
                        detail: "\"claims\" must be a list".to_owned(),
                    });
                }
            }
        }
        _ => {
            return Err(InvalidCandidate::Malformed {
                detail: "expected a list of claims or an object {\"claims\": [...]}".to_owned(),
            });
        }
    };
    let mut claims = Vec::with_capacity(list.len());
    for (index, item) in list.into_iter().enumerate() {
        let claim: Claim =
            serde_json::from_value(item).map_err(|e| InvalidCandidate::Malformed {
                detail: format!("claim {index}: {e}"),
            })?;
        claims.push(claim);
    }
    validate_claims(&claims)?;
    Ok(claims)
}

/// Checks what can be checked without the store: non-empty text and a positive `source_seq`.
pub fn validate_claims(claims: &[Claim]) -> Result<(), InvalidCandidate> {
    for (index, claim) in claims.iter().enumerate() {
        if claim.text.trim().is_empty() {
            return Err(InvalidCandidate::EmptyText { index });
        }
        if claim.source_seq == Seq::ZERO {
            return Err(InvalidCandidate::SourceNotFound {
                index,
                source_seq: claim.source_seq,
            });
        }
    }
    Ok(())
}

/// Checks every claim's `source_seq` against the cut and the run's last seq. Seqs of a run are
/// gap-free from 1, so a seq exists exactly when `1 ≤ seq ≤ last`.
pub fn validate_sources(claims: &[Claim], cut: Seq, last: Seq) -> Result<(), InvalidCandidate> {
    validate_claims(claims)?;
    for (index, claim) in claims.iter().enumerate() {
        if claim.source_seq > last {
            return Err(InvalidCandidate::SourceNotFound {
                index,
                source_seq: claim.source_seq,
            });
        }
        if claim.source_seq > cut {
            return Err(InvalidCandidate::SourceAfterCut {
                index,
                source_seq: claim.source_seq,
                cut,
            });
        }
    }
    Ok(())
}

/// How two summary versions' claims differ.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClaimDiff {
    /// Claims only the second version has.
    pub added: Vec<Claim>,
    /// Claims only the first version has.
    pub dropped: Vec<Claim>,
    /// Claims of the same kind citing the same seq whose text changed: `(from, to)`.
    pub changed: Vec<(Claim, Claim)>,
}

/// The difference from claims `a` to claims `b`. A claim is the same when kind, text and seq
/// all match; a claim of one kind and seq present in both with another text (and no exact
/// match) is *changed*; the rest are added or dropped. Order follows `b` for added and changed
/// claims and `a` for dropped ones.
///
/// ```
/// use baton_core::claim::{diff, Claim, ClaimKind};
/// use baton_core::Seq;
/// let c = |kind, text: &str, seq| Claim { kind, text: text.into(), source_seq: Seq(seq) };
/// let a = [c(ClaimKind::Goal, "fix the bug", 1), c(ClaimKind::Hypothesis, "cache", 4)];
/// let b = [c(ClaimKind::Goal, "fix the login bug", 1), c(ClaimKind::Verified, "serializer", 9)];
/// let d = diff(&a, &b);
/// assert_eq!(d.changed.len(), 1);
/// assert_eq!((d.added.len(), d.dropped.len()), (1, 1));
/// ```
pub fn diff(a: &[Claim], b: &[Claim]) -> ClaimDiff {
    let mut out = ClaimDiff::default();
    let in_a = |c: &Claim| a.contains(c);
    let in_b = |c: &Claim| b.contains(c);
    let mut used = vec![false; a.len()];
    for claim in b.iter().filter(|c| !in_a(c)) {
        let twin = a.iter().enumerate().position(|(i, old)| {
            !used[i] && !in_b(old) && old.kind == claim.kind && old.source_seq == claim.source_seq
        });
        match twin {
            Some(i) => {
                used[i] = true;
                out.changed.push((a[i].clone(), claim.clone()));
            }
            None => out.added.push(claim.clone()),
        }
    }
    for (i, claim) in a.iter().enumerate() {
        if !used[i] && !in_b(claim) {
            out.dropped.push(claim.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn rejects(json: &str, expect: &str) {
        let err = parse_candidate(json).unwrap_err().to_string();
        assert!(err.contains(expect), "expected {expect:?} in {err:?}");
    }

    #[test]
    fn malformed_candidates_name_the_problem() {
        rejects("{", "not valid JSON");
        rejects(r#"{"x": []}"#, "expected a list");
        rejects(
            r#"[{"kind":"goal","text":"a","source_seq":1,"extra":1}]"#,
            "claim 0: unknown field `extra`",
        );
        rejects(
            r#"[{"kind":"goal","text":"a","source_seq":1.5}]"#,
            "claim 0",
        );
        rejects(
            r#"[{"kind":"goal","text":"a","source_seq":"1"}]"#,
            "claim 0",
        );
        rejects(r#"[{"kind":"goal","text":"a","source_seq":-1}]"#, "claim 0");
        rejects(
            r#"[{"kind":"goal","text":"ok","source_seq":1},{"kind":"goal","text":"  ","source_seq":1}]"#,
            "claim 1: text is empty",
        );
        rejects(
            r#"[{"kind":"goal","text":"a","source_seq":0}]"#,
            "source_seq 0",
        );
        rejects(
            r#"[{"kind":"goal","text":"a"}]"#,
            "missing field `source_seq`",
        );
    }

    #[test]
    fn sources_must_lie_at_or_before_the_cut() {
        let claims =
            parse_candidate(r#"{"claims":[{"kind":"verified","text":"a","source_seq":3}]}"#)
                .unwrap();
        assert!(validate_sources(&claims, Seq(3), Seq(5)).is_ok());
        assert!(matches!(
            validate_sources(&claims, Seq(2), Seq(5)),
            Err(InvalidCandidate::SourceAfterCut { .. })
        ));
        assert!(matches!(
            validate_sources(&claims, Seq(2), Seq(2)),
            Err(InvalidCandidate::SourceNotFound { .. })
        ));
    }
}
