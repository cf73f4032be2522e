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

/// Reads `path` (the format told from its content unless `format` names one), parses it, cuts
/// each transcript to its settled part when `live`, and makes the imports, counting each
/// transcript's messages with the counter `tokenizer` means for its first model. The error is
/// the reason the file failed, in words.
pub fn read_file(
    path: &Path,
    format: Option<Format>,
    live: bool,
    tokenizer: TokenizerChoice,
) -> Result<Read, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("reading: {e}"))?;
    let format = match format.or_else(|| baton_import::detect(&bytes)) {
        Some(format) => format,
        None => {
            return Ok(Read::NotTranscript(format!(
                "not a recognized transcript format (tried {})",
                Format::ALL.map(Format::name).join(", ")
            )));
        }
    };
    let mut transcripts = baton_import::parse(format, &bytes).map_err(|e| e.to_string())?;
    let held = transcripts
        .iter_mut()
        .map(|t| {
            let n = t.messages.len();
            if live {
                t.settle();
            }
            n - t.messages.len()
        })
        .collect::<Vec<usize>>();
    // A transcript without a message makes no run, as in `baton import`.
    let unsettled = held.iter().any(|&n| n > 0);
    let (transcripts, held): (Vec<Transcript>, Vec<usize>) = transcripts
        .into_iter()
        .zip(held)
        .filter(|(t, _)| !t.messages.is_empty())
        .unzip();
    let mut transcripts = transcripts;
    if transcripts.is_empty() && unsettled {
        return Ok(Read::NothingYet);
    }
    if transcripts.is_empty() {
        return Ok(Read::NotTranscript(format!(
            "no {} transcript in it (nothing to import)",
            format.name()
        )));
    }
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
