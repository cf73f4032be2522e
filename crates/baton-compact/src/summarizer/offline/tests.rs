//! The offline extractor on hand-made transcripts, the seeds' two continuity cases, and its
//! properties under random messages.

use baton_core::context::assemble;
use baton_core::{
    Claim, ClaimKind, ContentBlock, Entry, Message, Role, Run, RunId, RunStatus, Seq, Summary,
    SummaryId, TenantId, Timestamp,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::probes::probe;
use ClaimKind::*;

fn entry(seq: u64, message: Message) -> Entry {
    Entry {
        seq: Seq(seq),
        message,
        tokens: 10,
        created_at: Timestamp(0),
    }
}

fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

fn assistant(text: &str) -> Message {
    Message::text(Role::Assistant, text)
}

fn call(id: &str, name: &str, input: Value) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }],
    }
}

fn said_and_called(text: &str, id: &str, name: &str, input: Value) -> Message {
    let mut m = call(id, name, input);
    m.content
        .insert(0, ContentBlock::Text { text: text.into() });
    m
}

fn result(id: &str, text: &str, is_error: bool) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: vec![ContentBlock::Text { text: text.into() }],
            is_error,
        }],
    }
}

/// Claims as `kind seq text` lines.
fn lines(claims: &[Claim]) -> Vec<String> {
    claims
        .iter()
        .map(|c| format!("{} {} {}", c.kind, c.source_seq, c.text))
        .collect()
}

fn login_incident() -> Vec<Entry> {
    vec![
        entry(
            1,
            user(
                "Find why login fails. Never write to production. Only read logs under /var/log/app.",
            ),
        ),
        entry(
            2,
            said_and_called(
                "The session store might be expiring tokens early. Let me read the config.",
                "t1",
                "Read",
                json!({"file_path": "config/session.yaml"}),
            ),
        ),
        entry(3, result("t1", "ttl: 5s", false)),
        entry(4, call("t2", "Bash", json!({"command": "python check.py"}))),
        entry(
            5,
            result(
                "t2",
                "Traceback (most recent call last):\n  File \"check.py\", line 3\nKeyError: 'ttl'",
                true,
            ),
        ),
        entry(
            6,
            call(
                "t3",
                "Bash",
                json!({"command": "curl https://status.example.com/api"}),
            ),
        ),
        entry(7, result("t3", "ok", false)),
        entry(
            8,
            assistant(
                "Confirmed: the session store is not the cause; the TTL in config/session.yaml is. Next I will raise the TTL.",
            ),
        ),
        entry(
            9,
            call(
                "t4",
                "Bash",
                json!({"command": "./deploy.sh --env staging"}),
            ),
        ),
    ]
}

#[test]
fn extracts_every_kind_with_its_seq() {
    let claims = extract(&login_incident());
    assert_eq!(
        lines(&claims),
        [
            "goal 1 Find why login fails. Never write to production. Only read logs under /var/log/app.",
            "constraint 1 Never write to production.",
            "constraint 1 Only read logs under /var/log/app.",
            "artifact 1 path /var/log/app",
            "hypothesis 2 The session store might be expiring tokens early.",
            "artifact 2 path config/session.yaml",
            "artifact 4 command python check.py",
            "artifact 4 path check.py",
            "failed_approach 5 Bash python check.py: KeyError: 'ttl'",
            "artifact 6 command curl https://status.example.com/api",
            "artifact 6 url https://status.example.com/api",
            "verified 7 Confirmed: the session store is not the cause; the TTL in config/session.yaml is. (evidence: Bash curl https://status.example.com/api)",
            "pending 9 Bash ./deploy.sh --env staging",
            "artifact 9 command ./deploy.sh --env staging",
            "artifact 9 path ./deploy.sh",
            "next_step 8 Next I will raise the TTL.",
        ]
    );
}

