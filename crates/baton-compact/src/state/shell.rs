//! Reading a shell script just far enough to know which files it certainly writes or deletes.
//!
//! The script is cut into simple commands at unquoted `&&`, `||`, `;`, `|`, `&` and line
//! breaks (heredoc bodies skipped), each split into words with POSIX quoting. A command's file
//! effects are taken only where they are certain:
//! - output redirections `> f`, `>> f`, `&> f` (not `/dev/null`, not a path with `$`, a glob
//!   or a backtick) write `f`;
//! - `rm`, `git rm`, `unlink` delete their operands; `touch` and `tee` write theirs; `mv a b`
//!   and `git mv a b` delete `a` and write `b`; `cp a b` writes `b`; `sed -i … f` writes `f`.
//!
//! Anything else (a script, `make`, `npm`…) may write files too, but nothing certain can be
//! said of it, so nothing is.

/// What a script certainly does to files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Effects {
    /// Files written (created or changed).
    pub(crate) writes: Vec<String>,
    /// Files deleted.
    pub(crate) deletes: Vec<String>,
}

/// A simple command: its words, and the files its output redirections name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Simple {
    argv: Vec<String>,
    redirects: Vec<String>,
}

/// The words of each simple command of `script`, in order (environment assignments, `sudo`,
/// `time`, `env` and `command` dropped from the front).
pub(crate) fn programs(script: &str) -> Vec<Vec<String>> {
    parse(script)
        .into_iter()
        .map(|s| s.argv)
        .filter(|argv| !argv.is_empty())
        .collect()
}

