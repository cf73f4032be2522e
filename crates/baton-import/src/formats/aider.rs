//! aider chat history Markdown (`.aider.chat.history.md`, and the website's example transcripts).
//!
//! aider appends to one Markdown file across sessions, marking lines by prefix:
//! - `# aider chat started at <time>` starts a session; each session is one [`Transcript`]
//!   (`index` = its position in the file), and `<time>` (local time as aider wrote it, such as
//!   `2024-08-05 19:33:02`, with no offset) is the timestamp of the session's first message.
//!   Chat lines before the first header (a history whose start was cut off) form a session of
//!   their own, without a timestamp; a file with no header at all (a website example) is one
//!   session.
//! - `#### ` lines are what the user typed; a run of them is one user message.
//! - `> ` lines are aider's console output. aider has no tool protocol, but it does act: each
//!   `> Applied edit to FILE` line is a tool use `{name: "apply_edit", input: {"path": FILE,
//!   "edit": "sha256:…"}}` (id `aider-edit-<n>`, numbered per session; `edit` digests the edit
//!   blocks for that file in the last assistant reply before it, so two edits of one file are one
//!   repeated call only when they change it the same way) answered by a [`Role::Tool`] result `Applied edit to FILE`. The use joins the assistant message just before it (the reply whose
//!   edit blocks aider applied), else opens an assistant message of its own. Every other run of
//!   console lines is one user message holding the output: it is what the person saw and
//!   answered (`Add these files to the chat? y`), and it is not a tool's answer to the model.
//!   A `Model:`, `Models:` or `Main model:` console line sets the model of later assistant
//!   messages.
//! - Any other line is the assistant's reply, a run of them one assistant message (blank lines
//!   at its ends trimmed). Text before a session's first user line is not chat (the website
//!   examples' introductions) and is skipped.
//!
//! A session with no message (aider started and quit) yields no transcript; the others keep
//! their place in the file as `index`. aider appends to the file as the chat goes, and the last
//! exchange of the last session can still change however the file was cut: the reply streams,
//! a prompt or console output gains lines, an `Applied edit` line adds a call to the reply
//! before it, and a line cut short can become another kind of line. An exchange is complete
//! once the next prompt begins, and a prompt once a whole line of another kind follows it, so
//! the last complete unit ([`Transcript::settled`]) is every message before the last session's
//! last prompt, and that prompt too once it is closed (a file just copied keeps the user's
//! last instruction while its reply waits).
//!
//! The trailing two spaces aider writes after `####` and `>` lines (a Markdown line break) are
//! removed. Prefixes are matched on every line, inside code fences too, as aider writes them.
//! A Jekyll front matter block (`---` … `---`) at the top of the file is skipped, and in such a
//! file lines holding only `<div …>`, `</div>` or `<br/>` (the website's transcript wrappers)
//! are skipped too. Skipped lines are counted in [`crate::Skipped::non_message_lines`].

use baton_core::{ContentBlock, Message, Role};
use serde_json::json;

use crate::{Error, Format, ImportedMessage, Transcript};

const HEADER: &str = "# aider chat started at ";

/// Whether `bytes` look like an aider chat history: a session header, or user and console lines.
pub fn sniff(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return false;
    }
    let mut user = false;
    let mut console = false;
    for line in text.lines() {
        if line.starts_with(HEADER) {
            return true;
        }
        match Kind::of(line) {
            Kind::User(_) => user = true,
            Kind::Console(_) => console = true,
            Kind::Other => {}
        }
        if user && console {
            return true;
        }
    }
    false
}

