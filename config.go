package casleader

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

// ErrInvalidConfig is returned by [New] for a configuration that cannot be safe. The
// error is a [*ConfigError], naming the field and the rule.
var ErrInvalidConfig = errors.New("casleader: invalid config")

// ConfigError is the error [New] returns for a configuration it refuses. It is an
// [ErrInvalidConfig] (errors.Is holds); errors.As gives the field, for a program that
// maps fields to its own flags or settings.
type ConfigError struct {
	// Field names the Config field ("RenewDeadline", "Key", ...), or "Store" for a
	// nil store.
	Field string
	// Rule says what is wrong with the field and what to do, e.g. "(10s) must be
	// less than LeaseDuration (5s): the leader must stop acting before anyone can
	// take over".
	Rule string

	err error // a more specific error the field's value is, if any (ErrInvalidKey)
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s %s", ErrInvalidConfig, e.Field, e.Rule)
}

// Is reports whether target is [ErrInvalidConfig], or the more specific error
// the field's value is ([ErrInvalidKey] for a bad key in GroupConfig.Keys).
func (e *ConfigError) Is(target error) bool {
	return target == ErrInvalidConfig || (e.err != nil && errors.Is(e.err, target))
}

// Config configures an [Elector]. Zero values get the defaults documented per field.
//
// The durations must satisfy HeartbeatInterval < RenewDeadline < LeaseDuration. The
// leader stops trusting its leadership RenewDeadline after the send time of its last
// successful renewal, by its own monotonic clock; a follower may take over only
// LeaseDuration after that renewal executed, by the database clock. The gap
// LeaseDuration - RenewDeadline must cover clock-rate differences and the time an
// action takes after [Elector.IsLeader] said yes; use fencing ([Elector.Token]) for
// actions that must never overlap.
type Config struct {
	// Key names the election: candidates with the same key elect one leader.
	// 1 to 255 bytes of UTF-8. Required.
	Key string

	// ID names this candidate. It must be unique among live candidates. The elector
	// acts only in terms this process won (or was handed by name, or resumed with
	// ResumeTerm): a live lease naming its ID in another term is never adopted, and
	// if that lease is renewed (another process runs with this ID) Run returns an
	// error matching [ErrDuplicateID] within about one LeaseDuration. 1 to 255 bytes
	// of UTF-8. Default: hostname-pid-random.
	ID string

	// ResumeTerm, when not zero, is the fencing token of a term that an earlier run
	// of this candidate (same Key and ID) won and that has ended: that process has
	// exited or its Run has returned, e.g. with KeepLeaseOnExit. If the row still
	// names this ID in that term with a live lease, the elector resumes it with one
	// renewal instead of waiting for it to expire (a fast restart with a stable ID,
	// as etcd's ResumeElection); a release the earlier run sent that executes first
	// makes that renewal lose. Save the token while leading ([Term.Token], [Elector.Token])
	// and pass it on restart. Never pass the term of a process that may still run:
	// both would lead in it. Default 0: a lease of an earlier run is left to expire.
	ResumeTerm int64

	// LeaseDuration is how long after the leader's last renewal, by the database clock,
	// followers wait before they take over. Default 15 s, as in client-go's leader
	// election; RenewDeadline and HeartbeatInterval left zero keep the defaults'
	// ratios to it.
	LeaseDuration time.Duration

	// RenewDeadline is how long after the send time of its last successful renewal the
	// leader trusts its leadership, by its monotonic clock. Must be less than
	// LeaseDuration. Default 2/3 of LeaseDuration (10 s).
	RenewDeadline time.Duration

	// HeartbeatInterval is the time between two renewals. Must be less than
	// RenewDeadline, so that several renewals can fail before leadership is lost.
	// Default 1/5 of RenewDeadline (2 s).
	HeartbeatInterval time.Duration

	// PollInterval is the longest time a follower waits between two reads of the row.
	// Followers read when the observed lease can expire, or sooner when woken.
	// Default 5 s. The store's wake-ups (see [store.Driver.Subscribe]) wake
	// followers sooner when a lease is given up.
	PollInterval time.Duration

	// DrainTimeout bounds how long, after leadership ends, the elector waits for
	// OnStartedLeading to return before it releases the row (resign, Run's end) or
	// campaigns again (lost lease). When OnStartedLeading has not returned by then,
	// the row is NOT released: the lease is left to expire by itself, so that the
	// next leader cannot start before the lease allows while this work may still
	// act, and this candidate does not campaign again until the work returns.
	// Default LeaseDuration - RenewDeadline.
	DrainTimeout time.Duration

	// KeepLeaseOnExit keeps the lease when Run's context ends instead of releasing
	// it: the next leader then takes over only after the lease expires.
	KeepLeaseOnExit bool

	// Observer makes the elector never campaign: it only reports the leader.
	Observer bool

	// Priority is this candidate's priority, recorded in the members view (see
	// [Elector.Members]); higher is preferred. A leader hands its lease over to a
	// live candidate of strictly higher priority once that candidate has been
	// seen live for a full LeaseDuration, through the safe handover (see
	// docs/operations.md, "Preferred leader", for the rule). Equal priorities never hand over. It needs the members
	// table (`casleader migrate`). Default 0.
	Priority int

	// Logger receives role changes (Info), step-downs and renewal failures (Warn) and
	// per-tick detail (Debug). nil means discard.
	Logger *slog.Logger

	// OnStartedLeading is called in its own goroutine when this candidate becomes
	// leader, with a context that is cancelled the moment leadership is lost (at the
	// trust deadline at the latest) and the term's fencing token. It must return
	// soon after ctx is cancelled (see DrainTimeout). [TermFrom](ctx) gives the
	// term's handle: its token, its guards and a Resign that ends only this term
	// and does not wait for the callback.
	//
	// To run code when the term ends, run it in OnStartedLeading once ctx is
	// done; to follow the leader, see [Elector.Listen].
	//
	// A panic in OnStartedLeading is logged at Error level with the key, the term
	// and the stack, and then crashes the process, as with client-go: Go cannot
	// hand a panic of the elector's goroutines to the caller, and a leader in an
	// unknown state must not go on. The lease of a crashed leader is not released:
	// it expires by itself, so the next leader starts no earlier than the lease
	// allows. Recover in the callback to handle a panic yourself.
	OnStartedLeading func(ctx context.Context, token int64)

	// Hooks observe the elector from the inside: every store call it makes, the
	// start and end of its terms, each extension of its trust, each change of the
	// observed leader or clock skew (see [Hooks]; GroupConfig.Hooks takes the same
	// values). They are called in order, synchronously, and must not block.
	// Packages metrics and healthz give theirs (Metrics.Hooks, Checker.Hooks); add
	// your own beside them. For a stream of status changes that
	// may be read at any pace, see [Elector.Listen]. Default none.
	Hooks []Hooks
}