/// The file effects of `script` (see the module docs).
pub(crate) fn effects(script: &str) -> Effects {
    let mut out = Effects::default();
    for simple in parse(script) {
        for target in &simple.redirects {
            if certain(target) {
                out.writes.push(normalize(target));
            }
        }
        let argv: Vec<&str> = simple.argv.iter().map(String::as_str).collect();
        let (program, args) = match argv.split_first() {
            Some((p, rest)) => (p.rsplit('/').next().unwrap_or(p), rest),
            None => continue,
        };
        let (program, args) = match (program, args) {
            ("git", [sub, rest @ ..]) if matches!(*sub, "rm" | "mv") => (*sub, rest),
            ("git", _) => continue,
            other => other,
        };
        let operands: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| !a.starts_with('-'))
            .collect();
        let certain_ops = || operands.iter().copied().filter(|a| certain(a));
        match program {
            "rm" | "unlink" => out.deletes.extend(certain_ops().map(normalize)),
            "touch" | "tee" => out.writes.extend(certain_ops().map(normalize)),
            "mv" if operands.len() == 2 && certain(operands[0]) && certain(operands[1]) => {
                out.deletes.push(normalize(operands[0]));
                out.writes.push(normalize(operands[1]));
            }
            "cp" if operands.len() == 2 && certain(operands[1]) => {
                out.writes.push(normalize(operands[1]));
            }
            "sed"
                if args
                    .iter()
                    .any(|a| a.starts_with("-i") || *a == "--in-place") =>
            {
                if let Some(last) = operands
                    .last()
                    .filter(|a| certain(a) && operands.len() >= 2)
                {
                    out.writes.push(normalize(last));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a word names one file for certain: no expansion, no glob, not a device, not a
/// directory-looking `x/`.
fn certain(word: &str) -> bool {
    !word.is_empty()
        && !word.contains(['$', '`', '*', '?', '[', '{', '~'])
        && !word.starts_with("/dev/")
        && !word.ends_with('/')
        && word != "."
        && word != ".."
}

/// `./x` is `x`.
fn normalize(path: &str) -> String {
    path.strip_prefix("./").unwrap_or(path).to_owned()
}

/// Splits `script` into simple commands.
fn parse(script: &str) -> Vec<Simple> {
    let script = without_heredocs(script);
    let mut out = Vec::new();
    let mut current = Simple::default();
    let mut word = String::new();
    let mut in_word = false;
    let mut redirect = false;
    let mut chars = script.chars().peekable();

    let finish_word =
        |current: &mut Simple, word: &mut String, in_word: &mut bool, redirect: &mut bool| {
            if *in_word {
                if *redirect {
                    current.redirects.push(std::mem::take(word));
                    *redirect = false;
                } else {
                    current.argv.push(std::mem::take(word));
                }
            }
            word.clear();
            *in_word = false;
        };

    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    in_word = true;
                    word.push(n);
                }
            }
            '>' => {
                // `2>` and `2>&1` redirect another descriptor: not a file written for certain.
                let fd_two = in_word && word == "2";
                if in_word && !fd_two && word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                } else if !fd_two {
                    finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
                }
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    // `>&2`: a descriptor.
                    chars.next();
                    while chars.peek().is_some_and(char::is_ascii_digit) {
                        chars.next();
                    }
                    word.clear();
                    in_word = false;
                    continue;
                }
                if fd_two {
                    word.clear();
                    in_word = false;
                    // Swallow the target of `2> file`.
                    while chars.peek() == Some(&' ') {
                        chars.next();
                    }
                    while chars
                        .peek()
                        .is_some_and(|n| !n.is_whitespace() && !matches!(n, ';' | '&' | '|'))
                    {
                        chars.next();
                    }
                    continue;
                }
                redirect = true;
            }
            '&' if chars.peek() == Some(&'>') => {
                chars.next();
                finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
                redirect = true;
            }
            '<' => {
                finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
                // An input redirection's word is read, not written: drop it.
                while chars.peek() == Some(&'<') {
                    chars.next();
                }
                while chars.peek() == Some(&' ') {
                    chars.next();
                }
                while chars
                    .peek()
                    .is_some_and(|n| !n.is_whitespace() && !matches!(n, ';' | '&' | '|'))
                {
                    chars.next();
                }
            }
            ';' | '&' | '|' | '\n' | '(' | ')' => {
                finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
                redirect = false;
                let done = std::mem::take(&mut current);
                if !done.argv.is_empty() || !done.redirects.is_empty() {
                    out.push(done);
                }
            }
            c if c.is_whitespace() => {
                finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
                finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
                let done = std::mem::take(&mut current);
                if !done.argv.is_empty() || !done.redirects.is_empty() {
                    out.push(done);
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    finish_word(&mut current, &mut word, &mut in_word, &mut redirect);
    if !current.argv.is_empty() || !current.redirects.is_empty() {
        out.push(current);
    }
    for simple in &mut out {
        strip_prefixes(&mut simple.argv);
    }
    out
}

/// Drops environment assignments and wrappers (`sudo`, `time`, `env`, `command`, `nohup`,
/// `exec`) from the front of a command's words.
fn strip_prefixes(argv: &mut Vec<String>) {
    let skip = argv
        .iter()
        .take_while(|w| {
            matches!(
                w.as_str(),
                "sudo" | "time" | "env" | "command" | "nohup" | "exec"
            ) || (w.contains('=') && !w.starts_with('=') && !w.starts_with('-'))
        })
        .count();
    argv.drain(..skip);
}

/// `script` with every heredoc's body removed (the line that opens it kept).
fn without_heredocs(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut pending: Vec<String> = Vec::new();
    for line in script.split_inclusive('\n') {
        if let Some(delimiter) = pending.first() {
            if line.trim() == delimiter {
                pending.remove(0);
            }
            continue;
        }
        out.push_str(line);
        let mut rest = line;
        while let Some(i) = rest.find("<<") {
            let after = rest[i + 2..].trim_start_matches('-').trim_start();
            if after.starts_with('<') {
                // `<<<` is a here-string.
                rest = &rest[i + 3..];
                continue;
            }
            let delimiter: String = after
                .trim_start_matches(['\'', '"'])
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !delimiter.is_empty() {
                pending.push(delimiter);
            }
            rest = &rest[i + 2..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(script: &str, writes: &[&str], deletes: &[&str]) {
        let e = effects(script);
        assert_eq!(e.writes, writes, "writes of {script:?}");
        assert_eq!(e.deletes, deletes, "deletes of {script:?}");
    }

    #[test]
    fn certain_effects_only() {
        check("echo hi > out.txt", &["out.txt"], &[]);
        check("echo hi >> ./log/a.log 2>&1", &["log/a.log"], &[]);
        check("cargo test 2> err.txt", &[], &[]);
        check("ls > /dev/null", &[], &[]);
        check(
            "cat <<'EOF' > /repo/JOKE.md\n# A > B\nrm -rf /\nEOF\ncat /repo/JOKE.md",
            &["/repo/JOKE.md"],
            &[],
        );
        check(
            "rm -f a.txt b.txt && git rm src/old.rs",
            &[],
            &["a.txt", "b.txt", "src/old.rs"],
        );
        check("mv a.rs b.rs", &["b.rs"], &["a.rs"]);
        check("cp a.rs b.rs; touch new.rs", &["b.rs", "new.rs"], &[]);
        check("sed -i 's/a/b/' src/lib.rs", &["src/lib.rs"], &[]);
        check("rm -rf $TMP/x *.o build/", &[], &[]);
        check("echo 'a > b' # > not.txt", &[], &[]);
        check("npm test | tee test.log", &["test.log"], &[]);
        check("FOO=1 sudo rm x", &[], &["x"]);
        check("python - <<EOF\nopen('x','w')\nEOF", &[], &[]);
    }

    #[test]
    fn programs_are_the_words() {
        assert_eq!(
            programs("cd /repo && FOO=1 grep -n \"a b\" src | head -5"),
            vec![
                vec!["cd".to_owned(), "/repo".to_owned()],
                vec!["grep".into(), "-n".into(), "a b".into(), "src".into()],
                vec!["head".into(), "-5".into()],
            ]
        );
        assert!(programs("").is_empty());
    }
}
