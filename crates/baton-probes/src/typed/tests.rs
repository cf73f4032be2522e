//! Unit tests of `typed`: reminders, slash commands, first sentences.

use super::*;

#[test]
fn reminders_are_removed_wherever_they_are() {
    assert_eq!(
        without_reminders("a<system-reminder>x</system-reminder>b<system-reminder>y"),
        "ab"
    );
    assert_eq!(without_reminders("plain"), "plain");
}

#[test]
fn slash_commands_read_in_any_tag_order() {
    assert_eq!(
        slash_command("<command-args>x y</command-args><command-name>/run</command-name>"),
        Some("/run x y".to_owned())
    );
    assert_eq!(
        slash_command("<command-name>init</command-name>"),
        Some("/init".to_owned())
    );
    assert_eq!(slash_command("<command-message>m</command-message>"), None);
    assert_eq!(slash_command("text <command-name>/x</command-name>"), None);
}

#[test]
fn the_first_sentence_needs_three_words() {
    assert_eq!(
        first_sentence("Hi. Please fix it. Then go."),
        "Hi. Please fix it."
    );
    assert_eq!(
        first_sentence("e.g. do it now! And more"),
        "e.g. do it now!"
    );
    assert_eq!(first_sentence("one two three\nfour"), "one two three");
    assert_eq!(
        first_sentence("version 1.2.3 is out"),
        "version 1.2.3 is out"
    );
    assert_eq!(first_sentence(""), "");
}
