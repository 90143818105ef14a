package casleadertest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/testname"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/postgres"
	"github.com/casleader/casleader/store/sqlite"
)

// Dialect names a database engine.
type Dialect string

// The dialects [NewDB] serves.
const (
	MySQL    Dialect = "mysql"    // MySQL or MariaDB
	Postgres Dialect = "postgres" // PostgreSQL
	SQLite   Dialect = "sqlite"   // SQLite, in a file
)

// Environment variables read by [NewDB].
const (
	// EnvMySQL is the DSN of a MySQL or MariaDB server (go-sql-driver format, e.g.
	// "root@tcp(127.0.0.1:3306)/test"). When set, no container is started.
	EnvMySQL = "CASLEADER_MYSQL_DSN"
	// EnvPostgres is the DSN of a PostgreSQL server (e.g.
	// "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"). When set, no
	// container is started.
	EnvPostgres = "CASLEADER_POSTGRES_DSN"
	// EnvRequire=1 turns every skip of [NewDB] into a failure, so that a CI run
	// cannot go green by skipping.
	EnvRequire = "CASLEADER_REQUIRE_DB"
	// EnvMySQLImage is the image of the MySQL container (default "mariadb:10.11";
	// "mysql:8.4" works too).
	EnvMySQLImage = "CASLEADERTEST_MYSQL_IMAGE"
	// EnvPostgresImage is the image of the PostgreSQL container (default
	// "postgres:15").
	EnvPostgresImage = "CASLEADERTEST_POSTGRES_IMAGE"
	// EnvDocker=0 turns the Docker path off: without a DSN, tests skip (or fail
	// under [EnvRequire]) without asking a Docker engine.
	EnvDocker = "CASLEADERTEST_DOCKER"
	// EnvIdle is how long a container runs without a client connection before it
	// stops and removes itself: a Go duration of whole seconds, at least 10s
	// (default 10m).
	EnvIdle = "CASLEADERTEST_IDLE"
	// EnvKeep=1 keeps the containers running until they are removed by hand
	// (docker rm -f $(docker ps -aq --filter label=casleadertest)).
	EnvKeep = "CASLEADERTEST_KEEP"
)

// Default images. The official images of these names work; casleader's CI builds
// stand-ins with the same names from Debian packages (MariaDB 10.11 and PostgreSQL
// 15, by .ci/docker), because no registry is reachable there.
const (
	DefaultMySQLImage    = "mariadb:10.11"
	DefaultPostgresImage = "postgres:15"
)

// poolSize caps the connections of each [DB.SQL]: tests race up to twenty
// candidates on one pool, and the servers the DSN variables name are shared.
const poolSize = 20

// DB is a database for one test: a fresh, empty election table on it.
type DB struct {
	Dialect Dialect
	DSN     string       // the server's DSN; for SQLite the database file's path
	SQL     *sql.DB      // open pool; closed by t.Cleanup
	Table   string       // a table name unique to the test, created, dropped at cleanup
	Store   store.Driver // a store for Table on SQL (store/mysql, store/postgres, store/sqlite)

	from   string  // where the server came from, for Restart's error
	server *server // the test's own server ([NewRestartableDB]); nil otherwise
}

// NewDB returns a database for t of dialect d: from the DSN variable
// (CASLEADER_MYSQL_DSN / CASLEADER_POSTGRES_DSN), else a container started through
// github.com/ory/dockertest/v3, else for SQLite a file in t.TempDir(). It skips t with
// a message naming what to set, or fails it under CASLEADER_REQUIRE_DB=1.
//
// # Containers
//
// Without the DSN variable, NewDB asks the Docker engine of DOCKER_HOST (or the
// default socket) for one container per dialect and image, named
// "casleadertest-<dialect>-<hash of the image and settings>" and labelled
// "casleadertest". The first test binary of a run creates it; every other test and
// test binary, also those running at the same time, finds it by name and reuses it
// (the engine refuses a second container of the same name, so concurrent binaries
// cannot start two). Each test gets its own table, so tests share the server.
//
// The image must exist locally: NewDB never pulls (a pull can hang where no registry
// is reachable). A missing image skips t with the command that gets it (docker pull,
// or bash .ci/docker up in casleader's repository). The image is the official one's
// interface: docker-entrypoint.sh, MYSQL_ALLOW_EMPTY_PASSWORD / MYSQL_DATABASE,
// POSTGRES_HOST_AUTH_METHOD / POSTGRES_DB. PostgreSQL runs with max_connections=300
// and MySQL with max_connections=500, room for several test binaries that race
// twenty candidates each. Ports are published on 127.0.0.1 only, on ports the engine
// picks, never on 3306 or 5432.
//
// Cleanup: NewDB leaves no goroutine behind (no timer of dockertest's
// Resource.Expire). Instead the container stops itself once no client has been
// connected for [EnvIdle] (default 10 minutes), and the engine then removes it. Set
// [EnvKeep]=1 to keep it, or remove the containers at once with
// docker rm -f $(docker ps -aq --filter label=casleadertest).
func NewDB(t testing.TB, d Dialect) *DB {
	t.Helper()
	return newDB(t, d, false)
}

