// Package casleadersqlx shows, and tests, casleader in a service that holds a
// *sqlx.DB and writes in *sqlx.Tx.
//
// It has no code of its own, because none is needed: sqlx.DB embeds *sql.DB and
// sqlx.Tx embeds *sql.Tx, so a sqlx user hands casleader the embedded values,
// db.DB to build the store and tx.Tx to the guard:
//
//	db := sqlx.MustConnect("mysql", dsn) // or "pgx" with github.com/jackc/pgx/v5/stdlib
//	st, err := mysql.New(db.DB, "") // postgres.NewDB(db.DB, "") for PostgreSQL
//	...
//	tx, err := db.BeginTxx(ctx, nil)
//	if err := casleader.TermFrom(ctx).Guard(ctx, tx.Tx); err != nil { ... }
//	tx.NamedExecContext(...) // the fenced writes, with sqlx's own helpers
//	tx.Commit()
//
// The guard runs in the caller's transaction whatever wraps it, so every sqlx
// helper used on the same tx afterwards is fenced. sqlx is kept out of the core
// module's dependencies on purpose: casleader needs nothing from it, and users
// who do not use sqlx should not download it. This module's tests run an elector
// on a *sqlx.DB with a fenced write through a *sqlx.Tx on MariaDB and PostgreSQL.
package casleadersqlx
