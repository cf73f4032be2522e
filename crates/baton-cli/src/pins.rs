//! `baton pin` and `baton unpin`.

use std::io::Write;

use baton_core::Seq;
use baton_view::Pins;

use crate::args::{PinArgs, UnpinArgs};
use crate::env::{Env, print_json, run_id};

/// `baton pin`.
pub async fn pin(env: &Env, args: PinArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    // Every seq is checked before any is pinned, so a bad one pins nothing.
    let last = env.store.run(&env.tenant, &run).await?.last_seq;
    if let Some(bad) = args.seqs.iter().find(|s| **s == 0 || Seq(**s) > last) {
        return Err(baton_store::Error::SeqNotFound {
            run,
            seq: Seq(*bad),
            last,
        }
        .into());
    }
    let mut changed = false;
    for seq in &args.seqs {
        changed |= env.store.pin(&env.tenant, &run, Seq(*seq)).await?;
    }
    let pins = env.store.pins(&env.tenant, &run).await?;
    if env.json {
        return print_json(out, &Pins::of(&pins, changed));
    }
    match pins.as_slice() {
        [] => writeln!(out, "run {run} has no pinned messages")?,
        _ => writeln!(
            out,
            "run {run}: pinned {}",
            pins.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )?,
    }
    Ok(())
}

/// `baton unpin`.
pub async fn unpin(env: &Env, args: UnpinArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let run = run_id(&args.run)?;
    let mut not_pinned = Vec::new();
    for seq in &args.seqs {
        if !env.store.unpin(&env.tenant, &run, Seq(*seq)).await? {
            not_pinned.push(seq.to_string());
        }
    }
    let pins = env.store.pins(&env.tenant, &run).await?;
    if !not_pinned.is_empty() && !env.json {
        writeln!(out, "run {run}: {} was not pinned", not_pinned.join(", "))?;
    }
    if env.json {
        let changed = not_pinned.len() < args.seqs.len();
        return print_json(out, &Pins::of(&pins, changed));
    }
    writeln!(
        out,
        "run {run}: pinned {}",
        if pins.is_empty() {
            "nothing".to_owned()
        } else {
            pins.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    )?;
    Ok(())
}
