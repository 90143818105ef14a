// Package mydb gives tests MySQL/MariaDB pools; it imports only the MySQL driver.
package mydb

import (
	"database/sql"
	"testing"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store/mysql"
)

// MySQL returns a pool on the MySQL or MariaDB server, closed when t ends.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	db, err := mysql.Open(testdb.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	return db
}

// Galera returns one pool per Galera node, closed when t ends.
func Galera(t testing.TB) []*sql.DB {
	t.Helper()
	var dbs []*sql.DB
	for _, dsn := range testdb.GaleraDSNs(t) {
		db, err := mysql.Open(dsn)
		if err != nil {
			t.Fatalf("%s: %v", testdb.EnvGalera, err)
		}
		db.SetMaxOpenConns(32)
		t.Cleanup(func() { db.Close() })
		if err := db.Ping(); err != nil {
			t.Fatalf("Galera node %d of %s does not answer: %v", len(dbs)+1, testdb.EnvGalera, err)
		}
		dbs = append(dbs, db)
	}
	return dbs
}
