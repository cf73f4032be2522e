-- baton schema, version 2: recall search over history.
--
-- The words indexed are made in Rust (`baton_store::search_rows`): lowercase, diacritics
-- folded, one space between words, long texts cut into overlapping parts. That is what keeps
-- SQLite and PostgreSQL in agreement; the tokenizer below only splits on those spaces.
--
-- Design: a contentless FTS5 table (`content = ''`), so the words are indexed but not stored a
-- second time beside `history.message`, plus an ordinary table naming what each FTS rowid is
-- (a contentless table cannot return its columns). A search matches the phrase in the FTS
-- table, keeps the rows of the run (and kind), and joins back to `history` for the entries.
-- One row per (message, kind, part) with words. Indexing is lazy: `append` writes history
-- only, and `search` first indexes the run's messages after its mark in `search_progress` (in
-- Rust, in one `BEGIN IMMEDIATE` transaction), so history appended before this version is
-- indexed by the first search of its run, like any other.

CREATE TABLE history_search (
    id     INTEGER PRIMARY KEY,
    run_pk INTEGER NOT NULL,
    seq    INTEGER NOT NULL,
    kind   TEXT NOT NULL CHECK (kind IN ('text', 'tool_use', 'tool_result')),
    part   INTEGER NOT NULL CHECK (part >= 0),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq),
    UNIQUE (run_pk, seq, kind, part)
) STRICT;

CREATE VIRTUAL TABLE history_search_words USING fts5(
    body,
    content = '',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER history_search_is_append_only_update BEFORE UPDATE ON history_search
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;

CREATE TRIGGER history_search_is_append_only_delete BEFORE DELETE ON history_search
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;

-- How far each run's history is indexed: every message with seq <= indexed_through has its
-- rows above. No row means nothing is indexed yet.
CREATE TABLE search_progress (
    run_pk          INTEGER PRIMARY KEY REFERENCES runs(pk),
    indexed_through INTEGER NOT NULL CHECK (indexed_through >= 0)
) STRICT;
