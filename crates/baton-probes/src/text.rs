//! Presence in a text: whitespace-normalized substring search, and the rules that let one file
//! be named by its absolute or its relative path.
//!
//! Every key and every searched text is normalized the same way: runs of whitespace compare
//! equal (each becomes one space) and the ends are trimmed. A key also counts as present in the
//! form a JSON string would write it (quotes and backslashes escaped), because a tool call's
//! input is rendered as JSON when a context carries it as text.

/// Collapses every run of whitespace into one space and trims the ends.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The first `max` characters of `text` (on a character boundary).
pub fn clip_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// The first `max` whitespace-separated words of `text`, joined by single spaces.
pub fn first_words(text: &str, max: usize) -> String {
    text.split_whitespace()
        .take(max)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A text searched for many keys: normalized once.
pub struct Haystack {
    text: String,
}

impl Haystack {
    /// Normalizes `text` for searching.
    pub fn new(text: &str) -> Self {
        Haystack {
            text: normalize(text),
        }
    }

    /// Whether `key` (normalized) occurs, as written or JSON-escaped. An empty key is absent.
    pub fn contains(&self, key: &str) -> bool {
        self.forms(key)
            .iter()
            .any(|form| !form.is_empty() && self.text.contains(form.as_str()))
    }

    /// Whether the file `path` (as a tool input wrote it) is named, by the rules of the crate
    /// documentation: as written (so a relative path also inside any absolute path that ends
    /// with it), or, for an absolute path under `root` (the session's common directory), by
    /// its relative form standing as a path token of its own.
    pub fn names_path(&self, path: &str, root: Option<&str>) -> bool {
        let path = strip_dot_slash(path);
        if self.contains(path) {
            return true;
        }
        let Some(relative) = root.and_then(|r| relative_to(path, r)) else {
            return false;
        };
        self.forms(relative).iter().any(|form| {
            !form.is_empty()
                && self
                    .text
                    .match_indices(form.as_str())
                    .any(|(at, m)| self.token_starts_at(at) && self.token_ends_at(at + m.len()))
        })
    }

    /// The normalized key, and its JSON-escaped form (escaped, then normalized: a line break
    /// is `\n` there) when that differs.
    fn forms(&self, key: &str) -> Vec<String> {
        let plain = normalize(key);
        let escaped = serde_json::to_string(key.trim())
            .ok()
            .and_then(|s| s.get(1..s.len().saturating_sub(1)).map(normalize))
            .filter(|e| *e != plain);
        std::iter::once(plain).chain(escaped).collect()
    }

    /// The start of the path token holding byte `at`.
    fn token_start(&self, at: usize) -> usize {
        self.text[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| !is_path_char(*c))
            .map_or(0, |(i, c)| i + c.len_utf8())
    }

    /// Whether a path token starts at `at` (or at `./` just before it).
    fn token_starts_at(&self, at: usize) -> bool {
        let start = self.token_start(at);
        start == at || (start + 2 == at && self.text[start..at] == *"./")
    }

    /// Whether no file-name character continues the text at `end`.
    fn token_ends_at(&self, end: usize) -> bool {
        !self.text[end..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))
    }
}

/// Characters a path token is made of, for finding where one starts.
fn is_path_char(c: char) -> bool {
    !c.is_whitespace()
        && !matches!(
            c,
            '"' | '\''
                | '`'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | ','
                | ';'
                | '|'
                | '='
        )
}

/// `path` without leading `./`.
pub fn strip_dot_slash(path: &str) -> &str {
    let mut p = path.trim();
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p
}

/// `path` relative to the directory `root`, when it lies under it.
pub fn relative_to<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    path.strip_prefix(root)?
        .strip_prefix('/')
        .filter(|r| !r.is_empty())
}

/// Whether two paths as written name one file: equal, or one ends with `/` + the other.
pub fn same_file(a: &str, b: &str) -> bool {
    let (a, b) = (strip_dot_slash(a), strip_dot_slash(b));
    a == b || ends_with_component(a, b) || ends_with_component(b, a)
}

fn ends_with_component(long: &str, short: &str) -> bool {
    long.len() > short.len()
        && long.ends_with(short)
        && long.as_bytes()[long.len() - short.len() - 1] == b'/'
}

/// The deepest directory holding at least 90% of the distinct absolute paths given (`None`
/// when only `/` does): the session's common directory, against which an absolute path's
/// relative form is taken.
pub fn common_directory<'a>(paths: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut distinct: Vec<&str> = paths
        .into_iter()
        .map(strip_dot_slash)
        .filter(|p| p.starts_with('/'))
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.is_empty() {
        return None;
    }
    // Each path's directories (its components but the last).
    let dirs: Vec<Vec<&str>> = distinct
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
            parts[..parts.len().saturating_sub(1)].to_vec()
        })
        .collect();
    let n = dirs.len();
    let mut depth = 0;
    let mut prefix: Vec<&str> = Vec::new();
    loop {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for d in &dirs {
            if d.len() > depth && d[..depth] == prefix[..] {
                match counts.iter_mut().find(|(name, _)| *name == d[depth]) {
                    Some((_, c)) => *c += 1,
                    None => counts.push((d[depth], 1)),
                }
            }
        }
        match counts.into_iter().find(|(_, c)| c * 10 >= n * 9) {
            Some((name, _)) => {
                prefix.push(name);
                depth += 1;
            }
            None => break,
        }
    }
    (!prefix.is_empty()).then(|| format!("/{}", prefix.join("/")))
}

#[cfg(test)]
mod tests;
