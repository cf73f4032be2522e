//! Continuity probes: after a compaction, does the context the model receives still hold what
//! the continuation needs? Built from the transcript's structure by code of its own — this
//! crate never calls, copies or imports the extractor it grades (`baton-compact`), and a test
//! fails if it ever depends on it: a figure that grades itself is no figure.
//!
//! Roles:
//! - [`probe`]: `history` is every message of the run when the model call is made (seq
//!   order), `cut` the coverage of the summary or working state (messages at or before it
//!   reach the model only through the state; later ones are in the context whole), `context`
//!   the full text the model receives (the rendered preamble with the state, then every tail
//!   message as text). Each kind counts only items whose source lies at or before the cut
//!   (later ones are trivially present) and is a [`Share`], with a [`Miss`] per item absent.
//! - [`coverage`]: how much of a history a summary text names — paths, commands, user
//!   messages — to set baton's state beside another summarizer's (Claude Code's own) on the
//!   same history.
//! - `compaction_points` and `history_of` (feature `import`, on by default): where Claude
//!   Code or Codex compacted an imported transcript, with its summary, and the transcript as
//!   the entries a run would hold.
//!
//! # Presence
//!
//! Keys and context are compared whitespace-normalized (runs of whitespace are equal, ends
//! trimmed); a key also counts in the form a JSON string writes it (a context that renders a
//! tool call's input as JSON escapes its quotes).
//!
//! A **file path** counts as named when it occurs as the tool input wrote it (`./` dropped; so a
//! relative path also inside an absolute path that ends with it), or, for an absolute path
//! under the session's common directory, when its relative form stands as a path token of its
//! own (not inside a longer path). The common directory is the deepest directory holding more
//! 90% of the distinct absolute paths the tool inputs name up to the cut (and their
//! `workdir`s), so a few stray paths (`/tmp/…`) do not move it to `/`. A context
//! listing only base names fails for every file below a subdirectory of it. Absolute and
//! relative forms of one file are one item.
//!
//! # A message the user typed
//!
//! A text block of a user-role message (never a `tool_result` block), with its
//! `<system-reminder>…</system-reminder>` segments removed and trimmed, that does not start with
//! `<` (harness echoes: `<local-command-stdout>`, `<local-command-caveat>`,
//! `<environment_context>`, `<task-notification>`, `<user_instructions>`, `<image …>`…),
//! `Caveat:`, `[Request interrupted`, `# AGENTS.md instructions`, `Base directory for this
//! skill`, or `This session is being continued from a previous conversation` (a compaction
//! summary), and is not empty; except a slash command echo (`<command-name>/x</command-name>`
//! with optional `<command-message>` and `<command-args>A</command-args>`, in any order), which
//! is the instruction `/x A` as typed. The user text message right after a slash command
//! message (the next message of the run, when it is a user message with text that is not itself
//! a command or harness text) is the command's expansion and not typed by the user.
//!
//! One amendment, from the corpus: Codex's IDE and desktop clients put the files and context
//! the user attached above what they typed (`# Files mentioned by the user:` … `## My request
//! for Codex:` then the request). When a typed block holds the line `## My request for Codex:`,
//! the instruction is what follows it; otherwise every such message's key would be the same
//! harness heading.
//!
//! Its **key phrase** is its first sentence — ended by `.`, `!` or `?` before whitespace, or by
//! a line break, once it holds three words — cut to its first 12 words; a slash command's is
//! `/name args` cut to 12 words. A state that keeps instructions verbatim from their head
//! (clipped after several hundred characters) passes; only the head is asked for.
//!
//! # The kinds of [`probe`]
//!
//! - **instructions**: every message the user typed at or before the cut, present when its key
//!   phrase is.
//! - **plan items**: the `in_progress` items of the agent's latest plan at or before the cut
//!   (Claude Code `TodoWrite` and `TaskCreate`/`TaskUpdate`, Codex `update_plan`, OpenHands
//!   `task_tracking`), present when the item's text (`content`, `step`, `subject`, `title`) is.
//!   Malformed plan inputs are skipped and listed in [`Probes::skipped`].
//! - **modified files**: files created, modified or deleted by tool inputs at or before the cut
//!   (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`, `apply_patch` and patches run through a shell
//!   tool, `str_replace_editor`/`file_editor` `create`/`str_replace`/`insert`, OpenHands
//!   `edit`/`write`, aider `apply_edit`), unless the call's result reports failure (as below);
//!   present by the path rules above.
//! - **unresolved problems**: failed tool results at or before the cut still unresolved at it.
//!   Failed: the result's error flag, or a non-zero exit code — the `exit_code` of an output
//!   that is a JSON object (at its top or under `metadata`, as Codex's `apply_patch` writes),
//!   or, for a shell command, a status line among the output's first five and last three lines
//!   (`Exit code N`, `Exit code: N`, `Process exited with code N`, `… exited with code N`,
//!   `… exit status N`, `[… exit code N …]`). Except exploration that found nothing: a shell
//!   command whose first program (after `cd … &&` prefixes and a `bash -lc` wrapper) is one of
//!   `ls find grep rg cat head tail stat which test wc file`, failing with no output (status
//!   lines aside) or with "No such file or directory" / "no matches found"; and `grep`/`rg`
//!   exiting 1. Resolved when, after the failure and at or before the cut, the same check
//!   succeeds (same tool and input; for a shell command, the same command string with
//!   whitespace collapsed), or a file the failure's output names (a token holding a `/` or
//!   ending in `.ext`, `:line:col` dropped) or the failed call's own target is written
//!   successfully and then any shell command succeeds. Keyed by the failing command's first
//!   line (normalized, at most 80 characters) or, for another tool, the first file it writes,
//!   else the first of its `file_path`, `notebook_path`, `path` (matched as paths), `url`,
//!   `pattern`, `query`, `task_id`, `description`, else its name; one item per key.
//!   A user's refusal of a tool call carries the error flag and so counts as a problem.
//!
//! ```
//! use baton_core::{ContentBlock, Entry, Message, Role, Seq, Timestamp};
//! use serde_json::json;
//!
//! let entry = |seq, role, content| Entry {
//!     seq: Seq(seq), message: Message { role, content }, tokens: 0, created_at: Timestamp(0),
//! };
//! let text = |t: &str| vec![ContentBlock::Text { text: t.into() }];
//! let history = [
//!     entry(1, Role::User, text("Fix the parser. Keep the public API as it is.")),
//!     entry(2, Role::Assistant, vec![
//!         ContentBlock::ToolUse {
//!             id: "r".into(), name: "Read".into(), input: json!({"file_path": "/repo/README.md"}),
//!         },
//!         ContentBlock::ToolUse {
//!             id: "w".into(), name: "Write".into(),
//!             input: json!({"file_path": "/repo/src/parse.rs", "content": "…"}),
//!         },
//!     ]),
//!     entry(3, Role::User, vec![
//!         ContentBlock::ToolResult { tool_use_id: "r".into(), content: text("# repo"), is_error: false },
//!         ContentBlock::ToolResult { tool_use_id: "w".into(), content: text("ok"), is_error: false },
//!     ]),
//!     entry(4, Role::User, text("Now run the tests.")),
//! ];
//! // A state through seq 3 that kept the instruction but named the file by its base name
//! // (the session's common directory is /repo: `src/parse.rs` would have counted).
//! let context = "## Instructions\n- Fix the parser.\n## Files\n- parse.rs\n\nNow run the tests.";
//! let probes = baton_probes::probe(&history, Seq(3), context);
//! assert_eq!((probes.instructions.kept, probes.instructions.total), (1, 1));
//! assert_eq!((probes.modified_files.kept, probes.modified_files.total), (0, 1));
//! assert_eq!(probes.misses[0].key, "/repo/src/parse.rs");
//! ```

