//! Unit tests of `problems`: status lines, output bodies, first programs, named files.

use super::*;

#[test]
fn exit_codes_are_read_from_status_lines_only() {
    assert_eq!(status_exit_code("Exit code 2\nboom"), Some(2));
    assert_eq!(status_exit_code("Exit code: 0\nWall time: 1s"), Some(0));
    assert_eq!(
        status_exit_code("Chunk ID: x\nWall time: 0\nProcess exited with code 1\nOutput:\n"),
        Some(1)
    );
    assert_eq!(status_exit_code("FAIL\nexit status 1"), Some(1));
    assert_eq!(
        status_exit_code("out\n[Command finished with exit code 3]"),
        Some(3)
    );
    let middle = format!("{}Exit code 9\n{}", "l\n".repeat(10), "l\n".repeat(10));
    assert_eq!(
        status_exit_code(&middle),
        None,
        "a status line in the middle is output"
    );
    assert_eq!(status_exit_code("Exit code 1 was expected"), None);
    assert_eq!(
        json_exit_code(r#"{"output":"x","metadata":{"exit_code":4}}"#),
        Some(4)
    );
    assert_eq!(json_exit_code(r#"{"exit_code":0}"#), Some(0));
    assert_eq!(json_exit_code("not json"), None);
}

#[test]
fn the_body_drops_status_lines_and_headers() {
    assert_eq!(body("Exit code 1"), "");
    assert_eq!(body("Chunk ID: a\nWall time: 0\nOutput:\nhello"), "hello");
    assert_eq!(body("Exit code 2\nNo such file"), "No such file");
}

#[test]
fn the_first_program_skips_cd_prefixes_and_shell_wrappers() {
    assert_eq!(first_program("cd /a && cd b && grep x"), Some("grep"));
    assert_eq!(first_program("cd /a; ls -la"), Some("ls"));
    assert_eq!(first_program("bash -lc 'rg foo'"), Some("rg"));
    assert_eq!(first_program("cd /a"), Some("cd"));
    assert_eq!(first_program("  "), None);
}

#[test]
fn named_files_are_path_and_file_name_tokens() {
    let names =
        named_files("error: lib/foo.ex:3:5: bad\n  (test/a_test.exs:12) in main.rs. 1.5 done");
    assert_eq!(names, ["lib/foo.ex", "test/a_test.exs", "main.rs"]);
    assert!(names_file("lib/foo.ex", "/repo/lib/foo.ex"));
    assert!(names_file("main.rs", "/repo/src/main.rs"));
    assert!(!names_file("ain.rs", "/repo/src/main.rs"));
}

#[test]
fn a_compiler_location_with_a_message_names_its_file() {
    assert_eq!(
        named_files("lib/spotter_web/controllers/otel_trace_helpers.ex:94:7:pattern_match_cov"),
        ["lib/spotter_web/controllers/otel_trace_helpers.ex"]
    );
    assert!(names_file("lib/a/b.ex", "/home/u/project/lib/a/b.ex"));
}
