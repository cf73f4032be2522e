//! The duplicate-work report over the tool calls of the aider corpus, as imported.
// issue 17, item 8: every aider edit of the same file counted as a repeat (37–82% a day).

use std::path::PathBuf;

use baton_cache::report::{ToolCall, tools, total};
use baton_core::key::canonical_json;
use baton_core::{ContentBlock, Timestamp};
use baton_import::Format;

#[test]
fn r17_aider_edits_of_one_file_repeat_only_when_they_change_it_the_same_way() {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/corpus/aider-chat-md"
    ));
    if !dir.is_dir() {
        println!("skipping: corpus not found at {}", dir.display());
        return;
    }
    let mut calls = Vec::new();
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        for t in baton_import::parse(Format::Aider, &bytes).unwrap() {
            let run = format!("{}#{}", path.display(), t.index);
            for m in &t.messages {
                for block in &m.message.content {
                    if let ContentBlock::ToolUse { id, name, input } = block {
                        paths.push((run.clone(), input["path"].as_str().unwrap().to_owned()));
                        calls.push(ToolCall {
                            run: run.clone(),
                            at: Timestamp(0),
                            id: id.clone(),
                            tool: name.clone(),
                            canonical_input: canonical_json(input),
                        });
                    }
                }
            }
        }
    }
    let all = total(&tools(
        &calls,
        Some("apply_edit"),
        Timestamp(0),
        Timestamp(1),
    ));
    // Edits of a file the same run had edited before: what counting by path called repeats.
    let mut seen = std::collections::HashSet::new();
    let same_file = paths.iter().filter(|p| !seen.insert(*p)).count() as u64;
    println!(
        "aider corpus: {} edits, {same_file} of a file edited before in the run, {} repeats",
        all.calls, all.repeats
    );
    assert_eq!(all.calls, 447);
    assert!(same_file > 100, "{same_file}");
    // Only an edit that changes a file exactly as an earlier one did is a repeat.
    assert!(all.repeats * 10 < same_file, "{} repeats", all.repeats);
}
