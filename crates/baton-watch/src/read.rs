//! One file read into what the store imports: its format told from its content, parsed,
//! settled when the file may still be being written, redacted and counted.

use std::path::Path;
use std::time::{Duration, SystemTime};

use baton_import::{Format, Transcript};
use baton_store::NewImport;
use baton_tokens::TokenizerChoice;

/// A file changed less than this long ago may still be being written by its agent (see
/// [`is_live`]).
pub const LIVE_WITHIN: Duration = Duration::from_secs(600);

/// What reading a file found.
#[derive(Debug)]
pub enum Read {
    /// The file is not a transcript baton reads, or holds none; the reason says which.
    NotTranscript(String),
    /// The file is a transcript being written with nothing complete in it yet: no run is
    /// made (an empty run is noise), and a later read brings its messages.
    NothingYet,
    /// The file's transcripts, ready to import.
    File(FileRead),
}

/// A file's transcripts and the imports made of them, index by index.
#[derive(Debug)]
pub struct FileRead {
    /// The reader that read it.
    pub format: Format,
    /// The transcripts, redacted, each cut to its settled part when the file is live.
    pub transcripts: Vec<Transcript>,
    /// What the store imports of each.
    pub imports: Vec<NewImport>,
    /// Secrets redacted from each.
    pub redactions: Vec<usize>,
    /// Messages of each left for a later read because the file is still being written.
    pub held: Vec<usize>,
}

/// Whether a file last modified at `modified` may still be being written: it changed less
/// than `within` ago, or its time is in the future. A live file is imported up to its last
/// complete unit ([`Transcript::settle`]); a file quiet for longer is imported whole, its last
/// response included even when the agent never closed it (a session killed mid-response).
pub fn is_live(modified: SystemTime, within: Duration) -> bool {
    match modified.elapsed() {
        Ok(age) => age < within,
        Err(_) => true,
    }
}

/// Whether `bytes` end inside a JSON value, told from the bytes alone (not by the format's
/// parser): the last line of a JSON Lines file cut before its end, or a JSON document (or a
/// first line) cut before its last bracket, which `serde_json` reports as an unexpected end
/// of input. An empty file is not cut inside anything (and named, it fails as holding no
/// transcript, however new). A finished JSON Lines file fails a whole-document
/// parse on its second value (trailing characters), not at the end of input, and a Markdown
/// file at its first character, so neither is taken for unfinished.
pub fn unfinished(bytes: &[u8]) -> bool {
    let ends_early =
        |b: &[u8]| serde_json::from_slice::<serde::de::IgnoredAny>(b).is_err_and(|e| e.is_eof());
    let last = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[i + 1..],
        None => bytes,
    };
    // A character cut short (a UTF-8 sequence missing its last bytes) is a cut too, whatever
    // the format.
    let cut_character = std::str::from_utf8(bytes).is_err_and(|e| e.error_len().is_none());
    cut_character
        || (!bytes.trim_ascii().is_empty()
            && ((!last.trim_ascii().is_empty() && ends_early(last)) || ends_early(bytes)))
}

/// What a file's bytes hold, read by [`parse_bytes`].
#[derive(Debug)]
pub enum Parsed {
    /// No reader recognizes the bytes.
    Unrecognized,
    /// A live file with nothing complete in it yet: cut inside its first unit, holding no
    /// message yet, or every message still being written (`held` of them).
    NothingYet {
        /// Messages read but left for a later read.
        held: usize,
    },
    /// A file of this format that holds no transcript with a message.
    Empty(Format),
    /// The transcripts that hold a message, each cut to its settled part when the file is
    /// live, and how many messages each left for a later read.
    Transcripts {
        /// The reader that read them.
        format: Format,
        /// The transcripts, in file order.
        transcripts: Vec<Transcript>,
        /// Messages of each left for a later read (0 unless the file is live).
        held: Vec<usize>,
        /// Messages left for a later read in transcripts dropped for holding no settled
        /// message yet (they make no run until they do).
        held_without_run: usize,
    },
}