/// Reads every session of a chat history.
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let text =
        std::str::from_utf8(bytes).map_err(|e| Error::malformed(format!("not UTF-8: {e}")))?;
    let lines: Vec<&str> = text.lines().collect();
    let mut start = 0;
    let website = lines.first().is_some_and(|l| l.trim_end() == "---");
    if website {
        let close = lines
            .iter()
            .skip(1)
            .position(|l| l.trim_end() == "---")
            .ok_or_else(|| Error::at(1, "front matter opened with \"---\" is not closed"))?;
        start = close + 2;
    }

    let mut out = Vec::new();
    let mut session = Session::new(0, None, website);
    session.t.skipped.non_message_lines += start;
    let mut preamble_has_chat = false;
    let mut seen_header = false;
    // A last line without its newline may be cut short: `####` now, `##### Step` once whole.
    let cut_short = (!text.ends_with('\n')).then(|| lines.len().saturating_sub(1));
    for (at, line) in lines.iter().enumerate().skip(start) {
        if let Some(time) = line.strip_prefix(HEADER) {
            if seen_header || preamble_has_chat {
                out.push(session.finish());
            }
            seen_header = true;
            session = Session::new(out.len(), Some(time.trim().to_owned()), website);
            continue;
        }
        let kind = Kind::of(line);
        if !matches!(kind, Kind::Other) {
            preamble_has_chat = true;
        }
        session.line(line, kind, cut_short != Some(at));
    }
    if seen_header || preamble_has_chat {
        out.push(session.finish());
    }
    if out.is_empty() {
        return Err(Error::malformed(
            "no aider session: no \"# aider chat started at\" header and no \"####\" or \">\" lines",
        ));
    }
    let last = out.len() - 1;
    for (k, t) in out.iter_mut().enumerate() {
        let n = t.messages.len();
        // The last session's open exchange (module docs): `finish` left its start there.
        t.settled = if k == last { t.settled.min(n) } else { n };
        t.title = t
            .messages
            .iter()
            .filter(|m| m.message.role == Role::User)
            .find_map(|m| crate::title_of(&m.message.plain_text()));
    }
    // A session started and left without a word (aider opened and closed) is no transcript.
    out.retain(|t| !t.messages.is_empty());
    Ok(out)
}

