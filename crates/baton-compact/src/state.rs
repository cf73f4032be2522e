//! The working state: what a run is doing, read from the transcript's structure, kept bounded.
//!
//! A run's working state is the claim list of its active summary version. Each compaction reads
//! the messages it covers and updates the state it builds on ([`WorkingState::observe`]); then
//! [`bound`] fits it under a token cap, ranked, and the claims are installed as the next
//! version. Everything is read from structure first — who typed what, which tool was called with
//! which input, what its result said — and from keywords only where no structure exists:
//!
//! | section (claim kind) | what it holds |
//! |---|---|
//! | current task (`goal`) | the plan's item in progress, else the newest instruction |
//! | `instruction` | every message the user typed (`input`), verbatim, newest first; a slash command as typed; one over 1,000 characters keeps its first 600 and names its seq |
//! | `constraint` | the user's sentences with an imperative marker, verbatim (shown only when no instruction shown already holds them) |
//! | `task` | the latest plan the agent wrote with its own todo tool (`TodoWrite`, Codex `update_plan`), item by item with its status |
//! | `problem` | a failed tool result (error flag or non-zero exit; not exploration that found nothing), named by its check and the line that says why; resolved by a later success of the same check (the same command, or the same tool on the same file), or by a successful write of a file the failure named followed by a successful command |
//! | `file` | files by role from tool inputs: created, modified, deleted (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`, `apply_patch`, `str_replace_editor`, shell redirects and `rm`/`mv`/`cp`/`touch`/`sed -i` where certain) apart from read; one canonical path per file (`paths`), citing the seq that last touched it |
//! | `command` | every shell command run, whole (multi-line ones too), newest first |
//! | `verified` | only what a tool result shows: a check command whose output says it passed |
//! | `reported` | what the agent says it found or did, with no such result (never promoted) |
//! | `repo` | commits and pushes, from their commands' output |
//! | `hypothesis`, `failed_approach` | the agent's hedged beliefs; a later statement refuting one turns it into `refuted: … (by seq N)` |
//! | `pending` | tool calls that never got a result |
//! | `artifact` | URLs |
//! | `next_step` | the item in progress, else the agent's last plan sentence that is not a heading |
//!
//! A model summarizer adds what only a model can write (rejected designs, problem → cause → fix,
//! per-file intent, lessons, a next step with its rationale); [`WorkingState::with_model`]
//! merges the exact lists above into what it wrote, so a model can never drop them.
//!
//! **Pins.** A claim citing a pinned seq is always kept, unchanged.
//!
//! ```
//! use baton_compact::state::{WorkingState, bound};
//! use baton_core::tokens::ByteEstimate;
//! use baton_core::{Entry, Message, Role, Seq, Timestamp, ClaimKind};
//! let entry = |seq, role, text: &str| Entry { seq: Seq(seq), message: Message::text(role, text), tokens: 10, created_at: Timestamp(0) };
//! let old = [
//!     entry(1, Role::User, "Fix the login bug. important: do not commit until the end."),
//!     entry(2, Role::Assistant, "Let me look at the session code."),
//! ];
//! let mut state = WorkingState::from_claims(&[], &[]);
//! state.observe(&old);
//! let bounded = bound(&state, Seq(2), 2_000, &ByteEstimate);
//! assert_eq!(bounded.claims[0].kind, ClaimKind::Goal);
//! assert!(bounded.claims.iter().any(|c| c.kind == ClaimKind::Instruction
//!     && c.text == "Fix the login bug. important: do not commit until the end."));
//! assert!(bounded.tokens <= 2_000);
//! ```

mod bound;
pub(crate) mod detect;
pub(crate) mod input;
mod observe;
pub(crate) mod outcome;
pub(crate) mod paths;
pub(crate) mod shell;

use std::collections::BTreeMap;

use baton_core::{Claim, ClaimKind, Seq, Status};

/// An instruction this short is the current task in its own words; a longer one is named by
/// its seq (the instructions section holds it whole, and the state is not paid for twice).
const SHORT_TASK_CHARS: usize = 160;

pub use bound::{Bounded, bound};

/// The prefix of the claim that records a refuted hypothesis.
pub const REFUTED_PREFIX: &str = "refuted: ";

/// The `subject` of the note that counts what the bound left out, section by section.
pub const EVICTED_SUBJECT: &str = "evicted";

/// Instructions longer than this keep their first [`INSTRUCTION_HEAD`] characters.
pub const INSTRUCTION_CHARS: usize = 1_000;

/// What a clipped instruction keeps.
pub const INSTRUCTION_HEAD: usize = 600;

/// A line of a section: its text and the seq it rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) text: String,
    pub(crate) seq: Seq,
}

/// An item of the agent's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Task {
    pub(crate) text: String,
    pub(crate) status: Status,
    pub(crate) seq: Seq,
}

/// A file the run touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct File {
    /// The canonical spelling.
    pub(crate) path: String,
    pub(crate) role: Status,
    /// The seq that last touched it.
    pub(crate) seq: Seq,
    /// How often it was touched (ranks read files).
    pub(crate) touches: u32,
    /// Why it changed, when a model said.
    pub(crate) intent: Option<String>,
}

