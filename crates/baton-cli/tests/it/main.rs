//! Tests of the real `baton` binary: each runs the built executable as a child process against
//! a temp-file database, as a user would.

// Test code: a failed unwrap is a failed test, and diagnostics go to stderr.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod bad_input;
mod cache;
mod chat;
mod compaction;
mod error_table;
mod hardening;
mod import;
mod json_contract;
mod mcp;
mod ops;
mod race;
mod recall;
mod runs;
mod seed;
mod serve;
mod support;
mod tidy;
mod tokens;
mod ui;
mod usage;
mod versions;
mod watch;
