//! Tests for protocol units and safe cuts.
//!
//! Hand-made cases are one `check*` call each, on a transcript in a compact line format:
//!
//! ```text
//! start 10
//! 11 user "list files"
//! 12 assistant tool_use(a) tool_use(b)
//! 13 user tool_result(a)
//! 14 tool tool_result(b, error)
//! ```
//!
//! The optional `start` line is the seq the window follows (the active summary's coverage, else
//! 0). Every other line is a seq, a role and zero or more blocks: `"text"`, `tool_use(id)`,
//! `tool_result(id)` or `tool_result(id, error)`.
//!
//! The property tests compare [`ProtocolMap`] with [`oracle_safe`], a brute-force reading of the
//! three rules that looks at every occurrence of every id for every cut. The hand-made cases check
//! the oracle too, so both stand on the expectations written here.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::Index;

use super::{Problem, ProtocolEvents, ProtocolMap, Unit};
use crate::{ContentBlock, Message, Role, Seq};

// --- Fixtures -----------------------------------------------------------------------------------

/// A window of history: the seq it follows and its messages.
#[derive(Clone, Debug, PartialEq)]
struct Window {
    start: Seq,
    messages: Vec<(Seq, Message)>,
}

impl Window {
    fn events(&self) -> Vec<ProtocolEvents> {
        self.messages
            .iter()
            .map(|(seq, m)| ProtocolEvents::of(*seq, m))
            .collect()
    }

    /// Every cut point of the window: `start`, then each message's seq.
    fn boundaries(&self) -> Vec<Seq> {
        std::iter::once(self.start)
            .chain(self.messages.iter().map(|(seq, _)| *seq))
            .collect()
    }

    /// The boundaries the oracle finds safe, in order.
    fn oracle_cuts(&self) -> Vec<Seq> {
        let events = self.events();
        self.boundaries()
            .into_iter()
            .filter(|&b| oracle_safe(&events, b))
            .collect()
    }

    fn map(&self) -> ProtocolMap {
        ProtocolMap::analyze(self.start, &self.events())
    }

    /// The window in the fixture format, for failure messages of the property tests.
    fn render(&self) -> String {
        let mut out = String::new();
        if self.start != Seq::ZERO {
            writeln!(out, "start {}", self.start).unwrap();
        }
        for (seq, message) in &self.messages {
            write!(out, "{seq} {}", message.role.as_str()).unwrap();
            for block in &message.content {
                match block {
                    ContentBlock::Text { text } => write!(out, " {text:?}").unwrap(),
                    ContentBlock::ToolUse { id, .. } => write!(out, " tool_use({id})").unwrap(),
                    ContentBlock::ToolResult {
                        tool_use_id,
                        is_error: false,
                        ..
                    } => write!(out, " tool_result({tool_use_id})").unwrap(),
                    ContentBlock::ToolResult {
                        tool_use_id,
                        is_error: true,
                        ..
                    } => write!(out, " tool_result({tool_use_id}, error)").unwrap(),
                    other => panic!("no fixture form for a {} block", other.type_name()),
                }
            }
            out.push('\n');
        }
        out
    }
}

#[track_caller]
fn parse(transcript: &str) -> Window {
    let mut window = Window {
        start: Seq::ZERO,
        messages: Vec::new(),
    };
    for line in transcript.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let tokens = tokenize(line);
        let (head, rest) = tokens.split_first().unwrap();
        if head == "start" {
            assert!(
                window.messages.is_empty(),
                "`start` must come first: {line}"
            );
            assert_eq!(rest.len(), 1, "expected `start <seq>`: {line}");
            window.start = Seq(rest[0].parse().unwrap());
            continue;
        }
        let seq = Seq(head
            .parse()
            .unwrap_or_else(|_| panic!("expected a seq: {line}")));
        let (role, blocks) = rest
            .split_first()
            .unwrap_or_else(|| panic!("expected a role: {line}"));
        let role = match role.as_str() {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => panic!("unknown role {other:?}: {line}"),
        };
        let content = blocks.iter().map(|b| block(b, line)).collect();
        window.messages.push((seq, Message { role, content }));
    }
    window
}

/// Splits a line on spaces, keeping `"quoted text"` and `call(args, …)` whole.
#[track_caller]
fn tokenize(line: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut closing = None;
    for c in line.chars() {
        match closing {
            Some(end) => {
                token.push(c);
                if c == end {
                    closing = None;
                }
            }
            None if c.is_whitespace() => {
                if !token.is_empty() {
                    tokens.push(std::mem::take(&mut token));
                }
            }
            None => {
                token.push(c);
                closing = match c {
                    '"' => Some('"'),
                    '(' => Some(')'),
                    _ => None,
                };
            }
        }
    }
    assert!(closing.is_none(), "unclosed {token:?} in: {line}");
    if !token.is_empty() {
        tokens.push(token);
    }
    tokens
}

