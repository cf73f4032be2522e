//! Real token counts: tiktoken's BPE vocabularies behind `baton-core`'s [`TokenCounter`].
//!
//! Roles:
//! - [`Tiktoken`]: a [`TokenCounter`] over one vocabulary ([`Encoding`]), counting text the way
//!   the provider's tokenizer does; `baton-core` adds the same per-block and per-message
//!   overhead as for its byte-based proxy ([`ByteEstimate`]).
//! - [`encoding_for_model`]: which vocabulary a model name needs.
//! - [`TokenizerChoice`]: what the user configured (`--tokenizer`), parsed with
//!   [`TokenizerChoice::parse`]; [`counter`] makes it the counter for one run, given the model
//!   the run talks to when it is known.
//!
//! The vocabularies are embedded in `bpe-openai` (GitHub's `bpe` crate, prebuilt for tiktoken's
//! `o200k_base` and `cl100k_base`): nothing is fetched at run time. Each is loaded once per
//! process, on its first count (construction is free), and shared by every counter after that.
//! Its counts are tiktoken's (`tests/it/corpus.rs` checks every text of the shared corpus
//! against `tiktoken-rs`), computed several times faster: it counts a piece without building its
//! token list, and pre-splits text without the backtracking regex tiktoken needs. On top of
//! it, each thread keeps the counts of the short pieces it has seen (words, identifiers and
//! punctuation recur through a transcript), which halves the time to count the corpus
//! (`baton-bench --only tokens`: 38 → 74 MiB/s with `o200k_base`). The regex that cuts text
//! into pieces was then most of the cost; ASCII text is cut by a table instead, the regex asked
//! only where a character outside ASCII could change a piece (`split.rs`, 63 → 150 MiB/s).
//! [`preload`] loads the vocabularies ahead, in the background, for a server.
//!
//! ```
//! use baton_core::tokens::TokenCounter;
//! use baton_core::{Message, Role};
//! use baton_tokens::{TokenizerChoice, counter};
//!
//! let choice = TokenizerChoice::parse("auto")?;
//! let counter = counter(choice, Some("openai/gpt-4o-mini"));
//! assert_eq!(counter.name(), "o200k_base");
//! assert_eq!(counter.count_text("hello world"), 2);
//! // The text's 2 tokens, plus the overhead of one block and one message.
//! assert_eq!(counter.count_message(&Message::text(Role::User, "hello world")), 2 + 3 + 4);
//! # Ok::<(), baton_tokens::Error>(())
//! ```

use std::sync::Arc;

use baton_core::tokens::{ByteEstimate, TokenCounter};
use bpe_openai::Tokenizer;

mod split;

/// A tiktoken vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// `o200k_base`: GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the o-series and Codex models.
    O200k,
    /// `cl100k_base`: GPT-4, GPT-3.5 and the text-embedding-3 and ada-002 models; also the
    /// proxy for Claude models (see [`encoding_for_model`]).
    Cl100k,
}

impl Encoding {
    /// The vocabulary's name, as tiktoken and `--tokenizer` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }

    /// The vocabulary, loaded on first use and shared for the rest of the process.
    fn bpe(self) -> &'static Tokenizer {
        match self {
            Encoding::O200k => bpe_openai::o200k_base(),
            Encoding::Cl100k => bpe_openai::cl100k_base(),
        }
    }
}

/// Starts loading both vocabularies, each on a thread of its own, and returns at once, so the
/// first count that needs one does not wait for it (or waits less): `o200k_base` takes about
/// 45 ms to load and `cl100k_base` about 20 ms. A server calls it when it starts; later calls
/// do nothing. [`preload_for`] loads only what one `--tokenizer` choice can use.
pub fn preload() {
    preload_for(TokenizerChoice::Auto);
}

