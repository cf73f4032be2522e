//! Tool calls paired with their results, and what a call's input says: the shell command it
//! runs, the files it creates, modifies or deletes, the paths it names.
//!
//! Input shapes read (after `baton-import`; Codex `function_call` arguments arrive parsed, a
//! `custom_tool_call`'s input as a string):
//! - shell: Claude Code `Bash`, SWE-agent `bash`, OpenHands `run` and `execute_bash`
//!   (`command`), Codex `shell_command` (`command`), `exec_command` (`cmd`), `shell` and
//!   `local_shell` (`command`, an array joined by spaces, or a string), `container.exec`
//!   (`cmd`).
//! - writes: `Write`, `Edit`, `MultiEdit` (`file_path`), `NotebookEdit` (`notebook_path`);
//!   `apply_patch` (the patch as the input string, or under `input`/`patch`), and any shell
//!   command holding a patch (`*** Begin Patch`: Codex's `["apply_patch", patch]` and heredoc
//!   forms): its `*** Add File:`, `*** Update File:`, `*** Delete File:` and `*** Move to:`
//!   lines; `str_replace_editor` and `file_editor` with `command` `create`, `str_replace` or
//!   `insert` (`path`), and a shell command `str_replace_editor <that command> <path>`
//!   (SWE-agent's tool calls, imported as `bash`); OpenHands `edit` (unless `command` is
//!   `view`) and `write` (`path`); aider's `apply_edit` (`path`).

use std::collections::HashMap;

use baton_core::{ContentBlock, Entry, Seq};
use serde_json::Value;

/// A tool call and, when it came at or before the bound the calls were read to, its result.
pub struct Call<'a> {
    /// The seq of the message holding the call.
    pub seq: Seq,
    /// The tool's name.
    pub name: &'a str,
    /// The call's input.
    pub input: &'a Value,
    /// Its result.
    pub result: Option<Outcome>,
}

/// A tool result.
pub struct Outcome {
    /// The seq of the message holding it.
    pub seq: Seq,
    /// Its text blocks, joined by newlines.
    pub text: String,
    /// The error flag the tool set.
    pub is_error: bool,
}

/// The calls made at or before `through`, in order, each with its result when that too came at
/// or before `through`. A result answering no call (an orphan) is passed over; a reused call id
/// pairs with its latest call.
pub fn calls(history: &[Entry], through: Seq) -> Vec<Call<'_>> {
    let mut out: Vec<Call<'_>> = Vec::new();
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for entry in history.iter().take_while(|e| e.seq <= through) {
        for block in &entry.message.content {
            match block {
                ContentBlock::ToolUse { id, name, input } => {
                    by_id.insert(id.as_str(), out.len());
                    out.push(Call {
                        seq: entry.seq,
                        name,
                        input,
                        result: None,
                    });
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let Some(&at) = by_id.get(tool_use_id.as_str()) else {
                        continue;
                    };
                    if out[at].result.is_none() {
                        out[at].result = Some(Outcome {
                            seq: entry.seq,
                            text: block_text(content),
                            is_error: *is_error,
                        });
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The text blocks of a tool result, joined by newlines.
fn block_text(blocks: &[ContentBlock]) -> String {
    let texts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

/// The shell command a call runs, when it is a shell tool.
pub fn shell_command(name: &str, input: &Value) -> Option<String> {
    let field = match name {
        "Bash" | "bash" | "run" | "execute_bash" | "shell_command" | "shell" | "local_shell" => {
            "command"
        }
        "exec_command" | "container.exec" => "cmd",
        _ => return None,
    };
    match input.get(field)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let words: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
            words.map(|w| w.join(" "))
        }
        _ => None,
    }
}

/// The files a call creates, modifies or deletes, as its input writes them.
pub fn written_paths(name: &str, input: &Value) -> Vec<String> {
    let field = |key: &str| {
        input
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(|s| vec![s.trim().to_owned()])
            .unwrap_or_default()
    };
    let command = input.get("command").and_then(Value::as_str);
    match name {
        "Write" | "Edit" | "MultiEdit" => field("file_path"),
        "NotebookEdit" => field("notebook_path"),
        "apply_patch" => {
            let patch = input
                .as_str()
                .or_else(|| input.get("input").and_then(Value::as_str))
                .or_else(|| input.get("patch").and_then(Value::as_str))
                .unwrap_or("");
            patch_paths(patch)
        }
        "str_replace_editor" | "file_editor"
            if matches!(command, Some("create" | "str_replace" | "insert")) =>
        {
            field("path")
        }
        "edit" if command != Some("view") => field("path"),
        "write" | "apply_edit" => field("path"),
        _ => match shell_command(name, input) {
            Some(cmd) if cmd.contains("*** Begin Patch") => patch_paths(&cmd),
            Some(cmd) => editor_command_path(&cmd).into_iter().collect(),
            None => Vec::new(),
        },
    }
}

/// The paths a patch in Codex's `apply_patch` format names.
pub fn patch_paths(patch: &str) -> Vec<String> {
    const MARKERS: [&str; 4] = [
        "*** Add File:",
        "*** Update File:",
        "*** Delete File:",
        "*** Move to:",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim();
        if let Some(path) = MARKERS.iter().find_map(|m| line.strip_prefix(m)) {
            let path = path.trim().to_owned();
            if !path.is_empty() && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The path of a shell line `str_replace_editor create|str_replace|insert PATH …`.
fn editor_command_path(cmd: &str) -> Option<String> {
    let mut words = cmd.lines().next()?.split_whitespace();
    if words.next()? != "str_replace_editor" {
        return None;
    }
    match words.next()? {
        "create" | "str_replace" | "insert" => words.next().map(str::to_owned),
        _ => None,
    }
}

/// Every path a call's input names: what it writes, and the `path`, `file_path` and
/// `notebook_path` of any tool.
pub fn named_paths(name: &str, input: &Value) -> Vec<String> {
    let mut out = written_paths(name, input);
    for key in ["file_path", "notebook_path", "path"] {
        if let Some(p) = input.get(key).and_then(Value::as_str) {
            let p = p.trim();
            if !p.is_empty() && !out.iter().any(|o| o == p) {
                out.push(p.to_owned());
            }
        }
    }
    out
}

/// The input fields a non-shell call is named by in a problem, in order of preference, after
/// the files it writes.
const TARGET_FIELDS: [&str; 8] = [
    "file_path",
    "notebook_path",
    "path",
    "url",
    "pattern",
    "query",
    "task_id",
    "description",
];

/// What names a failed non-shell call: the first file it writes, else the first of
/// [`TARGET_FIELDS`] it has (its first line), else the tool's name. The flag says whether it is
/// a path.
pub fn target(name: &str, input: &Value) -> (String, bool) {
    if let Some(p) = written_paths(name, input).into_iter().next() {
        return (p, true);
    }
    for (i, key) in TARGET_FIELDS.iter().enumerate() {
        if let Some(v) = input.get(key).and_then(Value::as_str) {
            let line = v.lines().map(str::trim).find(|l| !l.is_empty());
            if let Some(line) = line {
                return (crate::text::clip_chars(line, 80).to_owned(), i < 3);
            }
        }
    }
    (name.to_owned(), false)
}
