//! Secret redaction for imported text: strings that look like API keys or tokens become
//! `[REDACTED:<kind>]`, and the caller learns how many there were.
//!
//! Recognized, by prefix and the run of key characters that follows it:
//!
//! | kind          | form                                                          |
//! |---------------|---------------------------------------------------------------|
//! | `anthropic`   | `sk-ant-` + 20 or more key characters                         |
//! | `openai`      | `sk-` (incl. `sk-proj-`) + 20 or more key characters          |
//! | `github`      | `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 30 or more; `github_pat_` + 22 or more |
//! | `aws`         | `AKIA` + exactly 16 of `[0-9A-Z]`                              |
//! | `slack`       | `xoxb-`/`xoxa-`/`xoxp-`/`xoxr-`/`xoxs-` + 10 or more          |
//! | `google`      | `AIza` + 30 or more                                           |
//! | `huggingface` | `hf_` + 30 or more letters and digits                         |
//! | `gitlab`      | `glpat-` + 20 or more                                         |
//! | `bearer`      | `Bearer ` + a token of 16 or more characters (the word stays) |
//!
//! To keep ordinary words intact, a prefix counts only at the start of a word (not after a
//! letter, digit, `-` or `_`), and `sk-…` keys and bearer tokens must mix letters and digits, so
//! `risk-free`, `sk-learn`, `sk-this-is-a-long-hyphenated-slug` and `Bearer authentication`
//! stay. Plain scanning, no regular expressions.
//!
//! ```
//! let (text, n) = baton_import::redact::redact("export KEY=sk-proj-abcDEF1234567890ghijKLMN");
//! assert_eq!(text, "export KEY=[REDACTED:openai]");
//! assert_eq!(n, 1);
//! ```

use baton_core::{ContentBlock, MediaSource, Message};

/// What one recognizer found at a position.
struct Found {
    /// Bytes kept before the redaction marker (the `Bearer ` of a bearer token).
    keep: usize,
    /// Bytes the match covers, from the position.
    len: usize,
    kind: &'static str,
}

/// Replaces secrets in `text`; returns the new text and how many were replaced.
pub fn redact(text: &str) -> (String, usize) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    let mut copied = 0; // text[..copied] is in `out` already
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start = i == 0 || !is_key(bytes[i - 1]);
        if at_word_start && let Some(found) = find_at(&bytes[i..]) {
            out.push_str(&text[copied..i + found.keep]);
            out.push_str("[REDACTED:");
            out.push_str(found.kind);
            out.push(']');
            count += 1;
            i += found.len;
            copied = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    (out, count)
}

/// Redacts every string of `message` a person or tool wrote: text, thinking, tool inputs (string
/// values at any depth; keys stay), tool results, URLs and document titles. Opaque payloads
/// (redacted thinking, signatures, base64 media, the sealed fields of a block baton cannot read)
/// are left as they are. Returns the count.
pub fn redact_message(message: &mut Message) -> usize {
    message.content.iter_mut().map(redact_block).sum()
}

fn redact_block(block: &mut ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text } | ContentBlock::ToolReference { tool_name: text } => {
            redact_in_place(text)
        }
        ContentBlock::Thinking { thinking, .. } => redact_in_place(thinking),
        ContentBlock::RedactedThinking { .. } => 0,
        ContentBlock::ToolUse { input, .. } => redact_json(input),
        ContentBlock::Opaque { block } => redact_opaque(block),
        ContentBlock::ToolResult { content, .. } => content.iter_mut().map(redact_block).sum(),
        ContentBlock::Image { source } => redact_source(source),
        ContentBlock::Document { source, title } => {
            redact_source(source) + title.as_mut().map_or(0, redact_in_place)
        }
    }
}

fn redact_source(source: &mut MediaSource) -> usize {
    match source {
        MediaSource::Url { url } => redact_in_place(url),
        MediaSource::File { .. } | MediaSource::Base64 { .. } => 0,
    }
}

fn redact_json(value: &mut serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(s) => redact_in_place(s),
        serde_json::Value::Array(items) => items.iter_mut().map(redact_json).sum(),
        serde_json::Value::Object(map) => map.values_mut().map(redact_json).sum(),
        _ => 0,
    }
}