// withDefaults returns c with zero values replaced by defaults.
func (c Config) withDefaults() Config {
	c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval = timing.Fill(c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval)
	c.PollInterval = cmp.Or(c.PollInterval, timing.DefaultPoll)
	if c.DrainTimeout == 0 && c.LeaseDuration > c.RenewDeadline {
		c.DrainTimeout = c.LeaseDuration - c.RenewDeadline
	}
	if c.ID == "" {
		c.ID = DefaultID()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate checks the rules between fields. c has its defaults.
func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	for _, f := range []struct {
		name, v string
	}{{"Key", c.Key}, {"ID", c.ID}} {
		if f.v == "" {
			return bad(f.name, "is empty: name the election (e.g. \"billing-cron\")")
		}
		if rule := rules.NameRule(f.v); rule != "" {
			return bad(f.name, "%s", rule)
		}
	}
	if c.ResumeTerm < 0 {
		return bad("ResumeTerm", "is %d: it must be a fencing token (positive) or 0", c.ResumeTerm)
	}
	return checkTiming(c.LeaseDuration, c.RenewDeadline, c.HeartbeatInterval, c.PollInterval, c.DrainTimeout)
}

// checkTiming checks the durations of a Config or a GroupConfig, defaults filled
// in: the one set of timing rules of both.
func checkTiming(lease, renew, heartbeat, poll, drain time.Duration) error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"LeaseDuration", lease}, {"RenewDeadline", renew},
		{"HeartbeatInterval", heartbeat}, {"PollInterval", poll},
	} {
		if d.v <= 0 {
			return bad(d.name, "is %v: it must be positive (or zero for the default)", d.v)
		}
		if d.v < time.Millisecond {
			return bad(d.name, "is %v: it must be at least 1ms", d.v)
		}
	}
	if drain < 0 {
		return bad("DrainTimeout", "is %v: it must not be negative", drain)
	}
	if renew >= lease {
		return bad("RenewDeadline", "(%v) must be less than LeaseDuration (%v): the leader must stop acting before anyone can take over", renew, lease)
	}
	if heartbeat >= renew {
		return bad("HeartbeatInterval", "(%v) must be less than RenewDeadline (%v): otherwise one late renewal loses leadership", heartbeat, renew)
	}
	return nil
}

// DefaultID returns a candidate ID unique to this process: hostname-pid-random.
func DefaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	if len(id) > store.MaxKeyLen {
		id = id[len(id)-store.MaxKeyLen:]
	}
	return id
}
