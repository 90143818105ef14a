//go:build !unix

package main

import (
	"errors"
	"log/slog"
	"os"
	"time"
)

const superviseCommand = "supervise-child"

var forwardedSignals = []os.Signal{os.Interrupt}

var errUnsupported = errors.New("casleader run needs process groups: it is supported on Unix only")

type child struct{ done chan struct{} }

func startChild(self string, argv, env []string, killAt int64) (*child, error) {
	return nil, errUnsupported
}
func (c *child) pid() int                                        { return 0 }
func (c *child) exitCode() int                                   { return exitFailure }
func (c *child) signal(sig os.Signal)                            {}
func (c *child) forward(sig os.Signal)                           {}
func (c *child) exited() bool                                    { return true }
func (c *child) killedBy() string                                { return "" }
func (c *child) alive() bool                                     { return false }
func (c *child) terminate(grace time.Duration, log *slog.Logger) {}
func (c *child) release()                                        {}
func (c *child) keepAlive(killAt int64)                          {}
func monoNow() int64                                             { return 0 }
func groupAlive(pgid int) bool                                   { return false }
func cmdSupervise(a *app, args []string) error                   { return errUnsupported }