#[test]
fn write_merges_into_the_working_state() {
    let old = login_incident();
    let written = Offline.write(&SummaryRequest {
        base: None,
        old: &old,
        cut: Seq(9),
        instructions: None,
        pins: &[],
    });
    assert_eq!((written.input_tokens, written.output_tokens), (0, 0));
    let got = lines(&written.claims);
    // The hypothesis was refuted by the finding that cites seq 7.
    assert!(got.contains(
        &"failed_approach 7 refuted: The session store might be expiring tokens early. (by seq 7)"
            .to_owned()
    ));
    assert!(written.claims.iter().all(|c| c.kind != Hypothesis));
    let kinds: Vec<ClaimKind> = written.claims.iter().map(|c| c.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort_by_key(|k| ClaimKind::ALL.iter().position(|a| a == k));
    assert_eq!(kinds, sorted);
}

#[test]
fn write_stops_at_the_cut_and_carries_the_base() {
    let old = login_incident();
    let base = summary(
        Seq(0),
        vec![
            Claim {
                kind: Note,
                text: "carried".into(),
                source_seq: Seq(1),
            },
            Claim {
                kind: NextStep,
                text: "Let me look (pinned).".into(),
                source_seq: Seq(1),
            },
        ],
    );
    let written = Offline.write(&SummaryRequest {
        base: Some(&base),
        old: &old,
        cut: Seq(3),
        instructions: Some("ignored offline"),
        pins: &[Seq(1)],
    });
    assert!(written.claims.iter().all(|c| c.source_seq <= Seq(3)));
    let got = lines(&written.claims);
    assert!(got.contains(&"note 1 carried".to_owned()));
    assert!(got.contains(&"next_step 1 Let me look (pinned).".to_owned()));
    assert!(got.contains(&"next_step 2 Let me read the config.".to_owned()));
    assert!(
        got.contains(&"hypothesis 2 The session store might be expiring tokens early.".to_owned())
    );
    // The call at seq 2 is answered at 3: nothing is pending.
    assert!(written.claims.iter().all(|c| c.kind != Pending));
}

#[test]
fn the_goal_is_the_first_request_in_about_200_characters() {
    let long = format!("Please {}", "refactor the parser module ".repeat(20));
    let claims = extract(&[
        entry(
            1,
            user("<local-command-caveat>Caveat: generated</local-command-caveat>"),
        ),
        entry(2, user("[Request interrupted by user]")),
        entry(3, user(&long)),
        entry(4, user("Second request.")),
    ]);
    let goal = claims.iter().find(|c| c.kind == Goal).unwrap();
    assert_eq!(goal.source_seq, Seq(3));
    assert!(
        goal.text
            .starts_with("Please refactor the parser module refactor")
    );
    assert!(goal.text.ends_with("module…"), "{}", goal.text);
    assert!(goal.text.chars().count() <= 201);
    assert_eq!(claims.iter().filter(|c| c.kind == Goal).count(), 1);
}

#[test]
fn failures_from_output_and_from_error_flags() {
    let claims = extract(&[
        entry(1, call("a", "Bash", json!({"command": "cargo build"}))),
        entry(
            2,
            result("a", "Compiling x\nerror[E0308]: mismatched types\n", false),
        ),
        entry(3, call("b", "Read", json!({"file_path": "missing.rs"}))),
        entry(
            4,
            result(
                "b",
                "<tool_use_error>File does not exist.</tool_use_error>",
                true,
            ),
        ),
        entry(5, call("c", "Bash", json!({"command": "ls"}))),
        entry(6, result("c", "Cargo.toml\nsrc", false)),
        entry(7, result("zz", "", true)),
    ]);
    let failed: Vec<String> = lines(&claims)
        .into_iter()
        .filter(|l| l.starts_with("failed_approach"))
        .collect();
    assert_eq!(
        failed,
        [
            "failed_approach 2 Bash cargo build: error[E0308]: mismatched types",
            "failed_approach 4 Read missing.rs: <tool_use_error>File does not exist.</tool_use_error>",
            "failed_approach 7 tool call zz: error",
        ]
    );
}

#[test]
fn thinking_and_code_are_not_sentences() {
    let claims = extract(&[
        entry(1, user("Fix it.\n```\n// never do this\n```")),
        entry(
            2,
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::Thinking {
                    thinking: "It is probably the cache. Confirmed.".into(),
                    signature: None,
                }],
            },
        ),
    ]);
    assert_eq!(lines(&claims), ["goal 1 Fix it. ``` // never do this ```"]);
}

fn summary(coverage: Seq, claims: Vec<Claim>) -> Summary {
    Summary {
        id: SummaryId(coverage.0 + 1),
        run: RunId::new("seed").unwrap(),
        coverage,
        previous_id: None,
        claims,
        meta: None,
        created_at: Timestamp(0),
    }
}

/// Compacts `history` through each of `cuts` in turn with the offline summarizer, each
/// compaction building on the previous summary; calls `check` with the history, the cut, the
/// new summary and the tail after each.
fn compact_through(
    history: &[Entry],
    cuts: &[u64],
    mut check: impl FnMut(Seq, &Summary, &[Entry]),
) {
    let mut active: Option<Summary> = None;
    for &cut in cuts {
        let cut = Seq(cut);
        let from = active.as_ref().map_or(Seq::ZERO, |s| s.coverage);
        let old: Vec<Entry> = history
            .iter()
            .filter(|e| e.seq > from && e.seq <= cut)
            .cloned()
            .collect();
        let written = Offline.write(&SummaryRequest {
            base: active.as_ref(),
            old: &old,
            cut,
            instructions: None,
            pins: &[],
        });
        claim::validate_sources(&written.claims, cut, Seq(history.len() as u64)).unwrap();
        let next = summary(cut, written.claims);
        let tail = &history[history.partition_point(|e| e.seq <= cut)..];
        check(cut, &next, tail);
        active = Some(next);
    }
}