#[track_caller]
fn block(token: &str, line: &str) -> ContentBlock {
    if let Some(text) = token.strip_prefix('"') {
        return ContentBlock::Text {
            text: text.strip_suffix('"').unwrap().to_owned(),
        };
    }
    let (name, args) = token
        .strip_suffix(')')
        .and_then(|t| t.split_once('('))
        .unwrap_or_else(|| panic!("unknown block {token:?}: {line}"));
    let args: Vec<&str> = args.split(',').map(str::trim).collect();
    match (name, args.as_slice()) {
        ("tool_use", [id]) => ContentBlock::ToolUse {
            id: (*id).to_owned(),
            name: "tool".to_owned(),
            input: serde_json::json!({}),
        },
        ("tool_result", [id]) => result(id, false),
        ("tool_result", [id, "error"]) => result(id, true),
        _ => panic!("unknown block {token:?}: {line}"),
    }
}

fn result(id: &str, is_error: bool) -> ContentBlock {
    ContentBlock::ToolResult {
        tool_use_id: id.to_owned(),
        content: vec![ContentBlock::Text {
            text: "output".to_owned(),
        }],
        is_error,
    }
}

// --- The oracle ---------------------------------------------------------------------------------

/// Whether a cut at `cut` (dropping every message with seq `≤ cut`) is safe, straight from the
/// three rules: for every id, look at the side of each of its calls and results.
fn oracle_safe(window: &[ProtocolEvents], cut: Seq) -> bool {
    let ids: BTreeSet<&str> = window
        .iter()
        .flat_map(|e| e.uses.iter().chain(&e.results))
        .map(String::as_str)
        .collect();
    ids.into_iter().all(|id| {
        // Whether each call and each result of `id` is dropped.
        let mut uses = Vec::new();
        let mut results = Vec::new();
        for e in window {
            let dropped = e.seq <= cut;
            uses.extend(e.uses.iter().filter(|u| *u == id).map(|_| dropped));
            results.extend(e.results.iter().filter(|r| *r == id).map(|_| dropped));
        }
        if results.is_empty() {
            // Dangling: no call may be dropped.
            return uses.iter().all(|&dropped| !dropped);
        }
        if uses.is_empty() {
            // Orphan: no result may be kept.
            return results.iter().all(|&dropped| dropped);
        }
        // Paired: every call on the same side as every result.
        uses.iter().all(|u| results.iter().all(|r| u == r))
    })
}

/// The problems a window has, found directly: a result per message naming an id never called, the
/// last call of an id never answered, the first result of an id that comes before any call of it,
/// and every call of an id after its first.
fn oracle_problems(window: &[ProtocolEvents]) -> Vec<(Seq, &'static str, String)> {
    let used = |id: &String| window.iter().any(|e| e.uses.contains(id));
    let answered = |id: &String| window.iter().any(|e| e.results.contains(id));
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for e in window {
        let orphans: BTreeSet<&String> = e.results.iter().filter(|id| !used(id)).collect();
        for id in orphans {
            problems.push((e.seq, "orphan_result", id.clone()));
        }
        for id in &e.uses {
            if !seen.insert(id) {
                problems.push((e.seq, "duplicate_use", id.clone()));
            }
        }
    }
    for id in &seen {
        let first_use = window.iter().position(|e| e.uses.contains(id));
        let first_result = window.iter().position(|e| e.results.contains(id));
        if let (Some(u), Some(r)) = (first_use, first_result)
            && r < u
        {
            problems.push((window[r].seq, "result_before_use", (*id).clone()));
        }
    }
    for id in seen.into_iter().filter(|id| !answered(id)) {
        let last = window.iter().rev().find(|e| e.uses.contains(id)).unwrap();
        problems.push((last.seq, "dangling_use", id.clone()));
    }
    problems.sort();
    problems
}

fn problem_key(p: &Problem) -> (Seq, &'static str, String) {
    match p {
        Problem::OrphanResult { seq, tool_use_id } => (*seq, "orphan_result", tool_use_id.clone()),
        Problem::DanglingUse { seq, tool_use_id } => (*seq, "dangling_use", tool_use_id.clone()),
        Problem::ResultBeforeUse { seq, tool_use_id } => {
            (*seq, "result_before_use", tool_use_id.clone())
        }
        Problem::DuplicateUse { seq, tool_use_id } => (*seq, "duplicate_use", tool_use_id.clone()),
    }
}

