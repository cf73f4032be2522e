//! `baton compact`, `baton replay` and `baton report growth`: compaction through the runtime,
//! offline replays of recorded runs, and the growth report.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use baton_compact::audit::{Retention, Share};
use baton_compact::config::{CompactionConfig, Overrides};
use baton_compact::growth::{Growth, svg};
use baton_compact::replay::{Replay, ReplayReport, replay};
use baton_compact::{Offline, Strategy};
use baton_core::prices::PriceTable;
use baton_core::{Entry, RunId, Seq};
use baton_runtime::{Compactor, Outcome};
use baton_view::GrowthReport;
use serde::Deserialize;
use serde_json::json;

use crate::args::{CompactArgs, GrowthArgs, ReplayArgs, StrategyOpts};
use crate::env::{Env, print_json};
use crate::exit::InvalidInput;

/// A `--config` file: the `[compaction]` section and where prices come from.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    compaction: Option<CompactionConfig>,
    #[serde(default)]
    prices: Option<std::path::PathBuf>,
}

/// The configuration the options describe: the file's `[compaction]`, then the flags; and the
/// price table.
pub(crate) fn configure(
    strategy: Option<&str>,
    opts: &StrategyOpts,
    budget: Option<u64>,
) -> anyhow::Result<(CompactionConfig, PriceTable)> {
    let file = match &opts.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--config: reading {}", path.display()))?;
            toml::from_str::<ConfigFile>(&text).map_err(|e| {
                InvalidInput(format!(
                    "{}: {}",
                    path.display(),
                    e.to_string().trim_end().replace('\n', " ")
                ))
            })?
        }
        None => ConfigFile::default(),
    };
    let mut config = file.compaction.unwrap_or_default();
    if let Some(name) = strategy {
        config.strategy = name.to_owned();
    }
    if let Some(budget) = budget {
        config = config.with_budget(budget);
    }
    config.apply(&Overrides {
        keep_last: opts.keep_last,
        max_tokens: opts.max_tokens,
        target_tokens: opts.target_tokens,
        keep_recent: opts.keep_recent,
        min_tokens: opts.min_tokens,
        threshold: opts.threshold,
        keep_tokens: None,
        instructions: opts.instructions.clone(),
    });
    let prices_file = opts.prices.as_deref().or(file.prices.as_deref());
    let prices = match prices_file {
        Some(path) => load_prices(path)?,
        None => PriceTable::defaults(),
    };
    Ok((config, prices))
}

pub(crate) fn load_prices(path: &Path) -> anyhow::Result<PriceTable> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--prices: reading {}", path.display()))?;
    PriceTable::parse(&text).map_err(|e| InvalidInput(format!("{}: {e}", path.display())).into())
}

pub(crate) fn build(config: &CompactionConfig) -> anyhow::Result<Arc<dyn Strategy>> {
    config
        .build()
        .map_err(|e| InvalidInput(e.to_string()).into())
}

fn pct(before: u64, after: u64) -> f64 {
    100.0 * before.saturating_sub(after) as f64 / before.max(1) as f64
}

fn share(s: &Share) -> String {
    match s.ratio() {
        Some(r) => format!("{}/{} ({:.0}%)", s.kept, s.total, 100.0 * r),
        None => "-".to_owned(),
    }
}

fn retention_line(r: &Retention) -> String {
    format!(
        "paths {}, commands {}, urls {}, numbers {}",
        share(&r.paths),
        share(&r.commands),
        share(&r.urls),
        share(&r.numbers)
    )
}

