//! Puts the commit the binary is built from in `BATON_COMMIT` (for `baton --version`): `git
//! rev-parse --short=12 HEAD`, with `-dirty` when the tree has changes to tracked files, or
//! `unknown` outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).map_or_else(
        || "unknown".to_owned(),
        |hash| match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(_) => format!("{hash}-dirty"),
            None => hash,
        },
    );
    println!("cargo:rustc-env=BATON_COMMIT={commit}");
    // Built again when HEAD moves (a commit, a checkout), not on every build.
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-env-changed=BATON_COMMIT");
}