/// Checks everything `map` says about `window` against the oracle; `context` names the window in
/// failure messages.
#[track_caller]
fn check_against_oracle(window: &Window, map: &ProtocolMap, oracle: &[Seq], context: &str) {
    let events = window.events();
    let boundaries = window.boundaries();

    for &b in &boundaries {
        let safe = oracle.contains(&b);
        assert_eq!(map.is_safe(b), safe, "is_safe({b}) of\n{context}");
        assert_eq!(map.explain(b).is_none(), safe, "explain({b}) of\n{context}");
    }
    // Seqs that are no boundary of the window are never cut points.
    let last = boundaries.last().copied().unwrap_or(window.start);
    for s in 0..=last.0 + 2 {
        if !boundaries.contains(&Seq(s)) {
            assert!(!map.is_safe(Seq(s)), "is_safe({s}) outside of\n{context}");
            assert!(map.explain(Seq(s)).is_some(), "explain({s}) of\n{context}");
        }
    }

    check_units(window, &map.units(), oracle, context);

    let mut problems: Vec<_> = map.problems().iter().map(problem_key).collect();
    assert!(
        problems.windows(2).all(|w| w[0].0 <= w[1].0),
        "problems out of seq order: {problems:?} of\n{context}"
    );
    problems.sort();
    assert_eq!(problems, oracle_problems(&events), "problems of\n{context}");
}

/// The units partition the window in order, each closed unit ends at a safe cut, and every safe
/// cut after `start` ends a unit; only the last unit may be open, and only when the end of the
/// window is unsafe.
#[track_caller]
fn check_units(window: &Window, units: &[Unit], oracle: &[Seq], context: &str) {
    let seqs: Vec<Seq> = window.messages.iter().map(|(s, _)| *s).collect();
    let mut covered = Vec::new();
    for (i, unit) in units.iter().enumerate() {
        let from = seqs.iter().position(|&s| s == unit.first);
        let to = seqs.iter().position(|&s| s == unit.last);
        let (Some(from), Some(to)) = (from, to) else {
            panic!("unit {unit:?} is not in\n{context}");
        };
        assert!(from <= to, "unit {unit:?} runs backwards in\n{context}");
        covered.extend_from_slice(&seqs[from..=to]);
        let last_unit = i + 1 == units.len();
        assert_eq!(
            unit.open,
            !oracle.contains(&unit.last),
            "unit {unit:?}: open iff its end is unsafe, in\n{context}"
        );
        assert!(
            !unit.open || last_unit,
            "open unit {unit:?} is not last in\n{context}"
        );
    }
    assert_eq!(covered, seqs, "units {units:?} do not partition\n{context}");
    let closed_ends: Vec<Seq> = units.iter().filter(|u| !u.open).map(|u| u.last).collect();
    let safe_after_start: Vec<Seq> = seqs
        .iter()
        .copied()
        .filter(|s| oracle.contains(s))
        .collect();
    assert_eq!(
        closed_ends, safe_after_start,
        "unit ends vs safe cuts of\n{context}"
    );
}

/// The nearest safe cut at or before `desired` agrees with the oracle: it is safe, nothing safe
/// lies strictly between it and `desired`, and `None` means nothing at or before `desired` is safe.
#[track_caller]
fn check_nearest(window: &Window, map: &ProtocolMap, oracle: &[Seq], desired: Seq, context: &str) {
    let boundaries = window.boundaries();
    let chosen = map.safe_cut_at_or_before(desired).map(|c| c.seq());
    match chosen {
        Some(c) => {
            assert!(
                c <= desired,
                "cut {c} after desired {desired} in\n{context}"
            );
            assert!(
                boundaries.contains(&c),
                "cut {c} is no boundary of\n{context}"
            );
            assert!(oracle.contains(&c), "cut {c} is unsafe in\n{context}");
            for &b in boundaries.iter().filter(|&&b| c < b && b <= desired) {
                assert!(
                    !oracle.contains(&b),
                    "cut {b} is safe and nearer to {desired} than {c} in\n{context}"
                );
            }
        }
        None => {
            for &b in boundaries.iter().filter(|&&b| b <= desired) {
                assert!(
                    !oracle.contains(&b),
                    "None, but cut {b} ≤ {desired} is safe in\n{context}"
                );
            }
        }
    }
}

// --- Data-driven checks -------------------------------------------------------------------------