/// Runs `baton compact`.
pub async fn compact(env: &Env, args: CompactArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = RunId::new(&args.run)?;
    let (mut config, prices) = configure(args.strategy.as_deref(), &args.opts, None)?;
    if let Some(log) = &args.log {
        config.settings.log = Some(log.clone());
    }
    let strategy = build(&config)?;
    let clear = config.clear().map_err(|e| InvalidInput(e.to_string()))?;
    let counter = run_counter(env, &run).await?;
    let compactor = Compactor {
        strategy: &*strategy,
        summarizer: &Offline,
        settings: &config.settings,
        clear,
        prices: &prices,
        counter: &*counter,
        force: args.force,
        dry_run: args.dry_run,
    };
    let outcome = baton_runtime::compact(&*env.store, &env.tenant, &run, &compactor)
        .await
        .map_err(|e| match e {
            needs @ baton_runtime::Error::NeedsModel { .. } => {
                InvalidInput(needs.to_string()).into()
            }
            other => anyhow::Error::new(other),
        })?;
    let name = strategy.name();
    match outcome {
        Outcome::Kept(keep) => {
            if env.json {
                let mut value = json!({"outcome": "kept", "strategy": name});
                merge(&mut value, serde_json::to_value(&keep)?);
                return print_json(out, &value);
            }
            writeln!(out, "run {run}: nothing to compact with {name}: {keep}")?;
        }
        Outcome::Refused {
            plan,
            reason,
            tokens_before,
            tokens_after,
        } => {
            if env.json {
                let mut value = json!({"outcome": "refused", "strategy": name, "plan": plan,
                        "tokens_before": tokens_before, "tokens_after": tokens_after});
                merge(&mut value, serde_json::to_value(&reason)?);
                return print_json(out, &value);
            }
            writeln!(
                out,
                "run {run}: {name} would {plan} ({tokens_before} → {tokens_after} tokens) but did not: {reason}"
            )?;
            if !args.force {
                writeln!(
                    out,
                    "  (--force compacts now: it skips the strategy's threshold and the trigger's loop guard and cost check)"
                )?;
            }
        }
        Outcome::Planned { compaction, claims } => {
            if env.json {
                let mut value = serde_json::to_value(&compaction)?;
                if let Some(map) = value.as_object_mut() {
                    map.insert("outcome".into(), json!("planned"));
                    map.insert("claims".into(), json!(claims));
                }
                return print_json(out, &value);
            }
            print_compaction(out, &run, &compaction, "would compact")?;
            for c in &claims {
                writeln!(
                    out,
                    "  {:<15} [seq {}] {}",
                    c.kind.as_str(),
                    c.source_seq,
                    c.text
                )?;
            }
            writeln!(out, "(dry run: nothing installed)")?;
        }
        Outcome::Compacted(compaction) => {
            if env.json {
                let mut value = serde_json::to_value(&compaction)?;
                if let Some(map) = value.as_object_mut() {
                    map.insert("outcome".into(), json!("compacted"));
                }
                return print_json(out, &value);
            }
            print_compaction(out, &run, &compaction, "compacted")?;
        }
        Outcome::Conflict(why) => {
            let context = match why {
                baton_store::Rejection::RunNotActive { .. } => {
                    format!("compact run {run}: nothing was written")
                }
                _ => format!(
                    "compact run {run}: another writer moved the run first; nothing was written"
                ),
            };
            return Err(anyhow::Error::new(why).context(context));
        }
    }
    Ok(())
}

/// Adds `fields`' keys (a tagged reason: `{"reason": "loop_guard", …}`) to the object `value`.
fn merge(value: &mut serde_json::Value, fields: serde_json::Value) {
    if let (Some(map), serde_json::Value::Object(fields)) = (value.as_object_mut(), fields) {
        map.extend(fields);
    }
}

pub(crate) fn print_compaction(
    out: &mut dyn Write,
    run: &RunId,
    c: &baton_compact::Compaction,
    verb: &str,
) -> anyhow::Result<()> {
    let what = match c.cut {
        Some(cut) => format!("messages through seq {cut}"),
        None => "old tool results".to_owned(),
    };
    writeln!(
        out,
        "run {run}: {verb} {what} with {} ({}): {} → {} tokens (-{:.1}%), {} → {} messages in the context",
        c.strategy,
        c.plan,
        c.tokens_before,
        c.tokens_after,
        pct(c.tokens_before, c.tokens_after),
        c.messages_before,
        c.messages_after
    )?;
    if let Some(id) = c.summary_id {
        writeln!(
            out,
            "  summary {id}: a working state of {} tokens",
            c.state_tokens
        )?;
    }
    if let Some(cleared) = c.cleared {
        writeln!(
            out,
            "  tool results through seq {} of {} tokens or more shown as a stub",
            cleared.through, cleared.min_tokens
        )?;
    }
    if let Some(r) = &c.retention {
        writeln!(
            out,
            "  still reachable from the dropped part: {}",
            retention_line(r)
        )?;
    }
    Ok(())
}

/// The run's whole history, and its rules and goal.
async fn recorded(
    env: &Env,
    run: &RunId,
) -> anyhow::Result<(Vec<Entry>, Option<String>, Option<String>)> {
    let record = env.store.run(&env.tenant, run).await?;
    let entries = env.store.read_range(&env.tenant, run, Seq(1), None).await?;
    Ok((entries, record.rules, record.goal))
}

/// How a run counts tokens: `--tokenizer`, its `auto` choice made by the model the run's
/// origin records (an imported run), else the default vocabulary.
pub(crate) async fn run_counter(
    env: &Env,
    run: &RunId,
) -> anyhow::Result<Arc<dyn baton_core::tokens::TokenCounter>> {
    let model = env
        .store
        .run_report(&env.tenant, run)
        .await?
        .origin
        .and_then(|o| o.models.first().cloned());
    Ok(baton_tokens::counter(env.tokenizer, model.as_deref()))
}

