//! The import rules of [`super`]: rolling digests and what a reimport decides.

use baton_core::{Message, Role, RunId, Seq};

use super::*;

fn import_of(texts: &[&str]) -> NewImport {
    let entries = texts
        .iter()
        .map(|t| NewEntry::estimated(Message::text(Role::User, *t)))
        .collect();
    let compactions = vec![SourceCompaction {
        after: 1,
        summary: Some("so far".into()),
        at: None,
    }];
    NewImport::new(None, Origin::default(), entries, compactions)
}

fn stored(import: &NewImport, n: u64, last_seq: u64) -> Stored {
    Stored {
        source_messages: n,
        digest: import.digest_after(n).unwrap(),
        last_seq: Seq(last_seq),
        compactions: import.compactions.len() as u64,
    }
}

fn run() -> RunId {
    RunId::new("r").unwrap()
}

#[test]
fn digests_roll_over_messages_and_depend_on_order() {
    let ab = import_of(&["a", "b"]);
    let ba = import_of(&["b", "a"]);
    assert_eq!(ab.digest_after(0), Some(Digest::empty()));
    assert_eq!(
        Digest::empty().to_hex(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_ne!(ab.digest(), ba.digest());
    assert_eq!(ab.digest_after(2), Some(ab.digest()));
    assert_eq!(ab.digest_after(3), None);
    // The digest of a prefix is the digest of the shorter transcript.
    assert_eq!(import_of(&["a"]).digest(), ab.digest_after(1).unwrap());
}

#[test]
fn a_source_imported_whole_is_up_to_date() {
    let i = import_of(&["a", "b"]);
    let d = decide(&i, 0, &run(), stored(&i, 2, 2), Reimport::AppendNew);
    assert_eq!(d, Ok(Decision::UpToDate));
}

#[test]
fn a_grown_source_is_reported_or_appended() {
    let old = import_of(&["a", "b"]);
    let new = import_of(&["a", "b", "c", "d"]);
    let s = stored(&old, 2, 2);
    assert_eq!(
        decide(&new, 0, &run(), s, Reimport::No),
        Ok(Decision::Grown { new: 2 })
    );
    let s = Stored {
        compactions: 0,
        ..s
    };
    assert_eq!(
        decide(&new, 0, &run(), s, Reimport::AppendNew),
        Ok(Decision::Append {
            from: 2,
            compactions_from: 0
        })
    );
    let s = Stored {
        compactions: 1,
        ..s
    };
    assert_eq!(
        decide(&new, 0, &run(), s, Reimport::AppendNew),
        Ok(Decision::Append {
            from: 2,
            compactions_from: 1
        })
    );
}

#[test]
fn a_compaction_after_the_last_message_is_recorded_on_reimport() {
    let old = import_of(&["a", "b"]);
    let mut new = import_of(&["a", "b"]);
    new.compactions.push(SourceCompaction {
        after: 2,
        summary: None,
        at: None,
    });
    let s = Stored {
        compactions: 1,
        ..stored(&old, 2, 2)
    };
    assert_eq!(
        decide(&new, 0, &run(), s, Reimport::AppendNew),
        Ok(Decision::Append {
            from: 2,
            compactions_from: 1
        })
    );
    assert_eq!(
        decide(&new, 0, &run(), s, Reimport::No),
        Ok(Decision::UpToDate)
    );
}

#[test]
fn a_last_message_that_grew_is_told_apart_from_an_edit() {
    // Imported while the last response was streaming: "b" then; "b, then more" now.
    let old = import_of(&["a", "b"]);
    let grown = import_of(&["a", "b, then more", "c"]);
    let s = stored(&old, 2, 2);
    let err = decide(&grown, 0, &run(), s, Reimport::AppendNew).unwrap_err();
    let b = Message::text(Role::User, "b");
    assert_eq!(
        refine_divergence(err.clone(), &grown, s, &b),
        ImportRejection::LastMessageChanged {
            index: 0,
            run: run(),
            stored: 2
        }
    );
    // An earlier message edited: still a divergence.
    let edited = import_of(&["A", "b", "c"]);
    let err = decide(&edited, 0, &run(), s, Reimport::AppendNew).unwrap_err();
    assert!(matches!(
        refine_divergence(err, &edited, s, &b),
        ImportRejection::Diverged { .. }
    ));
}

#[test]
fn an_edited_or_shorter_source_is_rejected() {
    let old = import_of(&["a", "b"]);
    let edited = import_of(&["a", "B", "c"]);
    let shorter = import_of(&["a"]);
    for import in [&edited, &shorter] {
        assert_eq!(
            decide(import, 3, &run(), stored(&old, 2, 2), Reimport::AppendNew),
            Err(ImportRejection::Diverged {
                index: 3,
                run: run(),
                stored: 2,
                first: None,
            })
        );
    }
}

#[test]
fn a_run_appended_to_since_is_not_extended() {
    let old = import_of(&["a", "b"]);
    let new = import_of(&["a", "b", "c"]);
    let err = decide(&new, 0, &run(), stored(&old, 2, 5), Reimport::AppendNew).unwrap_err();
    assert!(matches!(
        err,
        ImportRejection::RunMovedOn {
            last_seq: 5,
            stored: 2,
            ..
        }
    ));
    // Without a reimport it is only reported.
    assert_eq!(
        decide(&new, 0, &run(), stored(&old, 2, 5), Reimport::No),
        Ok(Decision::Grown { new: 1 })
    );
}

#[test]
fn the_first_difference_is_named_with_excerpts_of_both_sides() {
    let stored = import_of(&["a", "b", "c"]);
    let stored: Vec<Message> = stored.entries().iter().map(|e| e.message.clone()).collect();
    let edited = import_of(&["a", "B", "c"]);
    let first = first_difference(&edited, Seq(1), &stored).unwrap();
    assert_eq!(
        (first.seq, first.stored.as_str(), first.incoming.as_str()),
        (Seq(2), "b", "B")
    );
    // From a later seq: the chunk holds seqs 2 and 3.
    let first = first_difference(&edited, Seq(2), &stored[1..]).unwrap();
    assert_eq!(first.seq, Seq(2));
    // The same messages: nothing to name.
    assert_eq!(
        first_difference(&import_of(&["a", "b"]), Seq(1), &stored),
        None
    );
}

#[test]
fn a_long_message_is_shown_around_where_it_changes() {
    let long = "x".repeat(200);
    let stored = import_of(&[&format!("{long} old ending")]);
    let stored: Vec<Message> = stored.entries().iter().map(|e| e.message.clone()).collect();
    let edited = import_of(&[&format!("{long} new ending")]);
    let first = first_difference(&edited, Seq(1), &stored).unwrap();
    assert!(
        first.stored.starts_with('…') && first.stored.contains("old ending"),
        "{first}"
    );
    assert!(first.incoming.contains("new ending"), "{first}");
    assert!(first.stored.chars().count() <= EXCERPT_CHARS + 2, "{first}");
}
