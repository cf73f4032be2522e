//! The [`Strategy`] trait, its forwarding impls, and [`strategy_fn`] for tests.

use crate::{HistoryView, Plan};

/// A compaction strategy: reads a view of a run's context and returns a [`Plan`]. Pure: no IO,
/// no clock, no randomness, so the same view always gives the same plan.
///
/// A strategy decides *where* to cut and *what kind* of compaction to do; it never builds the
/// cut itself (only [`HistoryView::safe_cut_at_or_before`] and friends hand out
/// [`SafeCut`](baton_core::units::SafeCut)s) and never writes anything. The
/// [`Executor`](crate::Executor) carries the plan out; a decorator that wants to see what was
/// done wraps the executor ([`Logged`](crate::Logged)), not the strategy.
///
/// Forwarding impls exist for `&S`, `Box<S>` and `Arc<S>`. When writing a decorator, forward
/// every method: one that forgets `limit` makes the executor stop holding the budget.
pub trait Strategy: Send + Sync {
    /// The name configuration uses (`none`, `sliding`, `budget`, `clear-tool-results`,
    /// `summarize`, `structured`).
    fn name(&self) -> &'static str;

    /// Plans a compaction of the context `view` shows.
    fn plan(&self, view: &HistoryView<'_>) -> Plan;

    /// Plans a compaction the user asked for now (`baton compact --force`): as
    /// [`plan`](Self::plan), but as if the context had reached the strategy's threshold.
    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        self.plan(view)
    }

    /// The most tokens the strategy holds the context to, if it holds one (`budget`'s maximum,
    /// the summarizing strategies' threshold). The executor keeps the context there: it
    /// clears old tool results under the strategy when the context goes over, bypasses the loop
    /// guard while the context is over it and new content arrived, and sizes the working state
    /// from it; context assembly clips to it.
    fn limit(&self) -> Option<u64> {
        None
    }

    /// Whether the strategy's plans need a model to carry out (`summarize`): offline, the
    /// executor refuses them rather than run another strategy's code under its name.
    fn needs_model(&self) -> bool {
        false
    }
}

impl<S: Strategy + ?Sized> Strategy for &S {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan_now(view)
    }
    fn limit(&self) -> Option<u64> {
        (**self).limit()
    }
    fn needs_model(&self) -> bool {
        (**self).needs_model()
    }
}

impl<S: Strategy + ?Sized> Strategy for Box<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan_now(view)
    }
    fn limit(&self) -> Option<u64> {
        (**self).limit()
    }
    fn needs_model(&self) -> bool {
        (**self).needs_model()
    }
}

impl<S: Strategy + ?Sized> Strategy for std::sync::Arc<S> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn plan(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan(view)
    }
    fn plan_now(&self, view: &HistoryView<'_>) -> Plan {
        (**self).plan_now(view)
    }
    fn limit(&self) -> Option<u64> {
        (**self).limit()
    }
    fn needs_model(&self) -> bool {
        (**self).needs_model()
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
