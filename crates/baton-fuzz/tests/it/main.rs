//! The fuzzing campaign's short run (seconds: every target over its seeds and a thousand
//! mutants, every HTTP route over a hundred), and the regression tests of what the campaign
//! found. `cargo xtask fuzz` runs the whole campaign.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use baton_fuzz::{Campaign, TARGETS, load_seeds, seeds_dir};

#[test]
fn a_short_campaign_finds_no_panic_no_500_and_no_hang() {
    let findings = tempfile::tempdir().unwrap();
    let campaign = Campaign {
        inputs_per_target: 1_000,
        inputs_per_route: 100,
        seed: 20,
        findings: findings.path().to_owned(),
        only: None,
    };
    let outcomes = campaign.run(|_| {}).unwrap();
    assert_eq!(
        outcomes.len(),
        TARGETS.len() + 15,
        "every target and route ran"
    );
    for o in &outcomes {
        println!("{} {} inputs, slowest {:?}", o.target, o.inputs, o.slowest);
        assert_eq!(
            (o.failures, o.hangs),
            (0, 0),
            "{}: {:?}, kept {:?}",
            o.target,
            o.first_failure,
            o.findings
        );
    }
}

/// The importer's seeds are what they claim: each is detected as a format and parses, so the
/// mutants start from inputs that reach deep into the readers.
#[test]
fn every_import_seed_is_a_transcript() {
    let dir = seeds_dir().join("import");
    let seeds = load_seeds(&dir).unwrap();
    assert_eq!(seeds.len(), 7, "one seed per format");
    let mut formats = Vec::new();
    for seed in &seeds {
        let format = baton_import::detect(seed).expect("a seed no format claims");
        let transcripts = baton_import::parse(format, seed).unwrap();
        assert!(!transcripts.is_empty() && !transcripts[0].messages.is_empty());
        formats.push(format);
    }
    formats.sort_by_key(|f| format!("{f:?}"));
    formats.dedup();
    assert_eq!(formats.len(), 7, "every format has a seed: {formats:?}");
}