/// A failed check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    /// The check: a command, or a tool and its target.
    pub(crate) check: String,
    /// As shown: the check and the line that says why (and, resolved, where).
    pub(crate) text: String,
    /// Where it failed.
    pub(crate) seq: Seq,
    pub(crate) resolved: Option<Seq>,
    /// Files the failure names (and a failed edit's target).
    pub(crate) files: Vec<String>,
    /// A file it names was written successfully since it failed.
    pub(crate) fixed: bool,
}

/// A run's working state, typed by section. Built from a version's claims
/// ([`from_claims`](Self::from_claims)), updated by the messages a compaction covers
/// ([`observe`](Self::observe)), and turned back into claims under a cap by [`bound`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkingState {
    pub(crate) instructions: Vec<Item>,
    pub(crate) constraints: Vec<Item>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) problems: Vec<Problem>,
    pub(crate) files: Vec<File>,
    pub(crate) commands: Vec<Item>,
    pub(crate) verified: Vec<Item>,
    pub(crate) reported: Vec<Item>,
    pub(crate) repo: Vec<Item>,
    pub(crate) hypotheses: Vec<Item>,
    pub(crate) failed: Vec<Item>,
    pub(crate) rejected: Vec<Item>,
    pub(crate) lessons: Vec<Item>,
    pub(crate) pending: Vec<Item>,
    pub(crate) artifacts: Vec<Item>,
    pub(crate) notes: Vec<Item>,
    pub(crate) next_step: Option<Item>,
    /// The current task as the base version said it: kept when nothing newer names one.
    pub(crate) goal: Option<Item>,
    /// Items the bound left out, per section, over the run's life.
    pub(crate) evicted: BTreeMap<ClaimKind, u64>,
    /// Claims citing a pinned seq: carried unchanged.
    pub(crate) pinned: Vec<Claim>,
}

impl WorkingState {
    /// The state a version's claims describe; `pins` are the run's pinned seqs (claims citing
    /// them are carried unchanged).
    pub fn from_claims(claims: &[Claim], pins: &[Seq]) -> WorkingState {
        let mut state = WorkingState::default();
        for claim in claims {
            if pins.contains(&claim.source_seq) {
                state.pinned.push(claim.clone());
                continue;
            }
            let item = || Item {
                text: claim.text.clone(),
                seq: claim.source_seq,
            };
            match claim.kind {
                // Derived again from the plan and the instructions, when they name one.
                ClaimKind::Goal => state.goal = Some(item()),
                ClaimKind::Instruction => state.instructions.push(item()),
                ClaimKind::Constraint => state.constraints.push(item()),
                ClaimKind::Task => state.tasks.push(Task {
                    text: claim.text.clone(),
                    status: claim.status.unwrap_or(Status::Pending),
                    seq: claim.source_seq,
                }),
                ClaimKind::Problem => {
                    let check = claim.subject.clone().unwrap_or_else(|| claim.text.clone());
                    let mut files = Vec::new();
                    crate::audit::scan::text_facts(&claim.text, false, &mut |fact, text| {
                        if fact == crate::audit::scan::Fact::Path {
                            files.push(paths::normalize(text));
                        }
                    });
                    state.problems.push(Problem {
                        check,
                        text: claim.text.clone(),
                        seq: claim.source_seq,
                        resolved: (claim.status == Some(Status::Resolved))
                            .then_some(claim.source_seq),
                        files,
                        fixed: false,
                    });
                }
                ClaimKind::File => {
                    let path = claim.subject.clone().unwrap_or_else(|| claim.text.clone());
                    let intent = claim
                        .text
                        .split_once(" — ")
                        .map(|(_, why)| why.to_owned())
                        .filter(|why| !why.is_empty());
                    state.files.push(File {
                        path,
                        role: claim.status.unwrap_or(Status::Read),
                        seq: claim.source_seq,
                        touches: 1,
                        intent,
                    });
                }
                ClaimKind::Command => state.commands.push(item()),
                ClaimKind::Verified => state.verified.push(item()),
                ClaimKind::Reported => state.reported.push(item()),
                ClaimKind::Repo => state.repo.push(item()),
                ClaimKind::Hypothesis => state.hypotheses.push(item()),
                ClaimKind::FailedApproach => state.failed.push(item()),
                ClaimKind::Rejected => state.rejected.push(item()),
                ClaimKind::Lesson => state.lessons.push(item()),
                ClaimKind::Pending => state.pending.push(item()),
                ClaimKind::Artifact => state.artifacts.push(item()),
                ClaimKind::NextStep => state.next_step = Some(item()),
                ClaimKind::Note if claim.subject.as_deref() == Some(EVICTED_SUBJECT) => {
                    for (kind, n) in evicted_counts(&claim.text) {
                        *state.evicted.entry(kind).or_default() += n;
                    }
                }
                ClaimKind::Note => state.notes.push(item()),
            }
        }
        // Stored newest first where rendered so; kept in seq order here.
        for list in [
            &mut state.instructions,
            &mut state.commands,
            &mut state.verified,
            &mut state.reported,
            &mut state.repo,
        ] {
            list.sort_by_key(|i| i.seq);
        }
        state.problems.sort_by_key(|p| p.seq);
        state
    }

