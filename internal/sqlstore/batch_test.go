package sqlstore

import "testing"

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
