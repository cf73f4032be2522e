//! Pins: the messages no compaction drops.

use baton_core::Seq;
use serde::Serialize;

/// A run's pinned seqs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pins {
    /// The pinned seqs, in order.
    pub pins: Vec<u64>,
    /// Whether the request changed them (`false`: every seq was pinned already, or none was
    /// pinned).
    pub changed: bool,
}

impl Pins {
    /// The run's `pins`, and whether the request changed them.
    pub fn of(pins: &[Seq], changed: bool) -> Self {
        Pins {
            pins: pins.iter().map(|s| s.0).collect(),
            changed,
        }
    }
}
