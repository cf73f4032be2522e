//! One module per source format. Each offers `sniff(&[u8]) -> bool` (cheap, content-based) and
//! `parse(&[u8]) -> Result<Vec<Transcript>, Error>`.

mod aider;
mod claude_code;
mod codex;
mod messages;
mod openhands;
mod swe_agent;

use crate::{Error, Format, Transcript};

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
    }
}

/// Reads `bytes` as `format`.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Vec<Transcript>, Error> {
    match format {
        Format::ClaudeCode => claude_code::parse(bytes),
        Format::Codex => codex::parse(bytes),
        Format::OpenHands => openhands::parse(bytes),
        Format::SweAgent => swe_agent::parse(bytes),
        Format::OpenAi => messages::parse(bytes, Format::OpenAi),
        Format::Anthropic => messages::parse(bytes, Format::Anthropic),
        Format::Aider => aider::parse(bytes),
    }
}
