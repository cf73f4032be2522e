//! The runtime against real stores and real HTTP: compaction carried out through the store's
//! compare-and-swap, and the agent loop against the scripted provider on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent;
mod compact;
