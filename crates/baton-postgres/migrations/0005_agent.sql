-- baton schema, version 5 (the same version as baton-sqlite's 0005_agent.sql): what the
-- agent loop keeps beside history.
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
    run_pk     BIGINT NOT NULL,
    seq        BIGINT NOT NULL,
    read_only  BOOLEAN NOT NULL,
    text       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_pk, seq),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq)
);

CREATE TABLE tool_runs (
    run_pk      BIGINT NOT NULL REFERENCES runs(pk),
    tool_use_id TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    PRIMARY KEY (run_pk, tool_use_id)
);
