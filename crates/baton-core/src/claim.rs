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
///
/// The first kinds are the working state's sections, in the order context assembly renders them
/// ([`ClaimKind::ALL`]); `instruction`, `task`, `file`, `problem`, `command`, `reported`, `repo`,
/// `rejected` and `lesson` came with the working state of issue 15, the others before it (their
/// names never change: stored summaries use them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// The current objective: the task in progress, else the newest instruction.
    Goal,
    /// A message the user typed, verbatim (a long one clipped, naming its seq).
    Instruction,
    /// A constraint the user set, in their words.
    Constraint,
    /// An item of the agent's own plan, with its [`Status`] (`pending`, `in_progress`,
    /// `completed`).
    Task,
    /// A failed check, with its [`Status`] (`unresolved`, `resolved`); its `subject` is the
    /// check (a command, or a tool and its target).
    Problem,
    /// A file the run touched, with its [`Status`] (`created`, `modified`, `deleted`, `read`);
    /// its `subject` is the file's one canonical path.
    File,
    /// A shell command the agent ran, whole.
    Command,
    /// A fact a tool result itself shows (a test or check whose output says it passed).
    Verified,
    /// What the agent said it found or did, with no tool result to show it.
    Reported,
    /// The repository's state: commits, pushes and their outcomes.
    Repo,
    /// Something believed but not yet shown.
    Hypothesis,
    /// Something tried that did not work.
    FailedApproach,
    /// A design the user rejected, with the correction that rejected it.
    Rejected,
    /// A lesson for the rest of the run.
    Lesson,
    /// An operation started and not known to be finished.
    Pending,
    /// A URL or other artifact worth coming back to.
    Artifact,
    /// What to do next.
    NextStep,
    /// Anything else.
    Note,
}

impl ClaimKind {
    /// Every kind, in the order context assembly groups them.
    pub const ALL: [ClaimKind; 18] = [
        ClaimKind::Goal,
        ClaimKind::Instruction,
        ClaimKind::Constraint,
        ClaimKind::Task,
        ClaimKind::Problem,
        ClaimKind::File,
        ClaimKind::Command,
        ClaimKind::Verified,
        ClaimKind::Reported,
        ClaimKind::Repo,
        ClaimKind::Hypothesis,
        ClaimKind::FailedApproach,
        ClaimKind::Rejected,
        ClaimKind::Lesson,
        ClaimKind::Pending,
        ClaimKind::Artifact,
        ClaimKind::NextStep,
        ClaimKind::Note,
    ];

    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimKind::Goal => "goal",
            ClaimKind::Instruction => "instruction",
            ClaimKind::Constraint => "constraint",
            ClaimKind::Task => "task",
            ClaimKind::Problem => "problem",
            ClaimKind::File => "file",
            ClaimKind::Command => "command",
            ClaimKind::Verified => "verified",
            ClaimKind::Reported => "reported",
            ClaimKind::Repo => "repo",
            ClaimKind::Hypothesis => "hypothesis",
            ClaimKind::FailedApproach => "failed_approach",
            ClaimKind::Rejected => "rejected",
            ClaimKind::Lesson => "lesson",
            ClaimKind::Pending => "pending",
            ClaimKind::Artifact => "artifact",
            ClaimKind::NextStep => "next_step",
            ClaimKind::Note => "note",
        }
    }

    /// The heading context assembly gives the kind's section.
    pub fn heading(self) -> &'static str {
        match self {
            ClaimKind::Goal => "Current task",
            ClaimKind::Instruction => "User instructions (verbatim, newest first)",
            ClaimKind::Constraint => "Constraints",
            ClaimKind::Task => "Plan",
            ClaimKind::Problem => "Problems (unresolved first)",
            ClaimKind::File => "Files",
            ClaimKind::Command => "Commands run (newest first)",
            ClaimKind::Verified => "Verified by tool output",
            ClaimKind::Reported => "Reported by the agent (not verified)",
            ClaimKind::Repo => "Repository",
            ClaimKind::Hypothesis => "Hypotheses",
            ClaimKind::FailedApproach => "Failed approaches",
            ClaimKind::Rejected => "Rejected designs",
            ClaimKind::Lesson => "Lessons",
            ClaimKind::Pending => "Pending operations",
            ClaimKind::Artifact => "Artifacts",
            ClaimKind::NextStep => "Next step",
            ClaimKind::Note => "Notes",
        }
    }

    /// The statuses a claim of this kind takes (it must have one), or none (it must have none).
    pub fn statuses(self) -> &'static [Status] {
        match self {
            ClaimKind::Task => &[Status::Pending, Status::InProgress, Status::Completed],
            ClaimKind::File => &[
                Status::Created,
                Status::Modified,
                Status::Deleted,
                Status::Read,
            ],
            ClaimKind::Problem => &[Status::Unresolved, Status::Resolved],
            _ => &[],
        }
    }
}

