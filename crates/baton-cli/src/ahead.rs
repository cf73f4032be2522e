//! Read-ahead for `baton import`: the files of an import are read, parsed, redacted and
//! tokenized on worker threads while the store writes the ones before them.
//!
//! # Design
//! Tokenization dominates an import's CPU (issue 17: 557 of 758 ms on the corpus), and it is
//! per file and independent, while the store's writes must stay in path order (the report
//! lists files in that order, and a subagent's file is stored after the files before it, as a
//! sequential import stores them). So the work is split in two:
//!
//! - `workers` threads (one per core) take the next file index from a shared counter and run
//!   the job on it, never more than `window` files ahead of the consumer: a worker that is
//!   that far ahead waits on a condition variable. Memory is bounded by `window` prepared
//!   files, whatever the size of the tree (issue 17's 1 GiB tree under 500 MB).
//! - The consumer (the async import loop) takes results strictly in index order, waiting on a
//!   channel for the one it needs and parking the ones that arrive early.
//!
//! Dropping the [`ReadAhead`] (the import stops early on an error) tells the workers to stop;
//! they finish the file in hand and exit. A job that panics is reported as that file's panic
//! when the consumer reaches it, never as a hang.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::mpsc;

/// Ordered results of a job run ahead on worker threads; see the module docs.
pub struct ReadAhead<T> {
    results: mpsc::UnboundedReceiver<(usize, std::thread::Result<T>)>,
    early: BTreeMap<usize, std::thread::Result<T>>,
    next: usize,
    len: usize,
    shared: Arc<Shared>,
}

struct Shared {
    /// The next index a worker takes.
    taken: AtomicUsize,
    /// How many results the consumer has taken, with the condition workers wait on.
    consumed: Mutex<usize>,
    moved: Condvar,
    stop: AtomicBool,
}

