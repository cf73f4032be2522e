-- baton schema, version 6 (the same version as baton-sqlite's 0006_cache.sql): the response
-- cache, in-flight records and the call log.
--
-- `cache_entries`: a successful, complete result per (tenant, request key) until `expires_at`,
-- with the SHA-256 of its body: a body that no longer matches is reported and removed, never
-- served. `hits` counts how many times it was served.
-- `flights`: one row while some caller computes a key's result. `token` grows each time the
-- flight changes hands (an expired lease taken over), and only the current token renews or
-- releases it. Claims rely on the primary key: one `INSERT … ON CONFLICT DO NOTHING` wins, and
-- a takeover is an `UPDATE … WHERE lease_expires_at <= now`, which READ COMMITTED re-checks
-- against the row a concurrent taker just wrote, so exactly one taker succeeds.
-- `calls`: the call log, one row per model call however it was answered; `request_hash` is the
-- request key, so identical requests share it. `id` keeps the log's order among calls that
-- started in the same millisecond.
--
-- Times are milliseconds since the Unix epoch, as everywhere in baton's schema.

CREATE TABLE cache_entries (
    tenant_id   TEXT NOT NULL,
    key         BYTEA NOT NULL CHECK (octet_length(key) = 32),
    operation   TEXT NOT NULL,
    body        BYTEA NOT NULL,
    body_sha256 BYTEA NOT NULL CHECK (octet_length(body_sha256) = 32),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    hits        BIGINT NOT NULL DEFAULT 0 CHECK (hits >= 0),
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX cache_entries_expiry ON cache_entries (tenant_id, expires_at);

CREATE TABLE flights (
    tenant_id        TEXT NOT NULL,
    key              BYTEA NOT NULL CHECK (octet_length(key) = 32),
    owner            TEXT NOT NULL,
    token            BIGINT NOT NULL CHECK (token > 0),
    lease_expires_at BIGINT NOT NULL,
    started_at       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE TABLE calls (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    at            BIGINT NOT NULL,
    operation     TEXT NOT NULL,
    request_hash  BYTEA NOT NULL CHECK (octet_length(request_hash) = 32),
    model         TEXT NOT NULL,
    input_tokens  BIGINT NOT NULL CHECK (input_tokens >= 0),
    output_tokens BIGINT NOT NULL CHECK (output_tokens >= 0),
    cost_usd      DOUBLE PRECISION,
    outcome       TEXT NOT NULL CHECK (outcome IN ('executed', 'cache_hit', 'coalesced', 'error')),
    latency_ms    BIGINT NOT NULL CHECK (latency_ms >= 0),
    overlapped    BOOLEAN NOT NULL
);

CREATE INDEX calls_by_time ON calls (tenant_id, at, id);
