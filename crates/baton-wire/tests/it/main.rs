//! The one integration test binary of baton-wire: the real corpus and property tests.
//!
//! Corpus tests read `../shared/corpus` (from the workspace) at run time and skip, saying so,
//! when it is absent.

// All of this binary is test code, but clippy's `allow-*-in-tests` reaches only `#[test]`
// functions, not the helpers that load the corpus.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod claude_code;
mod corpus;
mod cross;
mod props;
mod swe_agent;
