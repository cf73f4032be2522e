//! [`bound`]: the working state fitted under a token cap, ranked, the rest left behind one line.
//!
//! The cap is in tokens of the run's tokenizer, counted on the state as context assembly renders
//! it ([`baton_core::context::render_state`]). The current task, the next step and pinned claims
//! are always kept. Then, in two tiers:
//!
//! 1. **What the continuation cannot do without**, in this order, as far as the cap goes: every
//!    instruction (newest first; a long one shortened to 300 characters before it is left out),
//!    the plan's items in progress and pending, the unresolved problems (newest first), the files
//!    created, modified or deleted (newest first).
//! 2. **The rest**, each section within a share of what tier 1 left — commands 30% (newest first;
//!    one over 400 characters shortened before it is left out), read files 15% (most touched
//!    first), resolved problems 10%, constraints 10%, verified findings 8%, completed plan items
//!    6%, repository events 6%, reported findings 5%, and 10% for failed approaches, rejected
//!    designs, lessons, hypotheses, pending calls, artifacts and notes; a share a section does
//!    not use goes to the others, in that order.
//!
//! What is left out is counted, section by section, in one note (`not shown: +41 files, …`) that
//! says how to recall it; the counts carry over from one version to the next.

use baton_core::context::{render_claim, render_state};
use baton_core::tokens::TokenCounter;
use baton_core::{Claim, ClaimKind, Seq, Status};

use super::{EVICTED_SUBJECT, Item, WorkingState, outcome};

/// A state fitted under its cap.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounded {
    /// The claims, in the order context assembly renders them.
    pub claims: Vec<Claim>,
    /// Their rendering's tokens, counted with the run's tokenizer.
    pub tokens: u64,
    /// Items this bound left out (before it, earlier versions left out more: their note says).
    pub evicted: u64,
}

/// One section's candidates: the claims in display order, each with its tier, and the order to
/// keep them in.
struct Section {
    kind: ClaimKind,
    /// The share of tier 2's room.
    share: f64,
    claims: Vec<Claim>,
    tier: Vec<u8>,
    /// A shorter form of a claim, tried before it is left out.
    short: Vec<Option<Claim>>,
    rank: Vec<usize>,
    kept: Vec<Option<bool>>,
}

impl Section {
    fn new(
        kind: ClaimKind,
        share: f64,
        claims: Vec<Claim>,
        tier: Vec<u8>,
        rank: Vec<usize>,
    ) -> Section {
        let n = claims.len();
        Section {
            kind,
            share,
            claims,
            tier,
            short: vec![None; n],
            rank,
            kept: vec![None; n],
        }
    }

    /// A section of one tier, in display order newest first.
    fn newest_first(kind: ClaimKind, tier: u8, share: f64, items: &[Item]) -> Section {
        let claims: Vec<Claim> = items
            .iter()
            .rev()
            .map(|i| Claim::new(kind, i.text.clone(), i.seq))
            .collect();
        let n = claims.len();
        Section::new(kind, share, claims, vec![tier; n], (0..n).collect())
    }

    /// Gives every claim longer than `max` characters a shortened form naming its seq.
    fn shortened(mut self, max: usize, note: &str) -> Section {
        for (i, claim) in self.claims.iter().enumerate() {
            if claim.text.chars().count() > max {
                let text = format!(
                    "{} [{note}: recall seq {}]",
                    outcome::clip(claim.text.lines().next().unwrap_or_default(), max),
                    claim.source_seq
                );
                let mut short = claim.clone();
                short.text = text;
                self.short[i] = Some(short);
            }
        }
        self
    }
}

