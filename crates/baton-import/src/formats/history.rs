//! Claude Code's prompt history, `~/.claude/history.jsonl`: one line per prompt the user typed,
//! in every project, kept after the sessions' own files are deleted.
//!
//! Each line is a JSON object: `display` (the prompt as shown, pasted text as a
//! `[Pasted text #1 +12 lines]` placeholder), `pastedContents` (an object of pasted items;
//! `content` holds the text of those kept inline), `timestamp` (milliseconds since the Unix
//! epoch), `project` (the working directory) and, since Claude Code 1.0.x, `sessionId`.
//!
//! [`parse`] groups the prompts into one [`Transcript`] per session id (format
//! [`Format::ClaudeCodeHistory`]), each prompt a user message in file order, with the pasted
//! texts after the prompt. Prompts of older versions, without a session id, go to one
//! transcript per project (no session id, [`Transcript::project`] set), since nothing ties them
//! to a session. The history file is only appended to, so a later read of the same file holds
//! the same transcripts with more prompts at their ends.
//!
//! A line that is not a JSON object with a string `display` is an error naming the line, except
//! an unterminated last line, which Claude Code may still be writing: it is left out.

use std::collections::BTreeMap;

use baton_core::{Message, Role, Timestamp};
use serde_json::Value;

use crate::{Error, Format, ImportedMessage, Transcript, title_of};

/// Whether `bytes` look like a prompt history: the first line has `display` and `timestamp`
/// and no `type`.
pub fn sniff(bytes: &[u8]) -> bool {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    match serde_json::from_slice::<Value>(first) {
        Ok(Value::Object(o)) => {
            o.contains_key("display") && o.contains_key("timestamp") && !o.contains_key("type")
        }
        _ => false,
    }
}

/// Reads a prompt history into one transcript per session (see the module documentation).
pub fn parse(bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let mut sessions: BTreeMap<String, usize> = BTreeMap::new();
    let mut projects: BTreeMap<String, usize> = BTreeMap::new();
    let mut out: Vec<Transcript> = Vec::new();
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let count = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        let number = i + 1;
        let last = number == count;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(_) if last && !ends_with_newline => break,
            Err(e) => return Err(Error::at(number, format!("not a JSON object: {e}"))),
        };
        let Value::Object(o) = value else {
            return Err(Error::at(number, "not a JSON object"));
        };
        let display = match o.get("display") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(Error::at(number, "`display` is not a string")),
            None => return Err(Error::at(number, "no `display` (the prompt's text)")),
        };
        let timestamp = match o.get("timestamp") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) => match n.as_i64() {
                Some(ms) if ms >= 0 => Some(Timestamp(ms).to_string()),
                _ => {
                    return Err(Error::at(
                        number,
                        format!("`timestamp` = {n}: expected milliseconds since 1970"),
                    ));
                }
            },
            Some(Value::String(s)) => match Timestamp::parse(s) {
                Some(t) => Some(t.to_string()),
                None => {
                    return Err(Error::at(
                        number,
                        format!(
                            "`timestamp` = {s:?}: expected milliseconds since 1970 or RFC 3339"
                        ),
                    ));
                }
            },
            Some(other) => {
                return Err(Error::at(
                    number,
                    format!("`timestamp` = {other}: expected milliseconds since 1970"),
                ));
            }
        };
        let text_of = |key: &str| -> Result<Option<String>, Error> {
            match o.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(Error::at(number, format!("`{key}` is not a string"))),
            }
        };
        let project = text_of("project")?;
        let session = text_of("sessionId")?;
        let mut text = display;
        if let Some(Value::Object(pasted)) = o.get("pastedContents") {
            for item in pasted.values() {
                if let Some(Value::String(content)) = item.get("content") {
                    text.push_str("\n\n");
                    text.push_str(content);
                }
            }
        }
        if text.trim().is_empty() {
            continue;
        }
        let at = match &session {
            Some(id) => *sessions.entry(id.clone()).or_insert_with(|| {
                let mut t = Transcript::new(Format::ClaudeCodeHistory);
                t.source_session_id = Some(id.clone());
                t.project = project.clone();
                out.push(t);
                out.len() - 1
            }),
            None => {
                let key = project.clone().unwrap_or_default();
                *projects.entry(key).or_insert_with(|| {
                    let mut t = Transcript::new(Format::ClaudeCodeHistory);
                    t.project = project.clone();
                    out.push(t);
                    out.len() - 1
                })
            }
        };
        let t = &mut out[at];
        if t.title.is_none() {
            t.title = title_of(&text);
        }
        t.messages.push(ImportedMessage {
            message: Message::text(Role::User, text),
            timestamp,
            model: None,
            line: None,
        });
    }
    for (index, t) in out.iter_mut().enumerate() {
        t.index = index;
        t.settled = t.messages.len();
    }
    Ok(out)
}