/// The safe cuts of `transcript` (among `start` and its seqs) are exactly `expect_safe`, by the
/// map and by the oracle; everything else the map says agrees with the oracle.
#[track_caller]
fn check(transcript: &str, expect_safe: &[u64]) {
    let window = parse(transcript);
    let map = window.map();
    let safe: Vec<u64> = window
        .boundaries()
        .into_iter()
        .filter(|&b| map.is_safe(b))
        .map(|b| b.0)
        .collect();
    assert_eq!(safe, expect_safe, "safe cuts of\n{transcript}");
    let oracle = window.oracle_cuts();
    let oracle_u64: Vec<u64> = oracle.iter().map(|s| s.0).collect();
    assert_eq!(
        oracle_u64, expect_safe,
        "oracle's safe cuts of\n{transcript}"
    );
    check_against_oracle(&window, &map, &oracle, transcript);
    let end = window.boundaries().last().map_or(0, |s| s.0);
    for desired in 0..=end + 2 {
        check_nearest(&window, &map, &oracle, Seq(desired), transcript);
    }
}

/// The units of `transcript`, written `1 | 2-3 | 4-5 open`.
#[track_caller]
fn check_units_are(transcript: &str, expect: &str) {
    let units = parse(transcript).map().units();
    let rendered: Vec<String> = units
        .iter()
        .map(|u| {
            let span = if u.first == u.last {
                format!("{}", u.first)
            } else {
                format!("{}-{}", u.first, u.last)
            };
            if u.open { format!("{span} open") } else { span }
        })
        .collect();
    assert_eq!(rendered.join(" | "), expect, "units of\n{transcript}");
}

/// The problems of `transcript`, one per line: `seq kind id`.
#[track_caller]
fn check_problems(transcript: &str, expect: &str) {
    let map = parse(transcript).map();
    let rendered: Vec<String> = map
        .problems()
        .iter()
        .map(|p| {
            let (seq, kind, id) = problem_key(p);
            format!("{seq} {kind} {id}")
        })
        .collect();
    assert_eq!(
        rendered.join("\n"),
        expect.trim(),
        "problems of\n{transcript}"
    );
}

/// `safe_cut_at_or_before(desired)` for each `(desired, expected)` pair.
#[track_caller]
fn check_nearest_cuts(transcript: &str, expect: &[(u64, Option<u64>)]) {
    let map = parse(transcript).map();
    for &(desired, cut) in expect {
        assert_eq!(
            map.safe_cut_at_or_before(Seq(desired)).map(|c| c.seq().0),
            cut,
            "safe_cut_at_or_before({desired}) of\n{transcript}"
        );
    }
}

#[test]
fn fixture_format_round_trips() {
    let transcript = r#"
start 10
11 user "list files"
12 assistant "sure" tool_use(a) tool_use(b)
13 user tool_result(a)
14 tool tool_result(b, error) "and a note"
15 system
"#;
    let window = parse(transcript);
    assert_eq!(window.start, Seq(10));
    assert_eq!(window.messages.len(), 5);
    assert_eq!(
        window.messages[3].1.content[0],
        result("b", true),
        "an error result parses with is_error"
    );
    assert_eq!(window.messages[1].1.plain_text(), "sure");
    assert_eq!(
        window.events()[1],
        ProtocolEvents {
            seq: Seq(12),
            uses: vec!["a".into(), "b".into()],
            results: vec![]
        }
    );
    assert_eq!(window.render(), transcript.trim_start());
    assert_eq!(parse(&window.render()), window);
}

#[test]
fn text_only() {
    check(
        r#"
1 user "hello"
2 assistant "hi"
3 user "bye"
"#,
        &[0, 1, 2, 3],
    );
    check_units_are(
        r#"
1 user "hello"
2 assistant "hi"
"#,
        "1 | 2",
    );
}

#[test]
fn empty_window() {
    check("", &[0]);
    check("start 7", &[7]);
    check_units_are("start 7", "");
    check_nearest_cuts("start 7", &[(6, None), (7, Some(7)), (100, Some(7))]);
}

#[test]
fn single_tool_call() {
    let t = r#"
1 user "list files"
2 assistant tool_use(a)
3 user tool_result(a)
4 assistant "done"
"#;
    check(t, &[0, 1, 3, 4]);
    check_units_are(t, "1 | 2-3 | 4");
    check_problems(t, "");
}

#[test]
fn text_beside_the_call_and_the_result() {
    check(
        r#"
1 user "list files"
2 assistant "let me look" tool_use(a)
3 user tool_result(a) "also, hurry"
4 assistant "done"
"#,
        &[0, 1, 3, 4],
    );
}

