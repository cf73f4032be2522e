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
//!   the job on it, never more than `jobs` files ahead of the consumer, nor more than
//!   `budget` bytes of files ahead (by each file's size, [`Window`]): a worker that is that far
//!   ahead waits on a condition variable. The file the consumer needs next is never held back,
//!   so one file over the budget is still read. Memory is bounded by the window, whatever the
//!   size of the tree (issue 17's 1 GiB tree under 500 MB). A window of many files keeps the
//!   workers busy while the store writes a large file (aider's history: a thousand runs).
//! - The consumer (the async import loop) takes results strictly in index order, waiting on a
//!   channel for the one it needs and parking the ones that arrive early.
//!
//! - The workers run at a lower priority than the rest of the process (nice +10 on Linux,
//!   [`WORKER_NICE`]). The consumer's writes are the import's critical path; with one worker
//!   per core and the consumer, there is one runnable thread more than there are cores, and
//!   at equal priority the scheduler gave the consumer a share of a core while it wrote a large
//!   file. Lower, the workers take what the consumer leaves: the corpus import's median went
//!   from 0.33–0.40 s to 0.28–0.32 s (three runs of 12 rounds each, taking turns, 2 cores).
//!   Other processes of the machine keep their share of it, as against any niced job.
//!
//! Dropping the [`ReadAhead`] (the import stops early on an error) tells the workers to stop;
//! they finish the file in hand and exit. A job that panics is reported as that file's panic
//! when the consumer reaches it, never as a hang.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use tokio::sync::mpsc;

/// How much the workers' nice value is raised above the process's (capped at 19, the lowest
/// priority): enough that a core the consumer wants is its own (a nice-10 thread weighs a tenth
/// of a nice-0 one), not so much that the workers starve when something else runs beside them.
pub const WORKER_NICE: i32 = 10;

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
    /// How far the consumer is, with the condition workers wait on.
    progress: Mutex<Progress>,
    moved: Condvar,
    stop: AtomicBool,
    window: Window,
}

/// How far the consumer is.
#[derive(Default)]
struct Progress {
    /// How many results it has taken.
    consumed: usize,
    /// The bytes of the jobs started and not yet taken.
    ahead: u64,
    /// The next job to start: jobs start in index order, so the budget holds the jobs nearest
    /// the consumer.
    gate: usize,
}

/// How far ahead of the consumer the workers may run.
pub struct Window {
    /// At most this many jobs (at least 1).
    pub jobs: usize,
    /// At most this many bytes (by `bytes`) of jobs started and not yet taken; the job the
    /// consumer needs next starts whatever its size.
    pub budget: u64,
    /// Each job's size, by index (a job with none counts 0).
    pub bytes: Vec<u64>,
}

impl Window {
    /// A window of `jobs` jobs, whatever their size.
    #[cfg(test)]
    pub fn jobs(jobs: usize) -> Self {
        Window {
            jobs,
            budget: u64::MAX,
            bytes: Vec::new(),
        }
    }

    fn bytes(&self, i: usize) -> u64 {
        self.bytes.get(i).copied().unwrap_or(0)
    }
}

