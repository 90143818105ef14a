// Package testtables_test checks that a test's tables (named by testdb.Name) are
// dropped when it ends, on MySQL/MariaDB and on PostgreSQL, so that runs do not
// pile tables up in the test databases.
package testtables_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/mydb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
)

type server struct {
	name string
	// exec runs a statement on the server, through a pool of t.
	exec func(t *testing.T, q string)
	// list returns the tables whose names start with prefix.
	list func(ctx context.Context, prefix string, keep bool) ([]string, error)
}

var servers = []server{
	{"MySQL", func(t *testing.T, q string) {
		_, err := mydb.MySQL(t).ExecContext(t.Context(), q)
		require.NoError(t, err, q)
	}, mydb.Drop},
	{"PostgreSQL", func(t *testing.T, q string) {
		_, err := pgdb.Postgres(t).Exec(t.Context(), q)
		require.NoError(t, err, q)
	}, pgdb.Drop},
}

func TestATestsTablesAreDroppedWhenItEnds(t *testing.T) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			outer := testdb.Name(t)
			s.exec(t, "CREATE TABLE "+outer+" (id INT PRIMARY KEY)")
			var inner string
			t.Run("CreatesTwoTables", func(t *testing.T) {
				inner = testdb.Name(t)
				s.exec(t, "CREATE TABLE "+inner+" (id INT PRIMARY KEY)")
				s.exec(t, "CREATE TABLE "+inner+"_members (id INT PRIMARY KEY)")
				left, err := s.list(t.Context(), inner, true)
				require.NoError(t, err)
				require.Len(t, left, 2, "the subtest's tables exist while it runs")
			})
			left, err := s.list(t.Context(), inner, true)
			require.NoError(t, err)
			assert.Empty(t, left, "the tables of the subtest are dropped when it ends")
			left, err = s.list(t.Context(), outer, true)
			require.NoError(t, err)
			assert.Equal(t, []string{outer}, trimSchema(left), "the table of the running test is kept")
		})
	}
}

// trimSchema removes PostgreSQL's "public." from the names.
func trimSchema(tables []string) []string {
	var out []string
	for _, tb := range tables {
		if len(tb) > 7 && tb[:7] == "public." {
			tb = tb[7:]
		}
		out = append(out, tb)
	}
	return out
}
