-- baton schema, version 5: what the agent loop keeps beside history.
--
-- `run_constraints`: the constraints the user set on a run (`baton chat --read-only`,
-- `/constraint TEXT`). Each is also a pinned user message of the history (its `seq`), so the
-- model always sees it; the executor reads this table, never the message text, to decide
-- whether a tool with side effects may run.
-- `tool_runs`: a tool call with side effects whose execution has started. Written before the
-- tool runs; its result message is appended after. A call found started but unanswered when a
-- run resumes may or may not have had its effect, so it is answered with an error saying so
-- instead of being run twice.

CREATE TABLE run_constraints (
    run_pk     INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    read_only  INTEGER NOT NULL CHECK (read_only IN (0, 1)),
    text       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_pk, seq),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq)
) STRICT;

CREATE TABLE tool_runs (
    run_pk      INTEGER NOT NULL REFERENCES runs(pk),
    tool_use_id TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    PRIMARY KEY (run_pk, tool_use_id)
) STRICT;
