package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/casleader/casleader/internal/testdb/litedb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/sqlite"
)

// TestMissingTableErrorSaysItOnce: no empty key printed as "", and "deployment
// error" once, also when the cause is a deployment error itself.
func TestMissingTableErrorSaysItOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *store.MissingTableError
		want string
	}{
		{&store.MissingTableError{Table: "e", Dialect: "postgres", Op: "check", Err: errors.New(`relation "e" does not exist`)}, "(check, postgres)"},
		{&store.MissingTableError{Table: "e", Dialect: "mysql", Op: "observe", Key: "k", Err: errors.New("no table")}, `(observe "k", mysql)`},
	} {
		msg := tc.err.Error()
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, `""`) || strings.Count(msg, "deployment error") != 1 {
			t.Errorf("MissingTableError = %q, want %q in it, no \"\", and \"deployment error\" once", msg, tc.want)
		}
	}
}

// TestMissingTableOnAStoreSaysDeploymentErrorOnce: the store's own error for a
// missing table (through its classification and wrapping) says it once.
func TestMissingTableOnAStoreSaysDeploymentErrorOnce(t *testing.T) {
	t.Parallel()
	st, err := sqlite.New(litedb.SQLite(t), "absent")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{st.Check(t.Context()), func() error { _, _, err := st.Observe(t.Context(), "k"); return err }()} {
		if !errors.Is(err, store.ErrDeployment) || strings.Count(err.Error(), "deployment error") != 1 || strings.Contains(err.Error(), `""`) {
			t.Errorf("%v: want one \"deployment error\" and no \"\"", err)
		}
	}
}
