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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseDSN(tc.in)
			if !errors.Is(err, errBadDSN) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseDSN(%q) = %v, want errBadDSN saying %q", tc.in, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
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
		msg := "dial " + tc.dsn + " failed; password " + tc.decoded
		if got := redactError(errors.New(msg), tc.dsn).Error(); leaks(got) {
			t.Errorf("redactError(%q) = %q", tc.dsn, got)
		}
		if tgt, err := parseDSN(tc.dsn); err == nil {
			if got := redactError(errors.New(tgt.driver), tc.dsn).Error(); leaks(got) {
				t.Errorf("the driver DSN of %q is not redacted: %q", tc.dsn, got)
			}
		}
	}
}