mod calls;
#[cfg(feature = "import")]
mod import;
mod plan;
mod problems;
mod text;
mod typed;

use std::collections::BTreeMap;
use std::fmt;

use baton_core::{Entry, Seq};
use serde::Serialize;

#[cfg(feature = "import")]
pub use import::{CompactionPoint, compaction_points, history_of};
pub use typed::{Instruction, instructions};

/// How many of a kind's items a context kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Share {
    /// Items present.
    pub kept: usize,
    /// Items asked for.
    pub total: usize,
}

impl Share {
    /// `kept / total`, 1 when nothing was asked for.
    pub fn ratio(self) -> f64 {
        if self.total == 0 {
            1.0
        } else {
            self.kept as f64 / self.total as f64
        }
    }

    fn count(&mut self, present: bool) {
        self.total += 1;
        self.kept += usize::from(present);
    }
}

impl std::ops::Add for Share {
    type Output = Share;
    fn add(self, other: Share) -> Share {
        Share {
            kept: self.kept + other.kept,
            total: self.total + other.total,
        }
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kept, self.total)
    }
}

/// What an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A message the user typed (by its key phrase).
    Instruction,
    /// An in-progress item of the latest plan.
    PlanItem,
    /// A file created, modified or deleted.
    ModifiedFile,
    /// A failure unresolved at the cut.
    UnresolvedProblem,
    /// A path a tool input names ([`coverage`]).
    Path,
    /// A shell command ([`coverage`]).
    Command,
    /// A user message, whole ([`coverage`]).
    UserMessage,
}

