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

// Password returns the password in a MySQL DSN ("user:pass@tcp(host)/db"), a URL
// ("postgres://user:pass@host/db", percent-decoded) or a key=value PostgreSQL DSN
// ("password='a b'", unquoted), or "".
func Password(dsn string) string {
	decoded, _ := password(dsn)
	return decoded
}

// password returns the password in dsn decoded, and as written in dsn.
func password(dsn string) (decoded, raw string) {
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && !strings.ContainsAny(scheme, ":@/ ") {
		// Split as url.Parse does, without failing on bad escapes: cut the
		// fragment, then the query; the authority ends at the first '/', the
		// userinfo at its last '@', the user at the first ':'.
		rest, _, _ = strings.Cut(rest, "#")
		authority, query, _ := strings.Cut(rest, "?")
		authority, _, _ = strings.Cut(authority, "/")
		if i := strings.LastIndex(authority, "@"); i >= 0 {
			if _, raw, ok := strings.Cut(authority[:i], ":"); ok {
				return unescape(url.PathUnescape, raw), raw
			}
		}
		// libpq and pgx also take the password as a query parameter.
		for _, kv := range strings.Split(query, "&") {
			if raw, ok := strings.CutPrefix(kv, "password="); ok {
				return unescape(url.QueryUnescape, raw), raw
			}
		}
		return "", ""
	}
	if loc := kvPassword.FindStringIndex(dsn); loc != nil {
		return keyValue(dsn[loc[1]:])
	}
	// go-sql-driver: [user[:password]@][net[(addr)]]/dbname[?params], split at the
	// last '/', then the last '@' before it, then the first ':'.
	if i := strings.LastIndex(dsn, "/"); i > 0 {
		if j := strings.LastIndex(dsn[:i], "@"); j >= 0 {
			if _, p, ok := strings.Cut(dsn[:j], ":"); ok {
				return p, p
			}
		}
	}
	return "", ""
}

// unescape returns s unescaped by f, or s itself when it is not validly escaped.
func unescape(f func(string) (string, error), s string) string {
	if u, err := f(s); err == nil {
		return u
	}
	return s
}

// kvPassword matches the start of a libpq key=value password setting.
var kvPassword = regexp.MustCompile(`(?:^|\s)password\s*=\s*`)

// keyValue reads a libpq key=value value at the start of s: single-quoted or up to
// white space, with backslash escapes. It returns the value and the text it spans.
func keyValue(s string) (value, raw string) {
	var b strings.Builder
	quoted := strings.HasPrefix(s, "'")
	i := 0
	if quoted {
		i = 1
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case quoted && c == '\'':
			return b.String(), s[:i+1]
		case !quoted && strings.IndexByte(" \t\n\r\v\f", c) >= 0:
			return b.String(), s[:i]
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), s
}

// redact replaces every form of dsn's password in s by "xxxxx".
func redact(s, dsn string) string {
	decoded, raw := password(dsn)
	if len(raw) < len(decoded) {
		raw, decoded = decoded, raw
	}
	for _, p := range []string{raw, decoded} { // the longer first
		if p != "" {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}

// Redact returns dsn with its password, as written and decoded, replaced by "xxxxx".
func Redact(dsn string) string { return redact(dsn, dsn) }

// RedactError returns err with every occurrence of dsn's password (as written in dsn,
// and decoded) in its message replaced by "xxxxx". The original error stays
// reachable with errors.Is and As.
func RedactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := redact(msg, dsn); red != msg {
		return redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }
