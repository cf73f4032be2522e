//! Integration tests of the SQLite store: the shared conformance suite on real temp files, and
//! what only SQLite has (file checks, migrations, append-only triggers).

mod conformance;
mod files;
