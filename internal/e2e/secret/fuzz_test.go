package secret_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/casleader/casleader/internal/secret"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzRedactMySQL: whatever password go-sql-driver reads from a DSN never survives
// Redact and RedactError. The password ends with a marker that no other part of
// the DSN holds, so any trace of it in the output is a leak.
func FuzzRedactMySQL(f *testing.F) {
	for _, p := range []string{"s3cr3t", "p@ss:w/rd", "pa(ss)", "a b", "x://y", "%41", "@@@", ":", "tcp"} {
		f.Add("app", p, "tcp(db:3306)", "elect")
	}
	f.Add("app", "//x", "", "elect")
	f.Fuzz(func(t *testing.T, user, password, addr, dbname string) {
		const marker = "ZQ"
		for _, s := range []string{user, addr, dbname} {
			if strings.Contains(s, "Z") {
				return
			}
		}
		password += marker // at the end, so that the password may start like a URL ("//")
		dsn := user + ":" + password + "@" + addr + "/" + dbname
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil || !strings.HasSuffix(cfg.Passwd, marker) {
			return // the driver reads another password, or none
		}
		checkRedacted(t, dsn, marker)
	})
}

// FuzzRedactPostgres: whatever password pgx reads from a URL or key=value DSN never
// survives Redact and RedactError. The password starts with a marker that no other
// part of the DSN holds, so any trace of it in the output is a leak.
func FuzzRedactPostgres(f *testing.F) {
	f.Add("app", "s3cr3t", "db:5432", "elect", 0)
	f.Add("app", "p@ss/w#rd?x", "db", "elect?sslmode=disable", 0)
	f.Add("app", "p%40ss", "db", "elect", 0)
	f.Add("", "s3 cr3t", "db", "elect", 1)
	f.Add("app", "it's \\ here", "db", "elect", 2)
	f.Add("app", "a b c", "db", "elect", 2)
	f.Fuzz(func(t *testing.T, user, password, host, rest string, form int) {
		const marker = "ZQ"
		for _, s := range []string{user, host, rest} {
			if strings.Contains(s, marker) || strings.Contains(s, "Z") {
				return
			}
		}
		password = marker + password
		var dsn string
		switch form % 3 {
		case 0:
			dsn = "postgres://" + user + ":" + password + "@" + host + "/" + rest
		case 1:
			dsn = "postgres://" + host + "/" + rest + "?password=" + password
		default:
			q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
			dsn = "host=" + host + " user=" + user + " password='" + q + "' dbname=" + rest
		}
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil || !strings.HasPrefix(cfg.Password, marker) {
			return // pgx reads no password, or another one
		}
		checkRedacted(t, dsn, marker)
	})
}

// checkRedacted fails t if secret.Redact(dsn), or a RedactError of a message holding
// dsn, still holds marker (the start of the password).
func checkRedacted(t *testing.T, dsn, marker string) {
	t.Helper()
	if red := secret.Redact(dsn); strings.Contains(red, marker) {
		t.Fatalf("secret.Redact(%q) = %q still holds part of the password", dsn, red)
	}
	cause := errors.New("dial failed")
	err := secret.RedactError(errors.Join(errors.New("connect "+dsn+": refused"), cause), dsn)
	if strings.Contains(err.Error(), marker) {
		t.Fatalf("secret.RedactError(%q) = %q still holds part of the password", dsn, err)
	}
	if !errors.Is(err, cause) {
		t.Fatal("RedactError broke the chain")
	}
}

// TestRedactHidesEveryDriversReading covers what the fuzzers found: DSNs that a
// driver reads differently from a URL parser.
func TestRedactHidesEveryDriversReading(t *testing.T) {
	for _, tc := range []struct{ dsn, password string }{
		{"app://s3cr3t@/elect", "//s3cr3t"},                              // go-sql-driver: user "app", password "//s3cr3t"
		{"postgres://app:pa#ss@db/elect", "pa#ss"},                       // pgx: '#' is data
		{"postgres://app:pa?ss@db/elect", "pa?ss"},                       // pgx: '?' in the user information
		{"postgres://app:wrong@db/elect?password=s3cr3t", "s3cr3t"},      // the query overrides
		{"postgres://?@/elect?password=s3cr3t", "s3cr3t"},                // a '?' before the query
		{"host=:// user=app password='s3cr3t' dbname=elect", "s3cr3t"},   // key=value holding "://"
		{"host=db user=app password='pw:s3cr3t' dbname=@/", "pw:s3cr3t"}, // also a go-sql-driver DSN
		{"postgres://app:s3cr3t @db/elect", "s3cr3t"},                    // pgx trims the space
	} {
		red := secret.Redact(tc.dsn)
		if strings.Contains(red, tc.password) || strings.Contains(red, "s3cr3t") {
			t.Errorf("secret.Redact(%q) = %q", tc.dsn, red)
		}
		err := secret.RedactError(errors.New("connect "+tc.dsn+": refused"), tc.dsn)
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), tc.password) {
			t.Errorf("secret.RedactError(%q) = %q", tc.dsn, err)
		}
	}
}
