-- baton schema, version 13 (the same version as baton-sqlite's 0013_live_attempt.sql): the
-- live attempt lives in its operation's row.
--
-- The attempt holding the operation's current fence is kept in `operations` (its owner is
-- `lease_owner`, its fence `fence`, its error `error`; it never keeps a result, which is the
-- operation's), so `begin` on a new key is one insert and a publish one update of one row.
-- `attempts` keeps only superseded attempts (lease lost, fenced out, failed and taken over):
-- a takeover moves the live attempt there and starts the new one in the row.

ALTER TABLE operations
    ADD COLUMN attempt_started_at BIGINT,
    ADD COLUMN attempt_ended_at BIGINT,
    ADD COLUMN attempt_outcome TEXT
        CHECK (attempt_outcome IN ('completed', 'failed', 'lease_lost', 'fenced_out')),
    ADD COLUMN attempt_paid BOOLEAN NOT NULL DEFAULT FALSE;

UPDATE operations AS o SET
    attempt_started_at = a.started_at,
    attempt_ended_at = a.ended_at,
    attempt_outcome = a.outcome,
    attempt_paid = a.paid
FROM attempts AS a
WHERE a.tenant_id = o.tenant_id AND a.key = o.key AND a.fence = o.fence;

DELETE FROM attempts AS a
USING operations AS o
WHERE a.tenant_id = o.tenant_id AND a.key = o.key AND a.fence = o.fence;
