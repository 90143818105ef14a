package casleader_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/internal/protocoltest"
	"github.com/casleader/casleader/store"
)

// cfg is the protocol suite's timing for candidate id on key "k".
func cfg(id string) casleader.Config {
	return casleader.Config{
		Key: "k", ID: id,
		LeaseDuration: lease, RenewDeadline: renewDL, HeartbeatInterval: heartbeat, PollInterval: poll,
	}
}

func newElector(t *testing.T, st store.Driver, c casleader.Config) *casleader.Elector {
	t.Helper()
	el, err := casleader.New(st, c)
	require.NoError(t, err)
	return el
}

// runUntil runs run until the returned stop is called, which returns its error.
func runUntil(t *testing.T, run func(context.Context) error) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan error, 1)
	go func() { ch <- run(ctx) }()
	return func() error { cancel(); return <-ch }, ch
}

// running runs el until the returned stop is called, which returns Run's error.
func running(t *testing.T, el *casleader.Elector) (stop func() error) {
	stop, _ = runUntil(t, el.Run)
	return stop
}

// lockedBuffer is a log sink that two electors' goroutines may write at once.
type lockedBuffer = protocoltest.SyncBuffer