/// Fits `state` (covering history through `coverage`) under `cap` tokens as `counter` counts
/// them. See the module docs.
pub fn bound(state: &WorkingState, coverage: Seq, cap: u64, counter: &dyn TokenCounter) -> Bounded {
    let cost = |c: &Claim| u64::from(counter.count_text(&render_claim(c))) + 1;
    let heading = |k: ClaimKind| u64::from(counter.count_text(&format!("## {}\n", k.heading())));

    let mut fixed: Vec<Claim> = Vec::new();
    if let Some(task) = state.current_task() {
        fixed.push(Claim::new(
            ClaimKind::Goal,
            outcome::clip(&task.text, 300),
            task.seq,
        ));
    }
    if let Some(next) = &state.next_step {
        fixed.push(Claim::new(
            ClaimKind::NextStep,
            outcome::clip(&next.text, 300),
            next.seq,
        ));
    }
    fixed.extend(state.pinned.iter().cloned());

    let mut sections = sections(state);
    let header = u64::from(counter.count_text(&render_state(coverage, &[])));
    let fixed_cost: u64 = fixed.iter().map(cost).sum::<u64>()
        + [ClaimKind::Goal, ClaimKind::NextStep]
            .iter()
            .map(|k| heading(*k))
            .sum::<u64>();
    let mut kinds: Vec<ClaimKind> = sections
        .iter()
        .filter(|s| !s.claims.is_empty())
        .map(|s| s.kind)
        .collect();
    kinds.dedup();
    let headings: u64 = kinds.iter().map(|k| heading(*k)).sum();
    // Room for the note on what is left out.
    let notes_room = 60;
    let room = cap.saturating_sub(header + fixed_cost + headings + notes_room);

    // Tier 1, in order, as far as the room goes.
    let mut used = 0;
    for section in &mut sections {
        used += take(section, 1, room.saturating_sub(used), &cost, false);
    }
    // Tier 2: shares of what is left, then what those leave, in order.
    let rest = room.saturating_sub(used);
    let mut leftover = 0u64;
    for section in &mut sections {
        let allowance = (rest as f64 * section.share) as u64;
        let spent = take(section, 2, allowance, &cost, false);
        leftover += allowance.saturating_sub(spent);
    }
    for section in &mut sections {
        let spent = take(section, 2, leftover, &cost, true);
        leftover = leftover.saturating_sub(spent);
    }

    // Assemble, then trim until the exact count fits.
    loop {
        let claims = assemble(state, &fixed, &sections);
        let tokens = u64::from(counter.count_text(&render_state(coverage, &claims)));
        let evicted: u64 = sections
            .iter()
            .map(|s| s.kept.iter().filter(|k| **k != Some(true)).count() as u64)
            .sum();
        if tokens <= cap || !drop_last(&mut sections) {
            return Bounded {
                claims,
                tokens,
                evicted,
            };
        }
    }
}

/// Keeps the section's candidates of `tier`, in rank order, while they fit in `allowance`;
/// returns the tokens used. With `more`, looks again at what an earlier pass left out.
fn take(
    section: &mut Section,
    tier: u8,
    allowance: u64,
    cost: &dyn Fn(&Claim) -> u64,
    more: bool,
) -> u64 {
    let mut used = 0;
    for &i in &section.rank {
        if section.tier[i] != tier || section.kept[i] == Some(true) {
            continue;
        }
        if !more && section.kept[i] == Some(false) {
            continue;
        }
        let full = cost(&section.claims[i]);
        if used + full <= allowance {
            used += full;
            section.kept[i] = Some(true);
            continue;
        }
        if let Some(short) = &section.short[i] {
            let c = cost(short);
            if used + c <= allowance {
                used += c;
                section.claims[i] = short.clone();
                section.short[i] = None;
                section.kept[i] = Some(true);
                continue;
            }
        }
        section.kept[i] = Some(false);
    }
    used
}

/// Leaves out the lowest-ranked kept claim: tier 2 before tier 1, the last section first;
/// `false` when nothing is left to leave out.
fn drop_last(sections: &mut [Section]) -> bool {
    for tier in [2, 1] {
        for section in sections.iter_mut().rev() {
            if let Some(&i) = section
                .rank
                .iter()
                .rev()
                .find(|&&i| section.tier[i] == tier && section.kept[i] == Some(true))
            {
                section.kept[i] = Some(false);
                return true;
            }
        }
    }
    false
}

