//! [`WorkingState::observe`]: one walk over the messages a compaction covers.

use std::collections::{HashMap, HashSet};

use baton_core::{ContentBlock, Entry, Role, Seq, Status};
use serde_json::Value;

use super::input::{UserInput, user_input};
use super::{
    File, INSTRUCTION_CHARS, INSTRUCTION_HEAD, Item, Problem, REFUTED_PREFIX, Task, WorkingState,
    detect, outcome, paths, shell,
};
use crate::audit::scan;

/// A tool call as the walk remembers it.
struct Call<'a> {
    name: &'a str,
    input: &'a Value,
    /// Where it was made: a file it writes was last touched there.
    seq: Seq,
}

/// What a tool call does to files, by tool.
enum FileUse {
    Read(String),
    /// A write whose role the result decides (`Write`: created or overwritten).
    Write(String),
    Modify(String),
    Create(String),
    Delete(String),
}

impl WorkingState {
    /// Updates the state with `old`, the messages a compaction covers (in seq order, after the
    /// state's own coverage). Pure and deterministic; never panics, whatever the messages hold
    /// (a malformed plan is skipped, a result without its call teaches nothing).
    pub fn observe(&mut self, old: &[Entry]) {
        let mut calls: HashMap<&str, Call<'_>> = HashMap::new();
        let mut answered: HashSet<&str> = HashSet::new();
        for entry in old {
            for block in &entry.message.content {
                if let ContentBlock::ToolResult { tool_use_id, .. } = block {
                    answered.insert(tool_use_id.as_str());
                }
            }
        }
        let mut after_command: Option<Seq> = None;
        let mut last_said: Option<&Entry> = None;
        let mut prev_seq = Seq::ZERO;
        for entry in old {
            let seq = entry.seq;
            match user_input(&entry.message) {
                Some(UserInput::Command(command)) => {
                    self.instruct(&command, seq);
                    after_command = Some(seq);
                }
                Some(UserInput::Text(text)) => {
                    // The message right after a slash command is its expansion.
                    if after_command != Some(prev_seq) {
                        self.instruct(&text, seq);
                    }
                    after_command = None;
                }
                Some(UserInput::Harness) | None => {}
            }
            // Constraints: from what the user typed and from what the harness injected on the
            // user's behalf (`AGENTS.md`, a skill's or a slash command's prompt), which are the
            // user's rules too; never from echoes.
            for sentence in detect::constraints(&entry.message) {
                push_unique(&mut self.constraints, sentence, seq);
            }
            for block in &entry.message.content {
                match block {
                    ContentBlock::ToolUse { id, name, input } => {
                        calls.insert(id.as_str(), Call { name, input, seq });
                        self.call(name, input, seq);
                        if !answered.contains(id.as_str()) {
                            let text = scan::describe_call(name, input);
                            if !self.pending.iter().any(|p| p.text == text) {
                                self.pending.push(Item { text, seq });
                            }
                        }
                    }
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        if let Some(call) = calls.get(tool_use_id.as_str()) {
                            self.result(call, &result_text(content), *is_error, seq);
                        }
                    }
                    _ => {}
                }
            }
            if entry.message.role == Role::Assistant {
                let mut said = false;
                for text in detect::assistant_texts(&entry.message) {
                    for sentence in detect::sentences(text) {
                        said = true;
                        if detect::is_hypothesis(sentence) {
                            push_unique(&mut self.hypotheses, sentence, seq);
                        } else if detect::is_verified(sentence) {
                            self.refute(sentence, seq);
                            push_unique(&mut self.reported, sentence, seq);
                        }
                    }
                    scan::text_facts(text, false, &mut |fact, found| {
                        if fact == scan::Fact::Url {
                            push_unique(&mut self.artifacts, found, seq);
                        }
                    });
                }
                if said {
                    last_said = Some(entry);
                }
            }
            prev_seq = seq;
        }
        if let Some(entry) = last_said
            && let Some(plan) = detect::last_plan_sentence(&entry.message)
        {
            self.next_step = Some(Item {
                text: plan.to_owned(),
                seq: entry.seq,
            });
        }
        if let Some(task) = self.tasks.iter().find(|t| t.status == Status::InProgress) {
            self.next_step = Some(Item {
                text: task.text.clone(),
                seq: task.seq,
            });
        }
    }

    /// Records a typed instruction (clipped when very long).
    fn instruct(&mut self, text: &str, seq: Seq) {
        let text = text.trim();
        let chars = text.chars().count();
        let text = if chars > INSTRUCTION_CHARS {
            let head = outcome::clip(text, INSTRUCTION_HEAD);
            format!(
                "{} [+{} characters: recall seq {seq}]",
                head.trim_end_matches('…'),
                chars - INSTRUCTION_HEAD
            )
        } else {
            text.to_owned()
        };
        self.instructions.push(Item { text, seq });
    }

    /// What a tool call says as it is made: a plan, a command run.
    fn call(&mut self, name: &str, input: &Value, seq: Seq) {
        if let Some(tasks) = plan_of(name, input, seq) {
            self.tasks = tasks;
        }
        if let Some(script) = scan::command_script(name, input) {
            let script = script.trim();
            if !script.is_empty() {
                self.commands.retain(|c| c.text != script);
                self.commands.push(Item {
                    text: script.to_owned(),
                    seq,
                });
            }
        }
    }

    /// What a tool result says about its call.
    fn result(&mut self, call: &Call<'_>, output: &str, is_error: bool, seq: Seq) {
        let script = scan::command_script(call.name, call.input);
        let code = outcome::exit_code(output);
        let failed = is_error || code.is_some_and(|c| c != 0);
        let uses = file_uses(call.name, call.input);
        let check = check_of(call.name, call.input, script.as_deref(), &uses);
        if failed {
            if let Some(script) = &script
                && outcome::found_nothing(script, output, code)
            {
                return;
            }
            if is_plan_tool(call.name) {
                return;
            }
            let why = outcome::error_line(output).unwrap_or_else(|| match code {
                Some(code) => format!("failed with exit code {code} and no output"),
                None => "failed with no output".to_owned(),
            });
            let mut files: Vec<String> = Vec::new();
            for line in output.lines().take(40) {
                scan::text_facts(line, false, &mut |fact, text| {
                    if fact == scan::Fact::Path {
                        files.push(paths::normalize(text));
                    }
                });
            }
            for u in &uses {
                files.push(paths::normalize(u.path()));
            }
            files.dedup();
            let shown = check.lines().next().unwrap_or_default();
            let text = format!("`{}`: {why}", outcome::clip(shown, 200));
            self.problems
                .retain(|p| !(p.check == check && p.resolved.is_none()));
            self.problems.push(Problem {
                check,
                text,
                seq,
                resolved: None,
                files,
                fixed: false,
            });
            return;
        }
        self.resolve(|p| p.check == check, seq);
        for u in uses {
            let (path, role) = match u {
                FileUse::Read(p) => (p, Status::Read),
                FileUse::Modify(p) => (p, Status::Modified),
                FileUse::Create(p) => (p, Status::Created),
                FileUse::Delete(p) => (p, Status::Deleted),
                FileUse::Write(p) => {
                    let created = output.contains("created successfully")
                        || (!output.contains("updated")
                            && !output.contains("overwr")
                            && self.file_index(&p).is_none());
                    let role = if created {
                        Status::Created
                    } else {
                        Status::Modified
                    };
                    (p, role)
                }
            };
            self.touch(&path, role, call.seq);
        }
        let Some(script) = script else { return };
        // A file a failure named was fixed, and now a command ran: that failure is resolved.
        self.resolve(|p| p.fixed, seq);
        if outcome::is_check(&script)
            && let Some(pass) = outcome::pass_line(output)
        {
            let shown = script.lines().next().unwrap_or_default();
            let head = format!("`{}`", outcome::clip(shown, 200));
            self.verified.retain(|v| !v.text.starts_with(&head));
            self.verified.push(Item {
                text: format!("{head}: {pass}"),
                seq,
            });
        }
        for argv in shell::programs(&script) {
            let args: Vec<&str> = argv.iter().map(String::as_str).collect();
            let text = match args.as_slice() {
                ["git", "commit", ..] => output
                    .lines()
                    .map(str::trim)
                    .find(|l| l.starts_with('[') && l.contains(']'))
                    .map(|l| format!("committed {}", outcome::clip(l, 200))),
                ["git", "push", ..] => Some(
                    output
                        .lines()
                        .map(str::trim)
                        .find(|l| l.contains("->"))
                        .map_or_else(
                            || format!("pushed (`{}`)", args.join(" ")),
                            |l| format!("pushed {}", outcome::clip(l, 200)),
                        ),
                ),
                _ => None,
            };
            if let Some(text) = text {
                push_unique(&mut self.repo, &text, seq);
            }
        }
    }

    /// Marks the open problems `which` selects resolved at `seq`.
    fn resolve(&mut self, which: impl Fn(&Problem) -> bool, seq: Seq) {
        for problem in &mut self.problems {
            if problem.resolved.is_none() && problem.seq < seq && which(problem) {
                problem.resolved = Some(seq);
                problem.text = format!("{} — resolved at seq {seq}", problem.text);
            }
        }
    }

    /// Records that `path` was touched in `role` at `seq`.
    fn touch(&mut self, path: &str, role: Status, seq: Seq) {
        let path = paths::normalize(path);
        if path.is_empty() {
            return;
        }
        if role != Status::Read {
            for problem in &mut self.problems {
                if problem.resolved.is_none()
                    && problem.files.iter().any(|f| paths::same_file(f, &path))
                {
                    problem.fixed = true;
                }
            }
        }
        match self.file_index(&path) {
            Some(i) => {
                let file = &mut self.files[i];
                file.path = paths::better(&file.path, &path).to_owned();
                file.seq = seq;
                file.touches += 1;
                file.role = match (file.role, role) {
                    (_, Status::Deleted) => Status::Deleted,
                    (Status::Deleted, Status::Read) => Status::Deleted,
                    (Status::Deleted, _) => Status::Created,
                    (Status::Created, _) => Status::Created,
                    (Status::Modified, _) => Status::Modified,
                    (_, new) => new,
                };
            }
            None => self.files.push(File {
                path,
                role,
                seq,
                touches: 1,
                intent: None,
            }),
        }
    }

    /// The file `path` names, if the state has it: an equal spelling first, then another
    /// spelling of it when exactly one file fits.
    pub(crate) fn file_index(&self, path: &str) -> Option<usize> {
        if let Some(i) = self.files.iter().position(|f| f.path == path) {
            return Some(i);
        }
        let mut fits = self
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| paths::same_file(&f.path, path));
        let first = fits.next().map(|(i, _)| i);
        match fits.next() {
            Some(_) => None,
            None => first,
        }
    }

    /// A statement refutes the hypotheses it shares two significant words with, when it holds a
    /// negation: they become failed approaches naming the refuting seq.
    fn refute(&mut self, statement: &str, seq: Seq) {
        if statement.starts_with(REFUTED_PREFIX) {
            return;
        }
        let (refuted, standing): (Vec<Item>, Vec<Item>) = std::mem::take(&mut self.hypotheses)
            .into_iter()
            .partition(|h| h.seq <= seq && detect::refutes(statement, &h.text));
        self.hypotheses = standing;
        for h in refuted {
            self.failed.push(Item {
                text: format!("{REFUTED_PREFIX}{} (by seq {seq})", h.text),
                seq,
            });
        }
    }
}

