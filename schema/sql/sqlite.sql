-- casleader election table for SQLite 3.42+.
-- One row per election key. SQLite has no timestamp type: tick_time, create_time and
-- update_time hold microseconds since the Unix epoch, written with the database
-- host's clock (unixepoch('subsec')). lease is the lease duration of the leader that
-- wrote the row, in microseconds (0: not recorded), and incarnation the running process
-- that holds the term ('' when none does).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   TEXT NOT NULL PRIMARY KEY CHECK (length(CAST(elect_key AS BLOB)) BETWEEN 1 AND 255),
    version     INTEGER NOT NULL,
    leader_id   TEXT NOT NULL DEFAULT '',
    term        INTEGER NOT NULL DEFAULT 0,
    tick_time   INTEGER NOT NULL,
    handover_to TEXT NOT NULL DEFAULT '',
    stepdown    INTEGER NOT NULL DEFAULT 0,
    lease       INTEGER NOT NULL DEFAULT 0,
    incarnation TEXT NOT NULL DEFAULT '',
    create_time INTEGER NOT NULL,
    update_time INTEGER NOT NULL
)