/// The claims to install: the fixed ones and every kept one, in render order, and one note
/// counting what each section left out.
fn assemble(state: &WorkingState, fixed: &[Claim], sections: &[Section]) -> Vec<Claim> {
    let mut claims: Vec<Claim> = fixed.to_vec();
    let instructions: Vec<&str> = sections
        .iter()
        .filter(|s| s.kind == ClaimKind::Instruction)
        .flat_map(|s| {
            s.claims
                .iter()
                .zip(&s.kept)
                .filter(|(_, k)| **k == Some(true))
                .map(|(c, _)| c.text.as_str())
        })
        .collect();
    let mut left: Vec<(ClaimKind, u64)> = state.evicted.iter().map(|(k, n)| (*k, *n)).collect();
    let mut newest = Seq::ZERO;
    for section in sections {
        let mut left_out = 0;
        for (claim, kept) in section.claims.iter().zip(&section.kept) {
            // A constraint an instruction shown already holds word for word is not repeated.
            let shown = section.kind == ClaimKind::Constraint
                && instructions.iter().any(|i| i.contains(&claim.text));
            match kept {
                Some(true) if !shown => claims.push(claim.clone()),
                Some(true) => {}
                _ => {
                    left_out += 1;
                    newest = newest.max(claim.source_seq);
                }
            }
        }
        if left_out > 0 {
            match left.iter_mut().find(|(k, _)| *k == section.kind) {
                Some((_, n)) => *n += left_out,
                None => left.push((section.kind, left_out)),
            }
        }
    }
    left.retain(|(_, n)| *n > 0);
    if !left.is_empty() {
        left.sort_by_key(|(k, _)| ClaimKind::ALL.iter().position(|x| x == k));
        let counts: Vec<String> = left
            .iter()
            .map(|(k, n)| format!("+{n} {}", label(*k)))
            .collect();
        let seq = if newest == Seq::ZERO {
            claims.iter().map(|c| c.source_seq).max().unwrap_or(Seq(1))
        } else {
            newest
        };
        claims.push(
            Claim::new(
                ClaimKind::Note,
                format!(
                    "not shown (recall their seqs, or search with recall --grep): {}",
                    counts.join(", ")
                ),
                seq.max(Seq(1)),
            )
            .with_subject(EVICTED_SUBJECT.trim_end_matches(':')),
        );
    }
    // Render order: by kind, keeping each section's own order.
    claims.sort_by_key(|c| ClaimKind::ALL.iter().position(|k| *k == c.kind));
    claims
}

/// The word the eviction note counts a kind's items with.
pub(crate) fn label(kind: ClaimKind) -> &'static str {
    match kind {
        ClaimKind::Instruction => "instructions",
        ClaimKind::Constraint => "constraints",
        ClaimKind::Task => "plan items",
        ClaimKind::Problem => "problems",
        ClaimKind::File => "files",
        ClaimKind::Command => "commands",
        ClaimKind::Verified => "verified findings",
        ClaimKind::Reported => "reported findings",
        ClaimKind::Repo => "repository events",
        ClaimKind::Hypothesis => "hypotheses",
        ClaimKind::FailedApproach => "failed approaches",
        ClaimKind::Rejected => "rejected designs",
        ClaimKind::Lesson => "lessons",
        ClaimKind::Pending => "pending operations",
        ClaimKind::Artifact => "artifacts",
        ClaimKind::Note => "notes",
        ClaimKind::Goal => "current tasks",
        ClaimKind::NextStep => "next steps",
    }
}

