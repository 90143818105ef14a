// Package dsn is the one parser of the DSN forms that casleader accepts: the
// command's --dsn and the dialect stores' Open functions read a DSN with it, so a
// DSN that works in one works in the other.
//
// It imports no driver (a program links only the driver of the dialect it uses):
// it finds the dialect and converts URL forms to the driver's DSN; the dialect's
// driver then parses the result. Its errors never quote the DSN or any piece of it:
// a password with an unencoded '#', '@', '/' or '?' moves the boundaries a parser
// sees, so any piece of the input a message quotes (a "port", a "host", a "path")
// may be a piece of the password. They say what is wrong in words.
package dsn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
)

// Target is a parsed DSN.
type Target struct {
	Dialect schema.Dialect
	// Raw is the DSN as given: print it only through secret.Redact.
	Raw string
	// Driver is what the dialect's driver takes: a go-sql-driver DSN (MySQL), a URL
	// or key=value DSN (PostgreSQL), a file path (SQLite).
	Driver string
}

// ErrBad marks a DSN that cannot be parsed.
var ErrBad = errors.New("bad DSN")

// EncodeHint ends the errors of DSNs that do not parse.
const EncodeHint = "percent-encode these characters in the user name and password: @ : / ? # % (as %40 %3A %2F %3F %23 %25)"

// Parse maps a DSN to a dialect and the driver's DSN:
//
//	mysql://user:pass@host:3306/db?param=value    (also mariadb://)
//	mysql://user:pass@tcp(host:3306)/db?params    (a go-sql-driver DSN after mysql://)
//	postgres://user:pass@host:5432/db?sslmode=... (also postgresql://)
//	sqlite://path/to/file.db, sqlite:///abs/path, or a plain file path
//
// A go-sql-driver DSN or a PostgreSQL key=value DSN without a scheme is refused
// with the scheme to put in front ([ForDialect] takes them). A misspelt scheme
// gets "did you mean".
func Parse(s string) (Target, error) {
	t := Target{Raw: s}
	if strings.TrimSpace(s) == "" {
		return t, fmt.Errorf("%w: the DSN is empty", ErrBad)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(scheme, "/@ \\") {
		if p, ok := strings.CutPrefix(s, "sqlite:"); ok {
			return sqliteTarget(t, p)
		}
		// A plain file path, unless it is clearly a DSN for a server.
		switch {
		case isGoSQLDriver(s):
			return t, fmt.Errorf("%w: it looks like a go-sql-driver MySQL DSN: put mysql:// in front of it", ErrBad)
		case isKeyValue(s):
			return t, fmt.Errorf("%w: it looks like a PostgreSQL key=value DSN: write it as a postgres://user:pass@host:5432/db URL", ErrBad)
		}
		return sqliteTarget(t, s)
	}
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb":
		d, err := mysqlDriverDSN(rest)
		t.Dialect, t.Driver = schema.MySQL, d
		return t, err
	case "postgres", "postgresql":
		// pgx ends the user information at the last '@' before the first '/'. An '@'
		// after that '/' (or, without one, after a '?') is an unencoded character of
		// a password that holds a '/' or '?': pgx would read a piece of it as the
		// host or the database name, and print it.
		after, hasPath := "", false
		if _, after, hasPath = strings.Cut(rest, "/"); !hasPath {
			_, after, _ = strings.Cut(rest, "?")
		}
		if strings.Contains(after, "@") {
			return t, fmt.Errorf("%w: PostgreSQL URL: an '@' after the host: %s", ErrBad, EncodeHint)
		}
		t.Dialect, t.Driver = schema.Postgres, s
		return t, nil
	case "sqlite", "sqlite3", "file":
		return sqliteTarget(t, rest)
	}
	return t, unknownScheme(scheme)
}

// ForDialect parses a DSN for a store of dialect d: the forms of [Parse] for d,
// and the driver's own DSN without a scheme (a go-sql-driver DSN for MySQL, a
// key=value DSN for PostgreSQL). A DSN of another dialect is refused with the
// package to use.
func ForDialect(d schema.Dialect, s string) (Target, error) {
	scheme, _, hasScheme := strings.Cut(s, "://")
	if !hasScheme || strings.ContainsAny(scheme, "/@ \\") {
		switch {
		case d == schema.MySQL && !isKeyValue(s) && strings.TrimSpace(s) != "":
			return Target{Dialect: d, Raw: s, Driver: s}, nil
		case d == schema.Postgres && isKeyValue(s):
			return Target{Dialect: d, Raw: s, Driver: s}, nil
		}
	}
	if other := schemeDialect(scheme); hasScheme && other != "" && other != d {
		return Target{Raw: s}, fmt.Errorf("%w: this is a %s DSN, not a %s one: open it with store/%s", ErrBad, other, d, other)
	}
	t, err := Parse(s)
	if err == nil && t.Dialect != d {
		err = fmt.Errorf("%w: this is a %s DSN, not a %s one: open it with store/%s", ErrBad, t.Dialect, d, t.Dialect)
	}
	return t, err
}

// schemeDialect returns the dialect of a URL scheme that [Parse] takes, or "".
func schemeDialect(scheme string) schema.Dialect {
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb":
		return schema.MySQL
	case "postgres", "postgresql":
		return schema.Postgres
	case "sqlite", "sqlite3", "file":
		return schema.SQLite
	}
	return ""
}

// schemes are the URL schemes that Parse takes, and the one each means.
var schemes = []struct{ name, means string }{
	{"mysql", "mysql"}, {"mariadb", "mariadb"}, {"postgres", "postgres"},
	{"postgresql", "postgresql"}, {"sqlite", "sqlite"},
}

// unknownScheme is the error for a scheme that Parse does not take: with the
// nearest known one when it is a likely misspelling. The scheme is quoted only
// when it is a URL scheme: anything else before "://" may be a piece of a password.
func unknownScheme(scheme string) error {
	const use = "use mysql://, postgres:// or sqlite:// (or a plain SQLite file path)"
	if !isScheme(scheme) {
		return fmt.Errorf("%w: unknown scheme: %s", ErrBad, use)
	}
	best, dist := "", 3
	for _, s := range schemes {
		if d := distance(strings.ToLower(scheme), s.name); d < dist {
			best, dist = s.means, d
		}
	}
	if best != "" {
		return fmt.Errorf("%w: unknown scheme %q: did you mean %s://?", ErrBad, scheme, best)
	}
	return fmt.Errorf("%w: unknown scheme %q: %s", ErrBad, scheme, use)
}

// distance is the Levenshtein distance between a and b (bytes).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func sqliteTarget(t Target, path string) (Target, error) {
	if path == "" {
		return t, fmt.Errorf("%w: the SQLite file path is empty: use sqlite://casleader.db or sqlite:///abs/path.db", ErrBad)
	}
	if strings.ContainsAny(path, "?#") {
		return t, fmt.Errorf("%w: the SQLite path holds a '?' or '#', which are not allowed (casleader sets the connection parameters itself)", ErrBad)
	}
	t.Dialect, t.Driver = schema.SQLite, path
	return t, nil
}

