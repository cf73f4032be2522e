-- baton schema, version 6: the response cache, in-flight records and the call log.
--
-- `cache_entries`: a successful, complete result per (tenant, request key) until `expires_at`,
-- with the SHA-256 of its body: a body that no longer matches is reported and removed, never
-- served. `hits` counts how many times it was served.
-- `flights`: one row while some caller computes a key's result. `token` grows each time the
-- flight changes hands (an expired lease taken over), and only the current token renews or
-- releases it.
-- `calls`: the call log, one row per model call however it was answered; `request_hash` is the
-- request key, so identical requests share it.

CREATE TABLE cache_entries (
    tenant_id   TEXT NOT NULL,
    key         BLOB NOT NULL CHECK (length(key) = 32),
    operation   TEXT NOT NULL,
    body        BLOB NOT NULL,
    body_sha256 BLOB NOT NULL CHECK (length(body_sha256) = 32),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    hits        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX cache_entries_expiry ON cache_entries (tenant_id, expires_at);

CREATE TABLE flights (
    tenant_id        TEXT NOT NULL,
    key              BLOB NOT NULL CHECK (length(key) = 32),
    owner            TEXT NOT NULL,
    token            INTEGER NOT NULL CHECK (token > 0),
    lease_expires_at INTEGER NOT NULL,
    started_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE calls (
    id            INTEGER PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    at            INTEGER NOT NULL,
    operation     TEXT NOT NULL,
    request_hash  BLOB NOT NULL CHECK (length(request_hash) = 32),
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
    cost_usd      REAL,
    outcome       TEXT NOT NULL CHECK (outcome IN ('executed', 'cache_hit', 'coalesced', 'error')),
    latency_ms    INTEGER NOT NULL CHECK (latency_ms >= 0),
    overlapped    INTEGER NOT NULL CHECK (overlapped IN (0, 1))
) STRICT;

CREATE INDEX calls_by_time ON calls (tenant_id, at);
