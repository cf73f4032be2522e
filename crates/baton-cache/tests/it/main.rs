//! `baton-cache` through its API against real stores (SQLite files) and a real upstream (the
//! scripted provider on loopback, which counts every request it gets).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod cache;
mod report;
