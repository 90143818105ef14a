// Package secret finds and hides the password of a DSN, in every form the drivers
// read it (MySQL's go-sql-driver DSNs, PostgreSQL URLs and key=value DSNs), without
// importing a driver.
package secret

import (
	"net/url"
	"slices"
	"strings"
)

// Password returns the password in a MySQL DSN ("user:pass@tcp(host)/db"), a URL
// ("postgres://user:pass@host/db", percent-decoded) or a key=value PostgreSQL DSN
// ("password='a b'", unquoted), or "".
func Password(dsn string) string {
	decoded, _ := password(dsn)
	return decoded
}

// password returns the password in dsn decoded, and as written in dsn.
func password(dsn string) (decoded, raw string) {
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && isURLScheme(scheme) {
		return urlPassword(rest)
	}
	if at, ok := kvPassword(dsn); ok {
		return keyValue(dsn[at:])
	}
	p := mysqlPassword(dsn)
	return p, p
}

// urlPassword returns the password of a URL DSN after its "scheme://". Like libpq
// and pgx, the user information ends at an '@' before the first '/', whatever '?' or
// '#' it holds (pgx takes "postgres://u:pa#ss@db/x" as password "pa#ss"); the last
// such '@' is taken, as url.Parse does, so that a password with an unencoded '@' is
// hidden whole. Without one, the password may be a query parameter.
func urlPassword(rest string) (decoded, raw string) {
	authority, _, _ := strings.Cut(rest, "/")
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		if _, raw, ok := strings.Cut(authority[:i], ":"); ok && raw != "" {
			return unescape(url.PathUnescape, raw), raw
		}
	}
	// libpq and pgx also take the password as a query parameter (URLs of theirs
	// have no fragment: a '#' is data).
	_, query, _ := strings.Cut(rest, "?")
	for _, kv := range strings.Split(query, "&") {
		if raw, ok := strings.CutPrefix(kv, "password="); ok {
			return unescape(url.QueryUnescape, raw), raw
		}
	}
	return "", ""
}

// mysqlPassword returns the password of a go-sql-driver DSN:
// [user[:password]@][net[(addr)]]/dbname[?params], split at the last '/', then the
// last '@' before it, then the first ':'.
func mysqlPassword(dsn string) string {
	if i := strings.LastIndex(dsn, "/"); i > 0 {
		if j := strings.LastIndex(dsn[:i], "@"); j >= 0 {
			if _, p, ok := strings.Cut(dsn[:j], ":"); ok {
				return p
			}
		}
	}
	return ""
}

// mysqlDriverPassword returns the password go-sql-driver reads from dsn, whatever
// dsn looks like, and whether the driver accepts dsn's network part (between the
// last '@' and the last '/'): empty, "tcp" or "unix", or an address in
// parentheses. A URL such as "postgres://u:pw@db:5432/x" is no DSN of its.
func mysqlDriverPassword(dsn string) (string, bool) {
	i := strings.LastIndex(dsn, "/")
	if i <= 0 {
		return "", false
	}
	j := strings.LastIndex(dsn[:i], "@")
	if j < 0 {
		return "", false
	}
	switch network := dsn[j+1 : i]; {
	case strings.Contains(network, "("):
		if !strings.HasSuffix(network, ")") {
			return "", false
		}
	case network != "" && network != "tcp" && network != "unix":
		return "", false
	}
	_, p, ok := strings.Cut(dsn[:j], ":")
	return p, ok
}

// unescape returns s unescaped by f, or s itself when it is not validly escaped.
func unescape(f func(string) (string, error), s string) string {
	if u, err := f(s); err == nil {
		return u
	}
	return s
}

// The matchers below are hand-written rather than regular expressions: package
// regexp would add a third of a megabyte to every program that opens a store.

// isURLScheme reports whether s is the scheme of a URL (RFC 3986):
// [A-Za-z][A-Za-z0-9+.-]*.
func isURLScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// queryPasswords returns the values of every password query parameter of a URL
// DSN's rest: each "password=" after a '?' or '&', up to the next '&'.
func queryPasswords(rest string) []string {
	var out []string
	for i := 0; i < len(rest); i++ {
		if rest[i] != '?' && rest[i] != '&' {
			continue
		}
		v, ok := strings.CutPrefix(rest[i+1:], "password=")
		if !ok {
			continue
		}
		if end := strings.IndexByte(v, '&'); end >= 0 {
			v = v[:end]
		}
		out = append(out, v)
		i += len("password=") + len(v) // the next match may start at the '&'
	}
	return out
}

// isSpace reports whether c is white space as libpq's key=value parser and \s
// see it: space, \t, \n, \f or \r.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// kvPassword returns where the value of the first libpq key=value password
// setting of dsn starts: after "password", at the start or after white space,
// then "=" with optional white space around it. ok is false without one.
func kvPassword(dsn string) (at int, ok bool) {
	for p := 0; p < len(dsn); p++ {
		if !strings.HasPrefix(dsn[p:], "password") || (p > 0 && !isSpace(dsn[p-1])) {
			continue
		}
		i := p + len("password")
		for i < len(dsn) && isSpace(dsn[i]) {
			i++
		}
		if i == len(dsn) || dsn[i] != '=' {
			continue
		}
		for i++; i < len(dsn) && isSpace(dsn[i]); i++ {
		}
		return i, true
	}
	return 0, false
}

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

// redact replaces every form of dsn's password in s by "xxxxx". A DSN that reads
// differently to the drivers (go-sql-driver takes "app://x@/db" as user "app" with
// password "//x", a URL parser as user "x" without one) has each reading hidden.
func redact(s, dsn string) string {
	decoded, raw := password(dsn)
	forms := []string{raw, decoded}
	if at, ok := kvPassword(dsn); ok {
		d, r := keyValue(dsn[at:])
		forms = append(forms, d, r)
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && isURLScheme(scheme) {
		// A query parameter overrides the user information's password in pgx, and
		// the query starts at a '?' after the user information, which may hold one:
		// hide every "password=" value after a '?' or '&'.
		for _, p := range queryPasswords(rest) {
			forms = append(forms, p, unescape(url.QueryUnescape, p))
		}
	}
	if p, ok := mysqlDriverPassword(dsn); ok { // go-sql-driver parses "app://x@/db" too
		forms = append(forms, p)
	}
	for _, p := range forms {
		forms = append(forms, strings.TrimSpace(p)) // as pgx reads "u:pw @db"
	}
	return mask(s, forms)
}

// mask replaces every occurrence of each of forms in s by "xxxxx". Occurrences that
// overlap (two readings of one password) are masked as one, so masking one reading
// never hides another from its turn.
func mask(s string, forms []string) string {
	var spans [][2]int
	for _, p := range forms {
		if p == "" {
			continue
		}
		for i := 0; i <= len(s)-len(p); {
			j := strings.Index(s[i:], p)
			if j < 0 {
				break
			}
			spans = append(spans, [2]int{i + j, i + j + len(p)})
			i += j + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	at := 0
	for k := 0; k < len(spans); {
		start, end := spans[k][0], spans[k][1]
		for k++; k < len(spans) && spans[k][0] <= end; k++ {
			end = max(end, spans[k][1])
		}
		b.WriteString(s[at:start])
		b.WriteString("xxxxx")
		at = end
	}
	b.WriteString(s[at:])
	return b.String()
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
