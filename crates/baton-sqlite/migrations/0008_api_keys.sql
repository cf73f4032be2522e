-- baton schema, version 8: API keys for the HTTP service.
--
-- Only the SHA-256 of a whole key is kept (`hash`, the primary key, which is how a request's
-- key is looked up); `id` is the key's public name for listings and revocation. A revoked key
-- keeps its row (`revoked_at`), so a listing shows what was shut out and when.

CREATE TABLE api_keys (
    hash       BLOB NOT NULL PRIMARY KEY CHECK (length(hash) = 32),
    id         TEXT NOT NULL UNIQUE,
    tenant_id  TEXT NOT NULL,
    label      TEXT,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id, created_at);
