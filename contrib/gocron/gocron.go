package casgocron

import (
	"context"
	"fmt"

	"github.com/go-co-op/gocron/v2"

	"github.com/casleader/casleader"
)

// Leader is what [New] needs of an election: [*casleader.Elector] and a group's
// [*casleader.Lease] have these methods, and a single-instance deployment or a test
// can pass a type of its own that always (or never) leads.
//
// [*casleader.Lease]: https://pkg.go.dev/github.com/casleader/casleader#Lease
type Leader interface {
	// IsLeader reports whether this instance leads now, without I/O.
	IsLeader() bool
	// Leader returns the leader's ID as last observed, "" when unknown.
	Leader() string
}

// Elector is a gocron.Elector backed by a [Leader]. It is safe for concurrent use.
type Elector struct {
	l Leader
}

var _ gocron.Elector = (*Elector)(nil)

// New returns a gocron.Elector that lets jobs run while l leads. Pass it to
// gocron.WithDistributedElector; l's election must be running (Elector.Run) for
// jobs to run.
func New(l Leader) *Elector { return &Elector{l: l} }

// IsLeader returns nil while the wrapped Leader leads, so that gocron runs the
// job; else an error that wraps [casleader.ErrNotLeader] and names the leader as
// last observed, so that gocron skips the run. It returns ctx's error when ctx has
// ended (the job was removed or the scheduler is shutting down). It does no I/O.
func (e *Elector) IsLeader(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.l.IsLeader() {
		return nil
	}
	if leader := e.l.Leader(); leader != "" {
		return fmt.Errorf("%w: %q leads", casleader.ErrNotLeader, leader)
	}
	return fmt.Errorf("%w: no leader known", casleader.ErrNotLeader)
}
