//! [`Wakeups`]: waiters woken by a backend's notifications, falling back to polling.
//!
//! A backend that can push notifications (PostgreSQL's `LISTEN`) gives [`Wakeups::new`] a
//! function that starts one listener task: the task forwards every payload to the broadcast
//! sender it is given and ends when its source dies. [`Wakeups::wait`] subscribes, starting a
//! listener when none runs (at most one start per [`RETRY`]), and returns when its payload
//! arrives or at `at_most`; with no listener the wait is a plain sleep (the poll). A wakeup is
//! only ever a hint: callers look again after every wait, so a lost one costs one `at_most`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

/// How many payloads are buffered for a waiter that has not read them yet; a waiter that falls
/// further behind stops waiting and looks again.
const BUFFER: usize = 1024;
/// How soon after starting a listener another may be started, when the first one ended (could
/// not connect, or its source died).
pub const RETRY: Duration = Duration::from_secs(1);

/// Starts a listener task that sends every payload it receives, until its source ends.
type Start =
    dyn Fn(broadcast::Sender<Arc<str>>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// A running listener: where it sends payloads, and its task.
type Listener = (broadcast::Sender<Arc<str>>, tokio::task::JoinHandle<()>);

/// One listener, shared by every wait; dropping it stops the listener.
pub struct Wakeups {
    start: Box<Start>,
    /// The running listener's payloads and task, and when the last one was started.
    live: Mutex<(Option<Listener>, Option<Instant>)>,
}

impl std::fmt::Debug for Wakeups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wakeups").finish_non_exhaustive()
    }
}

impl Wakeups {
    /// Wakeups from the listeners `start` starts (on the first wait, and on a later wait after
    /// one ended).
    pub fn new(
        start: impl Fn(broadcast::Sender<Arc<str>>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Wakeups {
            start: Box::new(start),
            live: Mutex::new((None, None)),
        }
    }

    /// The payloads from now on, starting a listener if none runs; `None` (poll) while the last
    /// one ended less than [`RETRY`] after it started.
    fn subscribe(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        let mut state = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((payloads, task)) = &state.0
            && !task.is_finished()
        {
            return Some(payloads.subscribe());
        }
        if state.1.is_some_and(|started| started.elapsed() < RETRY) {
            return None;
        }
        let (payloads, receiver) = broadcast::channel(BUFFER);
        let task = tokio::spawn((self.start)(payloads.clone()));
        *state = (Some((payloads, task)), Some(Instant::now()));
        Some(receiver)
    }

    /// Waits until `expected` arrives or `at_most` has passed.
    pub async fn wait(&self, expected: &str, at_most: Duration) {
        let Some(mut payloads) = self.subscribe() else {
            tokio::time::sleep(at_most).await;
            return;
        };
        let woken = async {
            loop {
                match payloads.recv().await {
                    Ok(payload) if *payload == *expected => return,
                    Ok(_) => {}
                    // Ours may have been among those dropped: look again now.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    // The listener died: the wait is the poll.
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        let _ = tokio::time::timeout(at_most, woken).await;
    }
}

impl Drop for Wakeups {
    fn drop(&mut self) {
        let state = self.live.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, task)) = state.0.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_returns_at_its_payload_and_polls_without_a_listener() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        runtime.block_on(waits());
    }

    async fn waits() {
        let wakeups = Wakeups::new(|payloads| {
            Box::pin(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let _ = payloads.send(Arc::from("ours"));
                }
            })
        });
        let started = Instant::now();
        wakeups.wait("ours", Duration::from_secs(30)).await;
        assert!(started.elapsed() < Duration::from_secs(10));
        let dead = Wakeups::new(|_| Box::pin(async {}));
        let started = Instant::now();
        dead.wait("ours", Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
