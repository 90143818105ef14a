-- casleader election table for MySQL 8.0+ and MariaDB 10.6+.
-- One row per election key. tick_time is written with the database clock (NOW(6));
-- TIMESTAMP(6) is stored in UTC whatever the session time zone. lease is the lease
-- duration of the leader that wrote the row, in microseconds (0: not recorded), and
-- incarnation the running process that holds the term ('' when none does).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    version     BIGINT NOT NULL,
    leader_id   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    term        BIGINT NOT NULL DEFAULT 0,
    tick_time   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    handover_to VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    stepdown    SMALLINT NOT NULL DEFAULT 0,
    lease       BIGINT NOT NULL DEFAULT 0,
    incarnation VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    create_time TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    update_time TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (elect_key)
) ENGINE = InnoDB