impl fmt::Display for ClaimKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a task, a file or a problem stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A task not started.
    Pending,
    /// The task being worked on.
    InProgress,
    /// A task done.
    Completed,
    /// A file the run created.
    Created,
    /// A file the run changed.
    Modified,
    /// A file the run deleted.
    Deleted,
    /// A file the run only read.
    Read,
    /// A problem still open.
    Unresolved,
    /// A problem a later success closed.
    Resolved,
}

impl Status {
    /// The snake_case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Created => "created",
            Status::Modified => "modified",
            Status::Deleted => "deleted",
            Status::Read => "read",
            Status::Unresolved => "unresolved",
            Status::Resolved => "resolved",
        }
    }
}

impl fmt::Display for Status {
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
    /// Where a task, file or problem stands: required for those kinds ([`ClaimKind::statuses`]),
    /// refused for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// What the claim is about, when it needs a key of its own to be merged with later claims:
    /// a file's canonical path, a problem's check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

impl Claim {
    /// A claim with no status and no subject.
    pub fn new(kind: ClaimKind, text: impl Into<String>, source_seq: Seq) -> Claim {
        Claim {
            kind,
            text: text.into(),
            source_seq,
            status: None,
            subject: None,
        }
    }

    /// The same claim with `status`.
    #[must_use]
    pub fn with_status(mut self, status: Status) -> Claim {
        self.status = Some(status);
        self
    }

    /// The same claim with `subject`.
    #[must_use]
    pub fn with_subject(mut self, subject: impl Into<String>) -> Claim {
        self.subject = Some(subject.into());
        self
    }
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
    /// A claim's status is missing, or not one its kind takes.
    #[error("candidate: claim {index}: a {kind} claim takes {expected}, not {found}")]
    BadStatus {
        /// The claim's position in the list, from 0.
        index: usize,
        /// The claim's kind.
        kind: ClaimKind,
        /// The status given (`none` when missing).
        found: String,
        /// What the kind takes.
        expected: String,
    },
    /// A claim's subject is empty or only whitespace.
    #[error("candidate: claim {index}: subject is empty")]
    EmptySubject {
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

/// Checks what can be checked without the store: non-empty text, a status exactly where the
/// kind takes one, a non-empty subject when there is one, and a positive `source_seq`.
pub fn validate_claims(claims: &[Claim]) -> Result<(), InvalidCandidate> {
    for (index, claim) in claims.iter().enumerate() {
        if claim.text.trim().is_empty() {
            return Err(InvalidCandidate::EmptyText { index });
        }
        let allowed = claim.kind.statuses();
        let fits = match claim.status {
            Some(status) => allowed.contains(&status),
            None => allowed.is_empty(),
        };
        if !fits {
            let expected = if allowed.is_empty() {
                "no status".to_owned()
            } else {
                let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
                format!("a status of {}", names.join(", "))
            };
            return Err(InvalidCandidate::BadStatus {
                index,
                kind: claim.kind,
                found: claim
                    .status
                    .map_or("none".to_owned(), |s| s.as_str().to_owned()),
                expected,
            });
        }
        if claim.subject.as_ref().is_some_and(|s| s.trim().is_empty()) {
            return Err(InvalidCandidate::EmptySubject { index });
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
/// let c = |kind, text: &str, seq| Claim::new(kind, text, Seq(seq));
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
            r#"[{"kind":"task","text":"a","source_seq":1}]"#,
            "claim 0: a task claim takes a status of pending, in_progress, completed, not none",
        );
        rejects(
            r#"[{"kind":"file","text":"a","source_seq":1,"status":"resolved"}]"#,
            "a file claim takes a status of created, modified, deleted, read, not resolved",
        );
        rejects(
            r#"[{"kind":"goal","text":"a","source_seq":1,"status":"pending"}]"#,
            "a goal claim takes no status, not pending",
        );
        rejects(
            r#"[{"kind":"file","text":"a","source_seq":1,"status":"read","subject":" "}]"#,
            "claim 0: subject is empty",
        );
        rejects(
            r#"[{"kind":"task","text":"a","source_seq":1,"status":"later"}]"#,
            "claim 0: unknown variant `later`",
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
