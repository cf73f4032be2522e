//! The working state's round trip through claims, the model merge, pins.

use baton_core::tokens::ByteEstimate;
use baton_core::{Claim, ClaimKind, Seq, Status};

use super::*;

fn c(kind: ClaimKind, text: &str, seq: u64) -> Claim {
    Claim::new(kind, text, Seq(seq))
}

#[test]
fn claims_round_trip_through_the_state() {
    let claims = vec![
        c(ClaimKind::Goal, "Design the fix", 4),
        c(ClaimKind::Instruction, "plan the /clear fix", 1),
        c(ClaimKind::Task, "Design the fix", 4).with_status(Status::InProgress),
        c(
            ClaimKind::Problem,
            "`cargo test`: error[E0308] in src/lib.rs",
            6,
        )
        .with_status(Status::Unresolved)
        .with_subject("cargo test"),
        c(
            ClaimKind::File,
            "/repo/src/lib.rs — moves the parser into its own module",
            8,
        )
        .with_status(Status::Modified)
        .with_subject("/repo/src/lib.rs"),
        c(ClaimKind::Command, "cargo test", 6),
        c(ClaimKind::NextStep, "Design the fix", 4),
    ];
    let state = WorkingState::from_claims(&claims, &[]);
    assert_eq!(
        state.files[0].intent.as_deref(),
        Some("moves the parser into its own module")
    );
    assert_eq!(state.problems[0].files, ["src/lib.rs"]);
    let bounded = bound(&state, Seq(8), 2_000, &ByteEstimate);
    assert_eq!(bounded.claims, claims);
}

#[test]
fn a_model_adds_what_only_it_can_write_and_drops_nothing_exact() {
    let mut state = WorkingState::default();
    state.instructions.push(Item {
        text: "fix the flaky test".into(),
        seq: Seq(1),
    });
    state.files.push(File {
        path: "/repo/src/a.rs".into(),
        role: Status::Modified,
        seq: Seq(5),
        touches: 1,
        intent: None,
    });
    state.problems.push(Problem {
        check: "cargo test".into(),
        text: "`cargo test`: timeout".into(),
        seq: Seq(3),
        resolved: None,
        files: vec![],
        fixed: false,
    });
    let model = vec![
        // Tries to drop the instruction and rewrite the plan: ignored.
        c(ClaimKind::Task, "invented", 2).with_status(Status::Completed),
        c(
            ClaimKind::Rejected,
            "a global lock — the user said locks are out (seq 4)",
            4,
        ),
        c(ClaimKind::Lesson, "the test depends on wall-clock time", 5),
        c(ClaimKind::File, "/repo/src/a.rs — uses a fake clock", 5)
            .with_status(Status::Modified)
            .with_subject("/repo/src/a.rs"),
        c(
            ClaimKind::Problem,
            "`cargo test`: timeout — cause: real clock; fix: inject one",
            3,
        )
        .with_status(Status::Unresolved)
        .with_subject("cargo test"),
        c(ClaimKind::Verified, "the fix works", 5),
        c(
            ClaimKind::NextStep,
            "run the suite 50 times — to be sure the flake is gone",
            5,
        ),
    ];
    let merged = state.with_model(&model);
    let claims = bound(&merged, Seq(5), 2_000, &ByteEstimate).claims;
    let has = |kind, text: &str| claims.iter().any(|c| c.kind == kind && c.text == text);
    assert!(has(ClaimKind::Instruction, "fix the flaky test"));
    assert!(claims.iter().all(|c| c.kind != ClaimKind::Task));
    assert!(has(
        ClaimKind::Rejected,
        "a global lock — the user said locks are out (seq 4)"
    ));
    assert!(has(
        ClaimKind::Lesson,
        "the test depends on wall-clock time"
    ));
    assert!(has(ClaimKind::File, "/repo/src/a.rs — uses a fake clock"));
    assert!(has(
        ClaimKind::Problem,
        "`cargo test`: timeout — cause: real clock; fix: inject one"
    ));
    assert!(has(ClaimKind::Reported, "the fix works"));
    assert!(claims.iter().all(|c| c.kind != ClaimKind::Verified));
    assert!(has(
        ClaimKind::NextStep,
        "run the suite 50 times — to be sure the flake is gone"
    ));
}

#[test]
fn pinned_claims_are_carried_unchanged() {
    let pinned = c(ClaimKind::Note, "the customer is on the old API", 2);
    let state = WorkingState::from_claims(std::slice::from_ref(&pinned), &[Seq(2)]);
    let bounded = bound(&state, Seq(9), 10, &ByteEstimate);
    assert!(bounded.claims.contains(&pinned));
}
