// Package store holds what every election store shares, and imports no database
// driver: the observed row ([Record]), the kinds of error, key validation, the batch
// types, the guard's [Fence], and [Driver], the contract every store implements. The stores
// themselves live in one package per dialect, each importing only its own driver:
// [github.com/casleader/casleader/store/postgres] (pgx),
// [github.com/casleader/casleader/store/mysql] (go-sql-driver/mysql) and
// [github.com/casleader/casleader/store/sqlite] (modernc.org/sqlite).
//
// Every write is a compare-and-set on the row's version: it names the version it read
// and bumps it by one. A lost compare-and-set is an outcome (swapped == false), never an
// error. Errors that do reach callers are classified with the sentinels below, so that
// callers never import a driver (each dialect package classifies its driver's errors):
//
//   - [ErrNotWritable]: the server refuses writes (read-only after a failover).
//   - [ErrTransient]: a timeout, a reset, a deadlock or serialization failure. The
//     write may or may not have committed: callers settle it with one read.
//   - [ErrDeployment]: a missing table, column or privilege. Retrying cannot help;
//     an operator must act. The message says what to do. A missing table is also a
//     [*MissingTableError], naming the table.
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
	"fmt"
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
	// back. Beyond one minute the row is reported as invalid ([ErrInvalidRow])
	// instead: no lease of a sane cluster lies that far ahead.
	Ahead time.Duration
	// HandoverTo names the candidate the leader has been asked to hand over to.
	HandoverTo string
	// StepDown reports that the leader has been asked to step down (resign, or hand
	// over to HandoverTo when that is set).
	StepDown bool
	// Lease is the lease duration of the candidate that started the term, as the row
	// records it: every reader judges the lease by it, never by its own setting
	// (candidates of one key may run with different timings). 0 when the row records
	// none (written by a version before the lease column): readers then use their own.
	Lease time.Duration
	// Incarnation is the running process that holds the term, as the row records it:
	// the one whose election or creation started it ([Candidate.Incarnation]); ""
	// when the row is released, handed over and not yet claimed, or was written by a
	// version before the incarnation column.
	Incarnation string
	// OneClock reports that Age was computed by the clock of the server that wrote
	// tick_time: a single-primary database (not a Galera cluster). Followers then
	// judge expiry by Age alone; otherwise they allow for skew between servers.
	OneClock bool
}

// Released reports whether nobody holds the lease.
func (r Record) Released() bool { return r.LeaderID == "" }

// LeaseOr returns the lease duration the row records, or own when it records none.
func (r Record) LeaseOr(own time.Duration) time.Duration {
	if r.Lease > 0 {
		return r.Lease
	}
	return own
}

// Handed reports whether the lease was handed over to its leader and not claimed
// yet: the target takes it with an election write, which only it can win
// (see the stores' Elect).
func (r Record) Handed() bool {
	return r.LeaderID != "" && r.HandoverTo == r.LeaderID && !r.StepDown
}

// Expired reports whether the lease is free for the taking: released, or not
// renewed for at least the lease the row records (own when it records none) by the
// database clock.
func (r Record) Expired(own time.Duration) bool {
	return r.Released() || r.Age >= r.LeaseOr(own)
}

// Remaining returns how long the lease has left by the database clock at the read,
// or zero when it has expired. own is used when the row records no lease.
func (r Record) Remaining(own time.Duration) time.Duration {
	if r.Expired(own) {
		return 0
	}
	return r.LeaseOr(own) - r.Age
}

// Candidate is who sends an election write (Insert, Elect, ElectReleased and their
// batched forms), as the row records it.
type Candidate struct {
	// ID is the candidate's ID, written to leader_id.
	ID string
	// Incarnation names the running process: random and fixed for its life, so
	// that two processes started with one ID (by mistake) are told apart. The row
	// records it with every term the process starts, and a process adopts a term
	// it reads only under its own incarnation.
	Incarnation string
	// Lease is the candidate's lease duration, recorded in the row with the term
	// so that every reader judges the lease by it. 0 records none.
	Lease time.Duration
}

// Error kinds. Test them with errors.Is.
var (
	ErrNotWritable = errors.New("store: database is not writable")
	ErrTransient   = errors.New("store: transient database error")
	ErrDeployment  = errors.New("store: deployment error")
	ErrInvalidRow  = errors.New("store: invalid election row")
)

// MissingTableError reports that the election table does not exist (or its schema
// does not). It is an [ErrDeployment]: errors.Is(err, ErrDeployment) holds, and
// errors.As finds it through the store's wrapping. Create the table with
// schema.Apply, the store's CreateTable ([Driver.CreateTable]) or `casleader migrate`.
type MissingTableError struct {
	// Table is the election table's name, as configured.
	Table string
	// Dialect is the store's SQL dialect ("mysql", "postgres" or "sqlite").
	Dialect string
	// Op is the operation that found the table missing ("observe", "elect", ...), and
	// Key the election key it was made for (empty for calls without one).
	Op, Key string
	// Err is the database's own error.
	Err error
}

func (e *MissingTableError) Error() string {
	return fmt.Sprintf("%v: table %q does not exist: create it with `casleader migrate`, schema.Apply or the store's CreateTable (%s): %v",
		ErrDeployment, e.Table, where(e.Op, e.Key, e.Dialect), e.Err)
}

// where describes an operation for a message: op, then the election key quoted
// when there is one, then the dialect when given ("observe \"k\", postgres";
// "check").
func where(op, key, dialect string) string {
	if key != "" {
		op += fmt.Sprintf(" %q", key)
	}
	if dialect != "" {
		op += ", " + dialect
	}
	return op
}

// Unwrap returns the database's error.
func (e *MissingTableError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrDeployment].
func (e *MissingTableError) Is(target error) bool { return target == ErrDeployment }

// MaxBatch is the largest number of keys one batched call accepts. Callers split
// larger sets; one call is one statement (two on MySQL).
const MaxBatch = 2000

// KeyVersion names an election key and the row version a compare-and-set is made from.
type KeyVersion struct {
	Key     string
	Version int64
}

// Won is a key whose batched compare-and-set won.
type Won struct {
	Key string
	// Term is the term that the write started (ElectMany, InsertMany): the fencing
	// token of the new leader, and also the row's new version, which its first
	// renewal is made from. It is 0 for writes that start no term (RenewMany,
	// ReleaseMany).
	Term int64
	// Since is a local time (with a monotonic reading) no later than the moment the
	// database executed the winning write: a leader may trust the lease until
	// Since + its renew deadline. It is the statement's send time, or on MySQL, where
	// the outcome is read back, the read's send time minus the age of the write it
	// found.
	Since time.Time
}
