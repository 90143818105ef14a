package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/store"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
)

// TestClassify checks that each server or driver error gets the kind DESIGN.md asks
// for: not writable (read-only after a failover: not a lost race), transient
// (retry within the deadline), deployment (fatal, tell the operator), or none.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return &mysql.MySQLError{Number: n, Message: fmt.Sprintf("error %d", n)} }
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		name     string
		classify func(error) error
		err      error
		want     error // nil: none of the kinds
		marker   error // the internal marker for deployment errors, if any
	}{
		{"MySQLReadOnly1290", classify, my(1290), store.ErrNotWritable, nil},
		{"MySQLReadOnlyTransaction1792", classify, my(1792), store.ErrNotWritable, nil},
		{"MySQLReadOnlyMode1836", classify, my(1836), store.ErrNotWritable, nil},
		{"MySQLDeadlock1213", classify, my(1213), store.ErrTransient, nil},
		{"MySQLLockWaitTimeout1205", classify, my(1205), store.ErrTransient, nil},
		{"GaleraNotReady1047", classify, my(1047), store.ErrTransient, nil},
		{"GaleraCertification1180", classify, my(1180), store.ErrTransient, nil},
		{"MySQLShutdown1053", classify, my(1053), store.ErrTransient, nil},
		{"MySQLTooManyConnections1040", classify, my(1040), store.ErrTransient, nil},
		{"MySQLInterrupted1317", classify, my(1317), store.ErrTransient, nil},
		{"MySQLStatementTimeout3024", classify, my(3024), store.ErrTransient, nil},
		{"MySQLNoSuchTable1146", classify, my(1146), store.ErrDeployment, sqlstore.ErrMissingTable},
		{"MySQLBadField1054", classify, my(1054), store.ErrDeployment, sqlstore.ErrWrongColumns},
		{"MySQLTableAccessDenied1142", classify, my(1142), store.ErrDeployment, sqlstore.ErrNoPrivilege},
		{"MySQLColumnAccessDenied1143", classify, my(1143), store.ErrDeployment, sqlstore.ErrNoPrivilege},
		{"MySQLDBAccessDenied1044", classify, my(1044), store.ErrDeployment, sqlstore.ErrNoPrivilege},
		{"MySQLAccessDenied1045", classify, my(1045), store.ErrDeployment, nil},
		{"MySQLUnknownDatabase1049", classify, my(1049), store.ErrDeployment, nil},
		{"MySQLInvalidConn", classify, mysql.ErrInvalidConn, store.ErrTransient, nil},
		{"MySQLBadConn", classify, driver.ErrBadConn, store.ErrTransient, nil},
		{"MySQLDuplicateKey1062", classify, my(1062), nil, nil},

		{"DeadlineExceeded", sqlstore.ClassifyCommon, context.DeadlineExceeded, store.ErrTransient, nil},
		{"Canceled", sqlstore.ClassifyCommon, context.Canceled, store.ErrTransient, nil},
		{"UnexpectedEOF", sqlstore.ClassifyCommon, io.ErrUnexpectedEOF, store.ErrTransient, nil},
		{"NetOpError", sqlstore.ClassifyCommon, opErr, store.ErrTransient, nil},
		{"Unknown", sqlstore.ClassifyCommon, errors.New("something else"), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.classify(tc.err)
			assert.ErrorIs(t, got, tc.err, "the driver error stays in the chain")
			for _, kind := range []error{store.ErrNotWritable, store.ErrTransient, store.ErrDeployment} {
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