/// How aider marked a line.
enum Kind<'a> {
    /// `#### text`: user input.
    User(&'a str),
    /// `> text`: console output.
    Console(&'a str),
    /// Anything else.
    Other,
}

impl<'a> Kind<'a> {
    fn of(line: &'a str) -> Kind<'a> {
        let body = line.strip_suffix("  ").unwrap_or(line);
        let marked = |prefix: &str| {
            body.strip_prefix(prefix).and_then(|rest| {
                if rest.is_empty() {
                    Some("")
                } else {
                    rest.strip_prefix(' ')
                }
            })
        };
        if let Some(rest) = marked("####") {
            Kind::User(rest)
        } else if let Some(rest) = marked(">") {
            Kind::Console(rest)
        } else {
            Kind::Other
        }
    }
}

/// The block being collected.
#[derive(PartialEq)]
enum Block {
    None,
    User,
    Console,
    Assistant,
}

struct Session {
    t: Transcript,
    timestamp: Option<String>,
    model: Option<String>,
    website: bool,
    /// Whether a user line has been seen: assistant text comes only after one.
    started: bool,
    block: Block,
    buffer: Vec<String>,
    /// Applied edits waiting for their results: (id, path).
    pending: Vec<(String, String)>,
    edits: usize,
    /// Where the exchange the last prompt opened starts: the prompt's message.
    exchange: usize,
    /// Whether a whole line of another kind followed that prompt, so it can no longer grow.
    prompt_closed: bool,
}

impl Session {
    fn new(index: usize, timestamp: Option<String>, website: bool) -> Self {
        let mut t = Transcript::new(Format::Aider);
        t.index = index;
        Session {
            t,
            timestamp,
            model: None,
            website,
            started: false,
            block: Block::None,
            buffer: Vec::new(),
            pending: Vec::new(),
            edits: 0,
            exchange: 0,
            prompt_closed: false,
        }
    }

    /// Reads one line; `whole` unless it is a last line that may be cut short, which opens no
    /// exchange (the module docs' last complete unit).
    fn line(&mut self, line: &str, kind: Kind<'_>, whole: bool) {
        let wrapper = self.website && is_wrapper(line);
        if whole && self.block == Block::User && !matches!(kind, Kind::User(_)) && !wrapper {
            self.prompt_closed = true;
        }
        match kind {
            Kind::User(text) => {
                if self.block != Block::User {
                    self.switch(Block::User);
                    if whole {
                        self.exchange = self.t.messages.len();
                        self.prompt_closed = false;
                    }
                }
                self.started = true;
                self.buffer.push(text.to_owned());
            }
            Kind::Console(text) => {
                self.switch(Block::Console);
                self.console(text);
            }
            Kind::Other => {
                if wrapper {
                    self.t.skipped.non_message_lines += 1;
                    return;
                }
                if !self.started {
                    self.switch(Block::None);
                    if !line.trim().is_empty() {
                        self.t.skipped.non_message_lines += 1;
                    }
                    return;
                }
                self.switch(Block::Assistant);
                self.buffer.push(line.to_owned());
            }
        }
    }

    fn console(&mut self, text: &str) {
        if let Some(path) = text.strip_prefix("Applied edit to ") {
            self.flush_console();
            self.edits += 1;
            let id = format!("aider-edit-{}", self.edits);
            let path = path.trim().to_owned();
            // The reply whose edit blocks were applied: the last assistant text (console output,
            // such as the token counts, may stand between it and the edit).
            let reply = self
                .t
                .messages
                .iter()
                .rev()
                .filter(|m| m.message.role == Role::Assistant)
                .map(|m| m.message.plain_text())
                .find(|text| !text.is_empty());
            let input = match reply {
                Some(reply) => json!({ "path": path, "edit": edit_digest(&reply, &path) }),
                None => json!({ "path": path }),
            };
            let tool_use = ContentBlock::ToolUse {
                id: id.clone(),
                name: "apply_edit".to_owned(),
                input,
            };
            match self.t.messages.last_mut() {
                Some(last)
                    if last.message.role == Role::Assistant
                        && (!self.pending.is_empty()
                            || last.message.tool_use_ids().next().is_none()) =>
                {
                    last.message.content.push(tool_use);
                }
                _ => self.push(Message {
                    role: Role::Assistant,
                    content: vec![tool_use],
                }),
            }
            self.pending.push((id, path));
            return;
        }
        self.flush_results();
        if let Some(model) = model_of(text) {
            self.model = Some(model.to_owned());
            self.t.saw_model(model);
        }
        self.buffer.push(text.to_owned());
    }

    /// Ends the current block if `next` is a different one.
    fn switch(&mut self, next: Block) {
        if self.block == next {
            return;
        }
        match self.block {
            Block::User => {
                let text = std::mem::take(&mut self.buffer).join("\n");
                self.push(Message::text(Role::User, text.trim_end()));
            }
            Block::Console => {
                self.flush_results();
                self.flush_console();
            }
            Block::Assistant => {
                let text = std::mem::take(&mut self.buffer).join("\n");
                let text = text.trim_matches('\n').trim_end();
                if !text.is_empty() {
                    self.push(Message::text(Role::Assistant, text));
                }
            }
            Block::None => {}
        }
        self.block = next;
    }

    fn flush_console(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.buffer).join("\n");
        let text = text.trim_matches('\n').trim_end();
        if !text.is_empty() {
            self.push(Message::text(Role::User, text));
        }
    }

    fn flush_results(&mut self) {
        for (id, path) in std::mem::take(&mut self.pending) {
            self.push(Message {
                role: Role::Tool,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id,
                    content: vec![ContentBlock::Text {
                        text: format!("Applied edit to {path}"),
                    }],
                    is_error: false,
                }],
            });
        }
    }

    fn push(&mut self, message: Message) {
        let model = (message.role == Role::Assistant)
            .then(|| self.model.clone())
            .flatten();
        self.t.messages.push(ImportedMessage {
            message,
            timestamp: self.timestamp.take(),
            model,
            line: None,
        });
    }

    fn finish(mut self) -> Transcript {
        self.switch(Block::None);
        self.t.settled = self.exchange + usize::from(self.prompt_closed);
        self.t
    }
}

