//! The crate's one integration test binary: baton's counts against tiktoken's own on the shared
//! corpus.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod corpus;
