// Package mysql is the election store for MySQL 8.0+ and MariaDB 10.6+ (Galera
// included), through database/sql and github.com/go-sql-driver/mysql. It is the
// only casleader package that imports that driver.
package mysql

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/casleader/casleader/internal/dsn"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Store is the store for MySQL 8.0+ and MariaDB 10.6+, through database/sql and
// github.com/go-sql-driver/mysql.
//
// tick_time is a TIMESTAMP(6) written with NOW(6) and ages are computed with
// TIMESTAMPDIFF in the same statement. Set the session time zone to UTC (DSN parameter
// time_zone='+00:00', as [Open] does) to keep ages exact across daylight-saving
// changes. Open the pool with interpolateParams=true (as [Open] does): otherwise
// the driver spends three round trips on each parameterised statement.
type Store struct{ core sqlstore.Core }

// New returns a store on db for the election table (empty means
// [schema.DefaultTable]).
//
// Its wake-ups go through named locks (GET_LOCK): the leader holds one per term
// and followers wait for it, each on a connection of its own. They take their
// connections from db, and wait on at most half of its connections (the other
// followed keys are woken by their reads), or from the pool given with [WakePool].
func New(db *sql.DB, table string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", store.ErrInvalidArgument)
	}
	c, err := sqlstore.New(schema.MySQL, table, sqlstore.SQLBackend(db), classify)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	locks := cmp.Or(o.wakePool, db)
	// The named-lock waiters take connections of the pool: leave half of them to
	// the elections (a pool of [Open] has sqlstore.DefaultPoolSize).
	waiters := max(locks.Stats().MaxOpenConnections/2-1, 1)
	if locks.Stats().MaxOpenConnections == 0 {
		waiters = sqlstore.DefaultPoolSize
	}
	n, err := notify.NewMySQL(notify.MySQLConfig{DB: locks, Table: c.Table(), Hub: c.Hub(), MaxWaiters: waiters})
	if err != nil {
		return nil, err
	}
	c.Listen(n)
	return &Store{c}, nil
}

// Option configures a [Store] in [New].
type Option func(*options)

type options struct{ wakePool *sql.DB }

// WakePool makes the store's named-lock wake-ups take their connections from db,
// a pool of their own, instead of the store's pool: one connection for the locks
// of the keys this process leads, and one per key it follows, on at most half of
// db's connections. Size it for the keys followed (2×keys+2 wakes them all). It
// replaces the second store whose Wakeups were set as Config.Notifier in earlier
// versions.
func WakePool(db *sql.DB) Option { return func(o *options) { o.wakePool = db } }

// Open opens a small pool for elections from a DSN in any form that the
// casleader command takes ("mysql://user:pass@host:3306/db", also mariadb://,
// percent-encoded) or go-sql-driver's own ("user:pass@tcp(host:3306)/db"), with
// interpolateParams=true, a UTC session time zone and short dial, read and write
// timeouts unless the DSN sets them. Its errors never quote the DSN.
func Open(s string) (*sql.DB, error) {
	t, err := dsn.ForDialect(schema.MySQL, s)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %w", store.ErrInvalidArgument, err)
	}
	cfg, err := mysql.ParseDSN(t.Driver)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w: %w: MySQL DSN: %s: %s", store.ErrInvalidArgument, dsn.ErrBad, dsn.Problem(err), dsn.EncodeHint)
	}
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = sqlstore.DefaultDialTimeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: open MySQL: %w", secret.RedactError(err, s, t.Driver))
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(sqlstore.DefaultPoolSize)
	db.SetMaxIdleConns(sqlstore.DefaultPoolSize)
	return db, nil
}

// MySQL server error numbers that casleader tells apart.
const (
	myDBAccessDenied       = 1044
	myAccessDenied         = 1045
	myBadDB                = 1049
	myBadField             = 1054
	myTableAccessDenied    = 1142
	myColumnAccessDenied   = 1143
	myNoSuchTable          = 1146
	myLockWaitTimeout      = 1205
	myDeadlock             = 1213
	myOptionPrevents       = 1290 // --read-only, --super-read-only
	myReadOnlyTransaction  = 1792
	myReadOnlyMode         = 1836
	myWsrepNotReady        = 1047 // Galera: node not ready
	myGaleraCertification  = 1180
	myServerShutdown       = 1053
	myTooManyConnections   = 1040
	myQueryInterrupted     = 1317
	myMaxStatementExceeded = 3024
	myOutOfRange           = 1264 // a value does not fit its column (an INT version)
	myDataTooLong          = 1406
	myValueOutOfRange      = 1690 // an expression overflowed its type
)

// classify marks go-sql-driver's and the server's errors with the kinds of
// package store.
func classify(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case myNoSuchTable:
			return fmt.Errorf("%w: %w", sqlstore.ErrMissingTable, err)
		case myBadField, myOutOfRange, myDataTooLong, myValueOutOfRange:
			return fmt.Errorf("%w: %w", sqlstore.ErrWrongColumns, err)
		case myTableAccessDenied, myColumnAccessDenied, myDBAccessDenied:
			return fmt.Errorf("%w: %w", sqlstore.ErrNoPrivilege, err)
		case myBadDB:
			return fmt.Errorf("%w: %w", sqlstore.ErrNoSchema, err)
		case myAccessDenied:
			return fmt.Errorf("%w: %w", store.ErrDeployment, err)
		case myOptionPrevents, myReadOnlyTransaction, myReadOnlyMode:
			return fmt.Errorf("%w: %w", store.ErrNotWritable, err)
		case myDeadlock, myLockWaitTimeout, myWsrepNotReady, myGaleraCertification,
			myServerShutdown, myTooManyConnections, myQueryInterrupted, myMaxStatementExceeded:
			return fmt.Errorf("%w: %w", store.ErrTransient, err)
		}
	}
	if errors.Is(err, mysql.ErrInvalidConn) {
		// The connection broke after the statement was sent: the write may or may
		// not have committed (go-sql-driver reports no network error here).
		return fmt.Errorf("%w: %w", store.ErrTransient, err)
	}
	return sqlstore.ClassifyCommon(err)
}
