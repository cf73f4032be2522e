//! The crate's one integration test binary: the offline extractor, the working-state merge,
//! the retention audit and the continuity probes over the real corpus in `/work/shared/corpus`
//! (a test says so and passes when the corpus is absent).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod corpus;
mod strategies;
