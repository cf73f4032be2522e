//! The working state's vocabulary, one case a line.

use super::*;

#[track_caller]
fn split(text: &str, expect: &[&str]) {
    assert_eq!(sentences(text), expect, "sentences of {text:?}");
}

#[test]
fn sentences_are_verbatim_slices() {
    split(
        "Fix the bug. Never touch prod! Why? Done",
        &["Fix the bug.", "Never touch prod!", "Why?", "Done"],
    );
    split(
        "- only read files\n* avoid writes\n1. first step\n> quoted. ## Heading",
        &[
            "only read files",
            "avoid writes",
            "first step",
            "quoted.",
            "Heading",
        ],
    );
    split(
        "Edit src/main.rs. Then test.",
        &["Edit src/main.rs.", "Then test."],
    );
    split(
        "Use e.g. a map, i.e. a table.",
        &["Use e.g. a map, i.e. a table."],
    );
    split("Step 2. is next", &["Step 2. is next"]);
    split("text\n```\nnever run this\n```\nafter", &["text", "after"]);
    split(
        "ask\n<system-reminder>\nYou must not do X.\n</system-reminder>\nend",
        &["ask", "end"],
    );
    split("  \n... \n", &[]);
    let text = "Un texto. Con acentos: sólo lectura.";
    for s in sentences(text) {
        assert!(text.contains(s));
    }
}

#[test]
fn constraints_are_imperative() {
    for yes in [
        "Never push to main.",
        "Don't touch the database.",
        "Don’t touch the database.",
        "You must not restart the server.",
        "Only read files under /var/log.",
        "This run is read-only.",
        "read only please",
        "No writes to production.",
        "Do it without network access.",
        "Avoid force pushes.",
        "Always run the tests.",
        "La ejecución es de solo lectura.",
        "No escribas en producción.",
        "Nunca borres datos.",
    ] {
        assert!(is_constraint(yes), "{yes:?} is a constraint");
    }
    for no in [
        "Fix the login bug.",
        "No, that is not what I meant.",
        "This is commonly done.",
        "Add tests for `subtree_only`.",
        "Mustard is yellow.",
        &format!("Never {}", "x".repeat(MAX_SENTENCE_CHARS)),
    ] {
        assert!(!is_constraint(no), "{no:?} is no constraint");
    }
}

#[test]
fn findings_are_checked_and_unhedged() {
    for yes in [
        "Confirmed: the cache is not the cause.",
        "The root cause is the serializer.",
        "All 18 tests pass.",
        "It turned out the port was wrong.",
        "The network was ruled out.",
    ] {
        assert!(is_verified(yes), "{yes:?} is a finding");
    }
    for no in [
        "The root cause is probably the serializer.",
        "Let me verify that the tests pass.",
        "If the tests pass, we are done.",
        "Tests should pass now.",
        "Did the tests pass?",
        "I edited the file.",
        "Next, I'll confirm the fix works.",
    ] {
        assert!(!is_verified(no), "{no:?} is no finding");
    }
}

#[test]
fn hypotheses_hedge_and_plans_announce() {
    assert!(is_hypothesis("The bug is probably in the cache layer."));
    assert!(is_hypothesis("I suspect the DNS."));
    assert!(is_hypothesis("It could be a race."));
    assert!(is_hypothesis("Quizás sea el puerto."));
    assert!(!is_hypothesis("The cache layer is fine."));
    assert!(is_plan("Next, I will run the migration."));
    assert!(is_plan("Let me check the logs."));
    assert!(is_plan("I'll add a test."));
    assert!(!is_plan("Shall I continue next?"));
    assert!(!is_plan("The tests pass."));
}

#[test]
fn refutation_needs_shared_words_and_a_negation() {
    let h = "The bug is probably in the cache layer.";
    assert!(refutes("The cache layer is not the cause.", h));
    assert!(refutes(
        "Ruled out the cache layer; the serializer it is.",
        h
    ));
    assert!(refutes(
        "The cache layer is fine; the bug is in the serializer instead.",
        h
    ));
    // One shared word is not enough; stop words do not count.
    assert!(!refutes("The cache is not involved.", h));
    assert!(!refutes("The bug is not probably in the code.", h));
    // Without a negation it confirms, it does not refute.
    assert!(!refutes("Confirmed: the cache layer is the cause.", h));
}

#[test]
fn failures_in_tool_output() {
    assert_eq!(
        failure_line("ok\nerror: could not compile `x`\n"),
        Some("error: could not compile `x`")
    );
    assert_eq!(
        failure_line("error[E0425]: cannot find value"),
        Some("error[E0425]: cannot find value")
    );
    assert_eq!(
        failure_line("fatal: not a git repository"),
        Some("fatal: not a git repository")
    );
    assert_eq!(
        failure_line("test result: FAILED. 1 passed; 2 failed"),
        Some("test result: FAILED. 1 passed; 2 failed")
    );
    assert_eq!(
        failure_line("bash: foo: command not found"),
        Some("bash: foo: command not found")
    );
    assert_eq!(
        failure_line(
            "Traceback (most recent call last):\n  File \"a.py\", line 1\n    x()\nNameError: name 'x' is not defined\n(Open file: a.py)"
        ),
        Some("NameError: name 'x' is not defined")
    );
    // An exit code says that it failed; a following error line says why.
    assert_eq!(
        failure_line("Exit code 128\nfatal: no upstream"),
        Some("fatal: no upstream")
    );
    assert_eq!(
        failure_line("Exit code 1\nsome output"),
        Some("Exit code 1")
    );
    assert_eq!(
        failure_line("Process exited with code 2"),
        Some("Process exited with code 2")
    );
    assert_eq!(
        failure_line("Command `ls x` executed with exit code 1."),
        Some("Command `ls x` executed with exit code 1.")
    );
    for ok in [
        "Process exited with code 0\nall good",
        "Command `mv a b` executed with exit code 0.",
        "All tests passed; 0 failed",
        "  12→    error: handled in this match arm",
        "5. Exit code 2 shows stderr to the user",
        "",
    ] {
        assert_eq!(failure_line(ok), None, "{ok:?} reports no failure");
    }
}

#[test]
fn harness_echoes() {
    assert!(!is_echo(
        "# AGENTS.md instructions for /x\n- Always use bun."
    ));
    assert!(is_echo("<local-command-stdout>x</local-command-stdout>"));
    assert!(is_echo("[Request interrupted by user]"));
}