/// [`preload`] of the vocabularies `choice` can count with: none for `bytes`, the one it
/// names, or both for `auto` (a model's name picks one per run). `baton import` and
/// `baton watch` call it before they open the store, so the vocabularies load meanwhile
/// instead of while the first file waits.
pub fn preload_for(choice: TokenizerChoice) {
    static STARTED: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    let encodings: &[Encoding] = match choice {
        TokenizerChoice::Bytes => &[],
        TokenizerChoice::O200k => &[Encoding::O200k],
        TokenizerChoice::Cl100k => &[Encoding::Cl100k],
        TokenizerChoice::Auto => &[Encoding::O200k, Encoding::Cl100k],
    };
    for &encoding in encodings {
        STARTED[encoding as usize].call_once(|| {
            // When no thread can be started, the first count loads its vocabulary, as without
            // this call.
            let _ = std::thread::Builder::new()
                .name(format!("baton-{}", encoding.name()))
                .spawn(move || encoding.bpe());
        });
    }
}

/// A [`TokenCounter`] over a tiktoken vocabulary.
///
/// Text is encoded as ordinary text: special-token markers such as `<|endoftext|>` that appear
/// in a transcript are counted as the characters they are, never as one special token (and
/// never refused).
///
/// Constructing one costs nothing. The first count of the process with a given vocabulary
/// loads it (`baton-bench` section 7 times it); every later count, by any `Tiktoken` of that
/// vocabulary on any thread, reuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiktoken {
    encoding: Encoding,
}

impl Tiktoken {
    /// A counter over `encoding`.
    pub fn new(encoding: Encoding) -> Self {
        Tiktoken { encoding }
    }

    /// Its vocabulary.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }
}

impl TokenCounter for Tiktoken {
    fn name(&self) -> &str {
        self.encoding.name()
    }

    fn count_text(&self, text: &str) -> u32 {
        if text.is_empty() {
            return 0;
        }
        let tokenizer = self.encoding.bpe();
        // What `Tokenizer::count` does (split, then count each piece), with each short piece's
        // count kept in this thread's memo: words, identifiers and punctuation recur
        // throughout a transcript, and a piece's count depends on its bytes alone.
        let text = tokenizer.normalize(text);
        let total: usize = MEMO.with_borrow_mut(|memo| {
            let memo = &mut memo[self.encoding as usize];
            split::Pieces::new(self.encoding, tokenizer, text.as_str())
                .map(|piece| {
                    if piece.len() > MEMO_PIECE_BYTES {
                        return tokenizer.bpe.count(piece.as_bytes());
                    }
                    if let Some(&n) = memo.get(piece) {
                        return n as usize;
                    }
                    let n = tokenizer.bpe.count(piece.as_bytes());
                    if memo.len() >= MEMO_PIECES {
                        memo.clear();
                    }
                    memo.insert(piece.into(), n as u32);
                    n
                })
                .sum()
        });
        u32::try_from(total).unwrap_or(u32::MAX)
    }
}

/// Pieces longer than this are counted every time (long pieces rarely recur).
const MEMO_PIECE_BYTES: usize = 32;
/// A thread's memo holds at most this many pieces per vocabulary (a few MB), then starts over.
const MEMO_PIECES: usize = 1 << 16;

thread_local! {
    /// Per vocabulary ([`Encoding`] as index): a piece's token count.
    static MEMO: std::cell::RefCell<[rustc_hash::FxHashMap<Box<str>, u32>; 2]> =
        std::cell::RefCell::default();
}

