//! Unit tests of `text`: normalization, path tokens, the common directory.

use super::*;

#[test]
fn normalize_collapses_whitespace_and_clip_keeps_char_boundaries() {
    assert_eq!(normalize("  a \n\t b  c\r\n"), "a b c");
    assert_eq!(clip_chars("héllo", 2), "hé");
    assert_eq!(clip_chars("ab", 5), "ab");
    assert_eq!(first_words(" one  two\nthree four", 3), "one two three");
}

#[test]
fn a_key_is_found_as_written_or_json_escaped() {
    let h = Haystack::new("call {\"command\":\"git commit -m \\\"fix\\\"\"}\n  and   more");
    assert!(h.contains("git commit -m \"fix\""));
    assert!(h.contains("and more"));
    assert!(!h.contains(""));
    assert!(!h.contains("   "));
}

#[test]
fn relative_forms_stand_as_path_tokens_of_their_own() {
    let h = Haystack::new("see `src/a.rs`, ./lib/b.rs and /x/src/c.rs or src/d.rs.bak");
    let root = Some("/p");
    assert!(h.names_path("/p/src/a.rs", root));
    assert!(h.names_path("/p/lib/b.rs", root));
    assert!(
        !h.names_path("/p/src/c.rs", root),
        "inside another absolute path"
    );
    assert!(
        h.names_path("/p/src/d.rs", root),
        "a dot after a name ends it"
    );
    assert!(!h.names_path("/p/src/a.rs", None));
    assert!(
        h.names_path("./src/c.rs", None),
        "a relative path inside an absolute one"
    );
    assert!(!h.names_path("/q/src/a.rs", root), "not under the root");
}

#[test]
fn same_file_merges_absolute_and_relative_forms() {
    assert!(same_file("/p/src/a.rs", "src/a.rs"));
    assert!(same_file("./src/a.rs", "src/a.rs"));
    assert!(!same_file("/p/src/a.rs", "rc/a.rs"));
    assert!(!same_file("a.rs", "b.rs"));
}

#[test]
fn the_common_directory_holds_nine_tenths_of_the_paths() {
    let many: Vec<String> = (0..9)
        .map(|i| format!("/home/u/proj/src/f{i}.rs"))
        .chain(["/home/u/proj/README.md".to_owned()])
        .collect();
    assert_eq!(
        common_directory(many.iter().map(String::as_str)).as_deref(),
        Some("/home/u/proj/src")
    );
    let stray: Vec<String> = many.iter().cloned().chain(["/tmp/x".to_owned()]).collect();
    assert_eq!(
        common_directory(stray.iter().map(String::as_str)).as_deref(),
        Some("/home/u/proj")
    );
    assert_eq!(common_directory(["/a/x", "/b/y"]), None);
    assert_eq!(common_directory(["rel/x", "~/y"]), None);
}
