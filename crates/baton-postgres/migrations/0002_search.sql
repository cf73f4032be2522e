-- baton schema, version 2 (the same version as baton-sqlite's 0002_search.sql): recall search
-- over history.
--
-- The words indexed are made in Rust (`baton_store::search_rows`): lowercase, diacritics
-- folded, one space between words, long texts cut into overlapping parts of at most 2,048
-- words (so a tsvector stays far below its 1 MB limit and its positions below 16,383). That is
-- what keeps PostgreSQL and SQLite in agreement; the 'simple' configuration below only splits
-- on those spaces, with no stemming and no stop words.
--
-- One row per (message, kind, part) with words. Indexing is lazy: `append` writes history
-- only, and `search` first indexes the run's messages after its mark in `search_progress` (in
-- Rust, in one transaction holding that row's lock, so two searchers never index the same
-- rows), so history appended before this version is indexed by the first search of its run.
-- A search is `tsv @@ phraseto_tsquery('simple', words)` on the
-- run's rows, joined back to `history` for the entries.

CREATE TABLE history_search (
    run_pk BIGINT NOT NULL,
    seq    BIGINT NOT NULL,
    kind   TEXT NOT NULL CHECK (kind IN ('text', 'tool_use', 'tool_result')),
    part   INTEGER NOT NULL CHECK (part >= 0),
    body   TEXT NOT NULL,
    tsv    tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    PRIMARY KEY (run_pk, seq, kind, part),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq)
);

CREATE INDEX history_search_tsv ON history_search USING GIN (tsv);

CREATE TRIGGER history_search_is_append_only BEFORE UPDATE OR DELETE ON history_search
    FOR EACH ROW EXECUTE FUNCTION baton_history_is_append_only();
CREATE TRIGGER history_search_is_append_only_truncate BEFORE TRUNCATE ON history_search
    FOR EACH STATEMENT EXECUTE FUNCTION baton_history_is_append_only();

-- How far each run's history is indexed: every message with seq <= indexed_through has its
-- rows above. No row means nothing is indexed yet.
CREATE TABLE search_progress (
    run_pk          BIGINT PRIMARY KEY REFERENCES runs(pk),
    indexed_through BIGINT NOT NULL CHECK (indexed_through >= 0)
);
