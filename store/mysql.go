package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/casleader/casleader/schema"
)

// MySQL is the store for MySQL 8.0+ and MariaDB 10.6+, through database/sql and
// github.com/go-sql-driver/mysql.
//
// tick_time is a TIMESTAMP(6) written with NOW(6) and ages are computed with
// TIMESTAMPDIFF in the same statement. Set the session time zone to UTC (DSN parameter
// time_zone='+00:00', as [OpenMySQL] does) to keep ages exact across daylight-saving
// changes. Open the pool with interpolateParams=true (as [OpenMySQL] does): otherwise
// the driver spends three round trips on each parameterised statement.
type MySQL struct{ core }

// NewMySQL returns a store on db for the election table (empty means
// [schema.DefaultTable]).
func NewMySQL(db *sql.DB, table string) (*MySQL, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", ErrInvalidArgument)
	}
	c, err := newCore(schema.MySQL, table, sqlBackend{db}, classifyMySQL, mysqlQueries)
	if err != nil {
		return nil, err
	}
	return &MySQL{c}, nil
}

// OpenMySQL opens a small pool for elections from a go-sql-driver DSN
// ("user:pass@tcp(host:3306)/db"), with interpolateParams=true, a UTC session time
// zone and short dial, read and write timeouts unless the DSN sets them.
func OpenMySQL(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse MySQL DSN: %w", RedactError(err, dsn))
	}
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultDialTimeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open MySQL: %w", RedactError(err, dsn))
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(defaultPoolSize)
	db.SetMaxIdleConns(defaultPoolSize)
	return db, nil
}

// mysqlEpochMicros is the database clock in microseconds since the Unix epoch, in
// any session time zone. Like NOW(6), it is evaluated once per statement.
const mysqlEpochMicros = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// mysqlNewTerm is a new term (see [core.Elect]). It reads only the old version, so it
// gives the same value in every assignment of a statement, whatever the order in
// which the server evaluates them (MariaDB's SIMULTANEOUS_ASSIGNMENT mode included).
const mysqlNewTerm = `GREATEST(version + 1, ` + mysqlEpochMicros + `)`

// mysqlAge is the age of tick_time by the database clock, in microseconds.
const mysqlAge = `TIMESTAMPDIFF(MICROSECOND, tick_time, NOW(6))`

func mysqlQueries(t, _ string) queries {
	const now = "NOW(6)"
	return queries{
		observe: `SELECT version, leader_id, term, ` + mysqlAge + `, handover_to, stepdown FROM ` + t + ` WHERE elect_key = ?`,
		insert: `INSERT IGNORE INTO ` + t + ` (elect_key, version, leader_id, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES (?, LAST_INSERT_ID(` + mysqlEpochMicros + `), ?, ` + mysqlEpochMicros + `, ` + now + `, '', 0, ` + now + `, ` + now + `)`,
		elect: `UPDATE ` + t + ` SET term = LAST_INSERT_ID(` + mysqlNewTerm + `), version = ` + mysqlNewTerm +
			`, leader_id = ?, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND (leader_id = '' OR ` + mysqlAge + ` >= ?)`,
		renew: `UPDATE ` + t + ` SET version = ?, tick_time = ` + now + `, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		release: `UPDATE ` + t + ` SET version = ?, leader_id = '', tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		handover: `UPDATE ` + t + ` SET term = LAST_INSERT_ID(` + mysqlNewTerm + `), version = ` + mysqlNewTerm +
			`, leader_id = ?, tick_time = ` + now + `, handover_to = ?, stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		request: `UPDATE ` + t + ` SET version = ?, handover_to = ?, stepdown = 1, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id <> ''`,
		check:              `SELECT ` + strings.Join(schema.Columns, ", ") + ` FROM ` + t + ` WHERE 1 = 0`,
		termByLastInsertID: true,
	}
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

func classifyMySQL(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case myNoSuchTable:
			return fmt.Errorf("%w: %w", errMissingTable, err)
		case myBadField, myOutOfRange, myDataTooLong, myValueOutOfRange:
			return fmt.Errorf("%w: %w", errWrongColumns, err)
		case myTableAccessDenied, myColumnAccessDenied, myDBAccessDenied:
			return fmt.Errorf("%w: %w", errNoPrivilege, err)
		case myAccessDenied, myBadDB:
			return fmt.Errorf("%w: %w", ErrDeployment, err)
		case myOptionPrevents, myReadOnlyTransaction, myReadOnlyMode:
			return fmt.Errorf("%w: %w", ErrNotWritable, err)
		case myDeadlock, myLockWaitTimeout, myWsrepNotReady, myGaleraCertification,
			myServerShutdown, myTooManyConnections, myQueryInterrupted, myMaxStatementExceeded:
			return fmt.Errorf("%w: %w", ErrTransient, err)
		}
	}
	if errors.Is(err, mysql.ErrInvalidConn) {
		// The connection broke after the statement was sent: the write may or may
		// not have committed (go-sql-driver reports no network error here).
		return fmt.Errorf("%w: %w", ErrTransient, err)
	}
	return classifyCommon(err)
}
