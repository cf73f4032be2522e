-- baton schema, version 1: tenants, runs, append-only history, summary versions.
-- Times are milliseconds since the Unix epoch. JSON columns hold baton-core's serde forms.

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE runs (
    pk                INTEGER PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    id                TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('active', 'completed', 'cancelled')),
    goal              TEXT,
    rules             TEXT,
    active_summary_id INTEGER REFERENCES summaries(id),
    last_seq          INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at        INTEGER NOT NULL,
    UNIQUE (tenant_id, id)
) STRICT;

-- The small columns come before `message` so reading tool ids or token counts never touches
-- the message's overflow pages.
CREATE TABLE history (
    run_pk       INTEGER NOT NULL REFERENCES runs(pk),
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    tokens       INTEGER NOT NULL CHECK (tokens >= 0),
    tool_uses    TEXT,
    tool_results TEXT,
    created_at   INTEGER NOT NULL,
    message      TEXT NOT NULL,
    PRIMARY KEY (run_pk, seq)
) STRICT;

-- The rows that open or answer tool calls: an install checks its cut against these only.
CREATE INDEX history_tool_rows ON history(run_pk, seq)
    WHERE tool_uses IS NOT NULL OR tool_results IS NOT NULL;

CREATE TRIGGER history_is_append_only_update BEFORE UPDATE ON history
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;

CREATE TRIGGER history_is_append_only_delete BEFORE DELETE ON history
BEGIN
    SELECT RAISE(ABORT, 'history is append-only');
END;

-- AUTOINCREMENT: a summary id is never reused, even by a later version of another run.
CREATE TABLE summaries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_pk      INTEGER NOT NULL REFERENCES runs(pk),
    coverage    INTEGER NOT NULL CHECK (coverage >= 1),
    previous_id INTEGER REFERENCES summaries(id),
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX summaries_by_run ON summaries(run_pk, id);