// NewRestartableDB is [NewDB] on a database server of t's own, which [DB.Restart]
// and the [RestartDatabase] fault of a [Cluster] stop and start again under the
// running candidates: a container started through dockertest for t alone, from
// the image NewDB uses, removed at t's cleanup (kept with [EnvKeep]=1). NewDB's
// container is shared by every test of the run, also of other test binaries,
// and a restart of it would break them: a restart needs a server of its own. It
// costs a container start (seconds) per call.
//
// The kit restarts only a server it started. Where the dialect's DSN variable
// (CASLEADER_MYSQL_DSN, CASLEADER_POSTGRES_DSN) is set, NewRestartableDB skips t,
// also under CASLEADER_REQUIRE_DB=1, with a message that says so: unset the
// variable, with a Docker engine and the image at hand, to run t on a container.
// Without a Docker engine or the image it skips t as NewDB does (or fails it under
// CASLEADER_REQUIRE_DB=1). SQLite has no server to restart (its database is a
// file, opened by each connection): NewRestartableDB fails t for SQLite.
func NewRestartableDB(t testing.TB, d Dialect) *DB {
	t.Helper()
	return newDB(t, d, true)
}

// newDB is NewDB, on a server of t's own when own is set.
func newDB(t testing.TB, d Dialect, own bool) *DB {
	t.Helper()
	db := &DB{Dialect: d, Table: testname.Name(t)}
	var err error
	switch d {
	case MySQL, Postgres:
		if own {
			db.server = ownServer(t, d)
			db.DSN, db.from = db.server.dsn, "container "+db.server.name+", of this test alone"
		} else {
			db.DSN, db.from = dsn(t, d)
		}
		db.SQL, err = open(d, db.DSN)
		if err != nil {
			t.Fatalf("casleadertest: %v", secret.RedactError(err, db.DSN))
		}
	case SQLite:
		if own {
			t.Fatalf("casleadertest: NewRestartableDB: SQLite has no server to restart (its database is a file that each connection opens): restart a MySQL or PostgreSQL server (casleadertest.MySQL, casleadertest.Postgres)")
		}
		db.from = "a SQLite file, which has no server"
		db.DSN = filepath.Join(t.TempDir(), "casleader.db")
		db.SQL, err = openHeld(SQLite, db.DSN)
		if err != nil {
			t.Fatalf("casleadertest: open SQLite: %v", err)
		}
	default:
		t.Fatalf("casleadertest: unknown dialect %q (use casleadertest.MySQL, Postgres or SQLite)", d)
	}
	db.SQL.SetMaxOpenConns(poolSize)
	t.Cleanup(func() { db.SQL.Close() })

	s, err := newStore(d, db.SQL, db.Table)
	if err != nil {
		t.Fatalf("casleadertest: %s store on table %s: %v", d, db.Table, err)
	}
	db.Store = s
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatalf("casleadertest: create table %s on %s: %v", db.Table, d, secret.RedactError(err, db.DSN))
	}
	t.Cleanup(func() { db.drop(t) })
	return db
}

// tableStore is what NewDB needs of the dialects' stores.
type tableStore = store.Driver

func newStore(d Dialect, db *sql.DB, table string) (tableStore, error) {
	switch d {
	case MySQL:
		return mysql.New(db, table)
	case Postgres:
		return postgres.NewDB(db, table)
	default:
		return sqlite.New(db, table)
	}
}

