// Package store owns all DML of the election table, one implementation per SQL
// dialect, and the classification of driver errors.
//
// Every write is a compare-and-set on the row's version: it names the version it read
// and bumps it by one. A lost compare-and-set is an outcome (swapped == false), never an
// error. Errors that do reach callers are classified with the sentinels below, so that
// callers never import a driver:
//
//   - [ErrNotWritable]: the server refuses writes (read-only after a failover).
//   - [ErrTransient]: a timeout, a reset, a deadlock or serialization failure. The
//     write may or may not have committed: callers settle it with one read.
//   - [ErrDeployment]: a missing table, column or privilege. Retrying cannot help;
//     an operator must act. The message says what to do.
//   - [ErrInvalidRow]: the row holds values casleader cannot have written (NULL
//     columns, a tick_time in the future of the database clock).
//
// Times are judged only by the database: a read returns the age of the last renewal
// computed by the database clock in the same statement, and an election requires the
// lease to have expired by the database clock at execution. No client clock is ever
// compared with a stored time.
package store

import (
	"errors"
	"time"
)

// Record is one observation of an election row.
type Record struct {
	// Key is the election key.
	Key string
	// Version is bumped by every successful write.
	Version int64
	// LeaderID is the candidate holding the lease, or "" when the lease is released.
	LeaderID string
	// Term is the version at which the current (or last) leader won: its fencing token.
	Term int64
	// Age is how long ago, by the database clock at the read, the row's tick_time was
	// written. It is never negative.
	Age time.Duration
	// Ahead is how far the row's tick_time lies in the future of the database clock
	// at the read (Age is then zero), or zero. A tick_time is written with the clock
	// of the server that executed the write: a positive Ahead means that server's
	// clock runs ahead of the one that read it (a multi-primary cluster such as
	// Galera, or a promoted standby) by at least Ahead, or that the clock stepped
	// back. Beyond [FutureTolerance] the row is reported as invalid instead.
	Ahead time.Duration
	// HandoverTo names the candidate the leader has been asked to hand over to.
	HandoverTo string
	// StepDown reports that the leader has been asked to step down (resign, or hand
	// over to HandoverTo when that is set).
	StepDown bool
}

// Released reports whether nobody holds the lease.
func (r Record) Released() bool { return r.LeaderID == "" }

// Expired reports whether the lease is free for the taking with the given lease
// duration: released, or not renewed for at least lease by the database clock.
func (r Record) Expired(lease time.Duration) bool {
	return r.Released() || r.Age >= lease
}

// Remaining returns how long the lease has left by the database clock at the read,
// or zero when it has expired.
func (r Record) Remaining(lease time.Duration) time.Duration {
	if r.Expired(lease) {
		return 0
	}
	return lease - r.Age
}

// Error kinds. Test them with errors.Is.
var (
	ErrNotWritable = errors.New("store: database is not writable")
	ErrTransient   = errors.New("store: transient database error")
	ErrDeployment  = errors.New("store: deployment error")
	ErrInvalidRow  = errors.New("store: invalid election row")
)

// FutureTolerance is how far in the future of the database clock a tick_time may lie
// before the row is reported as invalid. Negative ages happen when a row was written
// by another server whose clock runs ahead (a Galera node, a standby promoted since),
// or, by a moment, on a server whose clock has coarse steps: up to this bound they
// are read as age zero and reported in [Record.Ahead], the evidence of clock skew
// that the election measures; beyond it the row cannot be a lease of any sane
// cluster and is reported as [ErrInvalidRow].
const FutureTolerance = time.Minute