impl<T: Send + 'static> ReadAhead<T> {
    /// Runs `job(i)` for `i` in `0..len` on `workers` threads, at most `window` results ahead of
    /// the consumer (both at least 1).
    pub fn start<F>(len: usize, workers: usize, window: usize, job: F) -> Self
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
    {
        let window = window.max(1);
        let shared = Arc::new(Shared {
            taken: AtomicUsize::new(0),
            consumed: Mutex::new(0),
            moved: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let (tx, results) = mpsc::unbounded_channel();
        let job = Arc::new(job);
        for n in 0..workers.clamp(1, len.max(1)) {
            let spawned = {
                let (shared, tx, job) = (shared.clone(), tx.clone(), job.clone());
                std::thread::Builder::new()
                    .name(format!("baton-import-{n}"))
                    .spawn(move || work(&shared, &tx, &*job, len, window))
            };
            if spawned.is_err() && n == 0 {
                // No thread to be had: run the jobs here, in order, as a sequential import.
                work(&shared, &tx, &*job, len, usize::MAX);
            }
        }
        ReadAhead {
            results,
            early: BTreeMap::new(),
            next: 0,
            len,
            shared,
        }
    }

    /// The next result in index order, `None` after the last. A job that panicked resumes
    /// its panic here, in the consumer.
    pub async fn next(&mut self) -> Option<T> {
        if self.next == self.len {
            return None;
        }
        let result = loop {
            if let Some(result) = self.early.remove(&self.next) {
                break result;
            }
            match self.results.recv().await {
                Some((i, result)) if i == self.next => break result,
                Some((i, result)) => {
                    self.early.insert(i, result);
                }
                // Every worker is gone without the result: only a worker that could not start.
                None => panic!(
                    "import read-ahead: the workers stopped before file {}",
                    self.next
                ),
            }
        };
        self.next += 1;
        *self
            .shared
            .consumed
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = self.next;
        self.shared.moved.notify_all();
        Some(result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    }
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Taken under the lock, so a worker between its check and its wait cannot miss it.
        let _held = self
            .shared
            .consumed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.shared.moved.notify_all();
    }
}

fn work<T>(
    shared: &Shared,
    tx: &mpsc::UnboundedSender<(usize, std::thread::Result<T>)>,
    job: &(dyn Fn(usize) -> T + Send + Sync),
    len: usize,
    window: usize,
) {
    loop {
        let i = shared.taken.fetch_add(1, Ordering::SeqCst);
        if i >= len {
            return;
        }
        {
            let mut consumed = shared.consumed.lock().unwrap_or_else(|e| e.into_inner());
            while i >= consumed.saturating_add(window) && !shared.stop.load(Ordering::SeqCst) {
                consumed = shared
                    .moved
                    .wait(consumed)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(i)));
        if tx.send((i, result)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn results_come_in_index_order_whatever_order_the_workers_finish_in() {
        // Later indexes finish first: index i sleeps (20 - i) ms.
        let mut ahead = ReadAhead::start(20, 4, 8, |i| {
            std::thread::sleep(Duration::from_millis(20 - i as u64));
            i * 10
        });
        let got = block_on(async {
            let mut got = Vec::new();
            while let Some(v) = ahead.next().await {
                got.push(v);
            }
            got
        });
        assert_eq!(got, (0..20).map(|i| i * 10).collect::<Vec<_>>());
    }

    #[test]
    fn workers_never_run_more_than_the_window_ahead_of_the_consumer() {
        let started = Arc::new(AtomicUsize::new(0));
        let seen = started.clone();
        let mut ahead = ReadAhead::start(100, 4, 3, move |i| {
            seen.fetch_add(1, Ordering::SeqCst);
            i
        });
        block_on(async {
            for taken in 0..10 {
                assert_eq!(ahead.next().await, Some(taken));
                // The workers fill the window (waited for, however slow the machine)...
                let full = taken + 1 + 3;
                let waited = std::time::Instant::now();
                while started.load(Ordering::SeqCst) < full {
                    assert!(
                        waited.elapsed() < Duration::from_secs(10),
                        "the window never filled"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                // ...and go no further.
                std::thread::sleep(Duration::from_millis(20));
                let ran = started.load(Ordering::SeqCst);
                assert_eq!(
                    ran,
                    full,
                    "{ran} jobs started with {} taken and a window of 3",
                    taken + 1
                );
            }
        });
    }

    #[test]
    fn dropping_it_stops_the_workers() {
        let started = Arc::new(AtomicUsize::new(0));
        let seen = started.clone();
        let mut ahead = ReadAhead::start(1_000, 2, 2, move |i| {
            seen.fetch_add(1, Ordering::SeqCst);
            i
        });
        assert_eq!(block_on(ahead.next()), Some(0));
        drop(ahead);
        std::thread::sleep(Duration::from_millis(50));
        let ran = started.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            started.load(Ordering::SeqCst),
            ran,
            "no job starts after the drop"
        );
        assert!(ran <= 4, "{ran} jobs ran for one result taken");
    }

    #[test]
    fn a_job_that_panics_panics_in_the_consumer_at_its_turn() {
        let mut ahead = ReadAhead::start(5, 2, 4, |i| {
            assert!(i != 3, "file {i} is bad");
            i
        });
        let mut taken = Vec::new();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(async {
                while let Some(i) = ahead.next().await {
                    taken.push(i);
                }
            })
        }));
        let panic = caught.expect_err("the job's panic reaches the consumer");
        assert_eq!(
            panic.downcast_ref::<String>().map(String::as_str),
            Some("file 3 is bad")
        );
        assert_eq!(
            taken,
            [0, 1, 2],
            "the results before it were delivered, in order"
        );
    }

    #[test]
    fn nothing_to_do_ends_at_once() {
        let mut ahead = ReadAhead::start(0, 2, 2, |i| i);
        assert_eq!(block_on(ahead.next()), None);
    }
}
