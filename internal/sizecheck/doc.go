// Package sizecheck holds the programs of the binary-size check (BENCHMARKS.md,
// "Binary size") and the tests that keep casleader's promise that users link only
// what they use: no library package links a database driver, and a program that
// uses casleader with one driver is barely larger than one that uses the driver
// alone.
//
//   - pgxpool: a pgx pool, opened and pinged (the PostgreSQL baseline);
//   - postgres: a pgx pool, the PostgreSQL store and an Elector's Run;
//   - gosqldriver: go-sql-driver/mysql through database/sql, pinged (the MySQL
//     baseline);
//   - mysql: go-sql-driver/mysql, the MySQL store and an Elector's Run.
package sizecheck
