package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
)

// envDSN names the environment variable read when --dsn is not given.
const envDSN = "CASLEADER_DSN"

// defaultSQLiteFile is the database used when neither --dsn nor CASLEADER_DSN is set.
const defaultSQLiteFile = "casleader.db"

// target is a parsed --dsn: the dialect and what the store's Open function takes.
type target struct {
	dialect schema.Dialect
	raw     string // as the user gave it; only ever printed redacted
	driver  string // go-sql-driver DSN (MySQL), URL or key=value DSN (PostgreSQL), file path (SQLite)
}

// errBadDSN marks a --dsn that cannot be parsed: a usage error.
var errBadDSN = errors.New("bad DSN")

// goSQLDriverAddr matches the start of a go-sql-driver DSN's address part: "tcp(",
// "unix(" after an optional "user[:pass]@".
var goSQLDriverAddr = regexp.MustCompile(`^(?:[^@]*@)?(?:tcp|tcp4|tcp6|unix)\(`)

// pgKeyValue matches a libpq key=value DSN.
var pgKeyValue = regexp.MustCompile(`(^|\s)(host|dbname|user|password)\s*=`)

// parseDSN maps a --dsn value to a dialect and driver DSN:
//
//	mysql://user:pass@host:3306/db?param=value    (also mariadb://)
//	mysql://user:pass@tcp(host:3306)/db?params    (a go-sql-driver DSN after mysql://)
//	postgres://user:pass@host:5432/db?sslmode=... (also postgresql://)
//	sqlite://path/to/file.db, sqlite:///abs/path, or a plain file path
//
// Its errors never quote the DSN or a parser's message: a password with an unencoded
// '#', '@', '/' or '?' moves the boundaries a parser sees, so any piece of the input it
// quotes (a "port", a "host", a "path") may be a piece of the password, which no
// redaction by the password's value can find. They say what is wrong in words.
func parseDSN(s string) (target, error) {
	t := target{raw: s}
	if strings.TrimSpace(s) == "" {
		return t, fmt.Errorf("%w: the DSN is empty", errBadDSN)
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || strings.ContainsAny(scheme, "/@ \\") {
		if strings.HasPrefix(s, "sqlite:") {
			return sqliteTarget(t, strings.TrimPrefix(s, "sqlite:"))
		}
		// A plain file path, unless it is clearly a DSN for a server.
		switch {
		case goSQLDriverAddr.MatchString(s):
			return t, fmt.Errorf("%w: it looks like a go-sql-driver MySQL DSN: put mysql:// in front of it", errBadDSN)
		case pgKeyValue.MatchString(s):
			return t, fmt.Errorf("%w: it looks like a PostgreSQL key=value DSN: write it as a postgres://user:pass@host:5432/db URL", errBadDSN)
		}
		return sqliteTarget(t, s)
	}
	switch strings.ToLower(scheme) {
	case "mysql", "mariadb":
		d, err := mysqlDriverDSN(rest)
		if err != nil {
			return t, err
		}
		t.dialect, t.driver = schema.MySQL, d
		return t, nil
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
			return t, fmt.Errorf("%w: PostgreSQL URL: an '@' after the host: %s", errBadDSN, encodeHint)
		}
		if _, err := pgxpool.ParseConfig(s); err != nil {
			return t, fmt.Errorf("%w: PostgreSQL URL: %s: %s", errBadDSN, parseProblem(err), encodeHint)
		}
		t.dialect, t.driver = schema.Postgres, s
		return t, nil
	case "sqlite", "sqlite3", "file":
		return sqliteTarget(t, rest)
	}
	if !urlScheme.MatchString(scheme) {
		return t, fmt.Errorf("%w: unknown scheme: use mysql://, postgres:// or sqlite:// (or a plain SQLite file path)", errBadDSN)
	}
	return t, fmt.Errorf("%w: unknown scheme %q: use mysql://, postgres:// or sqlite:// (or a plain SQLite file path)", errBadDSN, scheme)
}

// urlScheme matches a URL scheme: only one of these is quoted in an error, anything
// else before "://" may be a piece of a password.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]{0,19}$`)

// encodeHint ends the errors of DSNs that do not parse.
const encodeHint = "percent-encode these characters in the user name and password: @ : / ? # % (as %40 %3A %2F %3F %23 %25)"

// parseProblem describes in fixed words why a DSN parser refused its input. The
// parsers' own messages are not used: they quote pieces of the input.
func parseProblem(err error) string {
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
	} {
		if strings.Contains(msg, p.in) {
			return p.say
		}
	}
	return "it cannot be parsed"
}

func sqliteTarget(t target, path string) (target, error) {
	if path == "" {
		return t, fmt.Errorf("%w: the SQLite file path is empty: use sqlite://casleader.db or sqlite:///abs/path.db", errBadDSN)
	}
	if strings.ContainsAny(path, "?#") {
		return t, fmt.Errorf("%w: the SQLite path holds a '?' or '#', which are not allowed (casleader sets the connection parameters itself)", errBadDSN)
	}
	t.dialect, t.driver = schema.SQLite, path
	return t, nil
}

// mysqlDriverDSN converts what follows "mysql://" into a go-sql-driver DSN. Two forms
// are accepted: a URL authority ("user:pass@host:port/db?params", with percent-encoding
// in user and password, port 3306 by default, and ?socket=/path for a Unix socket), and
// a go-sql-driver DSN as it is ("user:pass@tcp(host:3306)/db?params").
func mysqlDriverDSN(rest string) (string, error) {
	if goSQLDriverAddr.MatchString(rest) {
		if _, err := mysql.ParseDSN(rest); err != nil {
			return "", fmt.Errorf("%w: MySQL DSN: %s", errBadDSN, parseProblem(err))
		}
		return rest, nil
	}
	// A '#' has no meaning in a MySQL URL, and an '@' belongs before the host: either
	// is an unencoded character of a password, and what a URL parser makes of the
	// rest would connect somewhere else with a piece of the password as a name.
	if strings.Contains(rest, "#") {
		return "", fmt.Errorf("%w: MySQL URL: '#' is not allowed: %s", errBadDSN, encodeHint)
	}
	u, err := url.Parse("mysql://" + rest)
	if err != nil {
		return "", fmt.Errorf("%w: MySQL URL: %s: %s", errBadDSN, parseProblem(err), encodeHint)
	}
	if strings.Contains(u.RawPath+u.Path+u.RawQuery, "@") {
		return "", fmt.Errorf("%w: MySQL URL: an '@' after the host: %s", errBadDSN, encodeHint)
	}
	q := u.Query()
	var netw, addr string
	if sock := q.Get("socket"); sock != "" {
		netw, addr = "unix", sock
		q.Del("socket")
	} else {
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "3306"
		}
		netw, addr = "tcp", net.JoinHostPort(host, port)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return "", fmt.Errorf("%w: MySQL URL: the path has more than one '/': give one database name, as in mysql://user:pass@host:3306/db; %s", errBadDSN, encodeHint)
	}
	// Let the driver parse the parameters (it knows its own and passes the others on
	// as session variables), then add the credentials.
	base := netw + "(" + addr + ")/" + db
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return "", fmt.Errorf("%w: MySQL URL: %s", errBadDSN, parseProblem(err))
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg.FormatDSN(), nil
}

// secrets returns the password of dsn in every form it may appear in a message: as
// secret.Password finds it, as written (percent-encoded) and decoded.
func secrets(dsn string) []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(secret.Password(dsn))
	// The userinfo of a URL, also when url.Parse rejects the URL.
	if _, rest, ok := strings.Cut(dsn, "://"); ok {
		auth := rest
		if i := strings.IndexAny(auth, "/?#"); i >= 0 && !goSQLDriverAddr.MatchString(rest) {
			auth = auth[:i]
		}
		if i := strings.LastIndex(auth, "@"); i >= 0 {
			if _, p, ok := strings.Cut(auth[:i], ":"); ok {
				add(p)
				if d, err := url.PathUnescape(p); err == nil {
					add(d)
				}
			}
		}
		add(secret.Password(rest))
	}
	// Longest first, so that a shorter form inside a longer one leaves no rest.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// redact returns dsn with its password replaced by "xxxxx", for messages.
func redact(dsn string) string {
	s := secret.Redact(dsn)
	for _, p := range secrets(dsn) {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}

// redactError returns err with dsn's password removed from its message.
func redactError(err error, dsn string) error {
	if err == nil {
		return nil
	}
	err = secret.RedactError(err, dsn)
	msg := err.Error()
	for _, p := range secrets(dsn) {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	if msg == err.Error() {
		return err
	}
	return redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (r redactedError) Error() string { return r.msg }
func (r redactedError) Unwrap() error { return r.err }
