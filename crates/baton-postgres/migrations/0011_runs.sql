-- baton schema, version 11 (as baton-sqlite's 0011_runs.sql): runs listed for people, and runs
-- deleted whole.
--
-- `run_origins.project` and `run_origins.title`: the project an imported session worked in and
-- its first user instruction, on one line, cut to 80 characters. Runs imported before this
-- version get what can be derived from what is stored: the project their usage records name,
-- and the first line of their first user text that is not markup (`<…>`); NULL otherwise.
--
-- `run_deletions`: the one path by which history rows are removed. `Store::delete_run` writes
-- the run's key here, removes every row of the run, and removes the key again, in one
-- transaction; the append-only trigger function lets a row-level DELETE through only for a run
-- named here, so an ordinary DELETE, any UPDATE and any TRUNCATE still fail.

ALTER TABLE run_origins ADD COLUMN project TEXT;
ALTER TABLE run_origins ADD COLUMN title TEXT;

UPDATE run_origins o SET project = (
    SELECT u.project FROM usage_records u
    WHERE u.run_pk = o.run_pk AND u.project IS NOT NULL
    ORDER BY u.at LIMIT 1
);

-- Messages holding an escaped NUL are passed over: jsonb cannot hold one.
UPDATE run_origins o SET title = t.title
FROM (
    SELECT DISTINCT ON (run_pk) run_pk,
        CASE WHEN char_length(line) > 80 THEN rtrim(left(line, 80)) || '…' ELSE line END AS title
    FROM (
        SELECT h.run_pk, h.seq, b.n,
            rtrim(split_part(ltrim(b.block ->> 'text', E' \t\r\n'), E'\n', 1), E' \t\r') AS line
        FROM history h
        JOIN run_origins r ON r.run_pk = h.run_pk
        CROSS JOIN LATERAL jsonb_array_elements(h.message::jsonb -> 'content')
            WITH ORDINALITY AS b(block, n)
        WHERE h.message LIKE '{"role":"user"%'
          AND strpos(h.message, '\u0000') = 0
          AND b.block ->> 'type' = 'text'
          AND ltrim(b.block ->> 'text', E' \t\r\n') <> ''
          AND ltrim(b.block ->> 'text', E' \t\r\n') NOT LIKE '<%'
    ) texts
    ORDER BY run_pk, seq, n
) t
WHERE o.run_pk = t.run_pk;

CREATE TABLE run_deletions (
    run_pk BIGINT PRIMARY KEY
);

-- `SET search_path FROM CURRENT`: the function finds `run_deletions` in baton's schema whatever
-- the caller's search path.
CREATE OR REPLACE FUNCTION baton_history_is_append_only() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM run_deletions WHERE run_pk = OLD.run_pk) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'history is append-only';
END;
$$;
