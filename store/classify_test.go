package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
)

// TestClassify checks that each server or driver error gets the kind DESIGN.md asks
// for: not writable (read-only after a failover: not a lost race), transient
// (retry within the deadline), deployment (fatal, tell the operator), or none.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: fmt.Sprintf("error %d", n)} }
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "error " + code} }
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		name     string
		classify func(error) error
		err      error
		want     error // nil: none of the kinds
		marker   error // the internal marker for deployment errors, if any
	}{
		{"MySQLReadOnly1290", classifyMySQL, my(1290), ErrNotWritable, nil},
		{"MySQLReadOnlyTransaction1792", classifyMySQL, my(1792), ErrNotWritable, nil},
		{"MySQLReadOnlyMode1836", classifyMySQL, my(1836), ErrNotWritable, nil},
		{"MySQLDeadlock1213", classifyMySQL, my(1213), ErrTransient, nil},
		{"MySQLLockWaitTimeout1205", classifyMySQL, my(1205), ErrTransient, nil},
		{"GaleraNotReady1047", classifyMySQL, my(1047), ErrTransient, nil},
		{"GaleraCertification1180", classifyMySQL, my(1180), ErrTransient, nil},
		{"MySQLShutdown1053", classifyMySQL, my(1053), ErrTransient, nil},
		{"MySQLTooManyConnections1040", classifyMySQL, my(1040), ErrTransient, nil},
		{"MySQLInterrupted1317", classifyMySQL, my(1317), ErrTransient, nil},
		{"MySQLStatementTimeout3024", classifyMySQL, my(3024), ErrTransient, nil},
		{"MySQLNoSuchTable1146", classifyMySQL, my(1146), ErrDeployment, errMissingTable},
		{"MySQLBadField1054", classifyMySQL, my(1054), ErrDeployment, errWrongColumns},
		{"MySQLTableAccessDenied1142", classifyMySQL, my(1142), ErrDeployment, errNoPrivilege},
		{"MySQLColumnAccessDenied1143", classifyMySQL, my(1143), ErrDeployment, errNoPrivilege},
		{"MySQLDBAccessDenied1044", classifyMySQL, my(1044), ErrDeployment, errNoPrivilege},
		{"MySQLAccessDenied1045", classifyMySQL, my(1045), ErrDeployment, nil},
		{"MySQLUnknownDatabase1049", classifyMySQL, my(1049), ErrDeployment, nil},
		{"MySQLInvalidConn", classifyMySQL, mysql.ErrInvalidConn, ErrTransient, nil},
		{"MySQLBadConn", classifyMySQL, driver.ErrBadConn, ErrTransient, nil},
		{"MySQLDuplicateKey1062", classifyMySQL, my(1062), nil, nil},

		{"PostgresReadOnly25006", classifyPostgres, pg("25006"), ErrNotWritable, nil},
		{"PostgresSerialization40001", classifyPostgres, pg("40001"), ErrTransient, nil},
		{"PostgresDeadlock40P01", classifyPostgres, pg("40P01"), ErrTransient, nil},
		{"PostgresLockNotAvailable55P03", classifyPostgres, pg("55P03"), ErrTransient, nil},
		{"PostgresConnectionFailure08006", classifyPostgres, pg("08006"), ErrTransient, nil},
		{"PostgresAdminShutdown57P01", classifyPostgres, pg("57P01"), ErrTransient, nil},
		{"PostgresTooManyConnections53300", classifyPostgres, pg("53300"), ErrTransient, nil},
		{"PostgresQueryCanceled57014", classifyPostgres, pg("57014"), ErrTransient, nil},
		{"PostgresUndefinedTable42P01", classifyPostgres, pg("42P01"), ErrDeployment, errMissingTable},
		{"PostgresInvalidSchema3F000", classifyPostgres, pg("3F000"), ErrDeployment, errMissingTable},
		{"PostgresUndefinedColumn42703", classifyPostgres, pg("42703"), ErrDeployment, errWrongColumns},
		{"PostgresInsufficientPrivilege42501", classifyPostgres, pg("42501"), ErrDeployment, errNoPrivilege},
		{"PostgresBadPassword28P01", classifyPostgres, pg("28P01"), ErrDeployment, nil},
		{"PostgresUnknownDatabase3D000", classifyPostgres, pg("3D000"), ErrDeployment, nil},
		{"PostgresUniqueViolation23505", classifyPostgres, pg("23505"), nil, nil},

		{"DeadlineExceeded", classifyCommon, context.DeadlineExceeded, ErrTransient, nil},
		{"Canceled", classifyCommon, context.Canceled, ErrTransient, nil},
		{"UnexpectedEOF", classifyCommon, io.ErrUnexpectedEOF, ErrTransient, nil},
		{"NetOpError", classifyCommon, opErr, ErrTransient, nil},
		{"WrappedNetOpError", classifyPostgres, fmt.Errorf("read: %w", opErr), ErrTransient, nil},
		{"Unknown", classifyCommon, errors.New("something else"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.classify(tc.err)
			assert.ErrorIs(t, got, tc.err, "the driver error stays in the chain")
			for _, kind := range []error{ErrNotWritable, ErrTransient, ErrDeployment} {
				if kind == tc.want {
					assert.ErrorIs(t, got, kind)
				} else {
					assert.NotErrorIs(t, got, kind)
				}
			}
			if tc.marker != nil {
				assert.ErrorIs(t, got, tc.marker)
			}
		})
	}
}

// TestDeploymentErrorsSayWhatToDo checks the operator-facing messages of wrap.
func TestDeploymentErrorsSayWhatToDo(t *testing.T) {
	c := &core{table: "elections", classify: classifyPostgres}
	for _, tc := range []struct {
		code, want string
	}{
		{"42P01", "casleader migrate"},
		{"42703", "does not have casleader's columns"},
		{"42501", "grant SELECT, INSERT, UPDATE"},
	} {
		err := c.wrap("renew", "k", &pgconn.PgError{Code: tc.code})
		assert.ErrorIs(t, err, ErrDeployment, tc.code)
		assert.Contains(t, err.Error(), tc.want, tc.code)
		assert.Contains(t, err.Error(), `"elections"`, tc.code)
	}
}