/// Reads a file's bytes as `baton import` and `baton watch` both do: the format told from the
/// content unless `format` names one, each transcript cut to its settled part when the file is
/// `live` (a file cut inside its first unit is early, not unrecognized or broken), and a
/// transcript without a message dropped (an empty run is noise in `runs list`, and the next
/// read brings its message). The error is the reader's, in words.
pub fn parse_bytes(bytes: &[u8], format: Option<Format>, live: bool) -> Result<Parsed, String> {
    let early = || live && unfinished(bytes);
    let nothing_yet = Parsed::NothingYet { held: 0 };
    let Some(format) = format.or_else(|| baton_import::detect(bytes)) else {
        return Ok(if early() {
            nothing_yet
        } else {
            Parsed::Unrecognized
        });
    };
    let mut transcripts = match baton_import::parse(format, bytes) {
        Ok(transcripts) => transcripts,
        Err(_) if early() => return Ok(nothing_yet),
        Err(e) => return Err(e.to_string()),
    };
    let held: Vec<usize> = transcripts
        .iter_mut()
        .map(|t| {
            let n = t.messages.len();
            if live {
                t.settle();
            }
            n - t.messages.len()
        })
        .collect();
    let held_without_run: usize = transcripts
        .iter()
        .zip(&held)
        .filter(|(t, _)| t.messages.is_empty())
        .map(|(_, n)| n)
        .sum();
    let (transcripts, held): (Vec<Transcript>, Vec<usize>) = transcripts
        .into_iter()
        .zip(held)
        .filter(|(t, _)| !t.messages.is_empty())
        .unzip();
    if transcripts.is_empty() {
        // A live file of a format written line by line, holding no message yet, is early
        // too: its messages come after what it holds (a Codex `session_meta` line, Claude
        // Code's `summary` or snapshot lines). Not so for bytes another reader would take (a
        // wrong `--format`), nor for a whole JSON document: it fails as holding no transcript.
        let appended = matches!(format, Format::ClaudeCode | Format::Codex | Format::Aider)
            && baton_import::detect(bytes) == Some(format);
        return Ok(if held_without_run > 0 || early() || (live && appended) {
            Parsed::NothingYet {
                held: held_without_run,
            }
        } else {
            Parsed::Empty(format)
        });
    }
    Ok(Parsed::Transcripts {
        format,
        transcripts,
        held,
        held_without_run,
    })
}

/// Reads `path` with [`parse_bytes`] and makes the imports, counting each transcript's
/// messages with the counter `tokenizer` means for its first model. The error is the reason
/// the file failed, in words.
pub fn read_file(
    path: &Path,
    format: Option<Format>,
    live: bool,
    tokenizer: TokenizerChoice,
) -> Result<Read, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading: {e}"))?;
    let (format, mut transcripts, held) = match parse_bytes(&bytes, format, live)? {
        Parsed::Transcripts {
            format,
            transcripts,
            held,
            ..
        } => (format, transcripts, held),
        Parsed::NothingYet { .. } => return Ok(Read::NothingYet),
        Parsed::Unrecognized => {
            return Ok(Read::NotTranscript(format!(
                "not a recognized transcript format (tried {})",
                Format::ALL.map(Format::name).join(", ")
            )));
        }
        Parsed::Empty(format) => {
            return Ok(Read::NotTranscript(format!(
                "no {} transcript in it (nothing to import)",
                format.name()
            )));
        }
    };
    // The absolute path: the same file gives the same source key from any directory.
    let shown = std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string();
    let mut imports = Vec::with_capacity(transcripts.len());
    let mut redactions = Vec::with_capacity(transcripts.len());
    for t in &mut transcripts {
        let counter = baton_tokens::counter(tokenizer, t.models.first().map(String::as_str));
        let (import, redacted) = t.to_import(&shown, None, &*counter);
        imports.push(import);
        redactions.push(redacted);
    }
    Ok(Read::File(FileRead {
        format,
        transcripts,
        imports,
        redactions,
        held,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_file_is_unfinished_when_it_ends_inside_a_json_value() {
        let line = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
        let two = format!("{line}\n{line}\n");
        let doc = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
        for (bytes, unfinished_) in [
            (two.clone(), false),
            (format!("{line}\n{line}"), false),
            (format!("{line}\n{}", &line[..20]), true),
            (line[..20].to_owned(), true),
            (doc.to_owned(), false),
            (format!("{doc}\n"), false),
            (doc[..40].to_owned(), true),
            (
                "# aider chat started at 2024-08-05 19:33:02\n\n#### hi\n".to_owned(),
                false,
            ),
            ("".to_owned(), false),
            ("\n  \n".to_owned(), false),
        ] {
            assert_eq!(unfinished(bytes.as_bytes()), unfinished_, "{bytes:?}");
        }
        // A last character cut short: `é` is two bytes.
        let text = "#### café\n".as_bytes();
        let at = text.iter().position(|&b| b == 0xC3).unwrap() + 1;
        assert!(unfinished(&text[..at]));
        assert!(!unfinished(text));
    }

    /// A file being written whose first line is half there is nothing yet to a watcher, and
    /// the same bytes in a file quiet for long are no transcript.
    #[test]
    fn a_live_file_cut_inside_its_first_line_is_nothing_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let line = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"hi"}}"#;
        std::fs::write(&path, &line[..line.len() / 2]).unwrap();
        let read = |live| read_file(&path, None, live, TokenizerChoice::Bytes).unwrap();
        assert!(matches!(read(true), Read::NothingYet), "{:?}", read(true));
        assert!(
            matches!(read(false), Read::NotTranscript(_)),
            "{:?}",
            read(false)
        );
    }
}
