-- casleader members table for MySQL 8.0+ and MariaDB 10.6+: who takes part in each
-- election, and when each was last seen by the database clock (NOW(6)). It is a view
-- for operators: the election never reads it.
-- incarnation is the running process that last wrote the row ('' when written by a
-- version before the column).
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    member_id   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    role        VARCHAR(16) NOT NULL DEFAULT '',
    paused      SMALLINT NOT NULL DEFAULT 0,
    priority    BIGINT NOT NULL DEFAULT 0,
    incarnation VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    seen_at     TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (elect_key, member_id)
) ENGINE = InnoDB
