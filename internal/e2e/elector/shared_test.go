package casleader_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/store"
)

// renewCounter counts the renewal statements that reach a store and the keys they renew.
type renewCounter struct {
	store.Driver
	statements, keys atomic.Int64
	batched          atomic.Int64 // statements with more than one key
}

func (c *renewCounter) Renew(ctx context.Context, key, id string, v int64) (bool, error) {
	c.statements.Add(1)
	c.keys.Add(1)
	return c.Driver.Renew(ctx, key, id, v)
}

func (c *renewCounter) RenewMany(ctx context.Context, id string, held []store.KeyVersion) ([]store.Won, error) {
	c.statements.Add(1)
	c.keys.Add(int64(len(held)))
	if len(held) > 1 {
		c.batched.Add(1)
	}
	return c.Driver.RenewMany(ctx, id, held)
}

// TestElectorsOnOneStoreShareItsStatements runs 100 single-key electors, each
// leading its own key, on one store: they all lead, and their renewals reach the
// database as batched statements, each key with its own compare-and-set.
func TestElectorsOnOneStoreShareItsStatements(t *testing.T) {
	const n = 100
	for _, d := range dialects() {
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			s := d.Open(t, testdb.Name(t), 0)
			require.NoError(t, s.CreateTable(t.Context()))
			st := &renewCounter{Driver: s}
			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			defer func() {
				cancel()
				wg.Wait()
			}()
			els := make([]*casleader.Elector, n)
			for i := range els {
				el, err := casleader.New(st, casleader.Config{Key: fmt.Sprintf("k%03d", i), ID: "a",
					LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, PollInterval: time.Second})
				require.NoError(t, err)
				els[i] = el
				wg.Go(func() { assert.NoError(t, el.Run(ctx)) })
			}
			all := func() bool {
				for _, el := range els {
					if !el.IsLeader() {
						return false
					}
				}
				return true
			}
			require.Eventually(t, all, 60*time.Second, 20*time.Millisecond, "every elector leads its key")
			s0, k0 := st.statements.Load(), st.keys.Load()
			require.Eventually(t, func() bool { return st.keys.Load()-k0 >= 10*n }, 60*time.Second, 20*time.Millisecond,
				"ten renewals per key")
			statements, keys := st.statements.Load()-s0, st.keys.Load()-k0
			t.Logf("%d renewals in %d statements (%d batched)", keys, statements, st.batched.Load())
			assert.Positive(t, st.batched.Load())
			assert.Less(t, statements, keys/4, "renewals share statements")
			require.Eventually(t, all, 60*time.Second, 20*time.Millisecond, "every elector still leads its key (a lost lease is won again)")
		})
	}
}
