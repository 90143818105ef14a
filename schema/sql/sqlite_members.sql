-- casleader members table for SQLite 3.42+: who takes part in each election, and
-- when each was last seen (seen_at: microseconds since the Unix epoch by the
-- database host's clock). It is a view for operators: the election never reads it.
-- incarnation is the running process that last wrote the row ('' when written by a
-- version before the column).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   TEXT NOT NULL,
    member_id   TEXT NOT NULL,
    role        TEXT NOT NULL DEFAULT '',
    paused      INTEGER NOT NULL DEFAULT 0,
    priority    INTEGER NOT NULL DEFAULT 0,
    incarnation TEXT NOT NULL DEFAULT '',
    seen_at     INTEGER NOT NULL,
    PRIMARY KEY (elect_key, member_id)
)
