//! Tests of the real `baton` binary: each runs the built executable as a child process against
//! a temp-file database, as a user would.

mod bad_input;
mod json_contract;
mod race;
mod seed;
mod support;
mod tidy;