/// A recorded run as replay reads it: its history, rules, goal and token counter.
struct Recorded {
    run: RunId,
    entries: Vec<Entry>,
    rules: Option<String>,
    goal: Option<String>,
    counter: Arc<dyn baton_core::tokens::TokenCounter>,
}

/// The replay of one strategy, with the independent probes (`baton-probes`).
fn replay_one(
    recorded: &Recorded,
    config: &CompactionConfig,
    prices: PriceTable,
    every: usize,
) -> anyhow::Result<ReplayReport> {
    let mut how =
        Replay::new(recorded.run.clone(), config).map_err(|e| InvalidInput(e.to_string()))?;
    how.every = every;
    how.prices = prices;
    how.rules = recorded.rules.clone();
    how.goal = recorded.goal.clone();
    how.counter = recorded.counter.clone();
    how.extra_probes = vec![independent_probes()];
    Ok(replay(&recorded.entries, &how))
}

/// The probes `baton-probes` writes, as replay's extra probes.
pub(crate) fn independent_probes() -> baton_compact::replay::Probe {
    Arc::new(|history, cut, context| {
        let found = baton_probes::probe(history, cut, &context.text());
        for m in &found.misses {
            tracing::debug!(cut = %cut, kind = m.kind.as_str(), seq = %m.seq, key = %m.key, "probe miss");
        }
        let share = |s: baton_probes::Share| Share {
            kept: u32::try_from(s.kept).unwrap_or(u32::MAX),
            total: u32::try_from(s.total).unwrap_or(u32::MAX),
        };
        vec![
            ("instructions".to_owned(), share(found.instructions)),
            ("plan_items".to_owned(), share(found.plan_items)),
            ("modified_files".to_owned(), share(found.modified_files)),
            (
                "unresolved_problems".to_owned(),
                share(found.unresolved_problems),
            ),
        ]
    })
}

fn probe_json(r: &ReplayReport, kind: &str) -> serde_json::Value {
    let s = r.extra.get(kind).copied().unwrap_or_default();
    json!({"kept": s.kept, "total": s.total})
}

fn replay_json(r: &ReplayReport, none_total: Option<u64>) -> serde_json::Value {
    let ratio = |s: &Share| s.ratio();
    json!({
        "strategy": r.strategy,
        "needs_model": r.needs_model,
        "total_input_tokens": r.total_input_tokens,
        "full_input_tokens": r.total_full_tokens,
        "reduction": r.reduction,
        "vs_none": none_total.map(|n| n as f64 / r.total_input_tokens.max(1) as f64),
        "peak_context_tokens": r.peak_context_tokens,
        "budget": r.budget,
        "steps_over_budget": r.steps_over_budget,
        "state_tokens": r.state_tokens,
        "peak_state_tokens": r.peak_state_tokens,
        "state_cap": r.state_cap,
        "steps": r.steps.len(),
        "compactions": r.compactions,
        "refused": r.refused,
        "refused_no_room": r.refused_no_room,
        "summary_tokens": r.summary_tokens,
        "probes": {
            "instructions": probe_json(r, "instructions"),
            "plan_items": probe_json(r, "plan_items"),
            "modified_files": probe_json(r, "modified_files"),
            "unresolved_problems": probe_json(r, "unresolved_problems"),
        },
        "source_probes": {"kept": r.probes.sources.kept, "total": r.probes.sources.total},
        "retention": {
            "paths": ratio(&r.retention.paths),
            "commands": ratio(&r.retention.commands),
            "urls": ratio(&r.retention.urls),
            "numbers": ratio(&r.retention.numbers),
        },
        "duration_ms": r.duration.as_secs_f64() * 1000.0,
    })
}

