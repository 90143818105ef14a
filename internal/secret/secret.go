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
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && IsURLScheme(scheme) {
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

// unescape returns s unescaped by f, or s itself when it is not validly escaped.
func unescape(f func(string) (string, error), s string) string {
	if u, err := f(s); err == nil {
		return u
	}
	return s
}

// The matchers below are hand-written rather than regular expressions: package
// regexp would add a third of a megabyte to every program that opens a store.

// IsURLScheme reports whether s is the scheme of a URL (RFC 3986):
// [A-Za-z][A-Za-z0-9+.-]*.
func IsURLScheme(s string) bool {
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
	for _, sp := range queryPasswordSpans(rest) {
		out = append(out, rest[sp[0]:sp[1]])
	}
	return out
}

// queryPasswordSpans returns where the values of [queryPasswords] lie in rest.
func queryPasswordSpans(rest string) [][2]int {
	var out [][2]int
	for i := 0; i < len(rest); i++ {
		if rest[i] != '?' && rest[i] != '&' || !strings.HasPrefix(rest[i+1:], "password=") {
			continue
		}
		start := i + 1 + len("password=")
		end := len(rest)
		if amp := strings.IndexByte(rest[start:], '&'); amp >= 0 {
			end = start + amp
		}
		out = append(out, [2]int{start, end})
		i = end - 1 // the next match may start at the '&'
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

// spans returns where dsn holds a password, in every reading of it: as a URL's
// user information and password query parameters (pgx, a URL parser), as a libpq
// key=value setting, and as go-sql-driver reads it (which parses "app://x@/db" too,
// as user "app" with password "//x"). Masking these byte ranges, and nothing
// else, hides the password whatever it is ("a", or the user's own name) and
// leaves every other part of the DSN readable.
func spans(dsn string) [][2]int {
	var out [][2]int
	add := func(start, end int) {
		if end > start {
			out = append(out, [2]int{start, end})
		}
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok && IsURLScheme(scheme) {
		off := len(scheme) + len("://")
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			if c := strings.IndexByte(authority[:at], ':'); c >= 0 {
				add(off+c+1, off+at)
			}
		}
		// A query parameter overrides the user information's password in pgx, and
		// the query starts at a '?' after the user information, which may hold one.
		for _, sp := range queryPasswordSpans(rest) {
			add(off+sp[0], off+sp[1])
		}
	} else if at, ok := kvPassword(dsn); ok {
		_, raw := keyValue(dsn[at:])
		add(at, at+len(raw))
	} else if i := strings.LastIndex(dsn, "/"); i > 0 {
		if j := strings.LastIndex(dsn[:i], "@"); j >= 0 {
			if c := strings.IndexByte(dsn[:j], ':'); c >= 0 {
				add(c+1, j)
			}
		}
	}
	if start, end, ok := mysqlDriverSpan(dsn); ok {
		add(start, end)
	}
	return out
}

// mysqlDriverSpan returns where the password that go-sql-driver reads from dsn
// lies, whatever dsn looks like, when the driver accepts dsn's network part
// (between the last '@' and the last '/'): empty, "tcp" or "unix", or an address
// in parentheses. A URL such as "postgres://u:pw@db:5432/x" is no DSN of its.
func mysqlDriverSpan(dsn string) (start, end int, ok bool) {
	i := strings.LastIndex(dsn, "/")
	if i <= 0 {
		return 0, 0, false
	}
	j := strings.LastIndex(dsn[:i], "@")
	if j < 0 {
		return 0, 0, false
	}
	switch network := dsn[j+1 : i]; {
	case strings.Contains(network, "("):
		if !strings.HasSuffix(network, ")") {
			return 0, 0, false
		}
	case network != "" && network != "tcp" && network != "unix":
		return 0, 0, false
	}
	c := strings.IndexByte(dsn[:j], ':')
	return c + 1, j, c >= 0
}

// mask replaces each of the byte ranges spans of s by "xxxxx"; ranges that
// overlap (two readings of one password) are masked as one.
func mask(s string, spans [][2]int) string {
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

// Redact returns dsn with its password field (in every reading of dsn) replaced
// by "xxxxx". Only the field is replaced: a user, host or database name that
// equals the password stays as it is.
func Redact(dsn string) string { return mask(dsn, spans(dsn)) }

// RedactError returns err with every DSN of dsns that its message quotes
// replaced by the DSN redacted ([Redact]). Nothing else in the message is
// touched: messages are built never to hold a password elsewhere (parse errors
// describe the problem in words; servers do not echo passwords). The original
// error stays reachable with errors.Is and As.
func RedactError(err error, dsns ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := RedactString(msg, dsns...); red != msg {
		return redacted{msg: red, err: err}
	}
	return err
}

// RedactString returns s with every DSN of dsns that it quotes replaced by the
// DSN redacted ([Redact]), longest DSN first.
func RedactString(s string, dsns ...string) string {
	dsns = slices.Clone(dsns)
	slices.SortFunc(dsns, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dsns {
		if d != "" {
			if red := Redact(d); red != d {
				s = strings.ReplaceAll(s, d, red)
			}
		}
	}
	return s
}

type redacted struct {
	msg string
	err error
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }
