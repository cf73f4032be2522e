//! HTTP integration tests: a real server on loopback over a real store, on SQLite and on
//! PostgreSQL (`BATON_TEST_PG`), driven by a real HTTP client.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs
)]

mod agents;
mod capture;
mod contract;
mod gateway;
mod gateway_v2;
mod hardening;
mod history;
mod managed;
mod ops;
mod reports;
mod runs;
mod sdk;
mod service;
mod summaries;
mod support;
mod ui;
