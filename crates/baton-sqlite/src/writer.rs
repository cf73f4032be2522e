//! The writer: the one connection of a store that writes, and the thread that drains its queue.
//!
//! A write runs on the caller's thread when it can start at once ([`try_inline`]): the
//! connection is free, nothing is queued, and SQLite's write lock is free (`BEGIN IMMEDIATE`
//! with no busy wait). That is the common case of a lone writer, and it costs no thread hop.
//! Otherwise the job is queued and the caller awaits a oneshot reply, so no tokio worker ever
//! waits on the connection, on the queue, or on another process's busy timeout: the writer
//! thread does. It takes every job queued while it was busy (up to [`MAX_BATCH`]) and commits them
//! together (group commit): one `BEGIN IMMEDIATE`, each job inside a savepoint of its own, one
//! `COMMIT`. A job that fails rolls back to its savepoint only, so an error in one write never
//! fails the others; a job alone in its batch needs no savepoint. Replies are sent only once
//! the transaction holding the job committed. Writes of one store are serialized anyway (SQLite
//! has one write lock), so a batch changes no outcome: each job sees the ones before it, as it
//! would have one transaction later.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use baton_store::Error;
use baton_store::backend::BoxFuture;
use tokio::sync::oneshot;

use crate::SqliteTx;

/// The most jobs one transaction commits.
const MAX_BATCH: usize = 64;

/// A write job, its result type erased for the queue.
pub(crate) trait Job: Send {
    /// Runs the job inside the open transaction; whether it succeeded.
    fn run(&mut self, tx: &mut SqliteTx) -> bool;
    /// Hands the result to the caller: `failure`, when the transaction could not begin or
    /// commit, replaces a success (a job's own error is its result either way).
    fn finish(self: Box<Self>, failure: Option<&str>);
}

/// A job and where its result goes.
pub(crate) struct Typed<T, F> {
    pub(crate) job: Option<F>,
    pub(crate) result: Option<Result<T, Error>>,
    pub(crate) reply: oneshot::Sender<Result<T, Error>>,
}

impl<T, F> Job for Typed<T, F>
where
    T: Send + 'static,
    F: for<'t> FnOnce(&'t mut SqliteTx) -> BoxFuture<'t, Result<T, Error>> + Send + 'static,
{
    fn run(&mut self, tx: &mut SqliteTx) -> bool {
        let Some(job) = self.job.take() else {
            return false;
        };
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| poll_once(job(tx))))
            .unwrap_or_else(|_| Err(failed("a write job panicked; it was rolled back")));
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn finish(self: Box<Self>, failure: Option<&str>) {
        let result = match (self.result, failure) {
            (Some(Err(own)), _) => Err(own),
            (_, Some(failure)) => Err(failed(failure)),
            (Some(Ok(value)), None) => Ok(value),
            (None, None) => Err(failed("a write job never ran")),
        };
        let _ = self.reply.send(result);
    }
}

/// An error for a caller whose write was lost with its transaction.
pub(crate) fn failed(what: &str) -> Error {
    Error::backend(std::io::Error::other(what.to_owned()))
}

/// Drives a job's future to its end. A job over SQLite's primitives never waits (they run
/// synchronously inside their futures), so one poll finishes it; one that waits on anything
/// else is a bug, and fails instead of blocking the writer.
pub(crate) fn poll_once<T>(mut job: BoxFuture<'_, Result<T, Error>>) -> Result<T, Error> {
    match job.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => result,
        Poll::Pending => Err(failed(
            "a store job waited on something other than its rows; it was rolled back",
        )),
    }
}

/// The writing connection, shared by the writer thread (which locks it per batch) and callers
/// that find it idle (which only ever `try_lock` it).
pub(crate) struct Writer {
    conn: Mutex<SqliteTx>,
    /// Jobs sent to the queue and not yet taken by the thread.
    queued: AtomicUsize,
    busy_timeout: Duration,
}

impl Writer {
    pub(crate) fn new(tx: SqliteTx, busy_timeout: Duration) -> Self {
        Writer {
            conn: Mutex::new(tx),
            queued: AtomicUsize::new(0),
            busy_timeout,
        }
    }