impl<T: Send + 'static> ReadAhead<T> {
    /// Runs `job(i)` for `i` in `0..len` on `workers` threads (at least 1), at most `window`
    /// ahead of the consumer.
    pub fn start<F>(len: usize, workers: usize, mut window: Window, job: F) -> Self
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
    {
        window.jobs = window.jobs.max(1);
        let shared = Arc::new(Shared {
            taken: AtomicUsize::new(0),
            progress: Mutex::new(Progress::default()),
            moved: Condvar::new(),
            stop: AtomicBool::new(false),
            window,
        });
        let (tx, results) = mpsc::unbounded_channel();
        let job = Arc::new(job);
        for n in 0..workers.clamp(1, len.max(1)) {
            let spawned = {
                let (shared, tx, job) = (shared.clone(), tx.clone(), job.clone());
                std::thread::Builder::new()
                    .name(format!("baton-import-{n}"))
                    .spawn(move || {
                        yield_to_the_consumer();
                        work(&shared, &tx, &*job, len, false)
                    })
            };
            if spawned.is_err() && n == 0 {
                // No thread to be had: run the jobs here, in order, as a sequential import.
                work(&shared, &tx, &*job, len, true);
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
        {
            let mut progress = self.shared.lock();
            progress.consumed = self.next;
            let bytes = self.shared.window.bytes(self.next - 1);
            debug_assert!(progress.ahead >= bytes, "the read-ahead's bytes miscounted");
            progress.ahead = progress.ahead.saturating_sub(bytes);
        }
        self.shared.moved.notify_all();
        Some(result.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    }
}

impl<T> Drop for ReadAhead<T> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Taken under the lock, so a worker between its check and its wait cannot miss it.
        let _held = self.shared.lock();
        self.shared.moved.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Raises the calling worker thread's nice value by [`WORKER_NICE`] (see the module docs).
/// Linux sets the nice value of the thread whose id is given (POSIX of a process), so
/// elsewhere this does nothing. A failure leaves the thread at the process's priority, which
/// costs speed only.
#[cfg(target_os = "linux")]
fn yield_to_the_consumer() {
    use rustix::process::{getpriority_process, setpriority_process};
    let me = Some(rustix::thread::gettid());
    if let Ok(nice) = getpriority_process(me) {
        let _ = setpriority_process(me, (nice + WORKER_NICE).min(19));
    }
}

#[cfg(not(target_os = "linux"))]
fn yield_to_the_consumer() {}

/// A worker's loop; `alone` when it is the only one, on the consumer's thread, where it runs
/// every job in order without waiting.
fn work<T>(
    shared: &Shared,
    tx: &mpsc::UnboundedSender<(usize, std::thread::Result<T>)>,
    job: &(dyn Fn(usize) -> T + Send + Sync),
    len: usize,
    alone: bool,
) {
    let window = &shared.window;
    loop {
        let i = shared.taken.fetch_add(1, Ordering::SeqCst);
        if i >= len {
            return;
        }
        {
            let bytes = window.bytes(i);
            let mut progress = shared.lock();
            // The job the consumer needs next always runs, whatever its size.
            let too_far = |p: &Progress| {
                i >= p.consumed.saturating_add(window.jobs)
                    || (i > p.consumed && p.ahead.saturating_add(bytes) > window.budget)
            };
            while !alone
                && (progress.gate != i || too_far(&progress))
                && !shared.stop.load(Ordering::SeqCst)
            {
                progress = shared
                    .moved
                    .wait(progress)
                    .unwrap_or_else(|e| e.into_inner());
            }
            progress.ahead = progress.ahead.saturating_add(bytes);
            progress.gate = i + 1;
        }
        shared.moved.notify_all();
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
        let mut ahead = ReadAhead::start(20, 4, Window::jobs(8), |i| {
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
        let mut ahead = ReadAhead::start(100, 4, Window::jobs(3), move |i| {
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
    fn workers_never_run_more_bytes_ahead_than_the_budget_but_always_the_next_job() {
        // Job i weighs 10 bytes, except job 5, which alone is over the budget of 25.
        let bytes: Vec<u64> = (0..40).map(|i| if i == 5 { 100 } else { 10 }).collect();
        let started = Arc::new(AtomicUsize::new(0));
        let seen = started.clone();
        let window = Window {
            jobs: 100,
            budget: 25,
            bytes,
        };
        let mut ahead = ReadAhead::start(40, 4, window, move |i| {
            seen.fetch_add(1, Ordering::SeqCst);
            i
        });
        // With `taken` results taken, the jobs that may have started: the next one whatever
        // its size, then the following ones while all their bytes fit in the budget.
        let allowed = |taken: usize| -> usize {
            let mut ahead = if taken == 5 { 100 } else { 10 };
            let mut n = taken + 1;
            while n < 40 {
                let size = if n == 5 { 100 } else { 10 };
                if ahead + size > 25 {
                    break;
                }
                ahead += size;
                n += 1;
            }
            n
        };
        block_on(async {
            for taken in 0..30 {
                assert_eq!(ahead.next().await, Some(taken));
                let full = allowed(taken + 1);
                let waited = std::time::Instant::now();
                while started.load(Ordering::SeqCst) < full {
                    assert!(
                        waited.elapsed() < Duration::from_secs(10),
                        "the budget never filled after {} taken",
                        taken + 1
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                std::thread::sleep(Duration::from_millis(20));
                let ran = started.load(Ordering::SeqCst);
                assert_eq!(ran, full, "{ran} jobs started with {} taken", taken + 1);
            }
        });
    }

    #[test]
    fn dropping_it_stops_the_workers() {
        let started = Arc::new(AtomicUsize::new(0));
        let seen = started.clone();
        let mut ahead = ReadAhead::start(1_000, 2, Window::jobs(2), move |i| {
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
        let mut ahead = ReadAhead::start(5, 2, Window::jobs(4), |i| {
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

    /// The workers' nice value, read by the kernel, is the consumer's plus [`WORKER_NICE`]
    /// (capped at 19), and the consumer's own is untouched.
    #[cfg(target_os = "linux")]
    #[test]
    fn workers_run_at_a_lower_priority_than_the_consumer() {
        use rustix::process::getpriority_process;
        let nice = || getpriority_process(Some(rustix::thread::gettid())).expect("getpriority");
        let consumer = nice();
        let mut ahead = ReadAhead::start(4, 2, Window::jobs(4), move |_| nice());
        let workers = block_on(async {
            let mut got = Vec::new();
            while let Some(v) = ahead.next().await {
                got.push(v);
            }
            got
        });
        assert_eq!(workers, vec![(consumer + WORKER_NICE).min(19); 4]);
        assert_eq!(nice(), consumer);
    }

    #[test]
    fn nothing_to_do_ends_at_once() {
        let mut ahead = ReadAhead::start(0, 2, Window::jobs(2), |i| i);
        assert_eq!(block_on(ahead.next()), None);
    }
}
