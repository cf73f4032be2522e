-- baton schema, version 11: runs listed for people, and runs deleted whole.
--
-- `run_origins.project` and `run_origins.title`: the project an imported session worked in (the
-- agent's working directory, as Claude Code and Codex record it) and its first user
-- instruction, on one line, cut to 80 characters (`baton_import::title_of`). Runs imported
-- before this version get what can be derived from what is stored: the project their usage
-- records name, and the first line of their first user text that is not markup (`<…>`); NULL
-- otherwise. Importing the source again with `--reimport` writes the reader's own values when
-- it extends the run.
--
-- `run_deletions`: the one path by which history rows are removed. `Store::delete_run` writes
-- the run's key here, removes every row of the run, and removes the key again, in one
-- transaction; the append-only triggers let a DELETE through only for a run named here, so an
-- ordinary DELETE (or any UPDATE) of history still fails.
--
-- The search index becomes `contentless_delete = 1` (SQLite 3.43+), so a deleted run's words
-- can be removed by rowid: a contentless FTS5 table cannot otherwise forget a row without its
-- original text. The index is rebuilt empty; each run's first search indexes it again (the
-- indexing is lazy, see 0002).

ALTER TABLE run_origins ADD COLUMN project TEXT;
ALTER TABLE run_origins ADD COLUMN title TEXT;

UPDATE run_origins SET project = (
    SELECT u.project FROM usage_records u
    WHERE u.run_pk = run_origins.run_pk AND u.project IS NOT NULL
    ORDER BY u.at LIMIT 1
);

UPDATE run_origins SET title = (
    SELECT CASE WHEN length(line) > 80 THEN rtrim(substr(line, 1, 80)) || '…' ELSE line END
    FROM (
        SELECT rtrim(CASE WHEN instr(t, char(10)) > 0 THEN substr(t, 1, instr(t, char(10)) - 1)
                          ELSE t END, ' ' || char(9, 13)) AS line
        FROM (
            SELECT ltrim(json_extract(b.value, '$.text'), ' ' || char(9, 10, 13)) AS t
            FROM history h, json_each(h.message, '$.content') b
            WHERE h.run_pk = run_origins.run_pk
              AND h.message LIKE '{"role":"user"%'
              AND json_extract(b.value, '$.type') = 'text'
              AND ltrim(json_extract(b.value, '$.text'), ' ' || char(9, 10, 13)) <> ''
              AND ltrim(json_extract(b.value, '$.text'), ' ' || char(9, 10, 13)) NOT LIKE '<%'
            ORDER BY h.seq, b.key
            LIMIT 1
        )
    )
);

CREATE TABLE run_deletions (
    run_pk INTEGER PRIMARY KEY
) STRICT;

DROP TRIGGER history_is_append_only_delete;
CREATE TRIGGER history_is_append_only_delete BEFORE DELETE ON history
WHEN NOT EXISTS (SELECT 1 FROM run_deletions WHERE run_pk = OLD.run_pk)
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;

-- The index is emptied (while its delete trigger is away) and made again.
DROP TRIGGER history_search_is_append_only_delete;
DELETE FROM history_search;
DELETE FROM search_progress;
DROP TABLE history_search_words;
CREATE VIRTUAL TABLE history_search_words USING fts5(
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER history_search_is_append_only_delete BEFORE DELETE ON history_search
WHEN NOT EXISTS (SELECT 1 FROM run_deletions WHERE run_pk = OLD.run_pk)
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;
