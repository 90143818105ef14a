package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// TestClassify checks that each server error gets the kind DESIGN.md asks for (see
// the MySQL package's TestClassify for the kinds).
func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "error " + code} }
	opErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	for _, tc := range []struct {
		name     string
		classify func(error) error
		err      error
		want     error // nil: none of the kinds
		marker   error // the internal marker for deployment errors, if any
	}{
		{"PostgresReadOnly25006", classify, pg("25006"), store.ErrNotWritable, nil},
		{"PostgresSerialization40001", classify, pg("40001"), store.ErrTransient, nil},
		{"PostgresDeadlock40P01", classify, pg("40P01"), store.ErrTransient, nil},
		{"PostgresLockNotAvailable55P03", classify, pg("55P03"), store.ErrTransient, nil},
		{"PostgresConnectionFailure08006", classify, pg("08006"), store.ErrTransient, nil},
		{"PostgresAdminShutdown57P01", classify, pg("57P01"), store.ErrTransient, nil},
		{"PostgresTooManyConnections53300", classify, pg("53300"), store.ErrTransient, nil},
		{"PostgresQueryCanceled57014", classify, pg("57014"), store.ErrTransient, nil},
		{"PostgresUndefinedTable42P01", classify, pg("42P01"), store.ErrDeployment, sqlstore.ErrMissingTable},
		{"PostgresInvalidSchema3F000", classify, pg("3F000"), store.ErrDeployment, sqlstore.ErrNoSchema},
		{"PostgresUndefinedColumn42703", classify, pg("42703"), store.ErrDeployment, sqlstore.ErrWrongColumns},
		{"PostgresInsufficientPrivilege42501", classify, pg("42501"), store.ErrDeployment, sqlstore.ErrNoPrivilege},
		{"PostgresBadPassword28P01", classify, pg("28P01"), store.ErrDeployment, nil},
		{"PostgresUnknownDatabase3D000", classify, pg("3D000"), store.ErrDeployment, nil},
		{"PostgresUniqueViolation23505", classify, pg("23505"), nil, nil},
		{"WrappedNetOpError", classify, fmt.Errorf("read: %w", opErr), store.ErrTransient, nil},
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

// TestDeploymentErrorsSayWhatToDo checks the operator-facing messages that a
// classified server error gets on its way out of a store.
func TestDeploymentErrorsSayWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		code, want string
	}{
		{"42P01", "casleader migrate"},
		{"42703", "does not have casleader's columns"},
		{"42501", "grant SELECT, INSERT, UPDATE"},
	} {
		c, err := sqlstore.New(schema.Postgres, "elections", failing{&pgconn.PgError{Code: tc.code}}, classify)
		require.NoError(t, err)
		_, _, err = c.Observe(t.Context(), "k")
		assert.ErrorIs(t, err, store.ErrDeployment, tc.code)
		assert.Contains(t, err.Error(), tc.want, tc.code)
		assert.Contains(t, err.Error(), `"elections"`, tc.code)
	}
}

// failing is a backend whose every statement fails with err.
type failing struct{ err error }

func (f failing) Exec(context.Context, string, ...any) (int64, error) { return 0, f.err }
func (f failing) QueryRow(context.Context, string, ...any) sqlstore.Scanner {
	return row(f)
}
func (f failing) Query(context.Context, string, ...any) (sqlstore.Rows, error) { return nil, f.err }

type row struct{ err error }

func (r row) Scan(...any) error { return r.err }
