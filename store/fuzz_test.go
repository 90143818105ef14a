package store

import (
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzDecode feeds decode every combination of NULLs and values a corrupt or
// hostile row could hold. It must never panic, must reject with ErrInvalidRow
// anything casleader cannot have written, and what it accepts must be a Record the
// election logic can trust.
func FuzzDecode(f *testing.F) {
	f.Add("k", true, int64(1), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(9), true, "", true, int64(3), true, int64(5_000_000), true, "b", true, int64(1))
	f.Add("k", false, int64(0), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(-1), true, "a", true, int64(1), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(3), true, int64(0), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(-3_600_000_000), true, "", true, int64(0))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(math.MaxInt64), true, "", true, int64(0))
	f.Add("k", true, int64(math.MaxInt64), true, "a", true, int64(math.MaxInt64), true, int64(math.MinInt64), true, "", true, int64(-7))
	f.Add("k", true, int64(2), true, "a", true, int64(1), true, int64(-30_700_000_000_000_000), true, "", true, int64(0)) // tick_time in the year 3000
	f.Fuzz(func(t *testing.T, key string, vOK bool, v int64, lOK bool, leader string, tOK bool, term int64,
		aOK bool, ageMicros int64, hOK bool, handover string, sOK bool, stepdown int64) {
		rec, err := decode(key,
			sql.NullInt64{Int64: v, Valid: vOK}, sql.NullString{String: leader, Valid: lOK},
			sql.NullInt64{Int64: term, Valid: tOK}, sql.NullInt64{Int64: ageMicros, Valid: aOK},
			sql.NullString{String: handover, Valid: hOK}, sql.NullInt64{Int64: stepdown, Valid: sOK})
		if err != nil {
			if !errors.Is(err, ErrInvalidRow) {
				t.Fatalf("decode error %v is not ErrInvalidRow", err)
			}
			if !strings.Contains(err.Error(), "fix") {
				t.Fatalf("decode error %q does not say what to do", err)
			}
			return
		}
		if !vOK || !lOK || !tOK || !aOK || !hOK || !sOK {
			t.Fatalf("a NULL column was accepted: %+v", rec)
		}
		if rec.Version < 1 || rec.Version >= VersionLimit || rec.Term < 0 || rec.Term > rec.Version {
			t.Fatalf("accepted version %d term %d", rec.Version, rec.Term)
		}
		if ageMicros < -FutureTolerance.Microseconds() {
			t.Fatalf("a tick_time %d µs in the future was accepted as age %v", -ageMicros, rec.Age)
		}
		if rec.Age < 0 {
			t.Fatalf("negative age %v from %d µs", rec.Age, ageMicros)
		}
		if want := time.Duration(max(-ageMicros, 0)) * time.Microsecond; rec.Ahead != want {
			t.Fatalf("ahead %v from %d µs, want %v", rec.Ahead, ageMicros, want)
		}
		if ageMicros > 0 && ageMicros <= math.MaxInt64/1000 && rec.Age != time.Duration(ageMicros)*time.Microsecond {
			t.Fatalf("age %v from %d µs", rec.Age, ageMicros)
		}
		// An age too large for a Duration is an old lease, never a live one.
		if ageMicros > math.MaxInt64/1000 && !rec.Expired(time.Hour) {
			t.Fatalf("age of %d µs (wrapped to %v) reads as a live lease", ageMicros, rec.Age)
		}
		if rec.Key != key || rec.LeaderID != leader || rec.HandoverTo != handover || rec.StepDown != (stepdown != 0) {
			t.Fatalf("decode changed a value: %+v", rec)
		}
	})
}

// FuzzValidateName: what validateName accepts every database stores and compares
// the same way.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"k", "", "k ", " k", "k\x00", "k\xff", "ключ", strings.Repeat("k", 256), "'; DROP TABLE x; --"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := validateName("key", s)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%v is not ErrInvalidArgument", err)
			}
			return
		}
		if s == "" || len(s) > MaxKeyLen || strings.IndexByte(s, 0) >= 0 || strings.HasSuffix(s, " ") {
			t.Fatalf("accepted %q", s)
		}
	})
}

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

// checkRedacted fails t if Redact(dsn), or a RedactError of a message holding
// dsn, still holds marker (the start of the password).
func checkRedacted(t *testing.T, dsn, marker string) {
	t.Helper()
	if red := Redact(dsn); strings.Contains(red, marker) {
		t.Fatalf("Redact(%q) = %q still holds part of the password", dsn, red)
	}
	cause := errors.New("dial failed")
	err := RedactError(errors.Join(errors.New("connect "+dsn+": refused"), cause), dsn)
	if strings.Contains(err.Error(), marker) {
		t.Fatalf("RedactError(%q) = %q still holds part of the password", dsn, err)
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
		red := Redact(tc.dsn)
		if strings.Contains(red, tc.password) || strings.Contains(red, "s3cr3t") {
			t.Errorf("Redact(%q) = %q", tc.dsn, red)
		}
		err := RedactError(errors.New("connect "+tc.dsn+": refused"), tc.dsn)
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), tc.password) {
			t.Errorf("RedactError(%q) = %q", tc.dsn, err)
		}
	}
}
