-- baton schema, version 12: a deleted run's source stays deleted.
--
-- `Store::delete_run` records here the source key of every imported run it deletes (the run
-- and its subagents), so a later import of the same source (`baton import`, `baton watch`
-- seeing the file grow, `--reimport`) reports it as deleted and stores nothing, instead of
-- bringing back what the user removed (a secret imported by mistake). `baton import
-- --restore` removes the row and imports the source as a new run.

CREATE TABLE deleted_sources (
    tenant_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    -- The id the deleted run had, to name it in reports.
    run_id     TEXT NOT NULL,
    deleted_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, source_key)
);
