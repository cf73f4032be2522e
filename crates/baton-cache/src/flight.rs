//! In-process single-flight: concurrent callers with one key share one execution.
//!
//! Each key in flight has a slot holding a `tokio::sync::OnceCell`. The first caller runs its
//! work inside the cell's initializer; the others wait on the cell and get the same value. The
//! value is whatever the work returned, errors included, so followers get the leader's error
//! rather than repeating a call that just failed.
//!
//! What the known single-flight implementations get wrong, and what happens here instead:
//! - A leader that is cancelled (its future dropped) or panics does not fail or strand its
//!   followers: the cell's initializer is guarded by a one-permit semaphore, so when the
//!   leader's attempt ends without a value, exactly one waiting follower gets the permit and
//!   runs *its own* work; the rest keep waiting for that one. Never several replacements.
//! - A finished slot leaves the map as soon as its value is set, so a later caller with the
//!   same key starts afresh (it finds the result in the cache, not a stale in-memory value).
//! - A slot nobody waits on any more (its only caller was cancelled) is removed too.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

/// A set of keys in flight, each shared by the callers that ask for it meanwhile.
pub struct Group<K, V> {
    slots: Mutex<HashMap<K, Arc<Slot<V>>>>,
}

struct Slot<V> {
    cell: OnceCell<V>,
    /// Callers that joined the slot, ever.
    joined: AtomicUsize,
    /// Callers still waiting on it.
    active: AtomicUsize,
}

/// What [`Group::run`] gave one caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shared<V> {
    /// The value.
    pub value: V,
    /// Whether this caller's own work produced it (it led, or took over from a leader that
    /// was cancelled or panicked).
    pub ran: bool,
    /// How many callers had joined the flight when this one got the value, itself included:
    /// more than one means identical requests overlapped in time.
    pub joined: usize,
}

impl<K, V> Default for Group<K, V> {
    fn default() -> Self {
        Group {
            slots: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Group<K, V> {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many keys are in flight now.
    pub fn in_flight(&self) -> usize {
        self.slots.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Runs `work` for `key`, unless a caller is running it already: then waits for that
    /// caller's value. Cancel-safe: dropping this future hands the work to one waiter.
    pub async fn run<F, Fut>(&self, key: K, work: F) -> Shared<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let slot = {
            // A poisoned map only means another caller panicked while holding the lock for
            // an insert or a remove; the map itself is still consistent.
            // Joining happens under the map's lock, as leaving does, so a slot is never
            // removed between a caller finding it and counting itself in.
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let slot = slots
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Slot {
                        cell: OnceCell::new(),
                        joined: AtomicUsize::new(0),
                        active: AtomicUsize::new(0),
                    })
                })
                .clone();
            slot.joined.fetch_add(1, Ordering::SeqCst);
            slot.active.fetch_add(1, Ordering::SeqCst);
            slot
        };
        let leave = Leave {
            group: self,
            key,
            slot: slot.clone(),
        };
        let mut ran = false;
        let value = slot
            .cell
            .get_or_init(|| {
                ran = true;
                work()
            })
            .await
            .clone();
        let joined = slot.joined.load(Ordering::SeqCst);
        drop(leave);
        Shared { value, ran, joined }
    }
}

/// Leaves a slot when its caller is done, cancelled or panicking: a slot with a value, or with
/// nobody left waiting, leaves the map.
struct Leave<'a, K: Eq + Hash, V> {
    group: &'a Group<K, V>,
    key: K,
    slot: Arc<Slot<V>>,
}

impl<K: Eq + Hash, V> Drop for Leave<'_, K, V> {
    fn drop(&mut self) {
        let mut slots = self.group.slots.lock().unwrap_or_else(|p| p.into_inner());
        let left = self.slot.active.fetch_sub(1, Ordering::SeqCst) - 1;
        if (self.slot.cell.initialized() || left == 0)
            && slots
                .get(&self.key)
                .is_some_and(|s| Arc::ptr_eq(s, &self.slot))
        {
            slots.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests;
