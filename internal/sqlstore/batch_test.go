package sqlstore

import (
	"context"
	"testing"
	"time"

	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// TestCountSettles checks when the count of rows a batched renewal or release
// changed tells every key's outcome without a read-back.
func TestCountSettles(t *testing.T) {
	for _, c := range []struct {
		changed      int64
		n            int
		all, settled bool
	}{
		{changed: 3, n: 3, all: true, settled: true},
		{changed: 0, n: 3, all: false, settled: true},
		{changed: 1, n: 3, all: false, settled: false},
		{changed: 2, n: 3, all: false, settled: false},
		{changed: 1, n: 1, all: true, settled: true},
		{changed: 4, n: 3, all: false, settled: false}, // cannot happen; never trusted
		{changed: -1, n: 3, all: false, settled: false},
	} {
		all, settled := countSettles(c.changed, c.n)
		if all != c.all || settled != c.settled {
			t.Errorf("countSettles(%d, %d) = (%v, %v), want (%v, %v)", c.changed, c.n, all, settled, c.all, c.settled)
		}
	}
}

// staleRowBackend is a MySQL server whose batched write changes no row, and whose
// read-back shows every key as this candidate's own fresh term: the row a write of
// an earlier call left, read so fast that its age fits in the new call's elapsed
// time (a reply held up on a loaded machine).
type staleRowBackend struct{ reads int }

func (b *staleRowBackend) Exec(context.Context, string, ...any) (int64, error) { return 0, nil }
func (b *staleRowBackend) QueryRow(context.Context, string, ...any) Scanner    { return nil }
func (b *staleRowBackend) Query(_ context.Context, _ string, args ...any) (Rows, error) {
	b.reads++
	var keys []string
	for _, a := range args {
		if k, ok := a.(string); ok {
			keys = append(keys, k)
		}
	}
	return &ownRows{keys: keys, i: -1}, nil
}

// ownRows reads back keys as led by "me" in term 7 at version 7, fresh, age 0.
type ownRows struct {
	keys []string
	i    int
}

func (r *ownRows) Next() bool { r.i++; return r.i < len(r.keys) }
func (r *ownRows) Scan(dest ...any) error {
	*dest[0].(*string) = r.keys[r.i]
	*dest[1].(*int64) = 7
	*dest[2].(*string) = "me"
	*dest[3].(*int64) = 7
	*dest[4].(*bool) = true
	*dest[5].(*int64) = 0
	return nil
}
func (r *ownRows) Err() error { return nil }
func (r *ownRows) Close()     {}

// TestBatchedWriteThatChangedNoRowWonNoKey: a batched MySQL insert or election that
// changed no row won no key, even where the read-back shows rows that look won
// (TestGaleraConformance/Batch/InsertManyCreatesOnlyMissingRows saw a second insert
// of a row reported as inserted again under load); no read is sent.
func TestBatchedWriteThatChangedNoRowWonNoKey(t *testing.T) {
	b := &staleRowBackend{}
	c, err := New(schema.MySQL, "t", b, func(err error) error { return err })
	if err != nil {
		t.Fatal(err)
	}
	c.checked.Store(true)
	ins, err := c.InsertMany(t.Context(), store.Candidate{ID: "me"}, []string{"a", "b"})
	if err != nil || len(ins) != 0 {
		t.Errorf("InsertMany = %v, %v; want nothing inserted", ins, err)
	}
	won, err := c.ElectMany(t.Context(), store.Candidate{ID: "me", Lease: time.Second}, []store.KeyVersion{{Key: "a", Version: 3}})
	if err != nil || len(won) != 0 {
		t.Errorf("ElectMany = %v, %v; want nothing won", won, err)
	}
	if b.reads != 0 {
		t.Errorf("%d read-backs after writes that changed no row", b.reads)
	}
}
