//! [`Logged`]: the logging decorator. Wraps the executor and appends one JSON line per
//! compaction that changed something; no strategy has logging code of its own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::Compaction;
use crate::executor::{Execute, Executed, Outcome, Target};

/// An executor that logs what the executor inside it did, like tower's `Trace<S>` wraps a
/// service: every compaction carried out is written as one JSON line to the file at `path`
/// (created if needed, appended to) — the strategy, the run, the plan, messages and tokens
/// before and after, the cut, the summary id, the working state's size, the clearing, the
/// retention audit and the duration — and reported through `tracing`. Outcomes that change
/// nothing are not logged. A line that cannot be written is reported through `tracing` and
/// never fails the compaction.
///
/// ```no_run
/// use baton_compact::{Executor, Logged};
/// # fn wrap(executor: Executor<'_>) {
/// let logged = Logged::new(executor, "compactions.jsonl");
/// # }
/// ```
#[derive(Debug)]
pub struct Logged<E> {
    inner: E,
    path: PathBuf,
    /// One writer at a time, so lines from concurrent compactions never interleave.
    lock: Mutex<()>,
}

impl<E> Logged<E> {
    /// Wraps `inner`, logging to `path`.
    pub fn new(inner: E, path: impl Into<PathBuf>) -> Self {
        Logged {
            inner,
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// The executor inside.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Where the lines go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, compaction: &Compaction) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(compaction)?;
        line.push(b'\n');
        let _guard = self.lock.lock();
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?
            .write_all(&line)
    }
}

#[async_trait]
impl<E: Execute> Execute for Logged<E> {
    async fn execute<T: Target + ?Sized>(&self, target: &T) -> Executed<T> {
        let outcome = self.inner.execute(target).await;
        if let Ok(Outcome::Compacted(compaction)) = &outcome {
            tracing::info!(
                strategy = %compaction.strategy,
                run = %compaction.run,
                plan = compaction.plan,
                tokens_before = compaction.tokens_before,
                tokens_after = compaction.tokens_after,
                state_tokens = compaction.state_tokens,
                "compacted"
            );
            if let Err(err) = self.write(compaction) {
                tracing::warn!(
                    path = %self.path.display(),
                    error = %err,
                    "could not write the compaction log"
                );
            }
        }
        outcome
    }
}
