//! `baton-fuzz`: runs the fuzzing campaign and prints, per target, the inputs run, the
//! failures (panics; over HTTP also 500s), the hangs (over one second) and the slowest input.
//! Exits 1 when anything failed or hung. `cargo xtask fuzz` runs it in release mode.
//!
//! `--inputs N` inputs per pure target (default 1,700,000: with the HTTP routes, over ten
//! million in all), `--http-inputs N` per HTTP route (default 20,000), `--seed S`, `--only
//! NAME`, `--quick` (2,000 and 200: seconds), `--findings DIR` (default
//! `target/fuzz-findings`).

#![allow(clippy::print_stdout, clippy::print_stderr)] // the campaign's report is its output

use std::process::ExitCode;
use std::time::Instant;

use baton_fuzz::Campaign;

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("baton-fuzz: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<bool> {
    let mut campaign = Campaign {
        inputs_per_target: 1_700_000,
        inputs_per_route: 20_000,
        seed: 20,
        findings: std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/fuzz-findings"),
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{name} needs a value"))
        };
        match arg.as_str() {
            "--inputs" => campaign.inputs_per_target = value("--inputs")?.parse()?,
            "--http-inputs" => campaign.inputs_per_route = value("--http-inputs")?.parse()?,
            "--seed" => campaign.seed = value("--seed")?.parse()?,
            "--only" => campaign.only = Some(value("--only")?),
            "--findings" => campaign.findings = value("--findings")?.into(),
            "--quick" => {
                campaign.inputs_per_target = 2_000;
                campaign.inputs_per_route = 200;
            }
            other => anyhow::bail!(
                "unknown argument {other:?} (--inputs N, --http-inputs N, --seed S, --only NAME, --quick, --findings DIR)"
            ),
        }
    }
    let started = Instant::now();
    println!(
        "fuzzing: {} inputs per target, {} per HTTP route, seed {}",
        campaign.inputs_per_target, campaign.inputs_per_route, campaign.seed
    );
    let outcomes = campaign.run(|o| {
        println!(
            "  {:<44} {:>10} inputs  {:>3} failures  {:>3} hangs  slowest {:>8.1} ms",
            o.target,
            o.inputs,
            o.failures,
            o.hangs,
            o.slowest.as_secs_f64() * 1000.0
        );
        if let Some(first) = &o.first_failure {
            println!("      first failure: {first}");
        }
        for path in &o.findings {
            println!("      kept {}", path.display());
        }
    })?;
    let inputs: u64 = outcomes.iter().map(|o| o.inputs).sum();
    let failures: u64 = outcomes.iter().map(|o| o.failures).sum();
    let hangs: u64 = outcomes.iter().map(|o| o.hangs).sum();
    println!(
        "total: {inputs} inputs, {failures} failures, {hangs} hangs over 1 s, in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(failures == 0 && hangs == 0)
}