#[test]
fn parallel_calls_answered_in_one_message() {
    let t = r#"
1 user "list files"
2 assistant tool_use(a) tool_use(b) tool_use(c)
3 user tool_result(a) tool_result(b) tool_result(c)
4 assistant "done"
"#;
    check(t, &[0, 1, 3, 4]);
    check_units_are(t, "1 | 2-3 | 4");
}

#[test]
fn parallel_calls_answered_in_separate_messages() {
    let t = r#"
1 user "list files"
2 assistant tool_use(a) tool_use(b)
3 user tool_result(a)
4 user tool_result(b)
5 assistant "done"
"#;
    check(t, &[0, 1, 4, 5]);
    check_units_are(t, "1 | 2-4 | 5");
    // OpenAI's shape: one tool message per result.
    check(
        r#"
1 user "list files"
2 assistant tool_use(a) tool_use(b)
3 tool tool_result(a)
4 tool tool_result(b)
5 assistant "done"
"#,
        &[0, 1, 4, 5],
    );
}

#[test]
fn results_in_reverse_order() {
    check(
        r#"
1 user "go"
2 assistant tool_use(a) tool_use(b) tool_use(c)
3 user tool_result(c)
4 user tool_result(b)
5 user tool_result(a)
6 assistant "done"
"#,
        &[0, 1, 5, 6],
    );
    check(
        r#"
1 user "go"
2 assistant tool_use(a) tool_use(b)
3 user tool_result(b) tool_result(a)
"#,
        &[0, 1, 3],
    );
}

#[test]
fn consecutive_tool_turns_are_separate_units() {
    let t = r#"
1 user "go"
2 assistant tool_use(a)
3 user tool_result(a)
4 assistant tool_use(b)
5 user tool_result(b)
6 assistant "done"
"#;
    check(t, &[0, 1, 3, 5, 6]);
    check_units_are(t, "1 | 2-3 | 4-5 | 6");
}

#[test]
fn overlapping_calls_merge_into_one_unit() {
    let t = r#"
1 user "go"
2 assistant tool_use(a)
3 assistant tool_use(b)
4 user tool_result(a)
5 user tool_result(b)
6 assistant "done"
"#;
    check(t, &[0, 1, 5, 6]);
    check_units_are(t, "1 | 2-5 | 6");
}

#[test]
fn error_result_is_a_result() {
    let ok = r#"
1 user "go"
2 assistant tool_use(a) tool_use(b)
3 user tool_result(a)
4 user tool_result(b)
5 assistant "done"
"#;
    let failed = ok.replace("tool_result(b)", "tool_result(b, error)");
    check(ok, &[0, 1, 4, 5]);
    check(&failed, &[0, 1, 4, 5]);
    check_units_are(&failed, "1 | 2-4 | 5");
    check_problems(&failed, "");
}

#[test]
fn dangling_call_at_the_end() {
    let t = r#"
1 user "go"
2 assistant tool_use(a)
3 user tool_result(a)
4 assistant tool_use(b)
"#;
    check(t, &[0, 1, 3]);
    check_units_are(t, "1 | 2-3 | 4 open");
    check_problems(t, "4 dangling_use b");
    check_nearest_cuts(t, &[(4, Some(3)), (100, Some(3))]);
}

#[test]
fn dangling_parallel_call_at_the_end() {
    // One of two parallel calls is answered; the other may still be: nothing from 2 on may go.
    let t = r#"
1 user "go"
2 assistant tool_use(a) tool_use(b)
3 user tool_result(a)
"#;
    check(t, &[0, 1]);
    check_units_are(t, "1 | 2-3 open");
    check_problems(t, "2 dangling_use b");
}

#[test]
fn dangling_call_mid_conversation() {
    // An interrupted call is never answered, yet the run went on: everything from it on is one
    // open unit, because its result could still arrive.
    let t = r#"
1 user "go"
2 assistant tool_use(a)
3 user "never mind"
4 assistant tool_use(b)
5 user tool_result(b)
6 assistant "ok"
"#;
    check(t, &[0, 1]);
    check_units_are(t, "1 | 2-6 open");
    check_problems(t, "2 dangling_use a");
    check_nearest_cuts(t, &[(0, Some(0)), (5, Some(1)), (6, Some(1))]);
}

#[test]
fn orphan_result() {
    // The call was summarized away (or never existed): the result may never be kept.
    let t = r#"
1 user "go"
2 user tool_result(x)
3 assistant "hm"
4 user "ok"
"#;
    check(t, &[2, 3, 4]);
    check_units_are(t, "1-2 | 3 | 4");
    check_problems(t, "2 orphan_result x");
    check_nearest_cuts(t, &[(0, None), (1, None), (2, Some(2)), (9, Some(4))]);
}