    /// Counts a job about to be sent to the queue.
    pub(crate) fn queue_one(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// The connection; a job's panic is caught inside the lock, so a poisoned lock still
    /// guards a consistent connection (any open transaction is rolled back before the next).
    fn lock(&self) -> MutexGuard<'_, SqliteTx> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_lock(&self) -> Option<MutexGuard<'_, SqliteTx>> {
        match self.conn.try_lock() {
            Ok(tx) => Some(tx),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

/// Runs `job` on the calling thread if it can start without waiting on anything: nothing is
/// queued (queued jobs go first, and commit together), the connection is free, and SQLite's
/// write lock is free (the transaction begins with no busy wait). Gives the job back, not yet
/// run, when any of these does not hold; the caller queues it then.
pub(crate) fn try_inline(writer: &Writer, job: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
    if writer.queued.load(Ordering::SeqCst) > 0 {
        return Err(job);
    }
    let Some(mut tx) = writer.try_lock() else {
        return Err(job);
    };
    end_left_open(&tx);
    let set = |tx: &SqliteTx, wait| tx.conn.busy_timeout(wait).is_ok();
    if !set(&tx, Duration::ZERO) {
        return Err(job);
    }
    let began = tx.exec("BEGIN IMMEDIATE", []);
    if !set(&tx, writer.busy_timeout) {
        // The connection would go on without its busy timeout: leave it to the thread, whose
        // next batch fails as loudly as this would have.
        end_left_open(&tx);
        return Err(job);
    }
    if began.is_err() {
        return Err(job); // another process writes: the thread waits for it, not this caller
    }
    let mut done = Outbox::new();
    commit_begun(&mut tx, vec![job], &mut done);
    drop(tx);
    done.deliver();
    Ok(())
}

/// The thread's loop: until every sender (every clone of the store) is gone, takes what is
/// queued and commits it.
pub(crate) fn run(writer: &Writer, queue: Receiver<Box<dyn Job>>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        writer.queued.fetch_sub(batch.len(), Ordering::SeqCst);
        let mut done = Outbox::new();
        commit(&mut writer.lock(), batch, &mut done);
        done.deliver();
    }
}

/// Jobs whose transaction ended, with the failure that replaces a success. Delivered once the
/// connection is free again, so a caller that writes again on its reply finds it free.
struct Outbox(Vec<(Box<dyn Job>, Option<String>)>);

impl Outbox {
    fn new() -> Self {
        Outbox(Vec::new())
    }

    fn push(&mut self, job: Box<dyn Job>, failure: Option<&Error>) {
        self.0.push((job, failure.map(|e| e.to_string())));
    }

    fn deliver(self) {
        for (job, failure) in self.0 {
            job.finish(failure.as_deref());
        }
    }
}

/// Rolls back a transaction left open by a failed rollback or commit.
fn end_left_open(tx: &SqliteTx) {
    if !tx.conn.is_autocommit() {
        let _ = tx.exec("ROLLBACK", []);
    }
}

/// Runs `batch` in one transaction and hands each job its result.
fn commit(tx: &mut SqliteTx, batch: Vec<Box<dyn Job>>, out: &mut Outbox) {
    end_left_open(tx);
    if let Err(e) = tx.exec("BEGIN IMMEDIATE", []) {
        batch.into_iter().for_each(|job| out.push(job, Some(&e)));
        return;
    }
    commit_begun(tx, batch, out);
}

/// Runs `batch` in the transaction just begun, commits it and hands each job its result.
fn commit_begun(tx: &mut SqliteTx, batch: Vec<Box<dyn Job>>, out: &mut Outbox) {
    let alone = batch.len() == 1;
    let mut done = Vec::with_capacity(batch.len());
    let mut jobs = batch.into_iter();
    while let Some(mut job) = jobs.next() {
        if !alone && let Err(e) = tx.exec("SAVEPOINT job", []) {
            out.push(job, Some(&e));
            continue;
        }
        let ok = job.run(tx);
        if tx.conn.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a full disk): the jobs
            // before this one lost their writes with it. The rest get a transaction of their own.
            let lost = failed("sqlite rolled the write transaction back");
            done.into_iter()
                .for_each(|j: Box<dyn Job>| out.push(j, Some(&lost)));
            out.push(job, Some(&lost));
            let rest: Vec<_> = jobs.collect();
            if !rest.is_empty() {
                commit(tx, rest, out);
            }
            return;
        }
        let ended = match (alone, ok) {
            (true, true) => Ok(0),
            (true, false) => tx.exec("ROLLBACK", []),
            (false, true) => tx.exec("RELEASE job", []),
            (false, false) => tx
                .exec("ROLLBACK TO job", [])
                .and(tx.exec("RELEASE job", [])),
        };
        match (ended, ok) {
            (Err(e), _) => out.push(job, Some(&e)),
            (Ok(_), false) => out.push(job, None),
            (Ok(_), true) => done.push(job),
        }
    }
    if alone && done.is_empty() {
        return; // its transaction was rolled back above
    }
    let committed = tx.exec("COMMIT", []);
    if committed.is_err() && !tx.conn.is_autocommit() {
        let _ = tx.exec("ROLLBACK", []);
    }
    let failure = committed.err();
    done.into_iter()
        .for_each(|job| out.push(job, failure.as_ref()));
}