impl Kind {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Instruction => "instruction",
            Kind::PlanItem => "plan item",
            Kind::ModifiedFile => "modified file",
            Kind::UnresolvedProblem => "unresolved problem",
            Kind::Path => "path",
            Kind::Command => "command",
            Kind::UserMessage => "user message",
        }
    }
}

/// An item the context does not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Miss {
    /// What it is.
    pub kind: Kind,
    /// The seq of its source message.
    pub seq: Seq,
    /// The phrase, path or command that was looked for.
    pub key: String,
}

/// A plan tool call that was passed over because its input is malformed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skip {
    /// The seq of the call.
    pub seq: Seq,
    /// What was wrong.
    pub reason: String,
}

/// What a context kept of what the continuation needs (see the crate documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Probes {
    /// Messages the user typed, by key phrase.
    pub instructions: Share,
    /// In-progress items of the latest plan.
    pub plan_items: Share,
    /// Files created, modified or deleted.
    pub modified_files: Share,
    /// Failures unresolved at the cut.
    pub unresolved_problems: Share,
    /// Every item absent, in kind order then seq order.
    pub misses: Vec<Miss>,
    /// Plan tool calls skipped as malformed.
    pub skipped: Vec<Skip>,
}

impl fmt::Display for Probes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "instructions {}, plan items {}, modified files {}, unresolved problems {}",
            self.instructions, self.plan_items, self.modified_files, self.unresolved_problems
        )?;
        write_misses(f, &self.misses)?;
        for skip in &self.skipped {
            write!(f, "\nskipped @{}: {}", skip.seq, skip.reason)?;
        }
        Ok(())
    }
}

/// How much of a history a summary text names (see [`coverage`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Distinct file paths of tool inputs, named by the path rules.
    pub paths: Share,
    /// Distinct shell commands, present whole.
    pub commands: Share,
    /// Messages the user typed, present whole.
    pub user_messages: Share,
    /// Every item absent.
    pub misses: Vec<Miss>,
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "paths {}, commands {}, user messages {}",
            self.paths, self.commands, self.user_messages
        )?;
        write_misses(f, &self.misses)
    }
}

/// One line per miss: `missing <kind> @<seq>: <key>`.
fn write_misses(f: &mut fmt::Formatter<'_>, misses: &[Miss]) -> fmt::Result {
    for miss in misses {
        write!(
            f,
            "\nmissing {} @{}: {}",
            miss.kind.as_str(),
            miss.seq,
            miss.key
        )?;
    }
    Ok(())
}

/// Probes `context` for what the history held at or before `cut` (see the crate
/// documentation).
pub fn probe(history: &[Entry], cut: Seq, context: &str) -> Probes {
    let haystack = text::Haystack::new(context);
    let calls = calls::calls(history, cut);
    let root = root(&calls);
    let mut out = Probes::default();

    for instruction in instructions(history, cut) {
        let key = instruction.key();
        let present = haystack.contains(&key);
        out.instructions.count(present);
        miss(
            &mut out.misses,
            present,
            Kind::Instruction,
            instruction.seq,
            key,
        );
    }

    let (plan, skipped) = plan::latest(&calls);
    out.skipped = skipped;
    let mut seen: Vec<&str> = Vec::new();
    for item in plan.iter().filter(|i| i.status == "in_progress") {
        if seen.contains(&item.text.as_str()) {
            continue;
        }
        seen.push(&item.text);
        let present = haystack.contains(&item.text);
        out.plan_items.count(present);
        miss(
            &mut out.misses,
            present,
            Kind::PlanItem,
            item.seq,
            item.text.clone(),
        );
    }

    let written = calls
        .iter()
        .filter(|c| !c.result.as_ref().is_some_and(|r| problems::failed(c, r)))
        .flat_map(|c| {
            calls::written_paths(c.name, c.input)
                .into_iter()
                .map(|p| (c.seq, p))
        });
    for (seq, forms) in files(written, root.as_deref()) {
        let present = forms
            .iter()
            .any(|p| haystack.names_path(p, root.as_deref()));
        out.modified_files.count(present);
        miss(
            &mut out.misses,
            present,
            Kind::ModifiedFile,
            seq,
            forms[0].clone(),
        );
    }

    for problem in problems::unresolved(&calls) {
        let present = if problem.is_path {
            haystack.names_path(&problem.key, root.as_deref())
        } else {
            haystack.contains(&problem.key)
        };
        out.unresolved_problems.count(present);
        miss(
            &mut out.misses,
            present,
            Kind::UnresolvedProblem,
            problem.seq,
            problem.key,
        );
    }
    out
}

