package store_test

import (
	"errors"
	"strings"
	"testing"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

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

// TestMissingTableWhileAnotherConnectionChangesTheSchema: a statement whose prepare
// another connection's CREATE or DROP interrupts fails with SQLITE_SCHEMA, carrying
// what its last prepare found. When that is a missing table, the store says the table
// is missing, as it does without the race, not that the error is transient.
func TestMissingTableWhileAnotherConnectionChangesTheSchema(t *testing.T) {
	t.Parallel()
	db := litedb.SQLite(t)
	st, err := sqlite.New(db, "absent")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stop := make(chan struct{})
	changed := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				changed <- nil
				return
			default:
			}
			// CREATE and DROP in turn: the schema changes each time and stays small.
			if _, err := db.ExecContext(ctx, [2]string{"CREATE TABLE IF NOT EXISTS other (x)", "DROP TABLE IF EXISTS other"}[i%2]); err != nil && !strings.Contains(err.Error(), "SQLITE_BUSY") {
				changed <- err
				return
			}
		}
	}()
	raced := 0
	for i := 0; i < 20000 && raced < 3; i++ {
		_, _, err := st.Observe(ctx, "k")
		var se *sqlitedriver.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_SCHEMA && strings.Contains(se.Error(), "no such table") {
			raced++
		} else if errors.Is(err, store.ErrTransient) {
			continue // a lock held by the other connection, or a schema change the prepare outlived
		}
		if !errors.Is(err, store.ErrDeployment) {
			t.Fatalf("Observe on a missing table, attempt %d: %v, want a deployment error", i, err)
		}
	}
	close(stop)
	if err := <-changed; err != nil {
		t.Fatal(err)
	}
	if raced == 0 {
		t.Fatal("no read raced a schema change: the test did not test the race")
	}
}
