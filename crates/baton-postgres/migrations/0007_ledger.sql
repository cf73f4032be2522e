-- baton schema, version 7 (the same version as baton-sqlite's 0007_ledger.sql): the
-- idempotency ledger.
--
-- `operations`: one intended operation per (tenant, idempotency key), pinned to its request's
-- hash. `fence` grows every time the lease changes hands; only the current fence may renew
-- the lease or publish an outcome. `result` is the completed result's JSON text, as on SQLite
-- (it is only ever stored and read back whole, never queried). `expires_at` is when
-- `baton ops prune` may remove it; an expired record is never reused by `begin`.
-- `attempts`: every worker's attempt, with its fence, how it ended and what it tried to
-- publish (kept also when it was fenced out), and whether it made a paid external call.
-- Removing an operation removes its attempts. Keys sort by code point (`COLLATE "C"`), as
-- SQLite sorts them, so `operations` lists them in the same order on both backends.
--
-- Every check-then-act on an operation (a takeover, a heartbeat, a publish) first takes the
-- operation's row lock (`SELECT … FOR UPDATE`), so its attempts need no lock of their own.
--
-- Times are milliseconds since the Unix epoch, as everywhere in baton's schema.

CREATE TABLE operations (
    tenant_id        TEXT NOT NULL,
    key              TEXT COLLATE "C" NOT NULL,
    id               TEXT NOT NULL UNIQUE,
    request_hash     BYTEA NOT NULL CHECK (octet_length(request_hash) = 32),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    fence            BIGINT NOT NULL CHECK (fence >= 0),
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    result           TEXT,
    error            TEXT,
    retryable        BOOLEAN NOT NULL DEFAULT FALSE,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX operations_by_status ON operations (tenant_id, status);
CREATE INDEX operations_by_expiry ON operations (tenant_id, expires_at);

CREATE TABLE attempts (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    owner      TEXT NOT NULL,
    fence      BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at   BIGINT,
    outcome    TEXT CHECK (outcome IN ('completed', 'failed', 'lease_lost', 'fenced_out')),
    paid       BOOLEAN NOT NULL DEFAULT FALSE,
    result     TEXT,
    error      TEXT,
    UNIQUE (tenant_id, key, fence),
    FOREIGN KEY (tenant_id, key) REFERENCES operations (tenant_id, key) ON DELETE CASCADE
);

-- The highest fence of each pruned operation: the key's next operation starts above it, so a
-- worker of a pruned operation can never match a later fence.
CREATE TABLE fence_marks (
    tenant_id TEXT NOT NULL,
    key       TEXT COLLATE "C" NOT NULL,
    fence     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
