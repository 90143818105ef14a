// Package rules holds the checks that every store applies before it sends a
// statement, and the limits they enforce: the names a key or candidate ID may have,
// the highest row version, how far a row's tick_time may lie in the future, and
// the incarnation a running candidate records. The stores of the dialect packages,
// the in-memory store and the executors share them; users and store authors see
// their effect through the errors of package store.
package rules

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/casleader/casleader/store"
)

// FutureTolerance is how far in the future of the database clock a tick_time may lie
// before the row is reported as invalid. Negative ages happen when a row was written
// by another server whose clock runs ahead (a Galera node, a standby promoted since),
// or, by a moment, on a server whose clock has coarse steps: up to this bound they
// are read as age zero and reported in [store.Record.Ahead], the evidence of clock
// skew that the election measures; beyond it the row cannot be a lease of any sane
// cluster and is reported as [store.ErrInvalidRow].
const FutureTolerance = time.Minute

// ValidateName checks that s can be an election key or a candidate ID in every
// dialect: 1 to [store.MaxKeyLen] bytes of UTF-8, no NUL byte (PostgreSQL text cannot hold
// one) and no trailing space (MySQL's PAD SPACE collations would make "x" and "x "
// one key). what names the value in the error, which wraps [store.ErrInvalidArgument].
func ValidateName(what, s string) error {
	if rule := NameRule(s); rule != "" {
		return fmt.Errorf("%w: %s %s", store.ErrInvalidArgument, what, rule)
	}
	return nil
}

// NameRule returns "" for a valid election key or candidate ID (see [ValidateName]),
// or else the rule s breaks, e.g. "is 300 bytes, the limit is 255".
func NameRule(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > store.MaxKeyLen:
		return fmt.Sprintf("is %d bytes, the limit is %d", len(s), store.MaxKeyLen)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		// PostgreSQL text cannot hold NUL.
		return "contains a NUL byte"
	case strings.HasSuffix(s, " "):
		// MySQL's PAD SPACE collations compare "x" and "x " as equal: the two would be
		// one key (and one leader ID) there and two elsewhere.
		return fmt.Sprintf("%q ends with a space", s)
	}
	return ""
}

// ValidateNames checks a key and the candidate IDs of a call, in that order, with
// [ValidateName].
func ValidateNames(key string, ids ...string) error {
	if err := ValidateName("key", key); err != nil {
		return err
	}
	for _, id := range ids {
		if err := ValidateName("id", id); err != nil {
			return err
		}
	}
	return nil
}

// VersionLimit bounds a row's version, and so its term (a term is at most the
// version). It is a quarter of the BIGINT maximum: far above any version casleader
// writes (terms follow the database clock in microseconds, about 1.8e15 in 2026, and
// each write adds one), yet far enough below the maximum that no version or term can
// ever wrap to a negative number. A row at or above it reads as [store.ErrInvalidRow], and
// no write is sent from a version whose next version would reach it.
const VersionLimit int64 = 1 << 62

// CheckVersion returns an [store.ErrInvalidRow] error, saying what to do, when a write
// from version would take the row to [VersionLimit] or beyond.
func CheckVersion(version int64) error {
	if version < VersionLimit-1 {
		return nil
	}
	return versionLimitError(version)
}

// CheckRowVersion returns an [store.ErrInvalidRow] error, saying what to do, when a row
// read holds a version at or above [VersionLimit].
func CheckRowVersion(version int64) error {
	if version < VersionLimit {
		return nil
	}
	return versionLimitError(version)
}

func versionLimitError(version int64) error {
	return fmt.Errorf("%w: version %d has reached casleader's limit %d (kept far below the BIGINT maximum so that versions and terms never wrap): "+
		"no new term can be issued from this row. To fix it: stop every candidate of the key, delete the row, reset whatever compares its fencing tokens "+
		"(the next term restarts from the database clock, below the terms issued so far), then restart the candidates",
		store.ErrInvalidRow, version, VersionLimit)
}

// ValidateCandidate checks the parts of an election write's candidate that
// [ValidateNames] does not: an incarnation of at most [store.MaxKeyLen] bytes of UTF-8
// with no NUL byte (it may be empty), and a lease that is not negative.
func ValidateCandidate(c store.Candidate) error {
	if c.Incarnation != "" {
		if err := ValidateName("incarnation", c.Incarnation); err != nil {
			return err
		}
	}
	if c.Lease < 0 {
		return fmt.Errorf("%w: lease %v is negative", store.ErrInvalidArgument, c.Lease)
	}
	return nil
}

// ValidateTarget checks the target of a handover: its ID, and its incarnation
// when one is named (see store.Driver.Handover).
func ValidateTarget(to store.Candidate) error {
	if err := ValidateName("handover target", to.ID); err != nil {
		return err
	}
	if to.Incarnation != "" {
		return ValidateName("handover target's incarnation", to.Incarnation)
	}
	return nil
}

// NewIncarnation returns a new random incarnation (see [store.Candidate.Incarnation]):
// 16 hexadecimal digits, drawn once per running elector.
func NewIncarnation() string {
	return fmt.Sprintf("%016x", rand.Uint64())
}
