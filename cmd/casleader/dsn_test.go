package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/casleader/casleader/schema"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		dialect  schema.Dialect
		driver   string // "" = not checked
	}{
		{"MySQLURL", "mysql://u:p@db.example:3307/app?parseTime=true", schema.MySQL, "u:p@tcp(db.example:3307)/app?parseTime=true"},
		{"MySQLURLDefaultPort", "mysql://u@db/app", schema.MySQL, "u@tcp(db:3306)/app"},
		{"MySQLURLNoHost", "mysql:///app", schema.MySQL, "tcp(127.0.0.1:3306)/app"},
		{"MySQLURLPercentEncodedPassword", "mysql://u:p%40ss%2Fw@h:3306/app", schema.MySQL, "u:p@ss/w@tcp(h:3306)/app"},
		{"MySQLURLSessionVariable", "mysql://u@h/app?sql_mode=ANSI", schema.MySQL, "u@tcp(h:3306)/app?sql_mode=ANSI"},
		{"MySQLURLSocket", "mysql://u@localhost/app?socket=/run/mysqld/mysqld.sock", schema.MySQL, "u@unix(/run/mysqld/mysqld.sock)/app"},
		{"MySQLURLIPv6", "mysql://u@[::1]:3306/app", schema.MySQL, "u@tcp([::1]:3306)/app"},
		{"MariaDBScheme", "mariadb://u@h/app", schema.MySQL, "u@tcp(h:3306)/app"},
		{"GoSQLDriverDSNAfterScheme", "mysql://root@tcp(127.0.0.1:3306)/test", schema.MySQL, "root@tcp(127.0.0.1:3306)/test"},
		{"GoSQLDriverDSNWithPassword", "mysql://root:pw@tcp(127.0.0.1:3306)/test?timeout=1s", schema.MySQL, "root:pw@tcp(127.0.0.1:3306)/test?timeout=1s"},
		{"PostgresURL", "postgres://u:p@h:5432/app?sslmode=disable", schema.Postgres, "postgres://u:p@h:5432/app?sslmode=disable"},
		{"PostgresqlScheme", "postgresql://u@h/app", schema.Postgres, "postgresql://u@h/app"},
		{"SQLiteURL", "sqlite://data/e.db", schema.SQLite, "data/e.db"},
		{"SQLiteAbsoluteURL", "sqlite:///var/lib/e.db", schema.SQLite, "/var/lib/e.db"},
		{"SQLiteOpaque", "sqlite:e.db", schema.SQLite, "e.db"},
		{"PlainPath", "casleader.db", schema.SQLite, "casleader.db"},
		{"PlainAbsolutePath", "/tmp/x/casleader.db", schema.SQLite, "/tmp/x/casleader.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDSN(tc.in)
			if err != nil {
				t.Fatalf("parseDSN(%q): %v", tc.in, err)
			}
			if got.dialect != tc.dialect || (tc.driver != "" && got.driver != tc.driver) {
				t.Fatalf("parseDSN(%q) = %s %q, want %s %q", tc.in, got.dialect, got.driver, tc.dialect, tc.driver)
			}
		})
	}
}

func TestParseDSNRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"Empty", "", "empty"},
		{"UnknownScheme", "oracle://u@h/db", "unknown scheme"},
		{"GoSQLDriverDSNWithoutScheme", "root:s3cret@tcp(127.0.0.1:3306)/test", "mysql://"},
		{"PostgresKeyValue", "host=h user=u password=s3cret dbname=app", "postgres://"},
		{"MySQLBadPort", "mysql://u:s3cret@h:port/db", "invalid port"},
		{"MySQLTwoPathSegments", "mysql://u@h/a/b", "one database name"},
		{"PostgresBadURL", "postgres://u:s3cret@h:port/db", "PostgreSQL URL"},
		{"SQLiteEmpty", "sqlite://", "empty"},
		{"SQLiteQuery", "sqlite://e.db?mode=ro", "not allowed"},
		// A password with an unencoded character that ends a URL's user information
		// early: the parsers' messages would quote a piece of it.
		{"MySQLURLHashInPassword", "mysql://app:s3cret#3xyz@127.0.0.1:3306/test", "'#' is not allowed"},
		{"MySQLURLHashEarlyInPassword", "mysql://app:Tr0#ub4s3cret@127.0.0.1:3306/test", "'#' is not allowed"},
		{"MySQLURLSlashInPassword", "mysql://app:s3c/ret@127.0.0.1:3306/test", "invalid port"},
		{"MySQLURLDigitsSlashInPassword", "mysql://app:3306/s3cret@127.0.0.1:3306/test", "an '@' after the host"},
		{"MySQLURLDigitsSlashesInPassword", "mysql://app:3306/s3c/ret@127.0.0.1:3306/test", "an '@' after the host"},
		{"MySQLURLQuestionInPassword", "mysql://app:s3c?ret@127.0.0.1:3306/test", "invalid port"},
		{"MySQLURLDigitsQuestionInPassword", "mysql://app:12?s3cret@127.0.0.1:3306/test", "an '@' after the host"},
		{"MySQLURLBadEscapeInPassword", "mysql://app:s3%zcret@127.0.0.1:3306/test", "percent-encode"},
		{"MySQLURLSpaceInPassword", "mysql://app:s3c ret@127.0.0.1:3306/test", "percent-encode"},
		{"GoSQLDriverBadParam", "mysql://app:s3cret@tcp(127.0.0.1:3306)/test?parseTime=s3cret", "true or false"},
		{"GoSQLDriverUnterminatedAddress", "mysql://app:s3cret@tcp(127.0.0.1:3306/test", "closing ')'"},
		{"PostgresHashInPasswordBadPort", "postgres://app:s3c#ret@127.0.0.1:port/test", "invalid port"},
		{"PostgresSlashInPassword", "postgres://app:s3c/ret@127.0.0.1:5432/test", "PostgreSQL URL"},
		{"PostgresBadSSLMode", "postgres://app:s3cret@127.0.0.1:5432/test?sslmode=s3cret", "sslmode"},
		{"PostgresKeyValueUnquoted", "host=h user=u password=s3c ret dbname=app", "postgres://"},
		{"SQLitePathWithHash", "app:s3c#ret@h/db", "not allowed"},
		{"SchemeHoldsThePassword", "app:s3cret://h/db", "unknown scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDSN(tc.in)
			if !errors.Is(err, errBadDSN) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseDSN(%q) = %v, want errBadDSN saying %q", tc.in, err, tc.want)
			}
			for _, piece := range []string{"s3c", "ret", "3xyz", "Tr0"} {
				if strings.Contains(err.Error(), piece) {
					t.Fatalf("the error shows a piece of the password (%q): %v", piece, err)
				}
			}
		})
	}
}

func TestRedactHidesEveryFormOfThePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, raw, decoded string }{
		{"mysql://u:s3cret@h:3306/db", "s3cret", "s3cret"},
		{"mysql://u:s3%40cret@h:3306/db", "s3%40cret", "s3@cret"},
		{"mysql://u:s3cret@tcp(h:3306)/db", "s3cret", "s3cret"},
		{"postgres://u:s3cret@h/db", "s3cret", "s3cret"},
		{"postgres://u:s3%2Fcret@h/db", "s3%2Fcret", "s3/cret"},
		{"mysql://u:s3cret@h:port/db", "s3cret", "s3cret"}, // unparseable URL
	} {
		leaks := func(s string) bool { return strings.Contains(s, tc.raw) || strings.Contains(s, tc.decoded) }
		if got := redact(tc.dsn); leaks(got) {
			t.Errorf("redact(%q) = %q", tc.dsn, got)
		}
		tgt, err := parseDSN(tc.dsn)
		if err != nil {
			tgt = target{raw: tc.dsn}
		}
		msg := "dial " + tc.dsn + " failed (driver DSN " + tgt.driver + ")"
		if got := redactError(errors.New(msg), tgt).Error(); leaks(got) {
			t.Errorf("redactError(%q) = %q", tc.dsn, got)
		}
	}
}

// FuzzParseDSNNeverEchoesThePassword: whatever characters a password holds, unencoded,
// and wherever they move the boundaries a parser sees, no error of parseDSN quotes any
// piece of it, and for a DSN that parses, redact and redactError hide it (in the DSN
// and in the driver's DSN). The password holds a marker no other part of the DSN
// holds, at a position the fuzzer chooses: any piece of the password printed with the
// marker is a leak.
func FuzzParseDSNNeverEchoesThePassword(f *testing.F) {
	for _, p := range []string{"Tr0ub4dor#3xyz", "#", "a@b", "a/b", "a?b", "3306/x", "12?x", "1#x", "%zz", "a b", ":", "@@", "//", "x)"} {
		for form := range 7 {
			f.Add(form, "app", p[:len(p)/2], p[len(p)/2:], "127.0.0.1:3306", "test")
		}
	}
	f.Fuzz(func(t *testing.T, form int, user, before, after, host, db string) {
		const marker = "ZQ"
		for _, s := range []string{user, before, after, host, db} {
			if strings.ContainsAny(s, "Zz") { // z: no "%5A"-style spelling either
				return
			}
		}
		password := before + marker + after
		var dsn string
		switch (form%7 + 7) % 7 {
		case 0:
			dsn = "mysql://" + user + ":" + password + "@" + host + "/" + db
		case 1:
			dsn = "mariadb://" + user + ":" + password + "@" + host + "/" + db
		case 2:
			dsn = "mysql://" + user + ":" + password + "@tcp(" + host + ")/" + db
		case 3:
			dsn = "postgres://" + user + ":" + password + "@" + host + "/" + db
		case 4:
			if strings.Contains(password, "&") {
				return // in every reading a '&' ends the parameter: the rest is another one
			}
			dsn = "postgres://" + host + "/" + db + "?password=" + password
		case 5:
			dsn = "host=" + host + " user=" + user + " password=" + password + " dbname=" + db
		default:
			dsn = user + ":" + password + "@tcp(" + host + ")/" + db
		}
		tgt, err := parseDSN(dsn)
		if err != nil {
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("parseDSN(%q) = %q: the error shows a piece of the password", dsn, err)
			}
			return
		}
		if got := redact(dsn); strings.Contains(got, marker) {
			t.Fatalf("redact(%q) = %q", dsn, got)
		}
		msg := "connect " + dsn + " (" + tgt.driver + "): refused"
		if got := redactError(errors.New(msg), tgt).Error(); strings.Contains(got, marker) {
			t.Fatalf("redactError of %q = %q", dsn, got)
		}
	})
}
