//! The agent's tools: files in a working directory, a shell command with a timeout and an output
//! cap, and `recall`, which reads originals back from the store (compaction is reversible for
//! the model too).
//!
//! Every path a tool takes is relative to the working directory (an absolute path inside it is
//! accepted) and may not leave it, neither by `..` nor through a symbolic link ([`resolve`]);
//! `grep` does not follow symbolic links at all. A tool declares whether it has side effects;
//! the executor refuses those on a read-only run ([`crate::agent`]).
//!
//! `run_command` runs `sh -c` in a process group of its own, and kills the whole group (the
//! command's children too) when it times out or when its call is dropped (a cancelled turn).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::{ContentBlock, Entry, RunId, Seq, TenantId};
use baton_provider::ToolSpec;
use baton_store::{SearchQuery, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The most bytes of a file, a listing or a command's output a tool returns.
pub const OUTPUT_CAP: usize = 32 * 1024;
/// The largest file `grep` reads; larger ones are skipped and counted.
pub const GREP_FILE_CAP: u64 = 1024 * 1024;
/// A command's default timeout.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest timeout a command may ask for.
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// What a tool call can reach.
pub struct ToolContext<'a> {
    /// The directory the tools work in.
    pub workdir: &'a Path,
    /// The store, for `recall`.
    pub store: &'a dyn Store,
    /// The run's tenant.
    pub tenant: &'a TenantId,
    /// The run.
    pub run: &'a RunId,
}

/// A tool the model may call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Its name, description and input schema, as the model sees them.
    fn spec(&self) -> ToolSpec;

    /// Whether it changes anything outside the conversation (files, processes). The executor
    /// refuses these on a read-only run, and records each call before it runs so a resumed
    /// run never runs it twice.
    fn side_effects(&self) -> bool;

    /// Runs the tool; `Err` is a tool error the model sees (`is_error: true`).
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String>;
}

/// The tools of a run, by name.
pub struct Toolbox {
    tools: Vec<Box<dyn Tool>>,
}

impl Toolbox {
    /// `read_file`, `list_dir`, `grep`, `write_file`, `edit_file`, `run_command`, `recall`.
    pub fn standard() -> Self {
        Toolbox {
            tools: vec![
                Box::new(ReadFile),
                Box::new(ListDir),
                Box::new(Grep),
                Box::new(WriteFile),
                Box::new(EditFile),
                Box::new(RunCommand),
                Box::new(Recall),
            ],
        }
    }

    /// The tools' specs, in order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.spec().name == name)
            .map(|t| &**t)
    }

    /// The tools' names, for an error that lists them.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.spec().name).collect()
    }
}

fn spec(name: &str, description: &str, properties: Value, required: &[&str]) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
    }
}

fn string_arg<'v>(input: &'v Value, key: &str) -> Result<&'v str, String> {
    match input.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "invalid arguments: \"{key}\" must be a string, not {other}"
        )),
        None => Err(format!("invalid arguments: \"{key}\" is required")),
    }
}

fn optional_u64(input: &Value, key: &str) -> Result<Option<u64>, String> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("invalid arguments: \"{key}\" must be a whole number, not {v}")),
    }
}

/// `path` resolved inside `workdir`; an error when it would leave it.
///
/// `..` is resolved in the text of the path and may not climb above `workdir`. Then the
/// nearest part of the path that exists is resolved with every symbolic link in it followed,
/// and must still lie inside `workdir` (resolved the same way): a link inside the working
/// directory that points out of it, or one that points nowhere (a write would create its
/// target), is refused.
pub fn resolve(workdir: &Path, path: &str) -> Result<PathBuf, String> {
    let given = Path::new(path);
    let relative = match given.strip_prefix(workdir) {
        Ok(inside) => inside.to_path_buf(),
        Err(_) if given.is_absolute() => {
            return Err(format!(
                "{path}: outside the working directory {}",
                workdir.display()
            ));
        }
        Err(_) => given.to_path_buf(),
    };
    let mut out = workdir.to_path_buf();
    let mut depth = 0usize;
    for part in relative.components() {
        match part {
            Component::Normal(p) => {
                out.push(p);
                depth += 1;
            }
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => {
                out.pop();
                depth -= 1;
            }
            _ => {
                return Err(format!(
                    "{path}: outside the working directory {}",
                    workdir.display()
                ));
            }
        }
    }
    let root = workdir
        .canonicalize()
        .map_err(|e| format!("{path}: the working directory {}: {e}", workdir.display()))?;
    // The nearest ancestor that exists (the path itself, when it does), as a link or not.
    let mut existing = out.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    let real = existing.canonicalize().map_err(|e| {
        format!(
            "{path}: refused: {} is a symbolic link that leads nowhere ({e})",
            existing.display()
        )
    })?;
    if !real.starts_with(&root) {
        return Err(format!(
            "{path}: refused: a symbolic link leads outside the working directory {} (to {})",
            root.display(),
            real.display()
        ));
    }
    Ok(out)
}