impl FileUse {
    fn path(&self) -> &str {
        match self {
            FileUse::Read(p)
            | FileUse::Write(p)
            | FileUse::Modify(p)
            | FileUse::Create(p)
            | FileUse::Delete(p) => p,
        }
    }
}

/// The files a tool call reads or writes, by its name and input.
fn file_uses(name: &str, input: &Value) -> Vec<FileUse> {
    let str_of = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let path = || {
        [
            "file_path",
            "path",
            "notebook_path",
            "target_file",
            "filename",
        ]
        .iter()
        .find_map(|k| str_of(k))
    };
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "write" | "write_file" | "create_file" => path().map(FileUse::Write).into_iter().collect(),
        "edit" | "multiedit" | "notebookedit" | "edit_file" | "replace_in_file"
        | "search_replace" => path().map(FileUse::Modify).into_iter().collect(),
        "read" | "read_file" | "view_file" | "notebookread" => {
            path().map(FileUse::Read).into_iter().collect()
        }
        "str_replace_editor" | "str_replace_based_edit_tool" | "edit_tool" => {
            let Some(p) = path() else { return Vec::new() };
            match str_of("command").as_deref() {
                Some("create") => vec![FileUse::Create(p)],
                Some("str_replace" | "insert" | "undo_edit" | "edit") => vec![FileUse::Modify(p)],
                Some("view") => vec![FileUse::Read(p)],
                _ => Vec::new(),
            }
        }
        "apply_patch" => patch_uses(input),
        _ => match scan::command_script(name, input) {
            Some(script) if script.trim_start().starts_with("apply_patch") => {
                patch_uses(&Value::String(script))
            }
            Some(script) => {
                let effects = shell::effects(&script);
                effects
                    .writes
                    .into_iter()
                    .map(FileUse::Write)
                    .chain(effects.deletes.into_iter().map(FileUse::Delete))
                    .collect()
            }
            None => Vec::new(),
        },
    }
}

