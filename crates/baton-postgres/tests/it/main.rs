//! Integration tests of the PostgreSQL store against the server `BATON_TEST_PG` names
//! (default `postgres://postgres@127.0.0.1:5432/test`). Each test works in a schema of its own,
//! dropped when the test passes and left behind for inspection when it fails. These tests
//! never skip: an unreachable server fails them, with the URL in the message.

// Test code: a failed unwrap is a failed test, and diagnostics go to stderr.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod conformance;
mod faults;
mod notify;
mod schema;
mod support;
