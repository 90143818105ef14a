package casleadertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/casleader/casleader/internal/retry"
)

// ErrNotRestartable is what [DB.Restart] returns for a database whose server the
// kit did not start for the test alone.
var ErrNotRestartable = errors.New("casleadertest: the kit restarts only a database server it started for the test alone (NewRestartableDB)")

// The watchdog's signals (see watchdog), by their Linux numbers: the server runs
// in a Linux container, whatever the system of the client that sends them.
const (
	sigStopServer  dc.Signal = 10 // SIGUSR1: stop the server, keep the container
	sigStartServer dc.Signal = 12 // SIGUSR2: start the server again
)

// stopTimeout bounds the wait for a server to stop answering once it was told to
// stop.
const stopTimeout = time.Minute

// server is a database server in a container the kit started for one test alone.
type server struct {
	d    Dialect
	name string // the container's
	dsn  string
	host host
	mu   sync.Mutex // one restart at a time
}

// host runs the containers of servers: the Docker engine ([dockerHost]).
type host interface {
	// signal sends sig to the main process of container name: the watchdog.
	signal(ctx context.Context, name string, sig dc.Signal) error
	// gone reports whether container name is known not to run.
	gone(name string) bool
}

// dockerHost is the Docker engine of DOCKER_HOST (or the default socket).
type dockerHost struct{}

func (dockerHost) signal(ctx context.Context, name string, sig dc.Signal) error {
	pool, err := newPool()
	if err != nil {
		return err
	}
	defer pool.Client.HTTPClient.CloseIdleConnections()
	return pool.Client.KillContainer(dc.KillContainerOptions{ID: name, Signal: sig, Context: ctx})
}

func (dockerHost) gone(name string) bool {
	pool, err := newPool()
	if err != nil {
		return false // not known
	}
	defer pool.Client.HTTPClient.CloseIdleConnections()
	return containerGone(pool, name)
}

// restart stops the server, keeps it down for down from the moment it no longer
// answers, starts it again and waits until it answers. The server is started again
// whatever happened before, also when ctx ends: a server left down would fail
// everything after.
func (s *server) restart(ctx context.Context, down time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.host.signal(ctx, s.name, sigStopServer); err != nil {
		return fmt.Errorf("stop the server of container %s: %w", s.name, err)
	}
	stopped := s.awaitDown(ctx)
	if stopped == nil {
		stopped = retry.Sleep(ctx, down)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.host.signal(sctx, s.name, sigStartServer); err != nil {
		return fmt.Errorf("start the server of container %s again: %w (see `docker logs %s`)", s.name, err, s.name)
	}
	// Often: the moment it answers is when the fault heals, from which a leader
	// must be back within the liveness bound.
	if err := awaitServer(s.d, s.name, s.dsn, 50*time.Millisecond, func() bool { return s.host.gone(s.name) }); err != nil {
		return fmt.Errorf("after a restart: %w", err)
	}
	return stopped
}

// awaitDown waits until the server no longer answers.
func (s *server) awaitDown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	for attempt := 1; ping(ctx, s.d, s.dsn) == nil; attempt++ {
		if err := retry.Sleep(ctx, retry.Backoff(attempt, 10*time.Millisecond, 200*time.Millisecond)); err != nil {
			return fmt.Errorf("the server in container %s still answers after it was told to stop (see `docker logs %s`): %w", s.name, s.name, err)
		}
	}
	return nil
}

// removeContainer removes the container name and its volumes, running or not.
func removeContainer(name string) error {
	pool, err := newPool()
	if err != nil {
		return err
	}
	defer pool.Client.HTTPClient.CloseIdleConnections()
	err = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: name, Force: true, RemoveVolumes: true})
	var (
		missing *dc.NoSuchContainer
		apiErr  *dc.Error
	)
	if errors.As(err, &missing) || errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		return nil // gone, or being removed (it removes itself once stopped)
	}
	if err != nil {
		return fmt.Errorf("remove container %s: %w", name, err)
	}
	return nil
}
