-- baton schema, version 9: the ledger's operations are found by their primary key only.
--
-- Version 7 also indexed operations by (tenant_id, status) and (tenant_id, expires_at). Until
-- a table has statistics (a new schema, or a server with autovacuum off) the planner may take
-- either of them for a lookup by (tenant_id, key), and a pooled connection keeps such a plan:
-- the foreign-key check of every attempt insert, and the one-statement publish and heartbeat,
-- then walked all of the tenant's operations, so each call cost more as the ledger grew
-- (`baton-bench`, section 11, fell to 0.2x of pgbench at 8 clients). Listing by status and
-- pruning by expiry read the tenant's range of the primary key instead, as on SQLite, which
-- never had these indexes. Without an index on `status`, completing an operation is also a
-- HOT update.

DROP INDEX IF EXISTS operations_by_status;
DROP INDEX IF EXISTS operations_by_expiry;
