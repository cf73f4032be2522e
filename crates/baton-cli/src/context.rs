//! `baton context`: the context the next model call would get.

use std::io::Write;

use baton_core::Seq;

use crate::env::{Env, print_json, run_id};
use crate::history::print_entry;

/// `baton context`.
pub async fn context(env: &Env, run: &str, out: &mut dyn Write) -> anyhow::Result<()> {
    let ctx = env.store.context(&env.tenant, &run_id(run)?).await?;
    if env.json {
        return print_json(out, &serde_json::to_value(&ctx)?);
    }
    if let Some(preamble) = ctx.preamble() {
        writeln!(out, "{}", preamble.plain_text())?;
        writeln!(out)?;
    }
    let from = ctx.summary.as_ref().map_or(Seq(1), |s| s.coverage.next());
    let n = ctx.messages.len();
    let plural = if n == 1 { "" } else { "s" };
    writeln!(out, "# Messages from seq {from} ({n} message{plural})")?;
    for entry in &ctx.messages {
        print_entry(out, entry)?;
    }
    for problem in &ctx.problems {
        writeln!(out, "warning: {}", serde_json::to_string(problem)?)?;
    }
    writeln!(out)?;
    writeln!(out, "tokens: {} (estimated)", ctx.tokens)?;
    Ok(())
}