// drop drops the election table and its members table.
func (db *DB) drop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := ident.MembersTable(db.Table)
	if err != nil {
		t.Errorf("casleadertest: %v", err)
		return
	}
	for _, table := range []string{db.Table, members} {
		q, err := ident.Quote(schema.Dialect(db.Dialect), table)
		if err != nil {
			t.Errorf("casleadertest: %v", err)
			continue
		}
		if _, err := db.SQL.ExecContext(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
			t.Errorf("casleadertest: drop table %s: %v", q, err)
		}
	}
}

// open opens a pool on a server of dialect d (through the connector that lets a
// pause hold an action's statement) and checks that it answers.
func open(d Dialect, dsn string) (*sql.DB, error) {
	db, err := openHeld(d, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("the %s server does not answer: %w", d, err)
	}
	return db, nil
}

// Restart restarts the database server under whoever uses it: it stops the server
// with its fast shutdown, which drops every connection (a statement in flight
// gets MySQL's 1053 "server shutdown in progress" or PostgreSQL's 57P01
// "terminating connection due to administrator command"; then connections are
// lost, which MySQL's C clients report as 2013 or 2006 and go-sql-driver as
// "invalid connection" or EOF, and new ones are refused or closed, or get
// PostgreSQL's 57P03 while it starts), keeps it down for down from the moment it
// no longer answers,
// starts it again on the same data and port, and returns once it answers. The
// data committed before the restart is kept. [DB.SQL] stays usable: its broken
// connections are replaced as they are found.
//
// Only a database of [NewRestartableDB] has a server the kit may restart; for any
// other, Restart returns an error matching [ErrNotRestartable] that says where
// the database came from.
func (db *DB) Restart(ctx context.Context, down time.Duration) error {
	if db.server == nil {
		return fmt.Errorf("%w: this database is %s", ErrNotRestartable, db.from)
	}
	if down < 0 {
		return fmt.Errorf("casleadertest: Restart: down (%v) must not be negative", down)
	}
	return db.server.restart(ctx, down)
}

// ownServer starts a container for t alone and removes it at t's cleanup.
func ownServer(t testing.TB, d Dialect) *server {
	t.Helper()
	env := envOfDSN(d)
	if os.Getenv(env) != "" {
		t.Skipf("casleadertest: NewRestartableDB: %s is set, and the kit restarts only a server it started itself, never one given by DSN: unset %s (with a Docker engine and the image %s at hand) to run this test on a container of its own", env, env, engineFor(d).image)
	}
	if os.Getenv(EnvDocker) == "0" {
		unavailable(t, fmt.Sprintf("NewRestartableDB needs a container of its own, and %s=0 turns the Docker path off", EnvDocker))
	}
	dsn, name, err := startContainer(d, true)
	if err != nil {
		unavailable(t, fmt.Sprintf("NewRestartableDB needs a %s container of its own: %v", d, err))
	}
	t.Cleanup(func() {
		if os.Getenv(EnvKeep) == "1" {
			return
		}
		if err := removeContainer(name); err != nil {
			t.Errorf("casleadertest: %v", err)
		}
	})
	return &server{d: d, name: name, dsn: dsn, host: dockerHost{}}
}

func envOfDSN(d Dialect) string {
	if d == Postgres {
		return EnvPostgres
	}
	return EnvMySQL
}

// dsn returns the DSN of a server of dialect d: the variable's, else a container's,
// and where it came from.
func dsn(t testing.TB, d Dialect) (dsn, from string) {
	t.Helper()
	env := envOfDSN(d)
	if v := os.Getenv(env); v != "" {
		return v, "the server of " + env
	}
	if os.Getenv(EnvDocker) == "0" {
		unavailable(t, fmt.Sprintf("%s is not set and %s=0 turns the Docker path off: set %s to the DSN of a test server", env, EnvDocker, env))
	}
	v, err := containerDSN(d)
	if err != nil {
		unavailable(t, fmt.Sprintf("%s is not set, and no %s container: %v; set %s to the DSN of a test server instead", env, d, err, env))
	}
	return v, "the container that the run's tests share"
}

// unavailable skips t with msg, or fails it under CASLEADER_REQUIRE_DB=1.
func unavailable(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("casleadertest: %s (%s=1 forbids skipping)", msg, EnvRequire)
	}
	t.Skip("casleadertest: " + msg)
}
