package casleadertest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/casleadertest"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/storetest"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
)

// exists reports whether table exists in the database of db.
func exists(t *testing.T, d casleadertest.Dialect, db *sql.DB, table string) bool {
	t.Helper()
	var q string
	switch d {
	case casleadertest.MySQL:
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?"
	case casleadertest.Postgres:
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
	default:
		q = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	}
	var n int
	require.NoError(t, db.QueryRowContext(t.Context(), q, table).Scan(&n))
	return n == 1
}

func TestNewDB(t *testing.T) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			var got *casleadertest.DB
			t.Run("GivesAFreshTableWithAWorkingStore", func(t *testing.T) {
				db := casleadertest.NewDB(t, d)
				got = db
				assert.Equal(t, d, db.Dialect)
				assert.NotEmpty(t, db.DSN, "a DSN, or for SQLite the file's path")
				require.True(t, exists(t, d, db.SQL, db.Table), "table %s exists", db.Table)

				ctx := t.Context()
				_, found, err := db.Store.Observe(ctx, "job")
				require.NoError(t, err)
				assert.False(t, found, "the table is empty")
				term, inserted, err := db.Store.Insert(ctx, "job", store.Candidate{ID: "a"})
				require.NoError(t, err)
				require.True(t, inserted)
				rec, found, err := db.Store.Observe(ctx, "job")
				require.NoError(t, err)
				require.True(t, found)
				assert.Equal(t, "a", rec.LeaderID)
				assert.Equal(t, term, rec.Term)

				other := casleadertest.NewDB(t, d)
				assert.NotEqual(t, db.Table, other.Table, "each call gets a table of its own")
			})
			if got == nil || d == casleadertest.SQLite {
				return // skipped, or SQLite: the file went with t.TempDir
			}
			sqlDB := reopen(t, d, got.DSN)
			assert.False(t, exists(t, d, sqlDB, got.Table), "table %s is dropped at cleanup", got.Table)
			members, err := ident.MembersTable(got.Table)
			require.NoError(t, err)
			assert.False(t, exists(t, d, sqlDB, members), "table %s is dropped at cleanup", members)
		})
	}
}

func reopen(t *testing.T, d casleadertest.Dialect, dsn string) *sql.DB {
	t.Helper()
	var (
		db  *sql.DB
		err error
	)
	if d == casleadertest.MySQL {
		db, err = mysql.Open(dsn)
	} else {
		db, err = sql.Open("pgx", dsn)
	}
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestNewDBUnknownDialectFails checks the message of a bad dialect, in a test
// whose failure is caught.
func TestNewDBUnknownDialectFails(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine it runs on
		defer close(done)
		casleadertest.NewDB(r, "oracle")
	}()
	<-done
	require.True(t, r.failed, "NewDB fails an unknown dialect")
	assert.Contains(t, r.msg, `unknown dialect "oracle"`)
}

// recorder records a fatal failure or a skip instead of failing or skipping the
// test. Call what fails or skips on a goroutine of its own: both end it.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.failed = true
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skipped = true
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own and waits for it to end.
func (r *recorder) run(f func(t testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

// TestStoreConformance runs the stores' conformance suite on the servers NewDB
// gives: through dockertest where the DSN variables are unset. (SQLite's file is
// the same with or without the kit; package store runs the suite on it.)
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db := casleadertest.NewDB(t, d)
			h := storetest.SQL{
				Dialect: schema.Dialect(d),
				Exec:    storetest.DBExec(db.SQL),
				Open: func(table string) (storetest.Store, error) {
					switch d {
					case casleadertest.MySQL:
						return mysql.New(db.SQL, table)
					default:
						return postgres.NewDB(db.SQL, table)
					}
				},
			}.Harness()
			storetest.Run(t, h)
			t.Run("Batch", func(t *testing.T) { storetest.RunBatch(t, h) })
		})
	}
}

// child is set in the environment of the test binaries the Docker tests start.
const child = "CASLEADERTEST_TEST_CHILD"

// runChild runs test of this binary in a new process with env added, and returns
// its output.
func runChild(t *testing.T, test string, env ...string) string {
	t.Helper()
	out, err := child1(t, test, env...)
	require.NoError(t, err, "test binary %s: %s", test, out)
	return out
}

// child1 is runChild without the check, for use outside the test's goroutine.
func child1(t *testing.T, test string, env ...string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), child+"=1"), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dockerPath skips t unless NewDB takes the Docker path.
func dockerPath(t *testing.T) {
	t.Helper()
	if os.Getenv(casleadertest.EnvMySQL) != "" || os.Getenv(casleadertest.EnvPostgres) != "" {
		t.Skipf("%s or %s is set: NewDB takes no container", casleadertest.EnvMySQL, casleadertest.EnvPostgres)
	}
}

