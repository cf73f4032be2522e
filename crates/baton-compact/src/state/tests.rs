//! The merge rules, one case each, and their properties under random claims.

use baton_core::{Claim, ClaimKind, Seq};
use proptest::prelude::*;

use super::*;
use ClaimKind::*;

fn c(kind: ClaimKind, text: &str, seq: u64) -> Claim {
    Claim {
        kind,
        text: text.into(),
        source_seq: Seq(seq),
    }
}

/// The merged state as `kind seq text` lines.
#[track_caller]
fn check(base: &[Claim], new: &[Claim], pins: &[u64], expect: &[&str]) {
    let pins: Vec<Seq> = pins.iter().copied().map(Seq).collect();
    let merged = merge(base, new.to_vec(), &pins);
    let got: Vec<String> = merged
        .iter()
        .map(|c| format!("{} {} {}", c.kind, c.source_seq, c.text))
        .collect();
    assert_eq!(got, expect);
}

const HYPOTHESIS: &str = "The bug is probably in the cache layer.";
const CONCLUSION: &str = "The cache layer is not the cause; the root cause is the serializer.";

#[test]
fn one_goal_the_bases() {
    check(
        &[c(Goal, "fix login", 1)],
        &[c(Goal, "something else", 5)],
        &[],
        &["goal 1 fix login"],
    );
    check(
        &[],
        &[c(Goal, "second", 7), c(Goal, "first", 5)],
        &[],
        &["goal 5 first"],
    );
}

#[test]
fn constraints_are_a_union_keeping_the_earliest_seq() {
    check(
        &[
            c(Constraint, "Read-only.", 4),
            c(Constraint, "No secrets in logs.", 2),
        ],
        &[
            c(Constraint, "Read-only.", 1),
            c(Constraint, "Never push.", 9),
        ],
        &[],
        &[
            "constraint 1 Read-only.",
            "constraint 2 No secrets in logs.",
            "constraint 9 Never push.",
        ],
    );
}

#[test]
fn findings_failures_artifacts_and_notes_are_unions() {
    check(
        &[
            c(Artifact, "path a.rs", 3),
            c(Verified, "Tests pass.", 4),
            c(Note, "n", 1),
        ],
        &[
            c(Artifact, "path a.rs", 8),
            c(Artifact, "url https://x.io", 8),
            c(FailedApproach, "Bash make: error: no rule", 6),
            c(Verified, "Tests pass.", 9),
            c(Note, "n", 2),
        ],
        &[],
        &[
            "verified 4 Tests pass.",
            "failed_approach 6 Bash make: error: no rule",
            "artifact 3 path a.rs",
            "artifact 8 url https://x.io",
            "note 1 n",
        ],
    );
}

#[test]
fn a_refuted_hypothesis_becomes_a_failed_approach_naming_the_refuting_seq() {
    check(
        &[c(Hypothesis, HYPOTHESIS, 3)],
        &[c(Verified, CONCLUSION, 12), c(Verified, CONCLUSION, 15)],
        &[],
        &[
            &format!("verified 12 {CONCLUSION}"),
            &format!("failed_approach 12 refuted: {HYPOTHESIS} (by seq 12)"),
        ],
    );
    // A failed approach refutes too.
    check(
        &[c(Hypothesis, "Maybe the cache layer is stale.", 3)],
        &[c(
            FailedApproach,
            "Bash flush-cache: cache layer not found",
            5,
        )],
        &[],
        &[
            "failed_approach 5 Bash flush-cache: cache layer not found",
            "failed_approach 5 refuted: Maybe the cache layer is stale. (by seq 5)",
        ],
    );
}

#[test]
fn a_hypothesis_stands_against_earlier_or_unrelated_claims() {
    let stands = |refuter: Claim| {
        check(
            &[c(Hypothesis, HYPOTHESIS, 10)],
            std::slice::from_ref(&refuter),
            &[],
            &[
                &format!("{} {} {}", refuter.kind, refuter.source_seq, refuter.text),
                &format!("hypothesis 10 {HYPOTHESIS}"),
            ],
        )
    };
    // Earlier than the hypothesis.
    stands(c(Verified, CONCLUSION, 4));
    // One shared word.
    stands(c(Verified, "Confirmed: the cache is not involved.", 12));
    // No negation: it agrees.
    stands(c(Verified, "Confirmed: the cache layer drops entries.", 12));
    // A hypothesis does not refute a hypothesis.
    check(
        &[c(Hypothesis, HYPOTHESIS, 10)],
        &[c(
            Hypothesis,
            "Perhaps the cache layer is not the culprit.",
            12,
        )],
        &[],
        &[
            &format!("hypothesis 10 {HYPOTHESIS}"),
            "hypothesis 12 Perhaps the cache layer is not the culprit.",
        ],
    );
}

#[test]
fn a_hypothesis_never_becomes_verified() {
    let merged = merge(
        &[c(Hypothesis, HYPOTHESIS, 3)],
        vec![c(Verified, "Confirmed: the cache layer is the cause.", 8)],
        &[],
    );
    assert!(
        merged
            .iter()
            .all(|c| !(c.kind == Verified && c.text == HYPOTHESIS))
    );
    assert!(merged.contains(&c(Hypothesis, HYPOTHESIS, 3)));
}

