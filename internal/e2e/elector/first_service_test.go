package casleader_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store/postgres"
)

// TestFirstServiceStartsThreeReplicasAtOnce: a newcomer's first service, as the
// README's "A service" writes it with every error checked (Open, New, CreateTable at
// every start, casleader.New, Run), started as three replicas at the same moment
// on a PostgreSQL database where the table does not exist yet: every step of every
// replica succeeds, one replica leads, and each stops cleanly.
func TestFirstServiceStartsThreeReplicasAtOnce(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	table := testdb.Name(t)
	t.Cleanup(func() {
		pool := pgdb.Postgres(t)
		_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`", "`+table+`_members"`)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := make(chan struct{})
	electors := make([]*casleader.Elector, 3)
	errs := make([]error, 3)
	var ready, done sync.WaitGroup
	for i := range electors {
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			errs[i] = replica(ctx, dsn, table, &electors[i])
		})
	}
	ready.Wait()
	close(start)
	// Every replica gets through its set-up to Run (a set-up error ends its
	// goroutine: the wait then fails on the count), and one leads.
	ok := assert.Eventually(t, func() bool {
		els := loaded(electors)
		n := 0
		for _, el := range els {
			if el.IsLeader() {
				n++
			}
		}
		return len(els) == len(electors) && n == 1
	}, time.Minute, 10*time.Millisecond, "every replica runs, and one leads")
	cancel()
	done.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "replica %d", i)
	}
	require.True(t, ok)
}

var replicasMu sync.Mutex

func loaded(els []*casleader.Elector) []*casleader.Elector {
	replicasMu.Lock()
	defer replicasMu.Unlock()
	var out []*casleader.Elector
	for _, el := range els {
		if el != nil {
			out = append(out, el)
		}
	}
	return out
}

// replica is the README's first service: every error is returned.
func replica(ctx context.Context, dsn, table string, out **casleader.Elector) error {
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := postgres.New(db, table)
	if err != nil {
		return err
	}
	if err := st.CreateTable(ctx); err != nil {
		return err
	}
	el, err := casleader.New(st, casleader.Config{
		Key:              "billing-cron",
		OnStartedLeading: func(ctx context.Context, token int64) { <-ctx.Done() },
	})
	if err != nil {
		return err
	}
	replicasMu.Lock()
	*out = el
	replicasMu.Unlock()
	return el.Run(ctx)
}
