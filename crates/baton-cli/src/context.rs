//! `baton context`: the context the next model call would get.

use std::io::Write;

use crate::args::ContextArgs;
use crate::env::{Env, print_json, run_id};
use crate::exit::InvalidInput;

/// `baton context`.
pub async fn context(env: &Env, args: &ContextArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut ctx = env.store.context(&env.tenant, &run_id(&args.run)?).await?;
    if let Some(budget) = args.budget
        && !ctx.fit(budget)
    {
        let over = ctx.over_budget.as_ref().map_or_else(
            || format!("the context does not fit a budget of {budget} tokens"),
            ToString::to_string,
        );
        return Err(InvalidInput(format!("--budget {budget}: {over}")).into());
    }
    if env.json {
        return print_json(out, &serde_json::to_value(&ctx)?);
    }
    // What the model receives, whole: the preamble, then each message of the tail.
    write!(out, "{}", ctx.text())?;
    for problem in &ctx.problems {
        writeln!(out, "warning: {}", serde_json::to_string(problem)?)?;
    }
    writeln!(out)?;
    if let Some(budget) = args.budget {
        let clipped: Vec<String> = ctx.clipped.iter().map(ToString::to_string).collect();
        if clipped.is_empty() {
            writeln!(out, "fits the budget of {budget} tokens as it stands")?;
        } else {
            writeln!(
                out,
                "clipped to fit the budget of {budget} tokens: seq {} (recall them for the originals)",
                clipped.join(", ")
            )?;
        }
    }
    writeln!(out, "tokens: {} (estimated)", ctx.tokens)?;
    Ok(())
}