/// Every section's candidates, in priority order (tier 1's order first).
fn sections(state: &WorkingState) -> Vec<Section> {
    let mut out = Vec::new();

    out.push(
        Section::newest_first(ClaimKind::Instruction, 1, 0.0, &state.instructions)
            .shortened(300, "shortened"),
    );

    // The plan, in its own order: in progress and pending are tier 1, completed tier 2.
    let tasks: Vec<Claim> = state
        .tasks
        .iter()
        .map(|t| Claim::new(ClaimKind::Task, t.text.clone(), t.seq).with_status(t.status))
        .collect();
    let tiers: Vec<u8> = tasks
        .iter()
        .map(|t| {
            if t.status == Some(Status::Completed) {
                2
            } else {
                1
            }
        })
        .collect();
    let mut rank: Vec<usize> = (0..tasks.len()).collect();
    rank.sort_by_key(|&i| match tasks[i].status {
        Some(Status::InProgress) => 0,
        Some(Status::Pending) => 1,
        _ => 2,
    });
    out.push(Section::new(ClaimKind::Task, 0.06, tasks, tiers, rank));

    // Problems, unresolved first, each newest first.
    let mut problems: Vec<&super::Problem> = state.problems.iter().collect();
    problems.sort_by(|a, b| {
        a.resolved
            .is_some()
            .cmp(&b.resolved.is_some())
            .then(b.seq.cmp(&a.seq))
    });
    let claims: Vec<Claim> = problems
        .iter()
        .map(|p| {
            let status = if p.resolved.is_some() {
                Status::Resolved
            } else {
                Status::Unresolved
            };
            Claim::new(ClaimKind::Problem, p.text.clone(), p.seq)
                .with_status(status)
                .with_subject(p.check.clone())
        })
        .collect();
    let tiers = problems
        .iter()
        .map(|p| if p.resolved.is_some() { 2 } else { 1 })
        .collect();
    let rank = (0..claims.len()).collect();
    out.push(
        Section::new(ClaimKind::Problem, 0.10, claims, tiers, rank).shortened(400, "shortened"),
    );

    // Files: written ones newest first (tier 1), then read ones most touched first (tier 2).
    let mut files: Vec<&super::File> = state.files.iter().collect();
    let written = |f: &super::File| f.role != Status::Read;
    files.sort_by(|a, b| {
        written(b).cmp(&written(a)).then_with(|| match written(a) {
            true => b.seq.cmp(&a.seq),
            false => b.touches.cmp(&a.touches).then(b.seq.cmp(&a.seq)),
        })
    });
    let claims: Vec<Claim> = files
        .iter()
        .map(|f| {
            let text = match &f.intent {
                Some(why) => format!("{} — {why}", f.path),
                None => f.path.clone(),
            };
            Claim::new(ClaimKind::File, text, f.seq)
                .with_status(f.role)
                .with_subject(f.path.clone())
        })
        .collect();
    let tiers = files
        .iter()
        .map(|f| if written(f) { 1 } else { 2 })
        .collect();
    let rank = (0..claims.len()).collect();
    out.push(Section::new(ClaimKind::File, 0.15, claims, tiers, rank));

    out.push(
        Section::newest_first(ClaimKind::Command, 2, 0.30, &state.commands)
            .shortened(400, "shortened"),
    );
    out.push(Section::newest_first(
        ClaimKind::Constraint,
        2,
        0.10,
        &state.constraints,
    ));
    out.push(Section::newest_first(
        ClaimKind::Verified,
        2,
        0.08,
        &state.verified,
    ));
    out.push(Section::newest_first(ClaimKind::Repo, 2, 0.06, &state.repo));
    out.push(Section::newest_first(
        ClaimKind::Reported,
        2,
        0.05,
        &state.reported,
    ));
    out.push(Section::newest_first(
        ClaimKind::FailedApproach,
        2,
        0.02,
        &state.failed,
    ));
    out.push(Section::newest_first(
        ClaimKind::Rejected,
        2,
        0.02,
        &state.rejected,
    ));
    out.push(Section::newest_first(
        ClaimKind::Lesson,
        2,
        0.02,
        &state.lessons,
    ));
    out.push(Section::newest_first(
        ClaimKind::Hypothesis,
        2,
        0.01,
        &state.hypotheses,
    ));
    out.push(Section::newest_first(
        ClaimKind::Pending,
        2,
        0.01,
        &state.pending,
    ));
    out.push(Section::newest_first(
        ClaimKind::Artifact,
        2,
        0.01,
        &state.artifacts,
    ));
    out.push(Section::newest_first(
        ClaimKind::Note,
        2,
        0.01,
        &state.notes,
    ));
    out
}