// mysqlDriverDSN converts what follows "mysql://" into a go-sql-driver DSN. Two
// forms are accepted: a URL authority ("user:pass@host:port/db?params", with
// percent-encoding in user and password, port 3306 by default, and ?socket=/path
// for a Unix socket), and a go-sql-driver DSN as it is
// ("user:pass@tcp(host:3306)/db?params").
func mysqlDriverDSN(rest string) (string, error) {
	if isGoSQLDriver(rest) {
		return rest, nil
	}
	// A '#' has no meaning in a MySQL URL, and an '@' belongs before the host: either
	// is an unencoded character of a password, and what a URL parser makes of the
	// rest would connect somewhere else with a piece of the password as a name.
	if strings.Contains(rest, "#") {
		return "", fmt.Errorf("%w: MySQL URL: '#' is not allowed: %s", ErrBad, EncodeHint)
	}
	u, err := url.Parse("mysql://" + rest)
	if err != nil {
		return "", fmt.Errorf("%w: MySQL URL: %s: %s", ErrBad, Problem(err), EncodeHint)
	}
	if strings.Contains(u.RawPath+u.Path+u.RawQuery, "@") {
		return "", fmt.Errorf("%w: MySQL URL: an '@' after the host: %s", ErrBad, EncodeHint)
	}
	// The parameters go to the driver as written (it unescapes them), but socket.
	var params []string
	addr := "tcp(" + net.JoinHostPort(cmpOr(u.Hostname(), "127.0.0.1"), cmpOr(u.Port(), "3306")) + ")"
	for _, p := range strings.Split(u.RawQuery, "&") {
		if sock, ok := strings.CutPrefix(p, "socket="); ok {
			if sock, err = url.QueryUnescape(sock); err != nil {
				return "", fmt.Errorf("%w: MySQL URL: %s: %s", ErrBad, Problem(err), EncodeHint)
			}
			addr = "unix(" + sock + ")"
		} else if p != "" {
			params = append(params, p)
		}
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return "", fmt.Errorf("%w: MySQL URL: the path has more than one '/': give one database name, as in mysql://user:pass@host:3306/db; %s", ErrBad, EncodeHint)
	}
	var user string
	if u.User != nil {
		user = u.User.Username()
		if p, ok := u.User.Password(); ok && p != "" {
			user += ":" + p
		}
		if user != "" {
			user += "@"
		}
	}
	out := user + addr + "/" + db
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Problem describes in fixed words why a DSN parser (url.Parse, go-sql-driver's,
// pgx's) refused its input. The parsers' own messages are not used: they quote
// pieces of the input.
func Problem(err error) string {
	msg := err.Error()
	for _, p := range []struct{ in, say string }{
		{"invalid port", "invalid port: the port is not a number, or a character of the password ends the host early"},
		{"invalid userinfo", "the user name or password holds a character that must be percent-encoded"},
		{"invalid URL escape", "a '%' is not followed by two hexadecimal digits"},
		{"host name", "the host name holds an invalid character"},
		{"missing the slash separating the database name", "no '/' before the database name"},
		{"network address not terminated", "the address in tcp(...) has no closing ')'"},
		{"forget to escape a param value", "a parameter value must be escaped"},
		{"invalid bool value", "a parameter that takes true or false has another value"},
		{"sslmode", "sslmode is invalid: use disable, allow, prefer, require, verify-ca or verify-full"},
		{"connect_timeout", "connect_timeout is not a number of seconds"},
		{"pool_", "a pool_* parameter is invalid"},
		{"failed to parse as URL", "it is not a valid URL"},
		{"default addr for network", "the address is not in tcp(host:port) or unix(/path) form"},
	} {
		if strings.Contains(msg, p.in) {
			return p.say
		}
	}
	return "it cannot be parsed"
}

// The matchers below are hand-written rather than regular expressions: package
// regexp would add a third of a megabyte to every program that opens a store.

// isGoSQLDriver reports whether s is a go-sql-driver DSN with an address:
// "tcp(", "tcp4(", "tcp6(" or "unix(" at its start or after an '@'.
func isGoSQLDriver(s string) bool {
	for i := -1; i < len(s); i++ {
		if i >= 0 && s[i] != '@' {
			continue
		}
		for _, n := range []string{"tcp(", "tcp4(", "tcp6(", "unix("} {
			if strings.HasPrefix(s[i+1:], n) {
				return true
			}
		}
	}
	return false
}

// isKeyValue reports whether s is a libpq key=value DSN: one of host, dbname,
// user or password at the start or after white space, then optional white space
// and '='.
func isKeyValue(s string) bool {
	for _, key := range []string{"host", "dbname", "user", "password"} {
		for i := 0; i+len(key) <= len(s); i++ {
			if !strings.HasPrefix(s[i:], key) || (i > 0 && !isSpace(s[i-1])) {
				continue
			}
			j := i + len(key)
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			if j < len(s) && s[j] == '=' {
				return true
			}
		}
	}
	return false
}

// isSpace reports whether c is white space as \s sees it.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// isScheme reports whether s is a URL scheme of at most 20 characters.
func isScheme(s string) bool { return len(s) <= 20 && secret.IsURLScheme(s) }
