//! The pieces tiktoken's patterns cut a text into, found without the regex wherever the text
//! is ASCII.
//!
//! Both vocabularies count a text piece by piece, after `bpe-openai` cuts it with tiktoken's
//! pattern (one anchored, leftmost-first regex search per piece). With the counts of short
//! pieces remembered ([`crate::Tiktoken`]'s memo), that search is most of what counting costs
//! (about three quarters of it on the shared corpus). For ASCII the pattern's alternatives come
//! down to a few byte classes, so [`Pieces`] reads them off a table, and asks the regex only
//! for a piece whose outcome a non-ASCII character could change: one that starts at such a
//! character, or whose run (of letters, digits, punctuation or whitespace) ends at one, or
//! whose contraction (`'s`, `'re`, …) reads one. The regex's search is anchored at the piece's
//! start with the rest of the text as its haystack, exactly as `bpe-openai`'s own splitter
//! does, so the pieces are the regex's wherever it is asked, and the table's elsewhere.
//!
//! Equality with `bpe-openai`'s splitter is checked on generated text mixing every byte class
//! with letters, digits, spaces and marks from outside ASCII (`tests.rs`), and the counts with
//! `tiktoken-rs` on every text of the shared corpus (`tests/it/corpus.rs`).
//!
//! The patterns, for ASCII (`L` a letter, `U`/`l` upper/lower case, `N` a digit, `s` white
//! space, `P` anything else, `'c` a contraction: `'s 't 're 've 'm 'll 'd` in any case), tried in
//! order, the first that matches making the piece:
//!
//! | `cl100k_base`                | `o200k_base`                        |
//! |------------------------------|-------------------------------------|
//! | `'c`                         | `[^\r\nLN]? U* l+ 'c?`              |
//! | `[^\r\nLN]? L+`              | `[^\r\nLN]? U+ l* 'c?`              |
//! | `N{1,3}`                     | `N{1,3}`                            |
//! | ` ? P+ [\r\n]*`              | ` ? P+ [\r\n/]*`                    |
//!
//! and then, for both, `s*[\r\n]+`, `s+$`, `s+` less its last character when it is two or more
//! characters long (tiktoken's `\s+(?!\S)`), and `s+`.

use bpe_openai::Tokenizer;

use crate::Encoding;

/// What a byte is to the patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Upper,
    Lower,
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// White space other than a newline: space, tab, vertical tab, form feed.
    Space,
    /// Any other ASCII character: punctuation, symbols, control characters.
    Other,
    /// A byte of a character outside ASCII, whose class only the regex knows.
    Wide,
}

const fn class_of(b: u8) -> Class {
    match b {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b'\r' | b'\n' => Class::Newline,
        b' ' | b'\t' | 0x0B | 0x0C => Class::Space,
        0x80.. => Class::Wide,
        _ => Class::Other,
    }
}

const CLASSES: [Class; 256] = {
    let mut table = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = class_of(b as u8);
        b += 1;
    }
    table
};

fn is_letter(c: Class) -> bool {
    matches!(c, Class::Upper | Class::Lower)
}

fn is_space(c: Class) -> bool {
    matches!(c, Class::Space | Class::Newline)
}

/// The pieces of `text` for `encoding`, in order; see the module docs.
pub(crate) struct Pieces<'a> {
    text: &'a str,
    at: usize,
    encoding: Encoding,
    tokenizer: &'a Tokenizer,
}

impl<'a> Pieces<'a> {
    pub(crate) fn new(encoding: Encoding, tokenizer: &'a Tokenizer, text: &'a str) -> Self {
        Pieces {
            text,
            at: 0,
            encoding,
            tokenizer,
        }
    }

    /// The class of the byte at `i`, `None` past the end.
    fn class(&self, i: usize) -> Option<Class> {
        self.text.as_bytes().get(i).map(|&b| CLASSES[b as usize])
    }

    /// The end of the run of bytes of a class `member` says belongs to it, from `from`; `None`
    /// when it ends at a character outside ASCII that might belong to it too.
    fn run(&self, from: usize, member: fn(Class) -> bool) -> Option<usize> {
        let mut end = from;
        loop {
            match self.class(end) {
                Some(c) if member(c) => end += 1,
                Some(Class::Wide) => return None,
                _ => return Some(end),
            }
        }
    }