/// The vocabulary a model's input is counted with.
///
/// Case does not matter, and a provider prefix (`openai/`, `anthropic/`, anything up to the
/// last `/`) is ignored. GPT-4o, ChatGPT-4o, GPT-4.1, GPT-4.5, GPT-5, o1, o3, o4 and Codex
/// models use `o200k_base`; the other GPT-4 models, GPT-3.5 and the text-embedding-3 and
/// ada models use `cl100k_base`.
///
/// Claude models (any name containing `claude`, so Bedrock's `anthropic.claude-…` ids too)
/// get `cl100k_base`: Anthropic publishes no tokenizer for its current models, and
/// `cl100k_base` is the usual proxy for them; their counts are an approximation of what
/// Anthropic bills. Any other name gets `o200k_base`, the vocabulary of current OpenAI models.
///
/// ```
/// use baton_tokens::{Encoding, encoding_for_model};
/// assert_eq!(encoding_for_model("gpt-4o-2024-08-06"), Encoding::O200k);
/// assert_eq!(encoding_for_model("openai/gpt-4-turbo"), Encoding::Cl100k);
/// assert_eq!(encoding_for_model("claude-sonnet-4-5"), Encoding::Cl100k);
/// ```
pub fn encoding_for_model(model: &str) -> Encoding {
    let lower = model.trim().to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    const O200K: [&str; 9] = [
        "gpt-4o",
        "chatgpt-4o",
        "gpt-4.1",
        "gpt-4.5",
        "gpt-5",
        "o1",
        "o3",
        "o4",
        "codex",
    ];
    const CL100K: [&str; 5] = [
        "gpt-4",
        "gpt-3.5",
        "gpt-35",
        "text-embedding-3",
        "text-embedding-ada",
    ];
    if O200K.iter().any(|p| name.starts_with(p)) || name.contains("-codex") {
        return Encoding::O200k;
    }
    if CL100K.iter().any(|p| name.starts_with(p)) || name.contains("claude") {
        return Encoding::Cl100k;
    }
    Encoding::O200k
}

/// How token counts are computed, as configured (`--tokenizer`, `BATON_TOKENIZER`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TokenizerChoice {
    /// The vocabulary of the run's model ([`encoding_for_model`]), `o200k_base` when no model
    /// is known.
    #[default]
    Auto,
    /// The byte-based proxy ([`ByteEstimate`]): no vocabulary.
    Bytes,
    /// `o200k_base`, whatever the model.
    O200k,
    /// `cl100k_base`, whatever the model.
    Cl100k,
}

impl TokenizerChoice {
    /// Every choice, in the order names are listed.
    pub const ALL: [TokenizerChoice; 4] = [
        TokenizerChoice::Auto,
        TokenizerChoice::Bytes,
        TokenizerChoice::O200k,
        TokenizerChoice::Cl100k,
    ];

    /// Its name: `auto`, `bytes`, `o200k_base` or `cl100k_base`.
    pub fn name(self) -> &'static str {
        match self {
            TokenizerChoice::Auto => "auto",
            TokenizerChoice::Bytes => "bytes",
            TokenizerChoice::O200k => Encoding::O200k.name(),
            TokenizerChoice::Cl100k => Encoding::Cl100k.name(),
        }
    }

    /// Parses a name (see [`name`](Self::name)); `o200k` and `cl100k` are accepted too. Names
    /// are exact: no case folding, no surrounding spaces.
    pub fn parse(value: &str) -> Result<TokenizerChoice, Error> {
        match value {
            "o200k" => Ok(TokenizerChoice::O200k),
            "cl100k" => Ok(TokenizerChoice::Cl100k),
            _ => TokenizerChoice::ALL
                .into_iter()
                .find(|c| c.name() == value)
                .ok_or_else(|| Error::UnknownTokenizer {
                    value: value.to_owned(),
                }),
        }
    }
}

/// What can go wrong here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tokenizer name that is not one of [`TokenizerChoice`]'s.
    #[error(
        "tokenizer {value:?}: expected one of {}",
        TokenizerChoice::ALL.map(TokenizerChoice::name).join(", ")
    )]
    UnknownTokenizer {
        /// The name given.
        value: String,
    },
}

/// The counter `choice` means for a run whose model is `model` (when known).
///
/// Make one per run (or per command) and count every message with it; the vocabularies
/// themselves are shared, so this is cheap.
pub fn counter(choice: TokenizerChoice, model: Option<&str>) -> Arc<dyn TokenCounter> {
    let encoding = match choice {
        TokenizerChoice::Bytes => return Arc::new(ByteEstimate),
        TokenizerChoice::Auto => model.map_or(Encoding::O200k, encoding_for_model),
        TokenizerChoice::O200k => Encoding::O200k,
        TokenizerChoice::Cl100k => Encoding::Cl100k,
    };
    Arc::new(Tiktoken::new(encoding))
}

#[cfg(test)]
mod tests;