use baton_core::claim;

/// Seed 000 (capítulo 8): "solo lectura" said at step 1, 80 steps of work with tool calls,
/// a write tool at step 80. Under repeated compaction the constraint stays in the working
/// state verbatim, citing seq 1, and in the assembled context the model receives.
#[test]
fn seed_read_only_constraint_survives_every_compaction() {
    const READ_ONLY: &str = "La ejecución es de solo lectura: no escribas nada en producción.";
    let mut history = vec![entry(
        1,
        user(&format!(
            "Diagnostica el fallo de conexión de la API. {READ_ONLY}"
        )),
    )];
    for step in 1..=39u64 {
        let id = format!("t{step}");
        let command = match step % 3 {
            0 => format!("cat /etc/app/api-{step}.conf"),
            1 => "dig +short db.internal".to_owned(),
            _ => format!("grep -n port /var/log/api/{step}.log"),
        };
        let text = format!("Paso {step}: comprobando la configuración.");
        history.push(entry(
            2 * step,
            said_and_called(&text, &id, "Bash", json!({ "command": command })),
        ));
        history.push(entry(
            2 * step + 1,
            result(&id, &format!("port={}", 5400 + step), false),
        ));
    }
    history.push(entry(
        80,
        call(
            "w",
            "Write",
            json!({"file_path": "/etc/app/api.conf", "content": "port=5432"}),
        ),
    ));
    history.push(entry(81, result("w", "written", false)));
    let run = Run {
        id: RunId::new("seed").unwrap(),
        tenant: TenantId::default_tenant(),
        status: RunStatus::Active,
        goal: None,
        rules: None,
        active_summary_id: None,
        last_seq: Seq(81),
        cleared: None,
        created_at: Timestamp(0),
    };

    let mut compactions = 0;
    compact_through(&history, &[21, 41, 61, 79], |cut, summary, tail| {
        compactions += 1;
        let constraints: Vec<&Claim> = summary
            .claims
            .iter()
            .filter(|c| c.kind == Constraint)
            .collect();
        assert_eq!(constraints.len(), 1, "after the cut at {cut}");
        assert_eq!(constraints[0].text, READ_ONLY);
        assert_eq!(constraints[0].source_seq, Seq(1));
        let probes = probe(&history, cut, &summary.claims, tail);
        assert_eq!((probes.constraints.kept, probes.constraints.total), (1, 1));
        assert_eq!(probes.sources.kept, probes.sources.total);
        let context = assemble(&run, Some(summary), tail.to_vec());
        let input = context.preamble().unwrap().plain_text();
        assert!(input.contains(&format!("- {READ_ONLY} [seq 1]")), "{input}");
    });
    assert_eq!(compactions, 4);
    // The write tool is in the tail after the last compaction, next to the constraint.
    assert_eq!(history[79].seq, Seq(80));
}