/// The files a patch (`*** Add File:`, `*** Update File:`, `*** Delete File:`, `*** Move to:`)
/// creates, changes and deletes; the patch is the input itself or its `input`/`patch` field.
fn patch_uses(input: &Value) -> Vec<FileUse> {
    let text = match input {
        Value::String(s) => s.as_str(),
        other => match ["input", "patch", "diff"]
            .iter()
            .find_map(|k| other.get(*k).and_then(Value::as_str))
        {
            Some(s) => s,
            None => return Vec::new(),
        },
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let mut take = |prefix: &str, make: fn(String) -> FileUse| {
            if let Some(p) = line.strip_prefix(prefix) {
                let p = p.trim();
                if !p.is_empty() {
                    out.push(make(p.to_owned()));
                }
            }
        };
        take("*** Add File:", FileUse::Create);
        take("*** Update File:", FileUse::Modify);
        take("*** Delete File:", FileUse::Delete);
        take("*** Move to:", FileUse::Create);
    }
    out
}

/// The check a call is: its command (whitespace collapsed), or its tool and the file it works
/// on, or its tool and input.
fn check_of(name: &str, input: &Value, script: Option<&str>, uses: &[FileUse]) -> String {
    if let Some(script) = script
        && !script.trim_start().starts_with("apply_patch")
    {
        let collapsed = script.split_whitespace().collect::<Vec<_>>().join(" ");
        if !collapsed.is_empty() {
            return collapsed;
        }
    }
    match uses.first() {
        Some(u) if !u.path().trim().is_empty() => format!("{name} {}", paths::normalize(u.path())),
        _ => {
            let described = scan::describe_call(name, input);
            if described.trim().is_empty() {
                "a tool call".to_owned()
            } else {
                described
            }
        }
    }
}

