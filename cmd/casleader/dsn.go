package main

import (
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/dsn"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
)

// envDSN names the environment variable read when --dsn is not given.
const envDSN = "CASLEADER_DSN"

// defaultSQLiteFile is the database used when neither --dsn nor CASLEADER_DSN is set.
const defaultSQLiteFile = "casleader.db"

// target is a parsed --dsn: the dialect and what the store's Open function takes.
type target struct {
	dialect schema.Dialect
	raw     string // as the user gave it; only ever printed redacted
	driver  string // go-sql-driver DSN (MySQL), URL or key=value DSN (PostgreSQL), file path (SQLite)
}

// errBadDSN marks a --dsn that cannot be parsed: a usage error.
var errBadDSN = dsn.ErrBad

// parseDSN maps a --dsn value to a dialect and driver DSN with [dsn.Parse] (the
// parser that the stores' Open functions use too), then lets the dialect's driver
// parse the result, so that a bad DSN is a usage error before anything connects.
// Its errors never quote the DSN or a parser's message.
func parseDSN(s string) (target, error) {
	p, err := dsn.Parse(s)
	t := target{dialect: p.Dialect, raw: s, driver: p.Driver}
	if err != nil {
		return t, err
	}
	switch t.dialect {
	case schema.MySQL:
		if _, err := mysql.ParseDSN(t.driver); err != nil {
			return t, fmt.Errorf("%w: MySQL DSN: %s: %s", errBadDSN, dsn.Problem(err), dsn.EncodeHint)
		}
	case schema.Postgres:
		if _, err := pgxpool.ParseConfig(t.driver); err != nil {
			return t, fmt.Errorf("%w: PostgreSQL URL: %s: %s", errBadDSN, dsn.Problem(err), dsn.EncodeHint)
		}
	}
	return t, nil
}

// redact returns dsn with its password field replaced by "xxxxx", for messages.
func redact(dsn string) string { return secret.Redact(dsn) }

// redactError returns err with every quote of t's DSN (as given, and as the
// driver takes it) redacted.
func redactError(err error, t target) error { return secret.RedactError(err, t.raw, t.driver) }
