-- casleader members table for PostgreSQL 12+: who takes part in each election, and
-- when each was last seen by the database clock (clock_timestamp()). It is a view
-- for operators: the election never reads it.
-- incarnation is the running process that last wrote the row ('' when written by a
-- version before the column).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   TEXT NOT NULL,
    member_id   TEXT NOT NULL,
    role        TEXT NOT NULL DEFAULT '',
    paused      SMALLINT NOT NULL DEFAULT 0,
    priority    BIGINT NOT NULL DEFAULT 0,
    incarnation TEXT NOT NULL DEFAULT '',
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (elect_key, member_id)
)
