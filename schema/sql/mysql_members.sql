-- casleader members table for MySQL 8.0+ and MariaDB 10.6+: who takes part in each
-- election, and when each was last seen by the database clock (NOW(6)). It is a view
-- for operators: the election never reads it.
CREATE TABLE IF NOT EXISTS {{TABLE}} (
    elect_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    member_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    role      VARCHAR(16) NOT NULL DEFAULT '',
    paused    SMALLINT NOT NULL DEFAULT 0,
    priority  BIGINT NOT NULL DEFAULT 0,
    seen_at   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (elect_key, member_id)
) ENGINE = InnoDB
