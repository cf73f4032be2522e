//! The continuity probes on small hand-made histories.

use baton_core::{Claim, ClaimKind, Entry, Message, Role, Seq, Timestamp};

use super::*;

fn entry(seq: u64, role: Role, text: &str) -> Entry {
    Entry {
        seq: Seq(seq),
        message: Message::text(role, text),
        tokens: 10,
        created_at: Timestamp(0),
    }
}

fn claim(kind: ClaimKind, text: &str, seq: u64) -> Claim {
    Claim::new(kind, text, Seq(seq))
}

fn history() -> Vec<Entry> {
    vec![
        entry(
            1,
            Role::User,
            "Audit the DNS setup. Read-only: never change records.",
        ),
        entry(2, Role::Assistant, "The resolver is probably stale."),
        entry(
            3,
            Role::Assistant,
            "Confirmed: the resolver cache is not stale.",
        ),
        entry(4, Role::User, "Also, do not restart bind."),
        entry(5, Role::Assistant, "Verified: the zone file has a typo."),
        entry(6, Role::User, "Never email the team."),
    ]
}

#[test]
fn constraints_through_the_cut_must_be_in_the_claims_or_the_tail() {
    let h = history();
    // Cut at 5: two constraints before it; the one at 6 is in the tail, not probed.
    let claims = [claim(
        ClaimKind::Constraint,
        "Read-only: never change records.",
        1,
    )];
    let p = probe(&h, Seq(5), &claims, &h[5..]);
    assert_eq!(p.constraints, Share { kept: 1, total: 2 });
    // The tail can hold one whole.
    let p = probe(&h, Seq(3), &claims, &h[3..]);
    assert_eq!(p.constraints, Share { kept: 1, total: 1 });
    // A paraphrase is not the constraint.
    let p = probe(
        &h,
        Seq(3),
        &[claim(ClaimKind::Constraint, "read only", 1)],
        &[],
    );
    assert_eq!(p.constraints, Share { kept: 0, total: 1 });
}

#[test]
fn the_last_finding_through_the_cut_must_be_present() {
    let h = history();
    let with = [claim(
        ClaimKind::Verified,
        "Verified: the zone file has a typo. (evidence: Bash dig)",
        5,
    )];
    assert_eq!(
        probe(&h, Seq(5), &with, &[]).findings,
        Share { kept: 1, total: 1 }
    );
    // Only the last one counts: the earlier finding at 3 is not asked for.
    assert_eq!(
        probe(&h, Seq(6), &with, &[]).findings,
        Share { kept: 1, total: 1 }
    );
    assert_eq!(
        probe(&h, Seq(3), &with, &[]).findings,
        Share { kept: 0, total: 1 }
    );
    assert_eq!(
        probe(&h, Seq(3), &[], &h[2..]).findings,
        Share { kept: 1, total: 1 }
    );
    assert_eq!(probe(&h, Seq(2), &[], &[]).findings, Share::default());
}

#[test]
fn sources_must_resolve_to_the_history() {
    let h = history();
    let claims = [
        claim(ClaimKind::Note, "a", 1),
        claim(ClaimKind::Note, "b", 6),
        claim(ClaimKind::Note, "c", 0),
        claim(ClaimKind::Note, "d", 7),
    ];
    assert_eq!(
        probe(&h, Seq(6), &claims, &[]).sources,
        Share { kept: 2, total: 4 }
    );
    assert_eq!(probe(&[], Seq(0), &[], &[]), Probes::default());
}

#[test]
fn probes_add_up() {
    let h = history();
    let mut total = Probes::default();
    total += probe(&h, Seq(5), &[], &[]);
    total += probe(&h, Seq(6), &[], &[]);
    assert_eq!(total.constraints, Share { kept: 0, total: 5 });
    assert_eq!(total.findings, Share { kept: 0, total: 2 });
    let json = serde_json::to_string(&total).unwrap();
    assert!(
        json.starts_with(r#"{"constraints":{"kept":0,"total":5}"#),
        "{json}"
    );
}