/// Seed 000 (capítulo 8): a hypothesis stated early and refuted later. The working state holds
/// the current conclusion as verified with the seq of its evidence, and the refutation naming
/// that seq; the stale hypothesis is neither a hypothesis nor a finding.
#[test]
fn seed_refuted_hypothesis_is_not_kept_as_verified() {
    const HYPOTHESIS: &str = "The bug is probably in the cache layer.";
    const CONCLUSION: &str = "The cache layer is not the cause; the root cause is the serializer.";
    let history = vec![
        entry(
            1,
            user("Find why checkout is slow. Do not change the schema."),
        ),
        entry(
            2,
            said_and_called(
                &format!("{HYPOTHESIS} Let me profile it."),
                "t1",
                "Bash",
                json!({"command": "profile --component cache"}),
            ),
        ),
        entry(3, result("t1", "cache hit ratio 99%, p99 2 ms", false)),
        entry(
            4,
            call(
                "t2",
                "Bash",
                json!({"command": "profile --component serializer"}),
            ),
        ),
        entry(5, result("t2", "serialize: p99 850 ms", false)),
        entry(6, assistant(CONCLUSION)),
        entry(7, user("Good, fix the serializer.")),
        entry(8, assistant("Next I will rewrite the serializer.")),
    ];

    let mut states = Vec::new();
    compact_through(&history, &[3, 7], |cut, summary, tail| {
        let probes = probe(&history, cut, &summary.claims, tail);
        assert_eq!(probes.findings.kept, probes.findings.total);
        assert_eq!(probes.constraints.kept, probes.constraints.total);
        states.push(summary.claims.clone());
    });

    // After the first compaction the hypothesis is just that.
    assert!(states[0].contains(&Claim {
        kind: Hypothesis,
        text: HYPOTHESIS.into(),
        source_seq: Seq(2),
    }));
    // After the second, the conclusion is verified with the seq of its evidence…
    let last = &states[1];
    let verified: Vec<&Claim> = last.iter().filter(|c| c.kind == Verified).collect();
    assert_eq!(verified.len(), 1);
    assert!(verified[0].text.starts_with(CONCLUSION));
    assert_eq!(verified[0].source_seq, Seq(5));
    // …the stale hypothesis is neither a hypothesis nor a finding…
    assert!(
        last.iter()
            .filter(|c| matches!(c.kind, Hypothesis | Verified))
            .all(|c| !c.text.contains("probably in the cache layer")),
        "{last:#?}"
    );
    // …and its refutation names the seq that refuted it.
    let refuted: Vec<&Claim> = last
        .iter()
        .filter(|c| c.text.contains("probably in the cache layer"))
        .collect();
    assert_eq!(refuted.len(), 1);
    assert_eq!(refuted[0].kind, FailedApproach);
    assert_eq!(refuted[0].text, format!("refuted: {HYPOTHESIS} (by seq 5)"));
    assert_eq!(refuted[0].source_seq, Seq(5));
    assert!(last.contains(&Claim {
        kind: Constraint,
        text: "Do not change the schema.".into(),
        source_seq: Seq(1),
    }));
}

const WORDS: &[&str] = &[
    "Never",
    "only",
    "probably",
    "confirmed",
    "root cause",
    "is not",
    "src/main.rs",
    "https://x.io/a)",
    "12 ms",
    "v1.2.3",
    "$0.5",
    "Let me",
    "next",
    "```",
    "<system-reminder>",
    "</system-reminder>",
    "Traceback (most recent call last)",
    "Exit code 1",
    "error:",
    "é",
    "ñ.",
    "🙂",
    "1,024 tokens",
    "./a",
    "no escribas",
    "\n",
    "...",
    "?",
    "!",
    ".",
    "v",
    "$",
    "-",
    "/",
    "@",
    "<command-args>",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![3 => prop::sample::select(WORDS).prop_map(str::to_owned), 1 => "\\PC{0,12}"],
        0..12,
    )
    .prop_map(|parts| parts.join(" "))
}

fn block() -> impl Strategy<Value = ContentBlock> {
    let id = prop::sample::select(vec!["t0", "t1", "t2"]).prop_map(str::to_owned);
    let input = prop_oneof![
        text().prop_map(|s| json!({ "command": s })),
        text().prop_map(|s| json!({ "file_path": s })),
        (text(), text()).prop_map(|(a, b)| json!({ "cmd": ["bash", "-lc", a], "url": b })),
        text().prop_map(Value::String),
        Just(json!(null)),
    ];
    prop_oneof![
        text().prop_map(|text| ContentBlock::Text { text }),
        text().prop_map(|thinking| ContentBlock::Thinking {
            thinking,
            signature: None
        }),
        (
            id.clone(),
            prop::sample::select(vec!["Bash", "Read", "str_replace_editor", "shell"]),
            input
        )
            .prop_map(|(id, name, input)| ContentBlock::ToolUse {
                id,
                name: name.to_owned(),
                input
            }),
        (id, text(), any::<bool>()).prop_map(|(tool_use_id, text, is_error)| {
            ContentBlock::ToolResult {
                tool_use_id,
                content: vec![ContentBlock::Text { text }],
                is_error,
            }
        }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        prop::sample::select(vec![Role::System, Role::User, Role::Assistant, Role::Tool]),
        prop::collection::vec(block(), 0..4),
    )
        .prop_map(|(role, content)| Message { role, content })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn extract_never_panics_and_cites_only_its_input(
        first in 1u64..50,
        messages in prop::collection::vec(message(), 0..12),
    ) {
        let old: Vec<Entry> = (first..).zip(messages).map(|(seq, m)| entry(seq, m)).collect();
        let claims = extract(&old);
        for c in &claims {
            prop_assert!(old.iter().any(|e| e.seq == c.source_seq), "{c:?} cites outside");
            prop_assert!(!c.text.trim().is_empty(), "{c:?} is empty");
        }
        let last = old.last().map_or(Seq::ZERO, |e| e.seq);
        let written = Offline.write(&SummaryRequest {
            base: None,
            old: &old,
            cut: last,
            instructions: None,
            pins: &[],
        });
        prop_assert!(written.claims.iter().all(|c| c.source_seq <= last));
    }
}
