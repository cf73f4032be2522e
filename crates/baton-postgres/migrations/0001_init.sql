-- baton schema, version 1 (the same version as baton-sqlite's 0001_init.sql): tenants, runs,
-- append-only history, summary versions. Times are milliseconds since the Unix epoch.

CREATE TABLE tenants (
    id         TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

CREATE TABLE runs (
    pk                BIGSERIAL PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    id                TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('active', 'completed', 'cancelled')),
    goal              TEXT,
    rules             TEXT,
    active_summary_id BIGINT,
    last_seq          BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    created_at        BIGINT NOT NULL,
    UNIQUE (tenant_id, id)
);

CREATE TABLE history (
    run_pk       BIGINT NOT NULL REFERENCES runs(pk),
    seq          BIGINT NOT NULL CHECK (seq >= 1),
    tokens       INTEGER NOT NULL CHECK (tokens >= 0),
    tool_uses    TEXT,
    tool_results TEXT,
    created_at   BIGINT NOT NULL,
    message      TEXT NOT NULL,
    PRIMARY KEY (run_pk, seq)
);

-- The rows that open or answer tool calls: an install checks its cut against these only.
CREATE INDEX history_tool_rows ON history(run_pk, seq)
    WHERE tool_uses IS NOT NULL OR tool_results IS NOT NULL;

CREATE FUNCTION baton_history_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'history is append-only';
END;
$$;

CREATE TRIGGER history_is_append_only BEFORE UPDATE OR DELETE ON history
    FOR EACH ROW EXECUTE FUNCTION baton_history_is_append_only();
CREATE TRIGGER history_is_append_only_truncate BEFORE TRUNCATE ON history
    FOR EACH STATEMENT EXECUTE FUNCTION baton_history_is_append_only();

CREATE TABLE summaries (
    id          BIGSERIAL PRIMARY KEY,
    run_pk      BIGINT NOT NULL REFERENCES runs(pk),
    coverage    BIGINT NOT NULL CHECK (coverage >= 1),
    previous_id BIGINT REFERENCES summaries(id),
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE INDEX summaries_by_run ON summaries(run_pk, id);

ALTER TABLE runs ADD CONSTRAINT runs_active_summary_fk
    FOREIGN KEY (active_summary_id) REFERENCES summaries(id);
