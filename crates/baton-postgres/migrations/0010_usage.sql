-- baton schema, version 10 (as baton-sqlite's 0010_usage.sql): token usage per model response.
--
-- One row per tenant and response id (`baton_core::usage::UsageRecord::id`, the same in every
-- file a response is found in): an import that brings a response again keeps the larger copy,
-- so a report counts each response once. `run_pk` is the run that first brought it; `session`,
-- `project` and `agent` are what reports group by. `at` is the source's timestamp in
-- milliseconds since the epoch; `estimated` marks baton's estimates for sources that record no
-- usage.

CREATE TABLE usage_records (
    tenant_id      TEXT NOT NULL REFERENCES tenants(id),
    id             TEXT NOT NULL,
    run_pk         BIGINT NOT NULL REFERENCES runs(pk),
    session        TEXT NOT NULL,
    project        TEXT,
    agent          TEXT NOT NULL,
    model          TEXT,
    response_id    TEXT,
    request_id     TEXT,
    at             BIGINT,
    input          BIGINT NOT NULL CHECK (input >= 0),
    output         BIGINT NOT NULL CHECK (output >= 0),
    cache_write_5m BIGINT NOT NULL CHECK (cache_write_5m >= 0),
    cache_write_1h BIGINT NOT NULL CHECK (cache_write_1h >= 0),
    cache_read     BIGINT NOT NULL CHECK (cache_read >= 0),
    estimated      BOOLEAN NOT NULL,
    PRIMARY KEY (tenant_id, id)
);

CREATE INDEX usage_records_by_time ON usage_records(tenant_id, at);
CREATE INDEX usage_records_by_run ON usage_records(run_pk);
