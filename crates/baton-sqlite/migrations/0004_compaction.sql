-- baton schema, version 4: what compaction keeps beside summaries.
--
-- `runs.cleared_through` / `cleared_min_tokens`: which old tool results the run's context
-- shows as a stub (the `clear-tool-results` strategy); both NULL when none. Moved forward only,
-- by compare-and-swap on the pair.
-- `summaries.meta`: what made a version (strategy, sizes, the retention audit), as its
-- installer gave it, JSON; NULL for versions installed by hand.
-- `pins`: messages the user pinned; every strategy keeps them, and context assembly carries a
-- pinned message whole when a summary covers it.

ALTER TABLE runs ADD COLUMN cleared_through INTEGER CHECK (cleared_through >= 1);
ALTER TABLE runs ADD COLUMN cleared_min_tokens INTEGER CHECK (cleared_min_tokens >= 0);

ALTER TABLE summaries ADD COLUMN meta TEXT;

CREATE TABLE pins (
    run_pk     INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_pk, seq),
    FOREIGN KEY (run_pk, seq) REFERENCES history(run_pk, seq)
) STRICT;