/// At most [`OUTPUT_CAP`] bytes of `text`, cut at a character boundary, saying so.
fn capped(text: &str) -> String {
    if text.len() <= OUTPUT_CAP {
        return text.to_owned();
    }
    let mut end = OUTPUT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes cut]", &text[..end], text.len() - end)
}

struct ReadFile;

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        spec(
            "read_file",
            "Read a text file of the working directory.",
            json!({"path": {"type": "string", "description": "File path, relative to the working directory"}}),
            &["path"],
        )
    }
    fn side_effects(&self) -> bool {
        false
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let path = string_arg(input, "path")?;
        let full = resolve(ctx.workdir, path)?;
        let bytes = tokio::fs::read(&full)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("{path}: not a UTF-8 text file"))?;
        Ok(capped(&text))
    }
}

struct ListDir;

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        spec(
            "list_dir",
            "List a directory of the working directory (directories end with /).",
            json!({"path": {"type": "string", "description": "Directory path; \".\" for the working directory"}}),
            &["path"],
        )
    }
    fn side_effects(&self) -> bool {
        false
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let path = string_arg(input, "path")?;
        let full = resolve(ctx.workdir, path)?;
        let mut dir = tokio::fs::read_dir(&full)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        let mut names = Vec::new();
        while let Some(entry) = dir.next_entry().await.map_err(|e| format!("{path}: {e}"))? {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().await.is_ok_and(|t| t.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(capped(&names.join("\n")))
    }
}

struct Grep;

#[async_trait]
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        spec(
            "grep",
            "Search files of the working directory for a regular expression; prints path:line: text.",
            json!({
                "pattern": {"type": "string", "description": "A regular expression"},
                "path": {"type": "string", "description": "A file or directory to search (default: the working directory)"}
            }),
            &["pattern"],
        )
    }
    fn side_effects(&self) -> bool {
        false
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let pattern = string_arg(input, "pattern")?;
        let re =
            regex::Regex::new(pattern).map_err(|e| format!("invalid arguments: pattern: {e}"))?;
        let path = match input.get("path") {
            None | Some(Value::Null) => ".",
            Some(_) => string_arg(input, "path")?,
        };
        let root = resolve(ctx.workdir, path)?;
        let workdir = ctx.workdir.to_path_buf();
        // Walking and reading are blocking file work.
        let found = tokio::task::spawn_blocking(move || grep(&re, &root, &workdir))
            .await
            .map_err(|e| format!("grep: {e}"))?;
        let mut text = match found.lines.is_empty() {
            true => "no match".to_owned(),
            false => found.lines.join("\n"),
        };
        if found.skipped_large > 0 {
            text.push_str(&format!(
                "\n[{} files over {} KiB not searched]",
                found.skipped_large,
                GREP_FILE_CAP / 1024
            ));
        }
        Ok(capped(&text))
    }
}

/// What a `grep` walk found.
struct Found {
    lines: Vec<String>,
    /// Regular files skipped for being larger than [`GREP_FILE_CAP`].
    skipped_large: usize,
}

/// Searches `root` (a file, or a directory walked in name order). Symbolic links below `root`
/// are not followed (a link may lead out of the working directory, or loop); only regular files
/// of at most [`GREP_FILE_CAP`] bytes are read (a FIFO would block, a device never end).
fn grep(re: &regex::Regex, root: &Path, workdir: &Path) -> Found {
    let mut out = Found {
        lines: Vec::new(),
        skipped_large: 0,
    };
    // `root` itself was checked by `resolve`, so a link there is followed.
    let mut stack = vec![(root.to_path_buf(), std::fs::metadata(root))];
    while let Some((path, meta)) = stack.pop() {
        let Ok(meta) = meta else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                children.sort();
                stack.extend(children.into_iter().rev().map(|child| {
                    let meta = std::fs::symlink_metadata(&child);
                    (child, meta)
                }));
            }
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        if meta.len() > GREP_FILE_CAP {
            out.skipped_large += 1;
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let shown = path
            .strip_prefix(workdir)
            .unwrap_or(&path)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            if re.is_match(line) {
                out.lines.push(format!("{shown}:{}: {line}", n + 1));
                if out.lines.len() >= 500 {
                    return out;
                }
            }
        }
    }
    out
}

struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        spec(
            "write_file",
            "Create or replace a file of the working directory with the given content.",
            json!({
                "path": {"type": "string"},
                "content": {"type": "string"}
            }),
            &["path", "content"],
        )
    }
    fn side_effects(&self) -> bool {
        true
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let path = string_arg(input, "path")?;
        let content = string_arg(input, "content")?;
        let full = resolve(ctx.workdir, path)?;
        if let Some(parent) = full.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| format!("{path}: {e}"))?;
        }
        tokio::fs::write(&full, content)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(format!("wrote {} bytes to {path}", content.len()))
    }
}

struct EditFile;

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        spec(
            "edit_file",
            "Replace the one occurrence of old_string in a file with new_string.",
            json!({
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"}
            }),
            &["path", "old_string", "new_string"],
        )
    }
    fn side_effects(&self) -> bool {
        true
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let path = string_arg(input, "path")?;
        let old = string_arg(input, "old_string")?;
        let new = string_arg(input, "new_string")?;
        if old.is_empty() {
            return Err("invalid arguments: \"old_string\" is empty".to_owned());
        }
        let full = resolve(ctx.workdir, path)?;
        let text = tokio::fs::read_to_string(&full)
            .await
            .map_err(|e| format!("{path}: {e}"))?;
        match text.matches(old).count() {
            0 => Err(format!("{path}: old_string not found")),
            1 => {
                tokio::fs::write(&full, text.replacen(old, new, 1))
                    .await
                    .map_err(|e| format!("{path}: {e}"))?;
                Ok(format!("edited {path}"))
            }
            n => Err(format!(
                "{path}: old_string occurs {n} times; give more context so it occurs once"
            )),
        }
    }
}

struct RunCommand;