#[test]
fn orphan_result_after_a_summary() {
    let t = r#"
start 10
11 tool tool_result(a)
12 tool tool_result(b)
13 assistant "done"
"#;
    check(t, &[12, 13]);
    check_problems(
        t,
        "
11 orphan_result a
12 orphan_result b
",
    );
}

#[test]
fn orphan_result_repeated() {
    let t = r#"
1 user tool_result(x)
2 assistant "hm"
3 user tool_result(x, error)
4 assistant "ok"
"#;
    check(t, &[3, 4]);
    check_problems(
        t,
        "
1 orphan_result x
3 orphan_result x
",
    );
}

#[test]
fn result_before_its_call() {
    // Not an orphan (the call is in the window), but the two may not be separated.
    check(
        r#"
1 user tool_result(a)
2 assistant tool_use(a)
3 user "hm"
"#,
        &[0, 2, 3],
    );
    // …and it is a problem: no provider accepts a result before its call.
    check_problems(
        r#"
1 user tool_result(a)
2 assistant tool_use(a)
3 user tool_result(a)
4 user "hm"
"#,
        "1 result_before_use a",
    );
}

#[test]
fn duplicate_ids() {
    // Two calls reuse `a`: every call and result of `a` must stay on one side.
    let t = r#"
1 assistant tool_use(a)
2 user tool_result(a)
3 user "again"
4 assistant tool_use(a)
5 user tool_result(a)
6 assistant "done"
"#;
    check(t, &[0, 5, 6]);
    check_units_are(t, "1-5 | 6");
    check_problems(t, "4 duplicate_use a");
    // In one message.
    let t = r#"
1 assistant tool_use(a) tool_use(a)
2 user tool_result(a)
"#;
    check(t, &[0, 2]);
    check_problems(t, "1 duplicate_use a");
    // A reused id that is never answered is dangling too.
    let t = r#"
1 assistant tool_use(a)
2 assistant tool_use(a)
"#;
    check(t, &[0]);
    check_problems(
        t,
        "
2 duplicate_use a
2 dangling_use a
",
    );
}

#[test]
fn window_after_a_summary() {
    let t = r#"
start 10
11 user "next step"
12 assistant tool_use(a)
13 user tool_result(a)
14 assistant "done"
"#;
    check(t, &[10, 11, 13, 14]);
    check_units_are(t, "11 | 12-13 | 14");
    check_nearest_cuts(
        t,
        &[
            (0, None),
            (9, None),
            (10, Some(10)),
            (11, Some(11)),
            (12, Some(11)),
            (13, Some(13)),
            (14, Some(14)),
            (15, Some(14)),
            (u64::MAX, Some(14)),
        ],
    );
    let map = parse(t).map();
    assert!(!map.is_safe(Seq(9)));
    assert!(!map.is_safe(Seq(15)));
}

#[test]
fn seqs_with_gaps() {
    let t = r#"
start 2
5 user "go"
9 assistant tool_use(a)
20 user tool_result(a)
30 assistant "done"
"#;
    check(t, &[2, 5, 20, 30]);
    check_nearest_cuts(
        t,
        &[
            (1, None),
            (2, Some(2)),
            (4, Some(2)),
            (8, Some(5)),
            (19, Some(5)),
            (25, Some(20)),
            (31, Some(30)),
        ],
    );
    let map = parse(t).map();
    assert!(!map.is_safe(Seq(6)), "6 is no message of the window");
}

#[test]
fn explain() {
    let t = r#"
start 10
11 user "go"
12 assistant tool_use(a)
13 user tool_result(a)
"#;
    let map = parse(t).map();
    for safe in [10, 11, 13] {
        assert_eq!(map.explain(Seq(safe)), None, "explain({safe})");
    }
    assert_eq!(
        map.explain(Seq(12)).as_deref(),
        Some(
            "cut at seq 12 would separate a tool_use from its tool_result; \
             the nearest safe cut at or before it is 11"
        )
    );
    assert_eq!(
        map.explain(Seq(9)).as_deref(),
        Some("seq 9 is not in the window after seq 10")
    );
    assert_eq!(
        map.explain(Seq(14)).as_deref(),
        Some("seq 14 is not in the window after seq 10")
    );

    let orphan = parse(
        r#"
1 user tool_result(x)
2 user "hm"
"#,
    )
    .map();
    assert_eq!(
        orphan.explain(Seq(0)).as_deref(),
        Some(
            "cut at seq 0 would separate a tool_use from its tool_result; \
             no cut at or before it is safe"
        )
    );
}

