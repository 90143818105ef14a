// Package testname gives tests unique table names and election keys. It imports
// no driver, so the conformance suite (internal/storetest) can use it.
//
// # Cleanup
//
// Every name that [Name] gives is also the prefix of the tables its test creates
// (the election table, its "_members" table, the fault suite's "_actions" and
// "_probe" tables, ...). When the test ends, every [Dropper] registered with
// [AddDropper] drops the tables whose names start with the name, on its database:
// a run leaves no tables behind, and the catalogs of the test databases do not grow
// from run to run. The packages that open the test pools register one each
// (internal/testdb/pgdb for PostgreSQL, internal/testdb/mydb for MySQL/MariaDB),
// so a test binary drops on the databases whose driver it links. A failed test
// keeps its tables for inspection and logs their names; `bash .ci/run` drops such
// leftovers (tables named like [Name]'s) at its start.
package testname

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// Pattern matches the names that Name gives and the tables named after them (a
// suffix such as "_members" or "_actions" follows the random part). .ci/run
// drops the tables of the test databases that match it.
var Pattern = regexp.MustCompile(`^t_[a-z0-9_]*_[0-9a-f]{8}(_[a-z0-9_]*)?$`)

// Name returns a unique identifier for t, usable as a table name or an election key:
// "t_" + a readable part of the test name + a random suffix. The tables whose names
// start with it are dropped when t ends (see Cleanup in the package doc).
func Name(t testing.TB) string {
	n := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "t_" + strings.Trim(n, "_") + "_" + hex.EncodeToString(b)
	t.Cleanup(func() { cleanup(t, name, registered()) })
	return name
}

// A Dropper drops, on one database, the tables whose names start with prefix, and
// returns their names. With keep set it drops nothing and returns the names only.
// A Dropper whose database is not configured returns nothing.
type Dropper func(ctx context.Context, prefix string, keep bool) ([]string, error)

type namedDropper struct {
	where string // the database, for the log: "PostgreSQL"
	drop  Dropper
}

var (
	mu       sync.Mutex
	droppers []namedDropper
)

// AddDropper registers d, which drops on the database named where (for the log),
// for every name Name gives from then on. The test pool packages call it from
// their init functions.
func AddDropper(where string, d Dropper) {
	mu.Lock()
	defer mu.Unlock()
	droppers = append(droppers, namedDropper{where, d})
}

func registered() []namedDropper {
	mu.Lock()
	defer mu.Unlock()
	return append([]namedDropper(nil), droppers...)
}

// dropTimeout bounds one database's cleanup: connecting, listing and dropping.
const dropTimeout = 60 * time.Second

// cleanup drops the tables of name on every database of ds, or lists them when t
// failed. An error is logged, not reported as a failure: the test's verdict is
// made, and .ci/run drops what is left at its next start.
func cleanup(t testing.TB, name string, ds []namedDropper) {
	keep := t.Failed()
	for _, d := range ds {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		tables, err := d.drop(ctx, name, keep)
		cancel()
		switch {
		case err != nil:
			t.Logf("testname: could not drop the tables named %s* on %s: %v (bash .ci/run drops leftover test tables at its start)", name, d.where, err)
		case keep && len(tables) > 0:
			t.Logf("testname: the test failed: its tables on %s are kept for inspection: %s (bash .ci/run drops them at its start)", d.where, strings.Join(tables, ", "))
		}
	}
}

// LikePrefix returns the LIKE pattern (escape character: backslash) that matches
// the names starting with prefix.
func LikePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}
