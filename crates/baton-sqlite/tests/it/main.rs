//! Integration tests of the SQLite store: the shared conformance suite on real temp files, and
//! what only SQLite has (file checks, migrations, append-only triggers).

// Test code: a failed unwrap is a failed test, and diagnostics go to stderr.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod conformance;
mod files;
mod writer;