#[test]
fn problems_come_in_a_stable_order() {
    // Ties at one seq come out the same way every time, so reports and snapshots are stable.
    let t = r#"
1 assistant tool_use(e) tool_use(d) tool_use(c) tool_use(b) tool_use(a)
2 user tool_result(z) tool_result(y) tool_result(x) tool_result(w)
"#;
    let expect = "
1 dangling_use e
1 dangling_use d
1 dangling_use c
1 dangling_use b
1 dangling_use a
2 orphan_result z
2 orphan_result y
2 orphan_result x
2 orphan_result w
";
    for _ in 0..32 {
        check_problems(t, expect);
    }
}

// --- Properties ---------------------------------------------------------------------------------

/// One turn of a well-formed conversation.
#[derive(Clone, Debug)]
enum Step {
    UserText,
    AssistantText,
    /// An assistant message making parallel calls, answered in `order`, a new result message
    /// starting after each position marked in `split`.
    Tools {
        preamble: bool,
        order: Vec<usize>,
        split: Vec<bool>,
        errors: Vec<bool>,
        tool_role: bool,
    },
}

/// A generated well-formed conversation and what it should look like.
#[derive(Clone, Debug)]
struct Generated {
    window: Window,
    /// The safe cuts by construction: `start` and the end of every completed step.
    safe: Vec<Seq>,
    dangling: Vec<String>,
}

fn step() -> impl Strategy<Value = Step> {
    let tools = (1..=4usize).prop_flat_map(|n| {
        (
            any::<bool>(),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(prop::bool::weighted(0.2), n),
            any::<bool>(),
        )
            .prop_map(|(preamble, order, split, errors, tool_role)| Step::Tools {
                preamble,
                order,
                split,
                errors,
                tool_role,
            })
    });
    prop_oneof![
        2 => Just(Step::UserText),
        2 => Just(Step::AssistantText),
        4 => tools,
    ]
}

fn call(id: &str) -> ContentBlock {
    ContentBlock::ToolUse {
        id: id.to_owned(),
        name: "tool".to_owned(),
        input: serde_json::json!({}),
    }
}

/// Lays `steps` out from `start`, with seq gaps from `gaps` (cycled), and an optional dangling turn
/// of `dangling.0` calls of which the first `dangling.1` are answered.
fn build(start: u64, steps: &[Step], dangling: Option<(usize, usize)>, gaps: &[u64]) -> Generated {
    let mut messages: Vec<Message> = Vec::new();
    let mut ends = Vec::new();
    let mut next_id = 0;
    let mut fresh = || {
        next_id += 1;
        format!("t{next_id}")
    };
    for step in steps {
        match step {
            Step::UserText => messages.push(Message::text(Role::User, "please")),
            Step::AssistantText => messages.push(Message::text(Role::Assistant, "ok")),
            Step::Tools {
                preamble,
                order,
                split,
                errors,
                tool_role,
            } => {
                let ids: Vec<String> = order.iter().map(|_| fresh()).collect();
                let mut content = Vec::new();
                if *preamble {
                    content.push(ContentBlock::Text {
                        text: "let me check".to_owned(),
                    });
                }
                content.extend(ids.iter().map(|id| call(id)));
                messages.push(Message {
                    role: Role::Assistant,
                    content,
                });
                let role = if *tool_role { Role::Tool } else { Role::User };
                let mut group = Vec::new();
                for (pos, &k) in order.iter().enumerate() {
                    group.push(result(&ids[k], errors[k]));
                    if split[pos] || pos + 1 == order.len() {
                        messages.push(Message {
                            role,
                            content: std::mem::take(&mut group),
                        });
                    }
                }
            }
        }
        ends.push(messages.len());
    }
    let mut dangling_ids = Vec::new();
    if let Some((calls, answered)) = dangling {
        let ids: Vec<String> = (0..calls).map(|_| fresh()).collect();
        messages.push(Message {
            role: Role::Assistant,
            content: ids.iter().map(|id| call(id)).collect(),
        });
        if answered > 0 {
            messages.push(Message {
                role: Role::User,
                content: ids[..answered].iter().map(|id| result(id, false)).collect(),
            });
        }
        dangling_ids = ids[answered..].to_vec();
    }

    let mut seq = start;
    let mut seqs = Vec::new();
    for (i, _) in messages.iter().enumerate() {
        seq += gaps[i % gaps.len()];
        seqs.push(Seq(seq));
    }
    let mut safe = vec![Seq(start)];
    safe.extend(ends.iter().map(|&end| seqs[end - 1]));
    Generated {
        window: Window {
            start: Seq(start),
            messages: seqs.into_iter().zip(messages).collect(),
        },
        safe,
        dangling: dangling_ids,
    }
}

