package casgocron

import (
	"context"
	"fmt"

	"github.com/go-co-op/gocron/v2"

	"github.com/casleader/casleader"
)

// Elector is a gocron.Elector backed by a casleader.Leadership. It is safe for
// concurrent use.
type Elector struct {
	l casleader.Leadership
}

var _ gocron.Elector = (*Elector)(nil)

// New returns a gocron.Elector that lets jobs run while l leads. Pass it to
// gocron.WithDistributedElector; l's election must be running (Elector.Run) for
// jobs to run.
func New(l casleader.Leadership) *Elector { return &Elector{l: l} }

// IsLeader returns nil while the wrapped Leadership leads, so that gocron runs the
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
