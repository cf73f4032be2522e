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

/// For the readers' tests: `lines` as a JSONL file, one object a line.
#[cfg(test)]
pub(crate) fn jsonl(lines: &[serde_json::Value]) -> Vec<u8> {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    text.into_bytes()
}

/// For the readers' tests: cuts `lines` (one JSON object a line) after each line, as a file
/// still being written may end, and reads each cut with `parse`. Every transcript's settled
/// messages must be a prefix of the same transcript's (by source session id) in what the
/// whole file gives. Returns what the first transcript of each cut settles (0 for none).
#[cfg(test)]
#[track_caller]
pub(crate) fn settled_at_every_cut(
    lines: &[serde_json::Value],
    parse: fn(&[u8]) -> Result<Vec<Transcript>, Error>,
) -> Vec<usize> {
    let whole = parse(&jsonl(lines)).unwrap();
    (1..=lines.len())
        .map(|n| {
            let cut = parse(&jsonl(&lines[..n])).unwrap();
            for t in &cut {
                let full = whole
                    .iter()
                    .find(|w| w.source_session_id == t.source_session_id)
                    .unwrap();
                assert_eq!(
                    t.messages[..t.settled],
                    full.messages[..t.settled],
                    "cut at {n}"
                );
            }
            cut.first().map_or(0, |t| t.settled)
        })
        .collect()
}