/// A block baton cannot read: its strings as in a tool input, except the provider's sealed ones
/// (`encrypted_*`, `signature`) and base64 payloads (`data`), which must go back byte for byte.
fn redact_opaque(value: &mut serde_json::Value) -> usize {
    match value {
        serde_json::Value::Object(map) => map
            .iter_mut()
            .filter(|(key, _)| {
                !key.starts_with("encrypted") && !matches!(key.as_str(), "signature" | "data")
            })
            .map(|(_, v)| redact_opaque(v))
            .sum(),
        serde_json::Value::Array(items) => items.iter_mut().map(redact_opaque).sum(),
        other => redact_json(other),
    }
}

fn redact_in_place(text: &mut String) -> usize {
    let (redacted, n) = redact(text);
    if n > 0 {
        *text = redacted;
    }
    n
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Characters of API keys: letters, digits, `-` and `_`.
fn is_key(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The length of the run at the start of `s` whose bytes satisfy `pred`.
fn run(s: &[u8], pred: impl Fn(u8) -> bool) -> usize {
    s.iter().take_while(|b| pred(**b)).count()
}

fn mixes_letters_and_digits(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_digit) && s.iter().any(u8::is_ascii_alphabetic)
}

/// A secret starting at the start of `s`, if any.
fn find_at(s: &[u8]) -> Option<Found> {
    let token = |prefix: &[u8], min: usize, pred: fn(u8) -> bool, kind: &'static str| {
        let rest = s.strip_prefix(prefix)?;
        let n = run(rest, pred);
        (n >= min).then_some(Found {
            keep: 0,
            len: prefix.len() + n,
            kind,
        })
    };
    match s.first()? {
        b's' => {
            let rest = s.strip_prefix(b"sk-")?;
            let kind = if rest.starts_with(b"ant-") {
                "anthropic"
            } else {
                "openai"
            };
            let body_start = if kind == "anthropic" { 4 } else { 0 };
            let n = run(rest, is_key);
            let body = &rest[body_start..n.max(body_start)];
            (body.len() >= 20 && mixes_letters_and_digits(body)).then_some(Found {
                keep: 0,
                len: 3 + n,
                kind,
            })
        }
        b'g' => [&b"ghp_"[..], b"gho_", b"ghu_", b"ghs_", b"ghr_"]
            .into_iter()
            .find_map(|p| token(p, 30, |b| b.is_ascii_alphanumeric(), "github"))
            .or_else(|| token(b"github_pat_", 22, is_word, "github"))
            .or_else(|| token(b"glpat-", 20, is_key, "gitlab")),
        b'A' => {
            if let Some(rest) = s.strip_prefix(b"AKIA") {
                let n = run(rest, |b| b.is_ascii_digit() || b.is_ascii_uppercase());
                let followed_by_word = rest.get(n).is_some_and(|b| is_word(*b));
                return (n == 16 && !followed_by_word).then_some(Found {
                    keep: 0,
                    len: 20,
                    kind: "aws",
                });
            }
            token(b"AIza", 30, is_key, "google")
        }
        b'x' => [&b"xoxb-"[..], b"xoxa-", b"xoxp-", b"xoxr-", b"xoxs-"]
            .into_iter()
            .find_map(|p| token(p, 10, is_key, "slack")),
        b'h' => token(b"hf_", 30, |b| b.is_ascii_alphanumeric(), "huggingface"),
        b'B' => {
            let rest = s.strip_prefix(b"Bearer ")?;
            let pred = |b: u8| is_key(b) || matches!(b, b'.' | b'~' | b'+' | b'/' | b'=');
            let n = run(rest, pred);
            (n >= 16 && mixes_letters_and_digits(&rest[..n])).then_some(Found {
                keep: 7,
                len: 7 + n,
                kind: "bearer",
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use baton_core::{ContentBlock, MediaSource, Message, Role};

    use super::{redact, redact_message};

    #[track_caller]
    fn check(input: &str, expected: &str, n: usize) {
        assert_eq!(redact(input), (expected.to_owned(), n), "input: {input}");
    }

    #[test]
    fn redacts_each_kind() {
        check(
            "key sk-ant-api03-AbCdEf0123456789AbCdEf0123456789_xyz-Q end",
            "key [REDACTED:anthropic] end",
            1,
        );
        check("sk-proj-abcDEF1234567890ghijKLMN", "[REDACTED:openai]", 1);
        check(
            "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL\n",
            "OPENAI_API_KEY=[REDACTED:openai]\n",
            1,
        );
        check(
            "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "token: [REDACTED:github]",
            1,
        );
        check(
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "[REDACTED:github]",
            1,
        );
        check("aws AKIAIOSFODNN7EXAMPLE.", "aws [REDACTED:aws].", 1);
        check("xoxb-1234567890-abcdefghij", "[REDACTED:slack]", 1);
        check(
            "\"AIzaSyA-abcdefghijklmnopqrstuvwxyz012345\"",
            "\"[REDACTED:google]\"",
            1,
        );
        check(
            "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            "[REDACTED:huggingface]",
            1,
        );
        check("glpat-abcdefghij0123456789", "[REDACTED:gitlab]", 1);
        check(
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
            "Authorization: Bearer [REDACTED:bearer]",
            1,
        );
    }

    #[test]
    fn counts_several_and_keeps_unicode() {
        check(
            "é sk-abcdefghij0123456789abcd ✓ AKIAABCDEFGHIJKLMNOP é",
            "é [REDACTED:openai] ✓ [REDACTED:aws] é",
            2,
        );
    }

    #[test]
    fn leaves_ordinary_text() {
        for text in [
            "",
            "risk-free disk-abcdefghijklmnop0123456789 task-sk-abcdefghij0123456789abcd",
            "sk-learn and sk-short123",
            "sk-this-is-a-very-long-hyphenated-slug-without-numbers",
            "Bearer authentication uses a Bearer token",
            "Bearer ${OPENAI_API_KEY}",
            "AKIA0123 AKIAIOSFODNN7EXAMPLEX is 17",
            "ghp_short gho_ hf_tiny xoxb-1 glpat-abc AIzaShort",
            "github_pat_ too short",
            "REDACTED_API_KEY",
        ] {
            check(text, text, 0);
        }
    }

    #[test]
    fn messages_are_redacted_in_every_written_string_and_nowhere_else() {
        let key = "sk-ant-api03-abcdefghij0123456789XYZ";
        let mut m = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text {
                    text: format!("key {key}"),
                },
                ContentBlock::Thinking {
                    thinking: format!("use {key}"),
                    signature: Some(key.into()),
                },
                ContentBlock::RedactedThinking { data: key.into() },
                ContentBlock::ToolUse {
                    id: "t1".into(),
                    name: "bash".into(),
                    input: serde_json::json!({"command": format!("curl -H 'x-api-key: {key}'"), "env": [{key: key}], "n": 1}),
                },
                ContentBlock::ToolResult {
                    tool_use_id: "t1".into(),
                    content: vec![ContentBlock::Text {
                        text: format!("echo {key}"),
                    }],
                    is_error: false,
                },
                ContentBlock::Image {
                    source: MediaSource::Url {
                        url: format!("https://x.test/?token=Bearer {key}"),
                    },
                },
                ContentBlock::Document {
                    source: MediaSource::Base64 {
                        media_type: "text/plain".into(),
                        data: key.into(),
                    },
                    title: Some(key.into()),
                },
            ],
        };
        assert_eq!(redact_message(&mut m), 7);
        let json = serde_json::to_value(&m).unwrap();
        let text = json.to_string();
        // What remains: the signature, the redacted-thinking payload, base64 data and the
        // object key (keys are not values).
        assert_eq!(text.matches(key).count(), 4, "{text}");
        assert_eq!(json["content"][0]["text"], "key [REDACTED:anthropic]");
        assert_eq!(json["content"][3]["input"]["n"], 1);
        assert_eq!(
            json["content"][3]["input"]["env"][0][key],
            "[REDACTED:anthropic]"
        );
    }

    /// A block baton cannot read is redacted in what people and tools wrote (a fetched page's
    /// text, a query), never in the provider's sealed fields or base64 payloads, which must go
    /// back byte for byte.
    #[test]
    fn opaque_blocks_keep_their_sealed_fields_and_payloads() {
        let key = "sk-ant-api03-abcdefghij0123456789XYZ";
        let mut m = Message {
            role: Role::Assistant,
            content: vec![ContentBlock::Opaque {
                block: serde_json::json!({
                    "type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_1",
                    "content": {"type": "web_fetch_result", "url": format!("https://x.test/?k={key}"),
                        "content": {"type": "document", "title": format!("notes {key}"),
                            "source": {"type": "base64", "media_type": "application/pdf", "data": key}},
                        "encrypted_content": key, "signature": key}}),
            }],
        };
        assert_eq!(redact_message(&mut m), 2);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text.matches(key).count(), 3, "{text}");
    }
}
