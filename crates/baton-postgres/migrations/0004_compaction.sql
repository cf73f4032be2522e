-- baton schema, version 4 (the same version as baton-sqlite's 0004_compaction.sql): what
-- compaction keeps beside summaries.
--
-- `runs.cleared_through` / `cleared_min_tokens`: which old tool results the run's context
-- shows as a stub (the `clear-tool-results` strategy); both NULL when none. Moved forward only,
-- by compare-and-swap on the pair.
-- `summaries.meta`: what made a version (strategy, sizes, the retention audit), as its
-- installer gave it, JSON; NULL for versions installed by hand.
-- `pins`: messages the user pinned; every strategy keeps them, and context assembly carries a
-- pinned message whole when a summary covers it.

ALTER TABLE runs ADD COLUMN cleared_through BIGINT CHECK (cleared_through >= 1);
ALTER TABLE runs ADD COLUMN cleared_min_tokens BIGINT CHECK (cleared_min_tokens >= 0);

ALTER TABLE summaries ADD COLUMN meta TEXT;

CREATE TABLE pins (
    run_pk     BIGINT NOT NULL,
    seq        BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_pk, seq),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq)
);
