package secret

import (
	"errors"
	"strings"
	"testing"
)

// TestRedactKeepsMessagesReadable: the password field is masked, and nothing
// else: a short password ("a") does not garble "table" or "database=test", and a
// password equal to the user and database names ("casleader") leaves them
// readable. The number of x's says nothing about the password's length.
func TestRedactKeepsMessagesReadable(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://app:a@db:5432/test?sslmode=disable", "postgres://app:xxxxx@db:5432/test?sslmode=disable"},
		{"mysql://casleader:casleader@mysql:3306/casleader", "mysql://casleader:xxxxx@mysql:3306/casleader"},
		{"casleader:casleader@tcp(mysql:3306)/casleader", "casleader:xxxxx@tcp(mysql:3306)/casleader"},
		{"postgres://app:pa#ss@db/test", "postgres://app:xxxxx@db/test"},
		{"host=db user=app password=a dbname=test", "host=db user=app password=xxxxx dbname=test"},
		{"postgres://db/test?user=app&password=pa#ss", "postgres://db/test?user=app&password=xxxxx"},
	} {
		if got := Redact(tc.dsn); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
		msg := `check table "casleader_election" (database=test user=app): connect ` + tc.dsn + ": refused"
		got := RedactError(errors.New(msg), tc.dsn).Error()
		want := `check table "casleader_election" (database=test user=app): connect ` + tc.want + ": refused"
		if got != want {
			t.Errorf("RedactError(%q)\n got %q\nwant %q", tc.dsn, got, want)
		}
		for _, p := range []string{":a@", "pa#ss", ":casleader@"} {
			if strings.Contains(got, p) {
				t.Errorf("RedactError(%q) = %q shows the password", tc.dsn, got)
			}
		}
	}
}
