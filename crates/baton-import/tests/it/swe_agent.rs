//! The SWE-agent reader over every `swe-agent-traj/` corpus file: detection, the tool-call
//! protocol, and per-file counts against SOURCES.md.
//!
//! Counting rule. Messages are `history` entries, one message each, as SOURCES.md counts them.
//! Tool calls are the structured `tool_calls` of function-calling trajectories, else the
//! assistant entries of `history` with a non-empty `action`. SOURCES.md counts `trajectory`
//! steps with an action instead; the two differ in one file, `ctf__crypto__BabyEncryption`
//! (16 steps, 15 actions in `history`: an `edit 2:2 decrypt.py` step never reached the chat).
//! Dangling calls: every thought/action trajectory ends with its `submit` call, whose
//! observation `history` does not hold; function-calling trajectories end with a tool answer.

use baton_import::Format;

use crate::messages::{corpus_files, pairing_problems};

/// file, messages, tool calls, final submit dangles, model, session id.
type Expected = (
    &'static str,
    usize,
    usize,
    bool,
    Option<&'static str>,
    Option<&'static str>,
);

const MARSHMALLOW: Option<&str> = Some("marshmallow-code__marshmallow-1867");

const EXPECTED: &[Expected] = &[
    (
        "swe-agent__demonstrations__ctf__crypto__BabyEncryption.traj",
        31,
        15,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__crypto__BabyTimeCapsule.traj",
        19,
        9,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__crypto__eps.traj",
        29,
        14,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__crypto__katy.traj",
        37,
        18,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__forensics__flash.traj",
        9,
        4,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__misc__networking_1.traj",
        9,
        4,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__pwn__warmup.traj",
        15,
        7,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__rev__rock.traj",
        25,
        12,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__ctf__web__i_got_id_demo.traj",
        43,
        21,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__function_calling_simple.traj",
        12,
        5,
        false,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__human_thought__swe-bench-HumanEvalFix-python__lcb__t-0.00__p-0.95__c-4.00__install-0__humanevalfix-python-0.traj",
        11,
        5,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__default__t-0.20__p-0.95__c-2.00__install-1___install_from_source__marshmallow-code__marshmallow-1867.traj",
        29,
        14,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__default_sys-env_cursors_window100__t-0.20__p-0.95__c-2.00__install-1__marshmallow-code__marshmallow-1867.traj",
        25,
        12,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__default_sys-env_window100__t-0.20__p-0.95__c-2.00__install-1__marshmallow-code__marshmallow-1867.traj",
        23,
        11,
        true,
        Some("gpt-4o"),
        MARSHMALLOW,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__function_calling__install-1__marshmallow-code__marshmallow-1867.traj",
        24,
        11,
        false,
        Some("gpt-4o"),
        MARSHMALLOW,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__function_calling_replace__install-1__marshmallow-code__marshmallow-1867.traj",
        24,
        11,
        false,
        Some("gpt-4o"),
        MARSHMALLOW,
    ),
    // Replayed by SWE-agent's `replay` stand-in model: no model recorded.
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source__marshmallow-code__marshmallow-1867.traj",
        28,
        13,
        false,
        None,
        MARSHMALLOW,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__xml_sys-env_cursors_window100__t-0.20__p-0.95__c-2.00__install-1__marshmallow-code__marshmallow-1867.traj",
        25,
        12,
        true,
        None,
        None,
    ),
    (
        "swe-agent__demonstrations__replay__marshmallow-code__marshmallow-1867__xml_sys-env_window100__t-0.20__p-0.95__c-2.00__install-1__marshmallow-code__marshmallow-1867.traj",
        23,
        11,
        true,
        Some("gpt-4o"),
        MARSHMALLOW,
    ),
    (
        "swe-agent__test_data__gpt4__swe-agent-test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__6e44b9__sweagenttestrepo-1c2844.traj",
        10,
        4,
        false,
        Some("gpt-4o"),
        Some("SWE-agent__test-repo-i1"),
    ),
    (
        "swe-agent__test_data__gpt4__swe-agent__test-repo__default_from_url__t-0.00__p-0.95__c-3.00__install-1__swe-agent__test-repo-i1.traj",
        12,
        5,
        true,
        None,
        None,
    ),
];

#[test]
fn every_corpus_file_reads_with_the_expected_counts() {
    let Some(files) = corpus_files("swe-agent-traj") else {
        return;
    };
    assert_eq!(files.len(), EXPECTED.len(), "corpus files changed");
    for (name, bytes) in &files {
        let &(_, messages, tools, dangles, model, session) = EXPECTED
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("no expectation for {name}"));
        assert_eq!(
            baton_import::detect(bytes),
            Some(Format::SweAgent),
            "{name}"
        );
        let ts =
            baton_import::parse(Format::SweAgent, bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ts.len(), 1, "{name}");
        let t = &ts[0];
        assert_eq!(
            (t.messages.len(), t.tool_calls()),
            (messages, tools),
            "{name}"
        );
        assert_eq!(t.models, model.into_iter().collect::<Vec<_>>(), "{name}");
        assert_eq!(t.source_session_id.as_deref(), session, "{name}");
        let problems = pairing_problems(t);
        if dangles {
            let last = &t.messages.last().unwrap().message;
            let id = last
                .tool_use_ids()
                .next()
                .unwrap_or_else(|| panic!("{name}: no final call"));
            assert_eq!(problems, [format!("dangling {id}")], "{name}");
            match last.content.last() {
                Some(baton_core::ContentBlock::ToolUse {
                    name: tool, input, ..
                }) => {
                    assert_eq!(tool, "bash");
                    assert!(
                        input["command"].as_str().unwrap().starts_with("submit"),
                        "{name}: {input}"
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        } else {
            assert_eq!(problems, Vec::<String>::new(), "{name}");
        }
    }
}
