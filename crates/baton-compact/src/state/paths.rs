//! One canonical path per file: the absolute, relative and bare forms a transcript uses for one
//! file are recognized as the same file.
//!
//! Two spellings name the same file when they are equal once `./` is dropped, when one is
//! absolute and ends with `/` + the other (relative) one, or when one is a bare name (no `/`)
//! that is the other's last segment. The canonical spelling is the most complete one seen: an
//! absolute path over a relative one, a longer relative path over a shorter one.

/// `path` with a leading `./` dropped and doubled slashes collapsed.
pub(crate) fn normalize(path: &str) -> String {
    let trimmed = path.trim();
    let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
    let mut out = String::with_capacity(trimmed.len());
    let mut last_slash = false;
    for c in trimmed.chars() {
        if c == '/' && last_slash {
            continue;
        }
        last_slash = c == '/';
        out.push(c);
    }
    out
}

/// Whether `a` and `b` (normalized) name the same file.
pub(crate) fn same_file(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    if short.starts_with('/') {
        return false;
    }
    long.len() > short.len()
        && long.ends_with(short)
        && long.as_bytes()[long.len() - short.len() - 1] == b'/'
}

/// Which of two spellings of one file is the more complete.
pub(crate) fn better<'a>(a: &'a str, b: &'a str) -> &'a str {
    match (a.starts_with('/'), b.starts_with('/')) {
        (true, false) => a,
        (false, true) => b,
        _ if b.len() > a.len() => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_file() {
        assert!(same_file("/repo/src/main.rs", "src/main.rs"));
        assert!(same_file("src/main.rs", "main.rs"));
        assert!(same_file("/repo/src/main.rs", "main.rs"));
        assert!(!same_file("/repo/src/domain.rs", "main.rs"));
        assert!(!same_file("/a/main.rs", "/b/main.rs"));
        assert_eq!(normalize("./src//a.rs"), "src/a.rs");
        assert_eq!(better("src/a.rs", "/repo/src/a.rs"), "/repo/src/a.rs");
        assert_eq!(better("a.rs", "src/a.rs"), "src/a.rs");
    }
}