#[cfg(test)]
mod tests {
    use baton_core::tokens::ByteEstimate;

    use super::*;

    fn item(text: &str, seq: u64) -> Item {
        Item {
            text: text.to_owned(),
            seq: Seq(seq),
        }
    }

    #[test]
    fn a_big_state_stays_under_its_cap_and_says_what_it_left_out() {
        let mut state = WorkingState::default();
        for i in 1..=300u64 {
            state
                .commands
                .push(item(&format!("cargo test -p crate-{i} -- --nocapture"), i));
            state.files.push(super::super::File {
                path: format!("/repo/src/module_{i}.rs"),
                role: if i % 30 == 0 {
                    Status::Modified
                } else {
                    Status::Read
                },
                seq: Seq(i),
                touches: 1,
                intent: None,
            });
        }
        state
            .instructions
            .push(item("fix the flaky test, and do not commit", 2));
        let bounded = bound(&state, Seq(300), 1_000, &ByteEstimate);
        assert!(bounded.tokens <= 1_000, "{}", bounded.tokens);
        assert!(bounded.evicted > 400, "{}", bounded.evicted);
        let text = render_state(Seq(300), &bounded.claims);
        assert!(
            text.contains("fix the flaky test, and do not commit"),
            "{text}"
        );
        assert!(text.contains("not shown"), "{text}");
        assert!(text.contains("files"), "{text}");
        // Modified files before read ones; the newest command first.
        let files: Vec<&Claim> = bounded
            .claims
            .iter()
            .filter(|c| c.kind == ClaimKind::File)
            .collect();
        assert_eq!(files[0].status, Some(Status::Modified));
        assert_eq!(files[0].text, "/repo/src/module_300.rs");
        let commands: Vec<&Claim> = bounded
            .claims
            .iter()
            .filter(|c| c.kind == ClaimKind::Command)
            .collect();
        assert_eq!(commands[0].text, "cargo test -p crate-300 -- --nocapture");
        baton_core::claim::validate_sources(&bounded.claims, Seq(300), Seq(300)).unwrap();
    }

    #[test]
    fn eviction_counts_carry_over() {
        let mut state = WorkingState::default();
        for i in 1..=50u64 {
            state
                .commands
                .push(item(&format!("echo {i} {}", "x".repeat(60)), i));
        }
        let first = bound(&state, Seq(50), 400, &ByteEstimate);
        let left: u64 = first.evicted;
        assert!(left > 0);
        let again = WorkingState::from_claims(&first.claims, &[]);
        let second = bound(&again, Seq(50), 400, &ByteEstimate);
        let note = second
            .claims
            .iter()
            .find(|c| c.subject.as_deref() == Some("evicted"))
            .expect("a note");
        assert!(
            note.text.ends_with(&format!(": +{left} commands")),
            "{}",
            note.text
        );
    }

    #[test]
    fn long_instructions_are_shortened_before_they_are_left_out() {
        let mut state = WorkingState::default();
        state.instructions.push(item(&"please ".repeat(150), 1));
        state.instructions.push(item("now ship it", 5));
        let bounded = bound(&state, Seq(5), 260, &ByteEstimate);
        let instructions: Vec<&Claim> = bounded
            .claims
            .iter()
            .filter(|c| c.kind == ClaimKind::Instruction)
            .collect();
        assert_eq!(instructions.len(), 2, "{:#?}", bounded.claims);
        assert_eq!(instructions[0].text, "now ship it");
        assert!(instructions[1].text.ends_with("[shortened: recall seq 1]"));
        assert!(bounded.tokens <= 260);
    }
}