#[test]
fn refutation_records_refute_nothing() {
    let record = format!("{REFUTED_PREFIX}{HYPOTHESIS} (by seq 12)");
    check(
        &[c(FailedApproach, &record, 12)],
        &[c(Hypothesis, "Probably the cache layer again.", 14)],
        &[],
        &[
            "hypothesis 14 Probably the cache layer again.",
            &format!("failed_approach 12 {record}"),
        ],
    );
}

#[test]
fn pending_operations_stay_until_a_later_claim_reports_on_them() {
    check(
        &[
            c(Pending, "Bash deploy.sh", 5),
            c(Pending, "Bash backup.sh", 6),
        ],
        &[
            c(FailedApproach, "Bash deploy.sh: Exit code 1", 9),
            // Cites an earlier seq: not an answer.
            c(Verified, "Done (evidence: Bash backup.sh)", 4),
        ],
        &[],
        &[
            "verified 4 Done (evidence: Bash backup.sh)",
            "failed_approach 9 Bash deploy.sh: Exit code 1",
            "pending 6 Bash backup.sh",
        ],
    );
    // A base finding is old news: only new claims answer.
    check(
        &[
            c(Pending, "Bash a", 5),
            c(Verified, "ok (evidence: Bash a)", 7),
        ],
        &[],
        &[],
        &["verified 7 ok (evidence: Bash a)", "pending 5 Bash a"],
    );
}

#[test]
fn only_the_latest_next_step() {
    check(
        &[c(NextStep, "Next, run tests.", 8)],
        &[
            c(NextStep, "Let me deploy.", 12),
            c(NextStep, "Then lint.", 10),
        ],
        &[],
        &["next_step 12 Let me deploy."],
    );
}

#[test]
fn pinned_claims_are_kept_unchanged() {
    check(
        &[
            c(Goal, "old goal", 2),
            c(Goal, "pinned goal", 3),
            c(Hypothesis, HYPOTHESIS, 3),
            c(NextStep, "Let me look.", 3),
            c(Artifact, "path a.rs", 3),
        ],
        &[
            c(Artifact, "path a.rs", 1),
            c(Verified, CONCLUSION, 9),
            c(NextStep, "Then ship.", 9),
        ],
        &[3],
        &[
            "goal 2 old goal",
            "goal 3 pinned goal",
            &format!("verified 9 {CONCLUSION}"),
            &format!("hypothesis 3 {HYPOTHESIS}"),
            &format!("failed_approach 9 refuted: {HYPOTHESIS} (by seq 9)"),
            "artifact 1 path a.rs",
            "artifact 3 path a.rs",
            "next_step 3 Let me look.",
            "next_step 9 Then ship.",
        ],
    );
}

#[test]
fn empty_in_empty_out() {
    check(&[], &[], &[1], &[]);
}

const TEXTS: &[&str] = &[
    HYPOTHESIS,
    CONCLUSION,
    "Maybe the cache layer is stale.",
    "Bash ls",
    "Bash ls: Exit code 1",
    "done (evidence: Bash ls)",
    "Read-only.",
    "Never push.",
    "path a.rs",
    "Let me check.",
    "refuted: The bug is probably in the cache layer. (by seq 4)",
];

fn claim() -> impl Strategy<Value = Claim> {
    (
        prop::sample::select(ClaimKind::ALL.to_vec()),
        prop_oneof![3 => prop::sample::select(TEXTS).prop_map(str::to_owned), 1 => "[a-z ]{1,12}"],
        1u64..20,
    )
        .prop_map(|(kind, text, seq)| Claim {
            kind,
            text,
            source_seq: Seq(seq),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merge_is_idempotent_and_loses_no_constraint_or_pin(
        base in prop::collection::vec(claim(), 0..12),
        new in prop::collection::vec(claim(), 0..12),
        pins in prop::collection::vec((1u64..20).prop_map(Seq), 0..3),
    ) {
        let once = merge(&base, new.clone(), &pins);
        let twice = merge(&once, new.clone(), &pins);
        prop_assert_eq!(&twice, &once);

        let input: Vec<&Claim> = base.iter().chain(&new).collect();
        for claim in &input {
            if claim.kind == Constraint {
                prop_assert!(
                    once.iter().any(|c| c.kind == Constraint && c.text == claim.text),
                    "constraint {:?} dropped", claim.text
                );
            }
            if pins.contains(&claim.source_seq) {
                prop_assert!(once.contains(claim), "pinned {:?} dropped", claim);
            }
        }
        // Nothing becomes a finding that was not one.
        for claim in once.iter().filter(|c| c.kind == Verified) {
            prop_assert!(input.iter().any(|i| i.kind == Verified && i.text == claim.text));
        }
        // Ordered by kind, then seq.
        let rank = |c: &Claim| ClaimKind::ALL.iter().position(|k| *k == c.kind);
        prop_assert!(once.windows(2).all(|w| (rank(&w[0]), w[0].source_seq) <= (rank(&w[1]), w[1].source_seq)));
    }
}
