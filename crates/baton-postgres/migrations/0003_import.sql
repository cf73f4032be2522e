-- baton schema, version 3 (the same version as baton-sqlite's 0003_import.sql): imported runs.
--
-- `run_origins` says where an imported run came from. `source_key` is the source's identity
-- (a session id where the format has a globally unique one, else path and place in the file),
-- unique per tenant, so importing a source again finds its run instead of making a second.
-- `source_messages` and `source_digest` (a rolling SHA-256 over the imported messages, see
-- `baton_store::import`) let a later import check in one comparison that the source still
-- starts with what was imported, and append only what it gained since. Importers of one source
-- take turns on a transaction-scoped advisory lock keyed by schema, tenant and source key, so
-- the later ones find the run the first one made.
--
-- A subagent's `parent_key` names its parent's source key; `parent_run_pk` is filled when the
-- parent's run exists, by whichever of the two imports comes second.
--
-- `source_compactions` holds the compactions the source agent performed (Claude Code's
-- compact_boundary, Codex's compacted lines), as events placed after a seq: they are not
-- messages, and not baton summaries.

CREATE TABLE run_origins (
    run_pk               BIGINT PRIMARY KEY REFERENCES runs(pk),
    tenant_id            TEXT NOT NULL REFERENCES tenants(id),
    source_key           TEXT NOT NULL,
    path                 TEXT NOT NULL,
    format               TEXT NOT NULL,
    source_session_id    TEXT,
    parent_key           TEXT,
    parent_run_pk        BIGINT REFERENCES runs(pk),
    models               TEXT NOT NULL,
    first_at             TEXT,
    last_at              TEXT,
    redactions           BIGINT NOT NULL CHECK (redactions >= 0),
    skipped_lines        BIGINT NOT NULL CHECK (skipped_lines >= 0),
    side_branches        BIGINT NOT NULL CHECK (side_branches >= 0),
    side_branch_messages BIGINT NOT NULL CHECK (side_branch_messages >= 0),
    source_messages      BIGINT NOT NULL CHECK (source_messages >= 0),
    source_digest        TEXT NOT NULL,
    imported_at          BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    UNIQUE (tenant_id, source_key)
);

-- Subagents waiting for their parent's run.
CREATE INDEX run_origins_by_parent_key ON run_origins(tenant_id, parent_key)
    WHERE parent_key IS NOT NULL AND parent_run_pk IS NULL;

CREATE TABLE source_compactions (
    run_pk    BIGINT NOT NULL REFERENCES runs(pk),
    ordinal   BIGINT NOT NULL CHECK (ordinal >= 0),
    after_seq BIGINT NOT NULL CHECK (after_seq >= 0),
    summary   TEXT,
    at        TEXT,
    PRIMARY KEY (run_pk, ordinal)
);