// TestPrintDSN is run by the tests below in a child process: it prints the DSN
// NewDB gives for each server dialect.
func TestPrintDSN(t *testing.T) {
	if os.Getenv(child) != "1" {
		t.Skip("run by TestContainers* in a child process")
	}
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		if d == casleadertest.MySQL && os.Getenv("CASLEADERTEST_TEST_ONLY_POSTGRES") == "1" {
			continue
		}
		fmt.Printf("dsn %s %s\n", d, casleadertest.NewDB(t, d).DSN)
	}
}

// TestContainersAreSharedByTestBinaries: a second test binary (this one, run again)
// gets the servers of the first, not containers of its own.
func TestContainersAreSharedByTestBinaries(t *testing.T) {
	dockerPath(t)
	t.Parallel()
	mine := map[casleadertest.Dialect]string{}
	for _, d := range []casleadertest.Dialect{casleadertest.MySQL, casleadertest.Postgres} {
		mine[d] = casleadertest.NewDB(t, d).DSN
		require.NotEmpty(t, mine[d])
	}
	out := runChild(t, "TestPrintDSN")
	for d, dsn := range mine {
		assert.Contains(t, out, fmt.Sprintf("dsn %s %s\n", d, dsn), "the child test binary uses this binary's %s container", d)
	}
}

// TestContainersSayWhichImageIsMissing: without the image, NewDB skips with what
// to run, and pulls nothing.
func TestContainersSayWhichImageIsMissing(t *testing.T) {
	dockerPath(t)
	t.Parallel()
	casleadertest.NewDB(t, casleadertest.Postgres) // an engine answers (else this skips or fails)
	out := runChild(t, "TestPrintDSN",
		casleadertest.EnvPostgresImage+"=casleadertest/absent:none",
		"CASLEADERTEST_TEST_ONLY_POSTGRES=1",
		casleadertest.EnvRequire+"=0")
	assert.Contains(t, out, "--- SKIP: TestPrintDSN")
	assert.Contains(t, out, "the Docker image casleadertest/absent:none is not present, and casleadertest never pulls: run `docker pull casleadertest/absent:none`")
	assert.Contains(t, out, casleadertest.EnvPostgresImage)
}

// TestContainersRemoveThemselvesWhenIdle: two test binaries that start at the same
// time share one new container; once no client has been connected for the idle
// time, it stops, and the engine removes it.
func TestContainersRemoveThemselvesWhenIdle(t *testing.T) {
	dockerPath(t)
	t.Parallel()
	const idle = 10 * time.Second // a setting of its own: a container of its own
	var (
		outs [2]string
		errs [2]error
		wg   sync.WaitGroup
	)
	for i := range outs {
		wg.Go(func() {
			outs[i], errs[i] = child1(t, "TestPrintDSN", casleadertest.EnvIdle+"="+idle.String(), "CASLEADERTEST_TEST_ONLY_POSTGRES=1")
		})
	}
	wg.Wait()
	var ports [2]string
	for i, out := range outs {
		require.NoError(t, errs[i], "test binary %d: %s", i, out)
		_, port, ok := strings.Cut(out, "dsn postgres postgres://postgres@127.0.0.1:")
		require.True(t, ok, "test binary %d printed its DSN: %s", i, out)
		ports[i], _, _ = strings.Cut(port, "/")
	}
	require.Equal(t, ports[0], ports[1], "the two test binaries share one container")
	port := ports[0]

	pool, err := dockertest.NewPool("")
	require.NoError(t, err)
	defer pool.Client.HTTPClient.CloseIdleConnections()
	published := func() bool {
		cs, err := pool.Client.ListContainers(dc.ListContainersOptions{Filters: map[string][]string{"label": {"casleadertest=postgres"}}})
		require.NoError(t, err)
		for _, c := range cs {
			for _, p := range c.Ports {
				if strconv.FormatInt(p.PublicPort, 10) == port {
					return true
				}
			}
		}
		return false
	}
	require.True(t, published(), "the child's container publishes port %s", port)
	// The watchdog looks every 5s; PostgreSQL's fast shutdown and the removal take
	// seconds. A minute on top of the idle time is ample on a loaded machine.
	deadline := time.Now().Add(idle + 5*time.Second + time.Minute)
	for published() {
		require.True(t, time.Now().Before(deadline), "the container on port %s is still there %s after its last client left", port, idle+5*time.Second+time.Minute)
		time.Sleep(time.Second)
	}
}
