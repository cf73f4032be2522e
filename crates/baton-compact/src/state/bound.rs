//! [`bound`]: the working state fitted under a token cap, ranked, the rest left behind one line.
//!
//! The cap is in tokens of the run's tokenizer, counted on the state as context assembly renders
//! it ([`baton_core::context::render_state`]). The current task, the next step and pinned claims
//! are always kept. Every other section has a share of what is left:
//!
//! | section | share | ranked |
//! |---|---|---|
//! | instructions | 28% | newest first (an old one is shortened to 300 characters before it is left out) |
//! | commands | 12% | newest first |
//! | problems | 12% | unresolved first, then newest first |
//! | files | 12% | created, modified and deleted before read; then newest first (read files: most touched first) |
//! | plan | 10% | in progress, pending, completed |
//! | verified, repository, constraints, reported | 4%, 3%, 6%, 3% | newest first |
//! | the rest | 9% | newest first |
//!
//! A share a section does not use goes to the others, in the order above. What is left out is
//! counted, section by section, in one note (`+41 more files: …`) that says how to recall it;
//! the counts carry over from one version to the next.

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
    /// Items this bound left out (before it, earlier versions left out more: their notes say).
    pub evicted: u64,
}

/// One section's candidates: the claims in display order, and the order to keep them in.
struct Section {
    kind: ClaimKind,
    share: f64,
    claims: Vec<Claim>,
    /// A shorter form of a claim, tried before it is left out.
    short: Vec<Option<Claim>>,
    rank: Vec<usize>,
    kept: Vec<Option<bool>>,
}

impl Section {
    fn new(kind: ClaimKind, share: f64, claims: Vec<Claim>, rank: Vec<usize>) -> Section {
        let n = claims.len();
        Section {
            kind,
            share,
            claims,
            short: vec![None; n],
            rank,
            kept: vec![None; n],
        }
    }

