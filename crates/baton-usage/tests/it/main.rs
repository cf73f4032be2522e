//! The crate's one integration test binary: the reports on hand-made entries, on the shared
//! corpus against an independent reading of its files, and against ccusage itself.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod blocks;
mod ccusage;
mod corpus;
mod reports;
