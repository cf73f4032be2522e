//! Tidy checks over the whole workspace (rust-analyzer's `TidyDocs`): every Rust file opens
//! with a `//!` paragraph, ARCHITECTURE.md names every crate and stays under
//! 15 KB, and no test is silenced.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_paragraph() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let undocumented: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "files without a leading //! paragraph: {undocumented:#?}"
    );
}

#[test]
fn architecture_names_every_crate() {
    let architecture = std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).unwrap();
    for entry in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            architecture.contains(&format!("### `{name}`")),
            "ARCHITECTURE.md has no section for {name}"
        );
    }
}

/// The map stays a map: designs belong in module docs and figures in the bench's output, and a
/// page that outgrows 15 KB has started collecting them again.
#[test]
fn architecture_stays_under_fifteen_kilobytes() {
    let size = std::fs::metadata(workspace().join("ARCHITECTURE.md"))
        .unwrap()
        .len();
    assert!(
        size <= 15_000,
        "ARCHITECTURE.md is {size} bytes; keep it under 15,000 by moving designs to `//!` docs"
    );
}

#[test]
fn no_test_is_silenced() {
    let mut files = Vec::new();
    rust_files(&workspace().join("crates"), &mut files);
    let ignore = ["#[", "ignore]"].concat();
    let should_panic = ["#[", "should_panic"].concat();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(&ignore) && !text.contains(&should_panic),
            "{} silences a test",
            file.display()
        );
    }
}

#[test]
fn both_backends_have_the_same_migration_versions() {
    let names = |backend: &str| {
        let mut names: Vec<_> =
            std::fs::read_dir(workspace().join("crates").join(backend).join("migrations"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
        names.sort();
        names
    };
    let (sqlite, postgres) = (names("baton-sqlite"), names("baton-postgres"));
    assert!(!sqlite.is_empty());
    assert_eq!(
        sqlite, postgres,
        "a schema version means the same tables on both backends"
    );
}