    /// The current task: the plan's item in progress, else the newest instruction (itself when
    /// short; a long one is named by its seq, as the instructions section shows it whole), else
    /// what the base version said.
    pub(crate) fn current_task(&self) -> Option<Item> {
        if let Some(task) = self.tasks.iter().find(|t| t.status == Status::InProgress) {
            return Some(Item {
                text: task.text.clone(),
                seq: task.seq,
            });
        }
        self.instructions
            .last()
            .map(|i| Item {
                text: if i.text.chars().count() <= SHORT_TASK_CHARS {
                    i.text.clone()
                } else {
                    format!("the user's newest instruction (seq {})", i.seq)
                },
                seq: i.seq,
            })
            .or_else(|| self.goal.clone())
    }

    /// The state with what a model summarizer wrote merged in: the exact lists of this state
    /// (instructions, plan, files, problems, commands, verified findings, repository) stay as
    /// they are whatever the model wrote; the model adds what only it can write — rejected
    /// designs, lessons, hypotheses, failed approaches, notes, constraints — a file's intent (by
    /// path), a problem's cause and fix (by check; the status stays this state's), problems it
    /// knows resolved that this state does not hold, and its next step. A model's `verified`
    /// claim is kept as `reported`: only a tool result verifies.
    pub fn with_model(mut self, model: &[Claim]) -> WorkingState {
        let item = |c: &Claim| Item {
            text: c.text.clone(),
            seq: c.source_seq,
        };
        let push = |list: &mut Vec<Item>, c: &Claim| {
            if !list.iter().any(|i| i.text == c.text) {
                list.push(item(c));
            }
        };
        for claim in model {
            match claim.kind {
                ClaimKind::Rejected => push(&mut self.rejected, claim),
                ClaimKind::Lesson => push(&mut self.lessons, claim),
                ClaimKind::Hypothesis => push(&mut self.hypotheses, claim),
                ClaimKind::FailedApproach => push(&mut self.failed, claim),
                ClaimKind::Note => push(&mut self.notes, claim),
                ClaimKind::Constraint => push(&mut self.constraints, claim),
                ClaimKind::Pending => push(&mut self.pending, claim),
                ClaimKind::Artifact => push(&mut self.artifacts, claim),
                ClaimKind::Verified | ClaimKind::Reported => push(&mut self.reported, claim),
                ClaimKind::NextStep => self.next_step = Some(item(claim)),
                ClaimKind::File => {
                    let path = claim.subject.as_deref().unwrap_or(&claim.text);
                    let path = path.split(" — ").next().unwrap_or(path);
                    let why = claim
                        .text
                        .split_once(" — ")
                        .map_or(claim.text.as_str(), |(_, why)| why);
                    if let Some(file) = self
                        .files
                        .iter_mut()
                        .find(|f| paths::same_file(&f.path, &paths::normalize(path)))
                        && why != file.path
                        && !why.is_empty()
                    {
                        file.intent = Some(why.to_owned());
                    }
                }
                ClaimKind::Problem => {
                    let check = claim.subject.as_deref().unwrap_or_default();
                    match self
                        .problems
                        .iter_mut()
                        .find(|p| !check.is_empty() && p.check == check)
                    {
                        Some(problem) => {
                            problem.text = match problem.resolved {
                                Some(at) if !claim.text.contains("resolved") => {
                                    format!("{} — resolved at seq {at}", claim.text)
                                }
                                _ => claim.text.clone(),
                            };
                        }
                        None if claim.status == Some(Status::Resolved) => {
                            self.problems.push(Problem {
                                check: check.to_owned(),
                                text: claim.text.clone(),
                                seq: claim.source_seq,
                                resolved: Some(claim.source_seq),
                                files: Vec::new(),
                                fixed: false,
                            });
                        }
                        // An unresolved problem this state does not hold: a model's reading,
                        // kept as a note rather than as an open problem nothing can close.
                        None => push(&mut self.notes, claim),
                    }
                }
                // Exact lists: this state's stand.
                ClaimKind::Goal
                | ClaimKind::Instruction
                | ClaimKind::Task
                | ClaimKind::Command
                | ClaimKind::Repo => {}
            }
        }
        self.problems.sort_by_key(|p| p.seq);
        self
    }
}

/// The counts an eviction note holds (`…: +64 commands, +5 problems`), by kind.
fn evicted_counts(text: &str) -> Vec<(ClaimKind, u64)> {
    let list = text.rsplit_once(": ").map_or(text, |(_, list)| list);
    list.split(", ")
        .filter_map(|part| {
            let (n, label) = part.trim().strip_prefix('+')?.split_once(' ')?;
            let kind = ClaimKind::ALL
                .iter()
                .find(|k| bound::label(**k) == label.trim())?;
            Some((*kind, n.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests;