/// Runs `baton replay`.
pub async fn replay_run(env: &Env, args: ReplayArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = RunId::new(&args.run)?;
    if args.every == 0 {
        return Err(InvalidInput("--every 0: expected 1 or more model calls".into()).into());
    }
    let (entries, rules, goal) = recorded(env, &run).await?;
    let counter = run_counter(env, &run).await?;
    let rec = Recorded {
        run: run.clone(),
        entries,
        rules,
        goal,
        counter: counter.clone(),
    };
    let entries = &rec.entries;
    let mut reports = Vec::new();
    let mut budget = None;
    for name in &args.strategies {
        let (config, prices) = configure(Some(name), &args.opts, args.budget)?;
        build(&config)?;
        let report = replay_one(&rec, &config, prices, args.every)?;
        budget = budget.or(report.budget);
        reports.push(report);
    }
    let budget = args.budget.or(budget);
    // Every strategy is measured against the same budget.
    for r in &mut reports {
        if let Some(b) = budget {
            r.budget = Some(b);
            r.steps_over_budget = r.steps.iter().filter(|s| s.context_tokens > b).count();
        }
    }
    let none_total = reports
        .iter()
        .find(|r| r.strategy == "none")
        .map(|r| r.total_input_tokens);
    if env.json {
        let strategies: Vec<_> = reports.iter().map(|r| replay_json(r, none_total)).collect();
        return print_json(
            out,
            &json!({"run": run, "messages": entries.len(), "budget": budget, "every": args.every, "tokenizer": counter.name(), "strategies": strategies}),
        );
    }
    writeln!(
        out,
        "run {run}: {} messages, {} model calls, budget {} tokens, counted with {}",
        entries.len(),
        reports.iter().map(|r| r.steps.len()).max().unwrap_or(0),
        budget.map_or_else(|| "none".to_owned(), |b| b.to_string()),
        counter.name()
    )?;
    writeln!(
        out,
        "{:<19} {:>12} {:>6} {:>7} {:>5} {:>6} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7}",
        "strategy",
        "input",
        "reduct",
        "peak",
        "over",
        "state",
        "compact",
        "refused",
        "instruct",
        "plan",
        "files",
        "problem",
        "cmds"
    )?;
    for r in &reports {
        if r.needs_model {
            writeln!(
                out,
                "{:<19} needs a model to write its summaries: replay it with a provider (baton chat), or use structured offline",
                r.strategy
            )?;
            continue;
        }
        let probe = |kind: &str| {
            let s = r.extra.get(kind).copied().unwrap_or_default();
            if s.total == 0 {
                "-".to_owned()
            } else {
                format!("{}/{}", s.kept, s.total)
            }
        };
        writeln!(
            out,
            "{:<19} {:>12} {:>5.1}% {:>7} {:>5} {:>6} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7}",
            r.strategy,
            r.total_input_tokens,
            100.0 * r.reduction,
            r.peak_context_tokens,
            r.steps_over_budget,
            r.peak_state_tokens,
            r.compactions,
            r.refused,
            probe("instructions"),
            probe("plan_items"),
            probe("modified_files"),
            probe("unresolved_problems"),
            share_pct(&r.retention.commands),
        )?;
    }
    writeln!(
        out,
        "(over: steps whose context exceeded the budget; state: the largest working state, tokens; probes as kept/total, summed over every compaction and the final context)"
    )?;
    Ok(())
}

fn share_pct(s: &Share) -> String {
    s.ratio()
        .map_or_else(|| "-".to_owned(), |r| format!("{:.0}%", 100.0 * r))
}

/// Runs `baton report growth`.
pub async fn growth(env: &Env, args: GrowthArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = RunId::new(&args.run)?;
    let (entries, rules, goal) = recorded(env, &run).await?;
    let (config, prices) = configure(Some(&args.strategy), &args.opts, args.budget)?;
    build(&config)?;
    let mut how = Replay::new(run.clone(), &config).map_err(|e| InvalidInput(e.to_string()))?;
    how.prices = prices;
    how.rules = rules;
    how.goal = goal;
    how.counter = run_counter(env, &run).await?;
    how.probes = false;
    let report = replay(&entries, &how);
    if report.needs_model {
        return Err(InvalidInput(format!(
            "strategy {} needs a model to write its summaries; offline, use structured",
            report.strategy
        ))
        .into());
    }
    if report.steps.is_empty() {
        return Err(InvalidInput(format!(
            "run {run} has no model calls (assistant messages after the first message) to report on"
        ))
        .into());
    }
    let growth = Growth::of(&report.strategy, &report.steps);
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&growth))
            .with_context(|| format!("--svg: writing {}", path.display()))?;
    }
    if env.json {
        return print_json(out, &GrowthReport::of(&run, &growth));
    }
    writeln!(
        out,
        "run {run}: input tokens per model call, full transcript vs {}",
        growth.strategy
    )?;
    writeln!(
        out,
        "{:>6} {:>8} {:>14} {:>14}  ",
        "step", "seq", "full", "compacted"
    )?;
    let (mut full, mut ctx) = (0u64, 0u64);
    for (i, s) in growth.steps.iter().enumerate() {
        full += s.full_tokens;
        ctx += s.context_tokens;
        writeln!(
            out,
            "{:>6} {:>8} {:>14} {:>14}{}",
            i + 1,
            s.seq,
            s.full_tokens,
            s.context_tokens,
            if s.compacted { "  ← compacted" } else { "" }
        )?;
    }
    writeln!(
        out,
        "total  {:>8} {:>14} {:>14}  ({:.1}× fewer input tokens)",
        "", full, ctx, growth.ratio
    )?;
    if let Some(path) = &args.svg {
        writeln!(out, "chart written to {}", path.display())?;
    }
    Ok(())
}
