-- baton schema, version 7: the idempotency ledger.
--
-- `operations`: one intended operation per (tenant, idempotency key), pinned to its request's
-- hash. `fence` grows every time the lease changes hands; only the current fence may renew
-- the lease or publish an outcome. `expires_at` is when `baton ops prune` may remove it; an
-- expired record is never reused by `begin`.
-- `attempts`: every worker's attempt, with its fence, how it ended and what it tried to
-- publish (kept also when it was fenced out), and whether it made a paid external call.
-- Both tables are WITHOUT ROWID, clustered on their keys: a begin or a complete touches one
-- b-tree per table, which is what keeps a begin + complete
-- pair within half of a bare insert + update (`baton-bench`, section 10).

CREATE TABLE operations (
    tenant_id        TEXT NOT NULL,
    key              TEXT NOT NULL,
    id               TEXT NOT NULL,
    request_hash     BLOB NOT NULL CHECK (length(request_hash) = 32),
    status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed')),
    fence            INTEGER NOT NULL CHECK (fence >= 0),
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    result           TEXT,
    error            TEXT,
    retryable        INTEGER NOT NULL DEFAULT 0 CHECK (retryable IN (0, 1)),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
) STRICT, WITHOUT ROWID;

-- No index on expires_at: only `ops prune` reads it, over the tenant's range of the key.

CREATE TABLE attempts (
    tenant_id  TEXT NOT NULL,
    key        TEXT NOT NULL,
    owner      TEXT NOT NULL,
    fence      INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,
    outcome    TEXT CHECK (outcome IN ('completed', 'failed', 'lease_lost', 'fenced_out')),
    paid       INTEGER NOT NULL DEFAULT 0 CHECK (paid IN (0, 1)),
    result     TEXT,
    error      TEXT,
    PRIMARY KEY (tenant_id, key, fence),
    FOREIGN KEY (tenant_id, key) REFERENCES operations (tenant_id, key) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- The highest fence of each pruned operation: the key's next operation starts above it, so a
-- worker of a pruned operation can never match a later fence.
CREATE TABLE fence_marks (
    tenant_id TEXT NOT NULL,
    key       TEXT NOT NULL,
    fence     INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
) STRICT, WITHOUT ROWID;