/// What an edit of `path` changed, as `sha256:<16 hex digits>` of the reply's blocks for it:
/// a fenced block right after a line naming the file (aider's `diff` and `whole` formats), or a
/// fenced block whose `---`/`+++` lines name it (`udiff`); the whole reply when none does. Two
/// edits of one file are the same edit only when this is the same.
fn edit_digest(reply: &str, path: &str) -> String {
    use sha2::{Digest, Sha256};
    let names = |line: &str| {
        let l = line.trim().trim_matches('`').trim();
        !l.is_empty()
            && (l == path || l.ends_with(&format!("/{path}")) || path.ends_with(&format!("/{l}")))
    };
    let lines: Vec<&str> = reply.lines().collect();
    let mut blocks = String::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        let close = (i + 1..lines.len())
            .find(|&j| lines[j].trim() == "```")
            .unwrap_or(lines.len());
        let body = &lines[(i + 1).min(close)..close];
        let named = i > 0 && names(lines[i - 1]);
        let diffed = body.iter().any(|l| {
            (l.starts_with("--- ") || l.starts_with("+++ "))
                && l[4..]
                    .trim()
                    .trim_start_matches("a/")
                    .trim_start_matches("b/")
                    == path
        });
        if named || diffed {
            blocks.push_str(&body.join("\n"));
            blocks.push('\n');
        }
        i = close + 1;
    }
    let hashed = if blocks.is_empty() { reply } else { &blocks };
    let digest = Sha256::digest(hashed.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The website's transcript wrappers.
fn is_wrapper(line: &str) -> bool {
    let l = line.trim();
    (l.starts_with("<div") || l.starts_with("</div") || l.starts_with("<br")) && l.ends_with('>')
}

/// The main model named by an aider startup line, such as
/// `Models: gpt-4o with diff edit format, weak model gpt-4o-mini`.
fn model_of(text: &str) -> Option<&str> {
    let rest = ["Main model: ", "Models: ", "Model: "]
        .iter()
        .find_map(|p| text.strip_prefix(p))?;
    let end = rest
        .find(" with ")
        .or_else(|| rest.find(','))
        .unwrap_or(rest.len());
    let model = rest[..end].trim();
    (!model.is_empty()).then_some(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &Transcript) -> Vec<(Role, String)> {
        t.messages
            .iter()
            .map(|m| (m.message.role, m.message.plain_text()))
            .collect()
    }

    // issue 17: every aider edit of the same file counted as a repeat.
    #[test]
    fn r17_edits_of_one_file_are_the_same_call_only_when_they_change_it_the_same_way() {
        let edit = |replace: &str| {
            format!(
                "#### change it\n\napp.py\n```python\n<<<<<<< SEARCH\na\n=======\n{replace}\n>>>>>>> REPLACE\n```\n\n> Applied edit to app.py  \n\n"
            )
        };
        let md = format!("{}{}{}", edit("b"), edit("c"), edit("b"));
        let t = &parse(md.as_bytes()).unwrap()[0];
        let inputs: Vec<&serde_json::Value> = t
            .messages
            .iter()
            .flat_map(|m| &m.message.content)
            .filter_map(|b| match b {
                ContentBlock::ToolUse { input, .. } => Some(input),
                _ => None,
            })
            .collect();
        assert_eq!(inputs.len(), 3);
        assert_ne!(inputs[0], inputs[1], "a different change of the file");
        assert_eq!(inputs[0], inputs[2], "the same change again");
        // udiff names the file in its header; a reply naming no file is digested whole.
        let udiff = "```diff\n--- a/app.py\n+++ b/app.py\n@@\n-a\n+b\n```";
        assert_eq!(
            edit_digest(&format!("intro\n{udiff}\nmore words"), "app.py"),
            edit_digest(&format!("other intro\n{udiff}"), "app.py")
        );
        assert_ne!(
            edit_digest("just words", "app.py"),
            edit_digest("other words", "app.py")
        );
    }

    // issue 17: 150 empty aider runs were created.
    #[test]
    fn r17_an_empty_session_is_no_transcript_and_a_last_exchange_may_still_change() {
        let md = "\
# aider chat started at 2024-08-05 19:33:02

# aider chat started at 2024-08-05 19:40:00

#### hello

Hi there
";
        let ts = parse(md.as_bytes()).unwrap();
        assert_eq!(ts.len(), 1);
        assert_eq!(ts[0].index, 1);
        assert_eq!(ts[0].title.as_deref(), Some("hello"));
        // The reply may still grow; the prompt, closed by the blank line after it, may not.
        assert_eq!((ts[0].messages.len(), ts[0].settled), (2, 1));
        // A prompt on the last line may gain a line: nothing is settled.
        let ts = parse(b"# aider chat started at 2024-08-05 19:33:02\n#### hello\n").unwrap();
        assert_eq!((ts[0].messages.len(), ts[0].settled), (1, 0));
        let ts = parse(b"# aider chat started at 2024-08-05 19:33:02\n").unwrap();
        assert!(ts.is_empty());
    }

    /// A file being written, cut at every character: what its settled part holds is what the
    /// whole file holds there too (each session a prefix of the same session read whole, and a
    /// session before the cut's last one whole), so importing the cut and later the whole file
    /// gives the run one import of the whole gives. Checked against the whole file's parse,
    /// never against the rule that picks the settled part. (A reply line `##### Step` cut
    /// after its fourth `#` reads as a prompt.)
    #[test]
    fn every_cut_settles_to_a_prefix_of_the_whole_file() {
        let md = "\
# aider chat started at 2024-08-05 19:33:02

> Models: claude-3-5-sonnet-20240620 with diff edit format  

#### Fix the bug  
#### in utils.py  

Here is the fix — café:

##### Step 1
utils.py
```python
<<<<<<< SEARCH
x
=======
y
>>>>>>> REPLACE
```

> Applied edit to utils.py  
> Applied edit to b.py  
> Tokens: 1k sent, 20 received.  

#### thanks  

You're welcome.

# aider chat started at 2024-08-06 10:00:00

#### add a test  
#### for b.py  

Done.

> Applied edit to test_b.py  
";
        assert_every_cut_settles_to_a_prefix(md);
        // A website example: its `<div>` wrappers are no line of the chat, so a prompt goes on
        // past one (and one does not close it).
        assert_every_cut_settles_to_a_prefix(
            "\
---
parent: Example chat transcripts
---

# Hello aider!

<div class=\"chat-transcript\" markdown=\"1\">

#### change hello  
</div>
#### to goodbye  

Here is the change.

> Applied edit to hello.py  

#### thanks  
</div>
",
        );
    }

    /// Cuts `md` at every character and checks each settled session against the whole
    /// file's parse (see `every_cut_settles_to_a_prefix_of_the_whole_file`).
    fn assert_every_cut_settles_to_a_prefix(md: &str) {
        let whole = parse(md.as_bytes()).unwrap();
        let mut checked = 0;
        for cut in (1..md.len()).filter(|&c| md.is_char_boundary(c)) {
            let Ok(mut ts) = parse(&md.as_bytes()[..cut]) else {
                continue;
            };
            let last = ts.iter().map(|t| t.index).max();
            for t in &mut ts {
                t.settle();
                let full = whole.iter().find(|w| w.index == t.index).unwrap();
                let held = &full.messages[..t.messages.len().min(full.messages.len())];
                let same = |a: &ImportedMessage, b: &ImportedMessage| {
                    (&a.message, &a.timestamp, &a.model) == (&b.message, &b.timestamp, &b.model)
                };
                assert!(
                    t.messages.len() <= full.messages.len()
                        && t.messages.iter().zip(held).all(|(a, b)| same(a, b)),
                    "cut at byte {cut}: session {} settled {:?}, whole {:?}",
                    t.index,
                    texts(t),
                    texts(full)
                );
                if Some(t.index) != last {
                    assert_eq!(t.messages.len(), full.messages.len(), "cut at byte {cut}");
                }
                checked += t.messages.len();
            }
        }
        assert!(checked > 0);
    }

    #[test]
    fn sessions_turns_console_and_edits() {
        let md = "\
# aider chat started at 2024-08-05 19:33:02

> aider --lint  
> Models: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku  

#### Fix the bug  
#### in utils.py  

Here is the fix:

utils.py
```python
<<<<<<< SEARCH
x
=======
y
>>>>>>> REPLACE
```

> Applied edit to utils.py  
> Applied edit to b.py  
> Commit abc123 fix  

#### thanks  

You're welcome.

# aider chat started at 2024-08-06 10:00:00

> Model: gpt-4 with whole edit format  
";
        let ts = parse(md.as_bytes()).unwrap();
        assert_eq!(ts.len(), 2);
        let t = &ts[0];
        assert_eq!(t.index, 0);
        assert_eq!(
            t.messages[0].timestamp.as_deref(),
            Some("2024-08-05 19:33:02")
        );
        assert!(t.messages[1..].iter().all(|m| m.timestamp.is_none()));
        assert_eq!(t.models, ["claude-3-5-sonnet-20240620"]);
        let got = texts(t);
        assert_eq!(got[0], (Role::User, "aider --lint\nModels: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku".into()));
        assert_eq!(got[1], (Role::User, "Fix the bug\nin utils.py".into()));
        assert_eq!(got[2].0, Role::Assistant);
        assert!(
            got[2]
                .1
                .starts_with("Here is the fix:\n\nutils.py\n```python")
        );
        assert!(got[2].1.ends_with(">>>>>>> REPLACE\n```"));
        // The edits join the reply that made them.
        assert_eq!(
            t.messages[2].message.tool_use_ids().collect::<Vec<_>>(),
            ["aider-edit-1", "aider-edit-2"]
        );
        assert_eq!(
            t.messages[2].model.as_deref(),
            Some("claude-3-5-sonnet-20240620")
        );
        match &t.messages[2].message.content[1] {
            ContentBlock::ToolUse { name, input, .. } => {
                assert_eq!(name, "apply_edit");
                assert_eq!(input["path"], "utils.py");
                // The block after the line naming the file is what the edit changed.
                assert_eq!(
                    input["edit"],
                    edit_digest(
                        "utils.py\n```python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```",
                        "utils.py"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.messages[3].message.role, Role::Tool);
        assert_eq!(
            t.messages[3].message.tool_result_ids().collect::<Vec<_>>(),
            ["aider-edit-1"]
        );
        assert_eq!(
            t.messages[4].message.tool_result_ids().collect::<Vec<_>>(),
            ["aider-edit-2"]
        );
        assert_eq!(got[5], (Role::User, "Commit abc123 fix".into()));
        assert_eq!(got[6], (Role::User, "thanks".into()));
        assert_eq!(got[7], (Role::Assistant, "You're welcome.".into()));
        assert_eq!(t.messages.len(), 8);
        assert_eq!(t.tool_calls(), 2);

        let t = &ts[1];
        assert_eq!(t.index, 1);
        assert_eq!(t.models, ["gpt-4"]);
        assert_eq!(t.messages.len(), 1);
        assert_eq!(
            t.messages[0].timestamp.as_deref(),
            Some("2024-08-06 10:00:00")
        );
    }

    #[test]
    fn edit_after_console_opens_its_own_assistant_message() {
        let md = "#### make it\n\nok\n\n> Allow creation of new file a.py? y  \n> Applied edit to a.py  \n";
        let t = &parse(md.as_bytes()).unwrap()[0];
        let roles: Vec<Role> = t.messages.iter().map(|m| m.message.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::User,
                Role::Assistant,
                Role::Tool
            ]
        );
        assert_eq!(t.messages[3].message.content.len(), 1);
        assert_eq!(t.messages[3].message.tool_use_ids().count(), 1);
        // A second edit after a user turn, with no reply before it, gets its own message too.
        let md = "#### a\n> Applied edit to x  \n#### b\n> Applied edit to y  \n";
        let t = &parse(md.as_bytes()).unwrap()[0];
        let roles: Vec<Role> = t.messages.iter().map(|m| m.message.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::User,
                Role::Assistant,
                Role::Tool
            ]
        );
    }

    #[test]
    fn website_example_front_matter_prose_and_wrappers_are_skipped() {
        let md = "---\nparent: Example chat transcripts\n---\n\n# Hello aider!\n\nIntro prose.\n\n<br/>\n<div class=\"chat-transcript\" markdown=\"1\">\n\n#### change hello to goodbye  \n\nDone.\n\n> Applied edit to hello.py  \n\n</div>\n<br/>\n";
        let ts = parse(md.as_bytes()).unwrap();
        assert_eq!(ts.len(), 1);
        let t = &ts[0];
        assert_eq!(texts(t)[0], (Role::User, "change hello to goodbye".into()));
        assert_eq!(texts(t)[1].1, "Done.");
        assert_eq!(t.messages.len(), 3);
        assert_eq!(t.messages[0].timestamp, None);
        // 3 front matter lines, heading, prose, 2 <br/>, 2 <div>s.
        assert_eq!(t.skipped.non_message_lines, 3 + 2 + 4);
    }

    #[test]
    fn preamble_before_first_header_is_a_session() {
        let md = "-*- mode: fundamental -*-\n> output\n#### fix\n\n# aider chat started at 2024-01-01 00:00:00\n\n#### hi\n";
        let ts = parse(md.as_bytes()).unwrap();
        assert_eq!(ts.len(), 2);
        assert_eq!(ts[0].messages[0].timestamp, None);
        assert_eq!(ts[0].skipped.non_message_lines, 1);
        assert_eq!(
            texts(&ts[0]),
            [(Role::User, "output".into()), (Role::User, "fix".into())]
        );
        assert_eq!(ts[1].index, 1);
        // Without chat lines the preamble is no session.
        let ts = parse(b"notes\n# aider chat started at 2024-01-01 00:00:00\n#### hi\n").unwrap();
        assert_eq!(ts.len(), 1);
        assert_eq!(ts[0].index, 0);
    }

    #[test]
    fn markers_need_their_space() {
        assert!(matches!(Kind::of("####"), Kind::User("")));
        assert!(matches!(Kind::of("####   "), Kind::User("")));
        assert!(matches!(Kind::of(">"), Kind::Console("")));
        assert!(matches!(Kind::of(">  "), Kind::Console("")));
        assert!(matches!(Kind::of("#####"), Kind::Other));
        assert!(matches!(Kind::of(">>>>>>> REPLACE"), Kind::Other));
        assert!(matches!(Kind::of("###x"), Kind::Other));
        assert_eq!(
            model_of("Main model: o1 with diff edit format, infinite"),
            Some("o1")
        );
        assert_eq!(model_of("Model: gpt-4"), Some("gpt-4"));
        assert_eq!(model_of("Models: a, weak b"), Some("a"));
        assert_eq!(model_of("Modelx: a"), None);
    }

    #[test]
    fn sniff_and_malformed() {
        assert!(sniff(b"# aider chat started at 2024-01-01 00:00:00\n"));
        assert!(sniff(b"---\nx: 1\n---\n#### hi\n> Applied edit to a\n"));
        assert!(!sniff(b"# Title\n\n#### A heading\n\ntext\n"));
        assert!(!sniff(
            b"[{\"role\":\"user\",\"content\":\"#### x\\n> y\"}]"
        ));
        let err = parse(b"just prose\n").unwrap_err();
        assert!(err.to_string().starts_with("no aider session"), "{err}");
        let err = parse(b"---\ntitle: x\n#### hi\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1: front matter opened with \"---\" is not closed"
        );
        assert!(parse(&[0xff, 0xfe]).is_err());
    }
}
