package casleader

import (
	"context"
	"sync/atomic"
)

// Leadership is the small interface that code gated on leadership needs. [Elector]
// and [Static] implement it; depend on it rather than on *Elector so that
// single-instance deployments and tests can use a [Static].
type Leadership interface {
	// IsLeader reports whether this instance leads now.
	IsLeader() bool
	// Token returns the fencing token of the current term, 0 when not leading.
	Token() int64
	// Leader returns the leader's ID as last observed, "" when unknown.
	Leader() string
}

// Static is a [Leadership] that never changes unless told to: always leader
// (single-instance deployments, manual allocation) or never leader (a standby that
// must not act, tests). It touches no database.
type Static struct {
	id     string
	leader atomic.Bool
	token  int64
}

// NewStatic returns a Static with the given ID that leads when leader is true. Its
// fencing token is 1.
func NewStatic(id string, leader bool) *Static {
	s := &Static{id: id, token: 1}
	s.leader.Store(leader)
	return s
}

// IsLeader reports the static role.
func (s *Static) IsLeader() bool { return s.leader.Load() }

// Token returns 1 while leading, else 0.
func (s *Static) Token() int64 {
	if s.IsLeader() {
		return s.token
	}
	return 0
}

// Leader returns the static ID while leading, else "".
func (s *Static) Leader() string {
	if s.IsLeader() {
		return s.id
	}
	return ""
}

// Set changes the static role, for tests and manual failover.
func (s *Static) Set(leader bool) { s.leader.Store(leader) }

// Run calls onStartedLeading (if not nil and leading) with ctx and the token, and
// blocks until ctx ends, like [Elector.Run].
func (s *Static) Run(ctx context.Context, onStartedLeading func(context.Context, int64)) error {
	if s.IsLeader() && onStartedLeading != nil {
		onStartedLeading(ctx, s.token)
	}
	<-ctx.Done()
	return nil
}

var (
	_ Leadership = (*Elector)(nil)
	_ Leadership = (*Static)(nil)
)
