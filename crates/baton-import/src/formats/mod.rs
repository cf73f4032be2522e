//! One module per source format. Each offers `sniff(&[u8]) -> bool` (cheap, content-based) and
//! `parse(&[u8]) -> Result<Vec<Transcript>, Error>`.

mod aider;
mod claude_code;
mod codex;
pub mod history;
mod messages;
mod openhands;
mod swe_agent;

use crate::{Error, Format, Transcript};

/// The lines of a JSONL file, each with its 1-based number and whether it is the piece after
/// the last newline (a line still being written, when the file does not end with one).
pub(crate) fn jsonl_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8], bool)> {
    let mut start = 0;
    let mut no = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        no += 1;
        match memchr::memchr(b'\n', &bytes[start..]) {
            Some(at) => {
                let line = &bytes[start..start + at];
                start += at + 1;
                Some((no, line, false))
            }
            None => {
                done = true;
                Some((no, &bytes[start..], true))
            }
        }
    })
}

/// Whether `bytes` look like `format`.
pub fn sniff(format: Format, bytes: &[u8]) -> bool {
    match format {
        Format::ClaudeCode => claude_code::sniff(bytes),
        Format::Codex => codex::sniff(bytes),
        Format::OpenHands => openhands::sniff(bytes),
        Format::SweAgent => swe_agent::sniff(bytes),
        Format::OpenAi => messages::sniff_openai(bytes),
        Format::Anthropic => messages::sniff_anthropic(bytes),
        Format::Aider => aider::sniff(bytes),
        Format::ClaudeCodeHistory => history::sniff(bytes),
    }
}

/// Reads `bytes` as `format`.
///
/// The formats that are one JSON document (OpenHands, SWE-agent, message arrays) are whole or
/// fail to parse, so every message of theirs is settled; Claude Code, Codex and aider append as
/// the session goes, and say in their module documentation what their last complete unit is.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    let mut transcripts = match format {
        Format::ClaudeCode => return claude_code::parse(bytes),
        Format::Codex => return codex::parse(bytes),
        Format::Aider => return aider::parse(bytes),
        Format::ClaudeCodeHistory => return history::parse(bytes),
        Format::OpenHands => openhands::parse(bytes)?,
        Format::SweAgent => swe_agent::parse(bytes)?,
        Format::OpenAi => messages::parse(bytes, Format::OpenAi)?,
        Format::Anthropic => messages::parse(bytes, Format::Anthropic)?,
    };
    for t in &mut transcripts {
        t.settled = t.messages.len();
        t.title = t
            .messages
            .iter()
            .filter(|m| m.message.role == baton_core::Role::User)
            .find_map(|m| crate::title_of(&m.message.plain_text()));
    }
    Ok(transcripts)
}