    /// In display order, newest first.
    fn newest_first(kind: ClaimKind, share: f64, items: &[Item]) -> Section {
        let claims: Vec<Claim> = items
            .iter()
            .rev()
            .map(|i| Claim::new(kind, i.text.clone(), i.seq))
            .collect();
        let rank = (0..claims.len()).collect();
        Section::new(kind, share, claims, rank)
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
    let headings: u64 = sections
        .iter()
        .filter(|s| !s.claims.is_empty())
        .map(|s| heading(s.kind))
        .sum();
    // Room for the note on what is left out.
    let notes_room = 40;
    let room = cap.saturating_sub(header + fixed_cost + headings + notes_room);

    // Pass 1: each section within its share; pass 2: what is left, in order.
    let mut leftover = 0u64;
    for section in &mut sections {
        let allowance = (room as f64 * section.share) as u64;
        let used = take(section, allowance, &cost, false);
        leftover += allowance.saturating_sub(used);
    }
    for section in &mut sections {
        let used = take(section, leftover, &cost, true);
        leftover = leftover.saturating_sub(used);
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

/// Keeps the section's next candidates, in rank order, while they fit in `allowance`; returns
/// the tokens used. With `more`, continues after what pass 1 kept.
fn take(section: &mut Section, allowance: u64, cost: &dyn Fn(&Claim) -> u64, more: bool) -> u64 {
    let mut used = 0;
    for &i in &section.rank {
        if section.kept[i] == Some(true) {
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

/// Leaves out the lowest-ranked kept claim of the lowest-priority section that has one;
/// `false` when nothing is left to leave out.
fn drop_last(sections: &mut [Section]) -> bool {
    for section in sections.iter_mut().rev() {
        if let Some(&i) = section
            .rank
            .iter()
            .rev()
            .find(|&&i| section.kept[i] == Some(true))
        {
            section.kept[i] = Some(false);
            return true;
        }
    }
    false
}

/// The claims to install: the fixed ones and every kept one, in render order, and one note per
/// section with something left out.
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
    let mut notes: Vec<Claim> = Vec::new();
    let mut last_seq = Seq::ZERO;
    for section in sections {
        let mut left_out = *state.evicted.get(&section.kind).unwrap_or(&0);
        for (claim, kept) in section.claims.iter().zip(&section.kept) {
            last_seq = last_seq.max(claim.source_seq);
            // A constraint an instruction shown already holds word for word is not repeated.
            let shown = section.kind == ClaimKind::Constraint
                && instructions.iter().any(|i| i.contains(&claim.text));
            match kept {
                Some(true) if !shown => claims.push(claim.clone()),
                Some(true) => {}
                _ => left_out += 1,
            }
        }
        if left_out > 0 {
            let seq = section
                .claims
                .iter()
                .map(|c| c.source_seq)
                .max()
                .or_else(|| claims.iter().map(|c| c.source_seq).max())
                .unwrap_or(Seq(1))
                .max(Seq(1));
            notes.push(
                Claim::new(
                    ClaimKind::Note,
                    format!(
                        "+{left_out} more {} not shown: recall their seqs, or search with recall --grep",
                        label(section.kind)
                    ),
                    seq,
                )
                .with_subject(format!("{EVICTED_SUBJECT}{}", section.kind.as_str())),
            );
        }
    }
    claims.extend(notes);
    // Render order: by kind, keeping each section's own order.
    claims.sort_by_key(|c| ClaimKind::ALL.iter().position(|k| *k == c.kind));
    claims
}

fn label(kind: ClaimKind) -> &'static str {
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
        ClaimKind::Goal | ClaimKind::NextStep => "items",
    }
}

/// Every section's candidates, in priority order.
fn sections(state: &WorkingState) -> Vec<Section> {
    let mut out = Vec::new();

    let mut instructions = Section::newest_first(ClaimKind::Instruction, 0.28, &state.instructions);
    for (i, claim) in instructions.claims.iter().enumerate() {
        if claim.text.chars().count() > 300 {
            let short = format!(
                "{} [shortened: recall seq {}]",
                outcome::clip(&claim.text, 300),
                claim.source_seq
            );
            instructions.short[i] = Some(Claim::new(ClaimKind::Instruction, short, claim.source_seq));
        }
    }
    out.push(instructions);

    out.push(Section::newest_first(ClaimKind::Command, 0.12, &state.commands));

    // Problems: in seq order, newest first; unresolved ranked first.
    let problems: Vec<Claim> = state
        .problems
        .iter()
        .rev()
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
    let mut rank: Vec<usize> = (0..problems.len()).collect();
    rank.sort_by_key(|&i| problems[i].status == Some(Status::Resolved));
    let problems = Section::new(ClaimKind::Problem, 0.12, problems, rank);
    // Display unresolved first too.
    out.push(display_by_rank(problems));

    // Files: written ones newest first, then read ones most touched first.
    let mut files: Vec<&super::File> = state.files.iter().collect();
    files.sort_by(|a, b| {
        let written = |f: &super::File| f.role != Status::Read;
        written(b)
            .cmp(&written(a))
            .then_with(|| match written(a) {
                true => b.seq.cmp(&a.seq),
                false => b.touches.cmp(&a.touches).then(b.seq.cmp(&a.seq)),
            })
    });
    let file_claims: Vec<Claim> = files
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
    let rank = (0..file_claims.len()).collect();
    out.push(Section::new(ClaimKind::File, 0.12, file_claims, rank));

    // The plan, in its own order; kept in progress, pending, completed.
    let tasks: Vec<Claim> = state
        .tasks
        .iter()
        .map(|t| Claim::new(ClaimKind::Task, t.text.clone(), t.seq).with_status(t.status))
        .collect();
    let mut rank: Vec<usize> = (0..tasks.len()).collect();
    rank.sort_by_key(|&i| match tasks[i].status {
        Some(Status::InProgress) => 0,
        Some(Status::Pending) => 1,
        _ => 2,
    });
    out.push(Section::new(ClaimKind::Task, 0.10, tasks, rank));

    out.push(Section::newest_first(ClaimKind::Verified, 0.04, &state.verified));
    out.push(Section::newest_first(ClaimKind::Repo, 0.03, &state.repo));
    out.push(Section::newest_first(ClaimKind::Constraint, 0.06, &state.constraints));
    out.push(Section::newest_first(ClaimKind::Reported, 0.03, &state.reported));
    out.push(Section::newest_first(ClaimKind::FailedApproach, 0.02, &state.failed));
    out.push(Section::newest_first(ClaimKind::Rejected, 0.02, &state.rejected));
    out.push(Section::newest_first(ClaimKind::Lesson, 0.02, &state.lessons));
    out.push(Section::newest_first(ClaimKind::Hypothesis, 0.01, &state.hypotheses));
    out.push(Section::newest_first(ClaimKind::Pending, 0.01, &state.pending));
    out.push(Section::newest_first(ClaimKind::Artifact, 0.005, &state.artifacts));
    out.push(Section::newest_first(ClaimKind::Note, 0.005, &state.notes));
    out
}

/// The section with its claims displayed in rank order.
fn display_by_rank(section: Section) -> Section {
    let claims: Vec<Claim> = section.rank.iter().map(|&i| section.claims[i].clone()).collect();
    let rank = (0..claims.len()).collect();
    Section::new(section.kind, section.share, claims, rank)
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
            state.commands.push(item(&format!("cargo test -p crate-{i} -- --nocapture"), i));
            state.files.push(super::super::File {
                path: format!("/repo/src/module_{i}.rs"),
                role: if i % 3 == 0 { Status::Modified } else { Status::Read },
                seq: Seq(i),
                touches: 1,
                intent: None,
            });
        }
        state.instructions.push(item("fix the flaky test, and do not commit", 2));
        let bounded = bound(&state, Seq(300), 1_000, &ByteEstimate);
        assert!(bounded.tokens <= 1_000, "{}", bounded.tokens);
        assert!(bounded.evicted > 400, "{}", bounded.evicted);
        let text = render_state(Seq(300), &bounded.claims);
        assert!(text.contains("fix the flaky test, and do not commit"), "{text}");
        assert!(text.contains("more files not shown"), "{text}");
        assert!(text.contains("more commands not shown"), "{text}");
        // Modified files before read ones; the newest command first.
        let files: Vec<&Claim> = bounded.claims.iter().filter(|c| c.kind == ClaimKind::File).collect();
        assert_eq!(files[0].status, Some(Status::Modified));
        assert_eq!(files[0].text, "/repo/src/module_300.rs");
        let commands: Vec<&Claim> = bounded.claims.iter().filter(|c| c.kind == ClaimKind::Command).collect();
        assert_eq!(commands[0].text, "cargo test -p crate-300 -- --nocapture");
        baton_core::claim::validate_sources(&bounded.claims, Seq(300), Seq(300)).unwrap();
    }

    #[test]
    fn eviction_counts_carry_over() {
        let mut state = WorkingState::default();
        for i in 1..=50u64 {
            state.commands.push(item(&format!("echo {i} {}", "x".repeat(60)), i));
        }
        let first = bound(&state, Seq(50), 400, &ByteEstimate);
        let left: u64 = first.evicted;
        assert!(left > 0);
        let again = WorkingState::from_claims(&first.claims, &[]);
        let second = bound(&again, Seq(50), 400, &ByteEstimate);
        let note = second
            .claims
            .iter()
            .find(|c| c.subject.as_deref() == Some("evicted:command"))
            .expect("a note");
        assert!(note.text.starts_with(&format!("+{left} more commands")), "{}", note.text);
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
