-- casleader members table for PostgreSQL 12+: who takes part in each election, and
-- when each was last seen by the database clock (clock_timestamp()). It is a view
-- for operators: the election never reads it.
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key TEXT NOT NULL,
    member_id TEXT NOT NULL,
    role      TEXT NOT NULL DEFAULT '',
    paused    SMALLINT NOT NULL DEFAULT 0,
    priority  BIGINT NOT NULL DEFAULT 0,
    seen_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (elect_key, member_id)
)
