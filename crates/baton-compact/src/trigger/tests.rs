//! The trigger's rules, one case each.

use baton_core::prices::PriceTable;

use super::*;

fn cost(model: &str, steps: u32) -> Trigger {
    Trigger {
        cost: Some(CostPolicy {
            model: model.into(),
            remaining_steps: steps,
            prompt_cache: true,
        }),
        ..Trigger::default()
    }
}

#[test]
fn threshold_and_minimum_reduction() {
    let t = Trigger {
        min_context_tokens: 50_000,
        ..Trigger::default()
    };
    assert!(matches!(
        t.admit(40_000, 10_000, None, 0),
        Err(Skip::UnderThreshold {
            tokens: 40_000,
            threshold: 50_000
        })
    ));
    assert!(t.admit(60_000, 10_000, None, 0).is_ok());
    // 10% is the default minimum: 9% refused, 11% admitted; growing never admitted.
    assert!(t.admit(100_000, 91_000, None, 0).is_err());
    assert!(t.admit(100_000, 89_000, None, 0).is_ok());
    assert!(t.admit(100_000, 120_000, None, 0).is_err());
}

#[test]
fn the_loop_guard_waits_for_new_content() {
    let t = Trigger::default();
    // The last compaction left 40k: the next waits for 25% more, 50k.
    let err = t.admit(49_999, 10_000, Some(40_000), 0).unwrap_err();
    assert_eq!(
        err,
        Skip::LoopGuard {
            tokens: 49_999,
            after_last: 40_000,
            needed: 50_000
        }
    );
    assert!(err.to_string().starts_with("loop guard: "), "{err}");
    assert!(t.admit(50_000, 10_000, Some(40_000), 0).is_ok());
    // A stored size near the top of u64 (a client wrote the meta) refuses; it never overflows.
    let huge = t.admit(50_000, 10_000, Some(u64::MAX - 1), 0).unwrap_err();
    assert!(
        matches!(
            huge,
            Skip::LoopGuard {
                needed: u64::MAX,
                ..
            }
        ),
        "{huge:?}"
    );
}

#[test]
fn a_summary_must_be_smaller_than_what_it_replaces() {
    let t = Trigger::default();
    assert_eq!(
        t.accept(100_000, 60_000, 5_000, 5_000),
        Err(Skip::SummaryNotSmaller {
            summary: 5_000,
            replaced: 5_000
        })
    );
    assert!(t.accept(100_000, 60_000, 4_999, 5_000).is_ok());
}

#[test]
fn the_cost_policy_weighs_savings_against_the_summary_call_and_the_cache() {
    let prices = PriceTable::defaults();
    // Sonnet: cached input 0.30, input 3, cache write 3.75, output 15 per MTok.
    // 100k → 20k over 50 steps saves 80k × 0.30 × 50 = $1.20; the summary reads 80k ($0.24)
    // and writes 8k ($0.12), and rewriting 20k into the cache costs 20k × 3.45 = $0.069.
    let t = cost("claude-sonnet-4-5", 50);
    assert!(
        t.admit_priced(100_000, 20_000, None, 80_000, &prices)
            .is_ok()
    );
    let policy = t.cost.clone().unwrap();
    let (saves, costs) = policy
        .weigh(100_000, 20_000, 80_000, 8_000, &prices)
        .unwrap();
    assert!((saves - 1.2).abs() < 1e-9, "{saves}");
    assert!((costs - (0.24 + 0.12 + 0.069)).abs() < 1e-9, "{costs}");
    // One step left: not worth it.
    let t = cost("claude-sonnet-4-5", 1);
    assert!(matches!(
        t.admit_priced(100_000, 20_000, None, 80_000, &prices),
        Err(Skip::NotWorthIt { .. })
    ));
    // An offline compaction (no summary call) pays once the cache rewrite is covered: with one
    // step left it saves $0.024 against $0.069, with five $0.12.
    let t = cost("claude-sonnet-4-5", 1);
    assert!(t.admit_priced(100_000, 20_000, None, 0, &prices).is_err());
    let t = cost("claude-sonnet-4-5", 5);
    assert!(t.admit_priced(100_000, 20_000, None, 0, &prices).is_ok());
    // An unknown model is said so, not guessed.
    assert_eq!(
        cost("my-llama", 10).admit_priced(100_000, 20_000, None, 0, &prices),
        Err(Skip::Unpriced {
            model: "my-llama".into()
        })
    );
}

#[test]
fn the_trigger_table_takes_only_known_keys() {
    let t: Trigger = serde_json::from_str(r#"{"min_reduction": 0.3}"#).unwrap();
    assert_eq!(t.min_reduction, 0.3);
    assert_eq!(t.min_growth, 0.25);
    assert!(serde_json::from_str::<Trigger>(r#"{"min_reduce": 0.3}"#).is_err());
}