fn well_formed() -> impl Strategy<Value = Generated> {
    (
        0u64..30,
        proptest::collection::vec(step(), 0..24),
        prop::option::weighted(0.25, (1..=3usize).prop_flat_map(|n| (Just(n), 0..n))),
        proptest::collection::vec(1u64..=3, 1..8),
    )
        .prop_map(|(start, steps, dangling, gaps)| build(start, &steps, dangling, &gaps))
}

/// A desired cut from a fraction of the range `0 ..= last seq + 3`: before, inside and beyond the
/// window.
fn desired(window: &Window, pick: Index) -> Seq {
    let end = window.boundaries().last().map_or(0, |s| s.0) + 3;
    Seq(pick.index(end as usize + 1) as u64)
}

/// A window with ids drawn from a small alphabet: orphans, dangling and reused ids, results before
/// calls and calls and results in one message all occur.
fn arbitrary_window() -> impl Strategy<Value = Window> {
    let id = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
    let block = prop_oneof![
        1 => Just(ContentBlock::Text { text: "x".to_owned() }),
        2 => id.clone().prop_map(call),
        2 => (id, any::<bool>()).prop_map(|(id, e)| result(id, e)),
    ];
    let role = prop::sample::select(vec![Role::User, Role::Assistant, Role::Tool]);
    let message = (role, proptest::collection::vec(block, 0..4))
        .prop_map(|(role, content)| Message { role, content });
    (
        0u64..6,
        proptest::collection::vec((1u64..=2, message), 0..12),
    )
        .prop_map(|(start, rows)| {
            let mut seq = start;
            let messages = rows
                .into_iter()
                .map(|(gap, m)| {
                    seq += gap;
                    (Seq(seq), m)
                })
                .collect();
            Window {
                start: Seq(start),
                messages,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// In a well-formed conversation the safe cuts are exactly the step ends, by the map and by
    /// the oracle, and the nearest safe cut is the oracle's.
    #[test]
    fn well_formed_conversations(
        generated in well_formed(),
        picks in proptest::collection::vec(any::<Index>(), 1..8),
    ) {
        let Generated { window, safe, dangling } = &generated;
        let context = window.render();
        let map = window.map();
        let oracle = window.oracle_cuts();
        prop_assert_eq!(&oracle, safe, "oracle vs construction of\n{}", context);
        check_against_oracle(window, &map, &oracle, &context);

        // The only problems are the calls left dangling at the very end, in call order.
        let expect_problems: Vec<(Seq, &str, String)> = dangling
            .iter()
            .map(|id| {
                let (seq, _) = window
                    .messages
                    .iter()
                    .find(|(_, m)| m.tool_use_ids().any(|u| u == id))
                    .unwrap();
                (*seq, "dangling_use", id.clone())
            })
            .collect();
        let problems: Vec<_> = map.problems().iter().map(problem_key).collect();
        prop_assert_eq!(problems, expect_problems, "problems of\n{}", context);
        let open = map.units().last().is_some_and(|u| u.open);
        prop_assert_eq!(open, !dangling.is_empty(), "open end of\n{}", context);

        for pick in picks {
            let d = desired(window, pick);
            check_nearest(window, &map, &oracle, d, &context);
            // No orphans, so `start` is safe: there is a cut whenever `d` is in or after the window.
            let chosen = map.safe_cut_at_or_before(d).map(|c| c.seq());
            let expect = safe.iter().copied().filter(|&s| s <= d).max();
            prop_assert_eq!(chosen, expect, "nearest cut at or before {} in\n{}", d, context);
            prop_assert_eq!(chosen.is_none(), d < window.start);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// For any ids at all, the map agrees with the oracle everywhere.
    #[test]
    fn arbitrary_ids(
        window in arbitrary_window(),
        picks in proptest::collection::vec(any::<Index>(), 1..8),
    ) {
        let context = window.render();
        let map = window.map();
        let oracle = window.oracle_cuts();
        check_against_oracle(&window, &map, &oracle, &context);
        for pick in picks {
            check_nearest(&window, &map, &oracle, desired(&window, pick), &context);
        }
    }

}

proptest! {
    #[test]
    fn fixture_format_round_trips_any_window(window in arbitrary_window()) {
        prop_assert_eq!(parse(&window.render()), window);
    }
}
