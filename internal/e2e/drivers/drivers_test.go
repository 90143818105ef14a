// Package drivers checks that a user of one store downloads only that store's
// database driver.
package drivers

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/casleader/casleader"

// drivers maps each store package to the module path of its driver's package.
var drivers = map[string]string{
	"store/postgres": "github.com/jackc/pgx/v5",
	"store/mysql":    "github.com/go-sql-driver/mysql",
	"store/sqlite":   "modernc.org/sqlite",
}

// TestAStoreLoadsOnlyItsDriver: `go mod tidy` in a user's module loads the
// packages the user imports, what they import, and the tests of all of them. For
// a module that imports casleader and one store, none of those may import another
// store's driver, else every user downloads every driver (SQLite's is 50 MB).
// Tests that need several databases live under internal/e2e, which no user imports.
func TestAStoreLoadsOnlyItsDriver(t *testing.T) {
	for st, own := range drivers {
		t.Run(st, func(t *testing.T) {
			var ours []string
			for _, p := range goList(t, "-deps", module, module+"/"+st) {
				if p == module || strings.HasPrefix(p, module+"/") {
					ours = append(ours, p)
				}
			}
			loaded := goList(t, append([]string{"-deps", "-test"}, ours...)...)
			require.True(t, slices.Contains(loaded, own), "the check must see the store's own driver %s", own)
			for other, driver := range drivers {
				if other != st && slices.Contains(loaded, driver) {
					t.Errorf("a user of %s would download %s: find the test that imports it with `go list -deps -test` and move it under internal/e2e", st, driver)
				}
			}
		})
	}
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)
	lines := strings.Fields(string(out))
	slices.Sort(lines)
	return slices.Compact(lines)
}
