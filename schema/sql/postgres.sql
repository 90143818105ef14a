-- casleader election table for PostgreSQL 12+.
-- One row per election key. tick_time is written with the database clock (clock_timestamp()).
-- lease is the lease duration of the leader that wrote the row, in microseconds (0: not
-- recorded), and incarnation the running process that holds the term ('' when none does).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   TEXT NOT NULL PRIMARY KEY CHECK (octet_length(elect_key) BETWEEN 1 AND 255),
    version     BIGINT NOT NULL,
    leader_id   TEXT NOT NULL DEFAULT '' CHECK (octet_length(leader_id) <= 255),
    term        BIGINT NOT NULL DEFAULT 0,
    tick_time   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    handover_to TEXT NOT NULL DEFAULT '' CHECK (octet_length(handover_to) <= 255),
    stepdown    SMALLINT NOT NULL DEFAULT 0,
    lease       BIGINT NOT NULL DEFAULT 0,
    incarnation TEXT NOT NULL DEFAULT '',
    create_time TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    update_time TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
)
