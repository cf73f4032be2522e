//! The offline summarizer: the working state read from the transcript's structure, no model.
//!
//! [`Offline::write`] takes the base version's claims as a [`WorkingState`], lets it
//! [`observe`](WorkingState::observe) the messages through the cut, and [`bound`]s it under the
//! request's cap. Nothing is paraphrased: instructions, plans, paths and commands are copied
//! verbatim (see [`crate::state`] for every section). Deterministic: the same messages give the
//! same claims.

use async_trait::async_trait;

use super::{SummarizeError, Summarizer, SummaryRequest, Written};
use crate::state::{WorkingState, bound};

/// The deterministic summarizer: no model, no IO, the same claims for the same messages. It
/// ignores [`SummaryRequest::instructions`], which are for model-backed summarizers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Offline;

impl Offline {
    /// Writes the claims for `request`, synchronously: the base's working state updated with
    /// the messages through the cut and bounded under the request's cap. Every new claim cites a
    /// seq of `request.old` at or before `request.cut`; claims citing pinned seqs are carried.
    pub fn write(&self, request: &SummaryRequest<'_>) -> Written {
        Written {
            claims: Offline::state(request).claims,
            input_tokens: 0,
            output_tokens: 0,
        }
    }

    /// The bounded working state `write` installs, with its size.
    pub fn state(request: &SummaryRequest<'_>) -> crate::state::Bounded {
        let base = request.base.map_or(&[][..], |b| b.claims.as_slice());
        let through = request.old.partition_point(|e| e.seq <= request.cut);
        let mut state = WorkingState::from_claims(base, request.pins);
        state.observe(&request.old[..through]);
        bound(&state, request.cut, request.cap, request.counter)
    }
}

#[async_trait]
impl Summarizer for Offline {
    fn name(&self) -> &str {
        "offline"
    }

    fn calls_a_model(&self) -> bool {
        false
    }

    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<Written, SummarizeError> {
        Ok(self.write(request))
    }
}

#[cfg(test)]
mod tests;
