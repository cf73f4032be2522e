//! [`Logged`]: the logging decorator. Wraps any strategy and appends one JSON line per
//! compaction that changed something; no strategy has logging code of its own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{Compaction, HistoryView, Plan, Strategy};

/// A strategy that logs what its inner strategy's compactions did, like tower's `Trace<S>`:
/// planning is forwarded untouched, and every [`Compaction`] the runtime reports is written as
/// one JSON line to the file at `path` (created if needed, appended to): the strategy, the run,
/// the plan, messages and tokens before and after, the cut, the summary id, the retention audit
/// and the duration. Plans that keep the context as it is are not logged. A line that cannot
/// be written is reported through `tracing` and never fails the compaction.
///
/// ```no_run
/// use baton_compact::strategies::Sliding;
/// use baton_compact::{Logged, Strategy};
/// let strategy = Logged::new(Sliding { keep_last: 10 }, "compactions.jsonl");
/// assert_eq!(strategy.name(), "sliding");
/// ```
#[derive(Debug)]
pub struct Logged<S> {
    inner: S,
    path: PathBuf,
    /// One writer at a time, so lines from concurrent compactions never interleave.
    lock: Mutex<()>,
}

impl<S> Logged<S> {
    /// Wraps `inner`, logging to `path`.
    pub fn new(inner: S, path: impl Into<PathBuf>) -> Self {
        Logged {
            inner,
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// The strategy inside.
    pub fn inner(&self) -> &S {
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

impl<S: Strategy> Strategy for Logged<S> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        self.inner.plan(view)
    }

    fn observe(&self, compaction: &Compaction) {
        if let Err(err) = self.write(compaction) {
            tracing::warn!(
                path = %self.path.display(),
                error = %err,
                "could not write the compaction log"
            );
        }
        self.inner.observe(compaction);
    }
}
