//! What the user typed, told apart from what the harness wrote in the user's place.
//!
//! The rule, shared word for word with the continuity probes (`baton-probes`, which implement it
//! on their own so that they can grade this extractor):
//!
//! A text block of a user-role message (never a `tool_result`), with `<system-reminder>…</system-reminder>`
//! segments removed, is typed by the user unless it is empty or starts with `<` (harness echoes:
//! `<local-command-stdout>`, `<local-command-caveat>`, `<environment_context>`,
//! `<task-notification>`, `<user_instructions>`, `<image …>`…), `Caveat:`, `[Request interrupted`,
//! `# AGENTS.md instructions`, `Base directory for this skill`, or `This session is being
//! continued from a previous conversation` (a compaction summary). A slash command echo
//! (`<command-name>/x</command-name>`, with optional `<command-message>` and
//! `<command-args>A</command-args>` in any order) is the instruction `/x A`, as typed. A Codex
//! client's message that lists attached files above the request (`# Files mentioned by the user:`
//! … `## My request for Codex:`) is the text after that last heading. The user
//! text message right after a slash command message (the next message of the run) is the
//! command's expansion, not typed by the user; the caller applies that rule, since it needs the
//! message before.

use std::borrow::Cow;

use baton_core::{ContentBlock, Message, Role};

/// What a user message holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UserInput {
    /// A slash command, as typed (`/name args`).
    Command(String),
    /// Text the user typed (the message's typed blocks, joined by a blank line).
    Text(String),
    /// Only text the harness wrote.
    Harness,
}

/// Prefixes of text the harness writes in a user message.
const HARNESS: &[&str] = &[
    "<",
    "Caveat:",
    "[Request interrupted",
    "# AGENTS.md instructions",
    "Base directory for this skill",
    "This session is being continued from a previous conversation",
];

/// The heading a Codex client puts above the request when it lists attached files first.
const CODEX_REQUEST: &str = "## My request for Codex:";

/// What `message` holds as user input, or `None` when it is not a user message with text
/// (a tool result, an assistant message).
pub(crate) fn user_input(message: &Message) -> Option<UserInput> {
    if message.role != Role::User {
        return None;
    }
    let texts: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return None;
    }
    if let Some(command) = texts.iter().find_map(|t| slash_command(t)) {
        return Some(UserInput::Command(command));
    }
    let typed: Vec<String> = texts
        .iter()
        .map(|t| strip_reminders(t))
        .map(|t| match t.rsplit_once(CODEX_REQUEST) {
            Some((_, request)) => request.trim().to_owned(),
            None => t.trim().to_owned(),
        })
        .filter(|t| !t.is_empty() && !HARNESS.iter().any(|p| t.starts_with(p)))
        .collect();
    if typed.is_empty() {
        return Some(UserInput::Harness);
    }
    Some(UserInput::Text(typed.join("\n\n")))
}

/// `text` without its `<system-reminder>…</system-reminder>` segments (an unclosed one runs to
/// the end).
pub(crate) fn strip_reminders(text: &str) -> Cow<'_, str> {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    if !text.contains(OPEN) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The slash command a command echo holds, as typed: `/name args`.
fn slash_command(text: &str) -> Option<String> {
    let name = between(text, "<command-name>", "</command-name>")?.trim();
    if name.is_empty() {
        return None;
    }
    let name = if name.starts_with('/') {
        name.to_owned()
    } else {
        format!("/{name}")
    };
    let args = between(text, "<command-args>", "</command-args>").map_or("", str::trim);
    Some(if args.is_empty() {
        name
    } else {
        format!("{name} {args}")
    })
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let (_, rest) = text.split_once(open)?;
    let (inside, _) = rest.split_once(close)?;
    Some(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::text(Role::User, text)
    }

    #[track_caller]
    fn check(text: &str, expect: Option<UserInput>) {
        assert_eq!(user_input(&user(text)), expect, "{text:?}");
    }

    #[test]
    fn typed_text_commands_and_harness() {
        use UserInput::*;
        check("fix the login bug", Some(Text("fix the login bug".into())));
        check(
            "<command-name>/clear</command-name>\n  <command-message>clear</command-message>\n  <command-args></command-args>",
            Some(Command("/clear".into())),
        );
        check(
            "<command-message>orchestrator is running…</command-message>\n<command-name>/orchestrator</command-name>\n<command-args>@CLAUDE.md update</command-args>",
            Some(Command("/orchestrator @CLAUDE.md update".into())),
        );
        check(
            "<local-command-stdout>Goodbye!</local-command-stdout>",
            Some(Harness),
        );
        check(
            "Caveat: The messages below were generated by the user",
            Some(Harness),
        );
        check("[Request interrupted by user for tool use]", Some(Harness));
        check(
            "# AGENTS.md instructions for /x\n\n<INSTRUCTIONS>",
            Some(Harness),
        );
        check(
            "Base directory for this skill: /home/u/.claude/skills/x",
            Some(Harness),
        );
        check(
            "This session is being continued from a previous conversation that ran out of context.",
            Some(Harness),
        );
        check(
            "<system-reminder>\nbe brief\n</system-reminder>\nship it",
            Some(Text("ship it".into())),
        );
        check("<system-reminder>only a reminder", Some(Harness));
        check(
            "# Files mentioned by the user:\n\n## demo.vtt: /Users/u/demo.vtt\n\n## My request for Codex:\nsummarize the action items",
            Some(Text("summarize the action items".into())),
        );
        check("   ", Some(Harness));
        assert_eq!(user_input(&Message::text(Role::Assistant, "hi")), None);
    }

    #[test]
    fn several_blocks_keep_the_typed_ones() {
        let message = Message {
            role: Role::User,
            content: vec![
                ContentBlock::Text {
                    text: "<image name=[Image #1]>".into(),
                },
                ContentBlock::Text {
                    text: "</image>".into(),
                },
                ContentBlock::Text {
                    text: "why does the label break? [Image #1]".into(),
                },
            ],
        };
        assert_eq!(
            user_input(&message),
            Some(UserInput::Text(
                "why does the label break? [Image #1]".into()
            ))
        );
    }
}