/// How much of the history at or before `through` the summary `text` names: the distinct file
/// paths of tool inputs (what the calls write, and the `path`, `file_path`, `notebook_path` of
/// any tool), by the path rules; the distinct shell commands issued, present when the whole
/// command (multi-line included) is; the messages the user typed, present when the whole text
/// is (for one over 1,000 characters, its first 600).
pub fn coverage(history: &[Entry], through: Seq, text: &str) -> Coverage {
    const LONG: usize = 1_000;
    const HEAD: usize = 600;
    let haystack = text::Haystack::new(text);
    let calls = calls::calls(history, through);
    let root = root(&calls);
    let mut out = Coverage::default();

    let named = calls.iter().flat_map(|c| {
        calls::named_paths(c.name, c.input)
            .into_iter()
            .map(|p| (c.seq, p))
    });
    for (seq, forms) in files(named, root.as_deref()) {
        let present = forms
            .iter()
            .any(|p| haystack.names_path(p, root.as_deref()));
        out.paths.count(present);
        miss(&mut out.misses, present, Kind::Path, seq, forms[0].clone());
    }

    // Each distinct command (by its normalized form), searched as written so that its JSON
    // form keeps its line breaks.
    let mut commands: Vec<(Seq, String, String)> = Vec::new();
    for call in &calls {
        if let Some(cmd) = calls::shell_command(call.name, call.input) {
            let normal = text::normalize(&cmd);
            if !normal.is_empty() && !commands.iter().any(|(_, _, c)| *c == normal) {
                commands.push((call.seq, cmd, normal));
            }
        }
    }
    for (seq, cmd, normal) in commands {
        let present = haystack.contains(&cmd);
        out.commands.count(present);
        miss(&mut out.misses, present, Kind::Command, seq, normal);
    }

    for instruction in instructions(history, through) {
        let whole = text::normalize(&instruction.text);
        let key = if whole.chars().count() > LONG {
            text::clip_chars(&whole, HEAD).to_owned()
        } else {
            whole
        };
        let present = haystack.contains(&key);
        out.user_messages.count(present);
        miss(
            &mut out.misses,
            present,
            Kind::UserMessage,
            instruction.seq,
            key,
        );
    }
    out
}

fn miss(misses: &mut Vec<Miss>, present: bool, kind: Kind, seq: Seq, key: String) {
    if !present {
        misses.push(Miss { kind, seq, key });
    }
}

/// The session's common directory, from every path and `workdir` the calls name.
fn root(calls: &[calls::Call<'_>]) -> Option<String> {
    let mut paths: Vec<String> = calls
        .iter()
        .flat_map(|c| calls::named_paths(c.name, c.input))
        .collect();
    paths.extend(calls.iter().filter_map(|c| {
        c.input
            .get("workdir")
            .and_then(serde_json::Value::as_str)
            .map(|w| format!("{}/.", w.trim_end_matches('/')))
    }));
    text::common_directory(paths.iter().map(String::as_str))
}

/// Paths grouped into files: a path under `root` and its relative form are one file. Each
/// file's forms as written (first seen first), with the seq that last named it, in order of
/// first appearance.
fn files(
    paths: impl Iterator<Item = (Seq, String)>,
    root: Option<&str>,
) -> Vec<(Seq, Vec<String>)> {
    let mut order: Vec<String> = Vec::new();
    let mut by_key: BTreeMap<String, (Seq, Vec<String>)> = BTreeMap::new();
    for (seq, path) in paths {
        let path = text::strip_dot_slash(&path).to_owned();
        if path.is_empty() {
            continue;
        }
        let key = root
            .and_then(|r| text::relative_to(&path, r))
            .unwrap_or(&path)
            .to_owned();
        let entry = by_key.entry(key.clone()).or_insert_with(|| {
            order.push(key);
            (seq, Vec::new())
        });
        entry.0 = seq;
        if !entry.1.contains(&path) {
            entry.1.push(path);
        }
    }
    order
        .into_iter()
        .filter_map(|k| by_key.remove(&k))
        .collect()
}
