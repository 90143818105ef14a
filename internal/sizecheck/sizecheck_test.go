package sizecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// drivers are the import path prefixes of the database drivers (and of the test
// harness casleader once pulled in) that no library package may link.
var drivers = []string{
	"github.com/jackc/",
	"github.com/go-sql-driver/",
	"modernc.org/",
	"github.com/lib/pq",
	"github.com/ory/dockertest",
}

// driverFree are the packages that a user of any dialect links: they must stay
// free of every driver, so that a PostgreSQL-only program links pgx and nothing
// else, and a MySQL-only one go-sql-driver/mysql.
var driverFree = []string{
	"github.com/casleader/casleader",
	"github.com/casleader/casleader/cas",
	"github.com/casleader/casleader/heartbeat",
	"github.com/casleader/casleader/detector",
	"github.com/casleader/casleader",
	"github.com/casleader/casleader/internal/notify",
	"github.com/casleader/casleader/store",
	"github.com/casleader/casleader/internal/storetest",
	"github.com/casleader/casleader/schema",
	"github.com/casleader/casleader/metrics",
	"github.com/casleader/casleader/healthz",
}

func goCmd(t *testing.T, args ...string) string {
	t.Helper()
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out, err := exec.Command(goBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestLibraryPackagesLinkNoDriver(t *testing.T) {
	t.Parallel()
	for _, pkg := range driverFree {
		t.Run(strings.TrimPrefix(pkg, "github.com/casleader/"), func(t *testing.T) {
			t.Parallel()
			for _, dep := range strings.Fields(goCmd(t, "list", "-deps", pkg)) {
				for _, d := range drivers {
					if strings.HasPrefix(dep, d) {
						t.Errorf("%s links %s: keep driver code in its dialect package (store/postgres, store/mysql, store/sqlite)", pkg, dep)
					}
				}
			}
		})
	}
}

// TestDialectPackagesLinkOnlyTheirDriver: a PostgreSQL-only program must not link
// the MySQL or SQLite driver, and so on.
func TestDialectPackagesLinkOnlyTheirDriver(t *testing.T) {
	t.Parallel()
	for pkg, own := range map[string]string{
		"github.com/casleader/casleader/store/postgres": "github.com/jackc/",
		"github.com/casleader/casleader/store/mysql":    "github.com/go-sql-driver/",
		"github.com/casleader/casleader/store/sqlite":   "modernc.org/",
	} {
		t.Run(strings.TrimPrefix(pkg, "github.com/casleader/casleader/"), func(t *testing.T) {
			t.Parallel()
			for _, dep := range strings.Fields(goCmd(t, "list", "-deps", pkg)) {
				for _, d := range drivers {
					if strings.HasPrefix(dep, d) && d != own {
						t.Errorf("%s links %s", pkg, dep)
					}
				}
			}
		})
	}
}

// Binary size: casleader's goal is to add less than goal bytes to a program that
// uses one driver; the test fails at limit, a quarter above the goal, so that a
// protocol feature to come does not fail CI for a few kilobytes, while linking pgx's
// type system (3 MB) or package regexp (a third of a megabyte) again does.
//
// The limit was raised from 1,250,000 when the stores' Open functions took the
// command's DSN forms (one shared parser, internal/dsn: about 11 KB of code) and
// CreateTable and Check learnt primary keys, a read-only start-up and clear
// errors: 40 KB in all, on programs already within 21 KB of the old limit. It was
// raised again from 1,300,000 to 1,350,000 on 2026-11-27, when the MySQL program
// added 1,312,351 bytes (1,286,218 before): one declared store contract (every
// method forwarded by each store), hooks that carry an Event per key, and the
// latest-only stream shared with groups added 26 KB. It was raised again to
// 1,750,000 the same day, when the Elector came to run on the engine of a Group
// with one key: every program now links the batched statements of the stores
// (about 30 KB of sqlstore), the engine's batching, balance and verbs (about 100
// KB of code) and their tables: 364 KB on the PostgreSQL program (1,662,300 above
// pgxpool), 372 KB on the MySQL one (1,684,281). It still fails at regexp or pgx's
// type system. It was raised to 1,850,000 on 2026-11-28, when single-key electors
// on one store came to share its statements (internal/coalesce: 32 KB of code,
// 92 KB of binary with its tables and debug information; PostgreSQL program
// 1,683,106 above pgxpool before, 1,774,897 after). It still fails at regexp.
const (
	goal  = 1_000_000
	limit = 1_850_000
)

// TestBinarySizeNearTheDriverAlone builds each example program and its
// driver-only baseline and compares their sizes.
func TestBinarySizeNearTheDriverAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds four programs; skipped with -short")
	}
	dir := t.TempDir()
	size := func(prog string) int64 {
		out := filepath.Join(dir, prog)
		goCmd(t, "build", "-o", out, "./"+prog)
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, c := range []struct{ prog, baseline string }{
		{"postgres", "pgxpool"},
		{"mysql", "gosqldriver"},
	} {
		got, base := size(c.prog), size(c.baseline)
		t.Logf("%s: %d bytes, %s alone: %d bytes, casleader adds %d (goal: under %d)", c.prog, got, c.baseline, base, got-base, goal)
		if got-base >= limit {
			t.Errorf("%s is %d bytes larger than %s alone, the limit is %d: find what casleader links anew with go tool nm -size (see BENCHMARKS.md, Binary size)", c.prog, got-base, c.baseline, limit)
		}
	}
}
