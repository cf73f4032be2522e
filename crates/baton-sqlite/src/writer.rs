//! The writer thread: the one connection of a store that writes, fed by a queue.
//!
//! A write job is queued by the calling task, which then awaits a oneshot reply, so no tokio
//! worker ever holds SQLite's write lock or waits out another process's busy timeout. The
//! thread takes every job queued while it was busy (up to [`MAX_BATCH`]) and commits them
//! together (group commit): one `BEGIN IMMEDIATE`, each job inside a savepoint of its own, one
//! `COMMIT`. A job that fails rolls back to its savepoint only, so an error in one write never
//! fails the others; a job alone in its batch needs no savepoint. Replies are sent only once
//! the transaction holding the job committed. Writes of one store are serialized anyway (SQLite
//! has one write lock), so a batch changes no outcome: each job sees the ones before it, as it
//! would have one transaction later.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::Receiver;
use std::task::{Context, Poll, Waker};

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
    fn finish(self: Box<Self>, failure: Option<&Error>);
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

    fn finish(self: Box<Self>, failure: Option<&Error>) {
        let result = match (self.result, failure) {
            (Some(Err(own)), _) => Err(own),
            (_, Some(failure)) => Err(failed(&failure.to_string())),
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

/// The thread's loop: until every sender (every clone of the store) is gone, takes what is
/// queued and commits it.
pub(crate) fn run(mut tx: SqliteTx, queue: Receiver<Box<dyn Job>>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        commit(&mut tx, batch);
    }
}

/// Runs `batch` in one transaction and hands each job its result.
fn commit(tx: &mut SqliteTx, batch: Vec<Box<dyn Job>>) {
    if !tx.conn.is_autocommit() {
        let _ = tx.exec("ROLLBACK", []); // left open by a failed rollback or commit
    }
    if let Err(e) = tx.exec("BEGIN IMMEDIATE", []) {
        batch.into_iter().for_each(|job| job.finish(Some(&e)));
        return;
    }
    let alone = batch.len() == 1;
    let mut done = Vec::with_capacity(batch.len());
    let mut jobs = batch.into_iter();
    while let Some(mut job) = jobs.next() {
        if !alone && let Err(e) = tx.exec("SAVEPOINT job", []) {
            job.finish(Some(&e));
            continue;
        }
        let ok = job.run(tx);
        if tx.conn.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a full disk): the jobs
            // before this one lost their writes with it. The rest get a transaction of their own.
            let lost = failed("sqlite rolled the write transaction back");
            done.into_iter()
                .for_each(|j: Box<dyn Job>| j.finish(Some(&lost)));
            job.finish(Some(&lost));
            let rest: Vec<_> = jobs.collect();
            if !rest.is_empty() {
                commit(tx, rest);
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
            (Err(e), _) => job.finish(Some(&e)),
            (Ok(_), false) => job.finish(None),
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
        .for_each(|job| job.finish(failure.as_ref()));
}
