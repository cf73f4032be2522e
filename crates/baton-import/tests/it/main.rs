//! The crate's one integration test binary: each reader over the real corpus in
//! `/work/shared/corpus` (a test says so and passes when the corpus is absent).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)]

mod aider;
mod claude_code;
mod codex;
mod history;
mod live;
mod messages;
mod openhands;
mod swe_agent;
