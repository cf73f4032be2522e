//! The [`Strategy`] trait, its forwarding impls, and [`strategy_fn`] for tests.

use crate::{Compaction, HistoryView, Plan};

/// A compaction strategy: reads a view of a run's context and returns a [`Plan`]. Pure: no IO,
/// no clock, no randomness, so the same view always gives the same plan.
///
/// A strategy decides *where* to cut and *what kind* of compaction to do; it never builds the
/// cut itself (only [`HistoryView::safe_cut_at_or_before`] and friends hand out
/// [`SafeCut`](baton_core::units::SafeCut)s) and never writes anything. The runtime carries the
/// plan out and then calls [`observe`](Strategy::observe), which is where decorators such as
/// [`Logged`](crate::Logged) see the outcome.
///
/// Forwarding impls exist for `&S`, `Box<S>` and `Arc<S>`. When writing a decorator, forward
/// both methods: a decorator that forgets `observe` silences every decorator inside it.
pub trait Strategy: Send + Sync {
    /// The name configuration uses (`none`, `sliding`, `budget`, `clear-tool-results`,
    /// `summarize`, `structured`).
    fn name(&self) -> &'static str;

    /// Plans a compaction of the context `view` shows.
    fn plan(&self, view: &HistoryView<'_>) -> Plan;

    /// Called by the runtime after it carried out a plan that changed something.
    fn observe(&self, _compaction: &Compaction) {}
}

impl<S: Strategy + ?Sized> Strategy for &S {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn observe(&self, compaction: &Compaction) {
        (**self).observe(compaction)
    }
}

impl<S: Strategy + ?Sized> Strategy for Box<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn observe(&self, compaction: &Compaction) {
        (**self).observe(compaction)
    }
}

impl<S: Strategy + ?Sized> Strategy for std::sync::Arc<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn observe(&self, compaction: &Compaction) {
        (**self).observe(compaction)
    }
}

/// A strategy made of a closure, for tests and one-off experiments (like tower's
/// `service_fn`).
///
/// ```
/// use baton_compact::{Keep, Plan, Strategy, strategy_fn};
/// let never = strategy_fn("never", |_view| Plan::Keep(Keep::Baseline));
/// assert_eq!(never.name(), "never");
/// ```
pub fn strategy_fn<F>(name: &'static str, f: F) -> StrategyFn<F>
where
    F: Fn(&HistoryView<'_>) -> Plan + Send + Sync,
{
    StrategyFn { name, f }
}

/// See [`strategy_fn`].
pub struct StrategyFn<F> {
    name: &'static str,
    f: F,
}

impl<F> Strategy for StrategyFn<F>
where
    F: Fn(&HistoryView<'_>) -> Plan + Send + Sync,
{
    fn name(&self) -> &'static str {
        self.name
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (self.f)(view)
    }
}