    /// The end of the run of bytes in `set` from `from`: a set of ASCII bytes, which no
    /// character outside ASCII extends.
    fn run_of(&self, from: usize, set: &[u8]) -> usize {
        let bytes = self.text.as_bytes();
        let mut end = from;
        while end < bytes.len() && set.contains(&bytes[end]) {
            end += 1;
        }
        end
    }

    /// The length of the contraction (`(?i:'s|'t|'re|'ve|'m|'ll|'d)`) at `i`: `Some(0)` when
    /// there is none, `None` when a character outside ASCII decides it.
    fn contraction(&self, i: usize) -> Option<usize> {
        let bytes = self.text.as_bytes();
        if bytes.get(i) != Some(&b'\'') {
            return Some(0);
        }
        let at = |k: usize| -> Option<Option<u8>> {
            match bytes.get(i + k) {
                Some(&b) if b >= 0x80 => None,
                b => Some(b.map(|b| b.to_ascii_lowercase())),
            }
        };
        Some(match at(1)? {
            Some(b's' | b't' | b'm' | b'd') => 2,
            Some(b'r' | b'v') if at(2)? == Some(b'e') => 3,
            Some(b'l') if at(2)? == Some(b'l') => 3,
            _ => 0,
        })
    }

    /// The end of the piece at `i` by the table, `None` when only the regex can tell.
    fn fast(&self, i: usize) -> Option<usize> {
        let c0 = self.class(i)?;
        if c0 == Class::Wide {
            return None;
        }
        let c1 = self.class(i + 1);
        // The optional leading character of a word: not a newline, letter or digit.
        let leads = matches!(c0, Class::Space | Class::Other);
        match self.encoding {
            Encoding::Cl100k => {
                let n = self.contraction(i)?;
                if n > 0 {
                    return Some(i + n);
                }
                if is_letter(c0) {
                    return self.run(i, is_letter);
                }
                if leads && c1 == Some(Class::Wide) {
                    return None;
                }
                if leads && c1.is_some_and(is_letter) {
                    return self.run(i + 1, is_letter);
                }
            }
            Encoding::O200k => {
                let start = match (is_letter(c0), leads, c1) {
                    (true, _, _) => Some(i),
                    (false, true, Some(Class::Wide)) => return None,
                    (false, true, Some(c)) if is_letter(c) => Some(i + 1),
                    _ => None,
                };
                if let Some(start) = start {
                    // Upper case then lower case: whichever of the two word patterns matches,
                    // it ends where the lower-case run does.
                    let upper = self.run(start, |c| c == Class::Upper)?;
                    let end = self.run(upper, |c| c == Class::Lower)?;
                    return Some(end + self.contraction(end)?);
                }
            }
        }
        if c0 == Class::Digit {
            let mut end = i;
            while end < i + 3 && self.class(end) == Some(Class::Digit) {
                end += 1;
            }
            if end < i + 3 && self.class(end) == Some(Class::Wide) {
                return None;
            }
            return Some(end);
        }
        let trailing: &[u8] = match self.encoding {
            Encoding::Cl100k => b"\r\n",
            Encoding::O200k => b"\r\n/",
        };
        let symbols = match (c0, c1) {
            (Class::Other, _) => Some(i),
            (Class::Space, Some(Class::Other)) if self.text.as_bytes()[i] == b' ' => Some(i + 1),
            _ => None,
        };
        if let Some(from) = symbols {
            let end = self.run(from, |c| c == Class::Other)?;
            return Some(self.run_of(end, trailing));
        }
        // White space: c0 is a space or a newline.
        let end = self.run(i, is_space)?;
        let bytes = self.text.as_bytes();
        if let Some(last) = bytes[i..end]
            .iter()
            .rposition(|b| matches!(b, b'\r' | b'\n'))
        {
            return Some(i + last + 1);
        }
        if end == bytes.len() || end - i == 1 {
            return Some(end);
        }
        Some(end - 1)
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let start = self.at;
        let rest = self.text.get(start..).filter(|rest| !rest.is_empty())?;
        let end = match self.fast(start) {
            Some(end) => end,
            // The patterns match at every character (a letter, digit, space or anything
            // else), so the regex always has a piece; were it not to, the rest is one.
            None => {
                start
                    + self
                        .tokenizer
                        .split(rest)
                        .next()
                        .map_or(rest.len(), str::len)
            }
        };
        self.at = end;
        Some(&self.text[start..end])
    }
}
