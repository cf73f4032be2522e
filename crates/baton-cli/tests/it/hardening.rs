//! Issue 20: the CLI's defects found by a newcomer's trial and an attack on the service, each
//! pinned by a test that failed before its fix (the items' numbers are the issue's).

use crate::support::Sandbox;

/// Items 4 and 7 from the command line: an id past the databases' range is invalid input
/// (exit 4), on both backends; `.` and `..` are no run id and no operation key.
#[test]
fn r20_4_7_out_of_range_and_dot_ids_are_invalid_input() {
    for sb in Sandbox::each() {
        sb.run(&["runs", "create", "--id", "r"]).ok();
        sb.run_with_stdin(
            &["append", "r"],
            "{\"role\":\"user\",\"content\":\"one\"}\n{\"role\":\"assistant\",\"content\":\"two\"}\n",
        )
        .ok();
        let candidate = sb.file("c.json", "[]");
        let candidate = candidate.to_str().unwrap();
        let id = sb
            .run(&[
                "--json", "summary", "install", "r", "--base", "none", "--cut", "1", "--file",
                candidate,
            ])
            .ok()
            .json()["id"]
            .as_u64()
            .unwrap()
            .to_string();
        let big = (i64::MAX as u64 + 1).to_string();
        sb.run(&["summary", "activate", "r", &id, "--base", &big])
            .fails(4, &format!("{big} is out of range"));
        sb.run(&["summary", "activate", "r", &big, "--base", &id])
            .fails(4, &big);
        sb.run(&[
            "summary", "install", "r", "--base", &big, "--cut", "2", "--file", candidate,
        ])
        .fails(4, &big);
        for dots in [".", ".."] {
            sb.run(&["runs", "create", "--id", dots])
                .fails(4, "other than '.' and '..'");
            sb.run(&[
                "ops",
                "begin",
                dots,
                "--request-hash",
                &"a".repeat(64),
                "--owner",
                "w",
                "--lease",
                "10s",
            ])
            .fails(4, "other than '.' and '..'");
        }
    }
}