/// The plan a plan tool call writes, item by item, or `None` when the call is no plan tool or
/// its input is malformed (then the plan stays as it was).
fn is_plan_tool(name: &str) -> bool {
    matches!(
        name,
        "TodoWrite" | "todo_write" | "todowrite" | "update_plan"
    )
}

fn plan_of(name: &str, input: &Value, seq: Seq) -> Option<Vec<Task>> {
    let (list, text_key) = match name {
        "TodoWrite" | "todo_write" | "todowrite" => (input.get("todos")?, "content"),
        "update_plan" => (input.get("plan")?, "step"),
        _ => return None,
    };
    let items = list.as_array()?;
    let mut tasks = Vec::with_capacity(items.len());
    for item in items {
        let Some(text) = item.get(text_key).and_then(Value::as_str) else {
            tracing::debug!(tool = name, "plan item without text: skipped");
            continue;
        };
        let status = match item.get("status").and_then(Value::as_str) {
            Some("pending") => Status::Pending,
            Some("in_progress") => Status::InProgress,
            Some("completed") => Status::Completed,
            other => {
                tracing::debug!(tool = name, status = ?other, "plan item with an unknown status: skipped");
                continue;
            }
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        tasks.push(Task {
            text: outcome::clip(text, 300),
            status,
            seq,
        });
    }
    if tasks.is_empty() && !items.is_empty() {
        return None;
    }
    Some(tasks)
}

fn push_unique(list: &mut Vec<Item>, text: &str, seq: Seq) {
    if !list.iter().any(|i| i.text == text) {
        list.push(Item {
            text: text.to_owned(),
            seq,
        });
    }
}

/// The text of a tool result's content, blocks joined by newlines.
fn result_text(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        if let ContentBlock::Text { text } = block {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}
