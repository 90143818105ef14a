package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"
)

const (
	defaultDialTimeout = 5 * time.Second
	defaultPoolSize    = 4
)

// classifyCommon marks the driver-independent transient errors: timeouts, cancelled
// statements, broken connections. Anything else is returned as it is; callers treat
// an unclassified error like a transient one.
func classifyCommon(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne):
		return fmt.Errorf("%w: %w", ErrTransient, err)
	}
	return err
}

// mysqlPassword matches the password of a go-sql-driver DSN: user:password@...
var mysqlPassword = regexp.MustCompile(`^[^:@/]*:(.*)@[a-z0-9]*\(`)

// Password returns the password in a MySQL DSN or a URL/key=value PostgreSQL DSN, or "".
func Password(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return p
		}
	}
	if m := mysqlPassword.FindStringSubmatch(dsn); m != nil {
		return m[1]
	}
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(v, `'`)
		}
	}
	return ""
}

// Redact returns dsn with its password replaced by "xxxxx".
func Redact(dsn string) string {
	p := Password(dsn)
	if p == "" {
		return dsn
	}
	return strings.ReplaceAll(dsn, p, "xxxxx")
}

// RedactError returns err with every occurrence of dsn's password in its message
// replaced by "xxxxx". The original error stays reachable with errors.Is and As.
func RedactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	p := Password(dsn)
	if p == "" || !strings.Contains(err.Error(), p) {
		return err
	}
	return redacted{msg: strings.ReplaceAll(err.Error(), p, "xxxxx"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }
