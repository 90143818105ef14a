package main

import (
	"strings"
	"testing"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store/sqlite"
)

// TestMigrateNamesEachWrongColumnType: a table with casleader's column names but
// other types (a MySQL INT version and term, a PostgreSQL BIGINT tick_time or
// BOOLEAN stepdown, a table with other names altogether) is refused by migrate and
// by status, with the column, the type found, the type needed and how to fix it,
// and migrate does not suggest running migrate.
func TestMigrateNamesEachWrongColumnType(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		var ddl string
		var mention []string
		switch db.kind {
		case "mysql":
			ddl = "CREATE TABLE `" + db.table + "` (elect_key VARCHAR(255) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, version INT NOT NULL," +
				" leader_id VARCHAR(255) COLLATE utf8mb4_bin NOT NULL DEFAULT '', term INT NOT NULL DEFAULT 0," +
				" tick_time TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), handover_to VARCHAR(255) COLLATE utf8mb4_bin NOT NULL DEFAULT ''," +
				" stepdown SMALLINT NOT NULL DEFAULT 0, create_time TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)," +
				" update_time TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))"
			mention = []string{"column version is int", "column term is int", "needs BIGINT", "ALTER TABLE"}
		case "postgres":
			ddl = `CREATE TABLE "` + db.table + `" (elect_key TEXT PRIMARY KEY, version BIGINT NOT NULL, leader_id TEXT NOT NULL DEFAULT '',` +
				` term BIGINT NOT NULL DEFAULT 0, tick_time BIGINT NOT NULL DEFAULT 0, handover_to TEXT NOT NULL DEFAULT '',` +
				` stepdown BOOLEAN NOT NULL DEFAULT false, create_time TIMESTAMPTZ NOT NULL DEFAULT now(), update_time TIMESTAMPTZ NOT NULL DEFAULT now())`
			mention = []string{"column tick_time is bigint, needs TIMESTAMPTZ", "column stepdown is boolean, needs SMALLINT", "ALTER TABLE"}
		default:
			ddl = `CREATE TABLE "` + db.table + `" (elect_key TEXT PRIMARY KEY, name TEXT)`
			mention = []string{"column leader_id is missing", "column version is missing (needs INTEGER)", "drop the table and re-create it"}
		}
		switch db.kind {
		case "mysql":
			_, err := mydb.MySQL(t).ExecContext(t.Context(), ddl)
			if err != nil {
				t.Fatal(err)
			}
		case "postgres":
			_, err := pgdb.Postgres(t).Exec(t.Context(), ddl)
			if err != nil {
				t.Fatal(err)
			}
		default:
			// The SQLite file is created by the command: make it with migrate on
			// another table, then add the wrong one.
			must(t, "--dsn", db.dsn, "--table", "other", "migrate")
			sdb, err := sqlite.Open(strings.TrimPrefix(db.dsn, "sqlite://"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = sdb.ExecContext(t.Context(), ddl)
			sdb.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, cmd := range []string{"migrate", "status"} {
			r := runCL(t, nil, append(db.args(), cmd)...)
			if r.code != exitDatabase {
				t.Fatalf("%s: exit %d, want %d:\n%s%s", cmd, r.code, exitDatabase, r.stdout, r.stderr)
			}
			for _, m := range mention {
				if !strings.Contains(r.stderr, m) {
					t.Errorf("%s: the error does not say %q:\n%s", cmd, m, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "create the table with") {
				t.Errorf("%s: suggests creating a table that exists:\n%s", cmd, r.stderr)
			}
		}
	})
}

// TestMigrateAddsTheMembersTableToAnExistingElectionTable: an election table
// created before the members view existed gets its members table from migrate,
// and status then lists the members.
func TestMigrateAddsTheMembersTableToAnExistingElectionTable(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		must(t, append(db.args(), "migrate")...)
		if err := execDB(t, db, "DROP TABLE "+db.table+"_members"); err != nil {
			t.Fatal(err)
		}
		if r := runCL(t, nil, append(db.args(), "status", "--key", "k", "--members")...); !strings.Contains(r.stdout, "cannot be read") {
			t.Fatalf("status --members without the members table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := must(t, append(db.args(), "migrate")...); !strings.Contains(r.stdout, "already exists") {
			t.Fatalf("migrate of an existing table prints:\n%s", r.stdout)
		}
		if r := runCL(t, nil, append(db.args(), "status", "--key", "k", "--members")...); !strings.Contains(r.stdout, "no members seen within") {
			t.Fatalf("status --members after migrate added the members table:\n%s", r.stdout)
		}
	})
}

// TestMigrateAddsTheIncarnationColumnToAMembersTableOfAnEarlierVersion: a members
// table made before its incarnation column gets it from migrate.
func TestMigrateAddsTheIncarnationColumnToAMembersTableOfAnEarlierVersion(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		must(t, append(db.args(), "migrate")...)
		if err := execDB(t, db, "DROP TABLE "+db.table+"_members"); err != nil {
			t.Fatal(err)
		}
		if err := execDB(t, db, testdb.MembersDDLBeforeIncarnation(t, schema.Dialect(db.kind), db.table)); err != nil {
			t.Fatal(err)
		}
		if err := execDB(t, db, "SELECT incarnation FROM "+db.table+"_members"); err == nil {
			t.Fatal("the members table of an earlier version has an incarnation column")
		}
		if r := must(t, append(db.args(), "migrate")...); !strings.Contains(r.stdout, "already exists") {
			t.Fatalf("migrate of an existing table prints:\n%s", r.stdout)
		}
		if err := execDB(t, db, "SELECT incarnation FROM "+db.table+"_members"); err != nil {
			t.Fatalf("migrate did not add the incarnation column: %v", err)
		}
	})
}

// execDB runs q on the database of db, as its administrator.
func execDB(t *testing.T, db testDB, q string) error {
	switch db.kind {
	case "mysql":
		_, err := mydb.MySQL(t).ExecContext(t.Context(), q)
		return err
	case "postgres":
		_, err := pgdb.Postgres(t).Exec(t.Context(), q)
		return err
	default:
		sdb, err := sqlite.Open(strings.TrimPrefix(db.dsn, "sqlite://"))
		if err != nil {
			return err
		}
		defer sdb.Close()
		_, err = sdb.ExecContext(t.Context(), q)
		return err
	}
}