#[async_trait]
impl Tool for RunCommand {
    fn spec(&self) -> ToolSpec {
        spec(
            "run_command",
            "Run a shell command in the working directory; returns its exit status and output.",
            json!({
                "command": {"type": "string"},
                "timeout_secs": {"type": "integer", "description": "Default 30, at most 600"}
            }),
            &["command"],
        )
    }
    fn side_effects(&self) -> bool {
        true
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let command = string_arg(input, "command")?;
        let timeout = optional_u64(input, "timeout_secs")?
            .map_or(COMMAND_TIMEOUT, Duration::from_secs)
            .min(MAX_COMMAND_TIMEOUT);
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(ctx.workdir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // A group of its own, so a timeout or a cancelled turn kills what `sh` started too.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("run_command: {e}"))?;
        let group = KillGroup(child.id());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Both streams at once (a command that fills one pipe while the other is read would
        // block forever), each kept up to the cap and the rest read and dropped.
        let run = async {
            tokio::join!(
                read_capped(stdout, OUTPUT_CAP),
                read_capped(stderr, OUTPUT_CAP),
                child.wait()
            )
        };
        let ((out, out_cut), (err, err_cut), status) =
            match tokio::time::timeout(timeout, run).await {
                Ok(done) => done,
                Err(_) => {
                    drop(group);
                    let _ = child.wait().await;
                    return Err(format!(
                        "run_command: no exit within {} s; the command was killed",
                        timeout.as_secs()
                    ));
                }
            };
        group.disarm();
        let code = status
            .map(|s| {
                s.code()
                    .map_or("killed by a signal".to_owned(), |c| format!("exit {c}"))
            })
            .map_err(|e| format!("run_command: {e}"))?;
        // Both streams share the cap: each gets at least half, and what one leaves unused.
        let out_budget = OUTPUT_CAP - err.len().min(OUTPUT_CAP / 2);
        let err_budget = OUTPUT_CAP - out.len().min(out_budget);
        let mut text = format!("{code}\n");
        text.push_str(&shown(&out, out_cut, out_budget, "stdout"));
        if !err.is_empty() {
            text.push_str("\n[stderr]\n");
            text.push_str(&shown(&err, err_cut, err_budget, "stderr"));
        }
        Ok(text)
    }
}

/// At most `budget` bytes of a stream's `kept` bytes as text, cut at a character boundary,
/// saying how many bytes were cut (`cut` more were read and dropped already).
fn shown(kept: &[u8], cut: u64, budget: usize, name: &str) -> String {
    let text = String::from_utf8_lossy(kept);
    let mut end = text.len().min(budget);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = cut + (text.len() - end) as u64;
    match cut {
        0 => text.into_owned(),
        _ => format!("{}\n[… {cut} more bytes of {name} cut]", &text[..end]),
    }
}

/// Kills a command's process group (`SIGKILL` to every process in it) when dropped, unless
/// disarmed: on a timeout, and when the call's future is dropped mid-run (Ctrl-C).
struct KillGroup(Option<u32>);

impl KillGroup {
    /// The command finished: its group is left alone.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        let Some(pgid) = self.0.and_then(|id| i32::try_from(id).ok()) else {
            return;
        };
        // The group may be gone already (ESRCH): nothing left to kill.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Reads `stream` to its end, keeping at most `cap` bytes; returns them and how many more
/// bytes there were.
async fn read_capped(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, u64) {
    let Some(mut stream) = stream else {
        return (Vec::new(), 0);
    };
    let mut kept = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let _ = (&mut stream).take(limit).read_to_end(&mut kept).await;
    let mut cut = tokio::io::copy(&mut stream, &mut tokio::io::sink())
        .await
        .unwrap_or(0);
    if kept.len() > cap {
        cut += (kept.len() - cap) as u64;
        kept.truncate(cap);
    }
    (kept, cut)
}

struct Recall;

#[async_trait]
impl Tool for Recall {
    fn spec(&self) -> ToolSpec {
        spec(
            "recall",
            "Read earlier messages of this conversation back in full, even when they were summarized: by seq, by range, or by a phrase.",
            json!({
                "seq": {"type": "integer"},
                "from": {"type": "integer"},
                "to": {"type": "integer"},
                "pattern": {"type": "string", "description": "Whole words, in order, any case"}
            }),
            &[],
        )
    }
    fn side_effects(&self) -> bool {
        false
    }
    async fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Result<String, String> {
        let seq = optional_u64(input, "seq")?;
        let from = optional_u64(input, "from")?;
        let to = optional_u64(input, "to")?;
        let entries = match (input.get("pattern"), seq, from) {
            (Some(Value::String(pattern)), _, _) => {
                let query = SearchQuery {
                    pattern: pattern.clone(),
                    kind: None,
                    limit: 20,
                };
                ctx.store
                    .search(ctx.tenant, ctx.run, &query)
                    .await
                    .map_err(|e| format!("recall: {e}"))?
                    .entries
            }
            (_, Some(seq), _) => read(ctx, Seq(seq), Some(Seq(seq))).await?,
            (_, None, Some(from)) => read(ctx, Seq(from), to.map(Seq)).await?,
            _ => {
                return Err(
                    "invalid arguments: give \"seq\", \"from\" (and \"to\"), or \"pattern\""
                        .to_owned(),
                );
            }
        };
        if entries.is_empty() {
            return Ok("no message matches".to_owned());
        }
        Ok(capped(
            &entries.iter().map(render).collect::<Vec<_>>().join("\n\n"),
        ))
    }
}

async fn read(ctx: &ToolContext<'_>, from: Seq, to: Option<Seq>) -> Result<Vec<Entry>, String> {
    ctx.store
        .read_range(ctx.tenant, ctx.run, from, to)
        .await
        .map_err(|e| format!("recall: {e}"))
}

/// A message as recall shows it: its seq and role, then its blocks as text.
pub fn render(entry: &Entry) -> String {
    let mut out = format!("[seq {} {}]", entry.seq, entry.message.role.as_str());
    for block in &entry.message.content {
        out.push('\n');
        out.push_str(&render_block(block));
    }
    out
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Thinking { thinking, .. } => format!("(thinking) {thinking}"),
        ContentBlock::RedactedThinking { .. } => "(redacted thinking)".to_owned(),
        ContentBlock::ToolUse { name, input, id } => format!("(tool call {name} [{id}]) {input}"),
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            let body: Vec<String> = content.iter().map(render_block).collect();
            let error = if *is_error { " error" } else { "" };
            format!("(tool result [{tool_use_id}]{error}) {}", body.join("\n"))
        }
        ContentBlock::Image { .. } => "(image)".to_owned(),
        ContentBlock::ToolReference { tool_name } => format!("(tool {tool_name} made available)"),
        ContentBlock::Opaque { block } => format!(
            "({} block) {block}",
            block
                .get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("vendor")
        ),
        ContentBlock::Document { title, .. } => {
            format!("(document {})", title.as_deref().unwrap_or(""))
        }
    }
}

#[cfg(test)]
mod tests;
