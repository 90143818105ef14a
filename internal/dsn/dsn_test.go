package dsn

import (
	"errors"
	"strings"
	"testing"

	"github.com/casleader/casleader/schema"
)

func TestForDialect(t *testing.T) {
	for _, tc := range []struct {
		d            schema.Dialect
		in, driver   string
		err, notEcho string
	}{
		{schema.MySQL, "mysql://root@127.0.0.1:3306/test", "root@tcp(127.0.0.1:3306)/test", "", ""},
		{schema.MySQL, "mysql://app:p%40ss@db/test?parseTime=true", "app:p@ss@tcp(db:3306)/test?parseTime=true", "", ""},
		{schema.MySQL, "root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test", "", ""},
		{schema.MySQL, "app:p@ss@unix(/run/mysqld.sock)/test", "app:p@ss@unix(/run/mysqld.sock)/test", "", ""},
		{schema.Postgres, "postgres://u:pw@h/db", "postgres://u:pw@h/db", "", ""},
		{schema.Postgres, "host=h user=u password=pw dbname=db", "host=h user=u password=pw dbname=db", "", ""},
		{schema.MySQL, "mysq://root:s3cret@127.0.0.1/test", "", `unknown scheme "mysq": did you mean mysql://?`, "s3cret"},
		{schema.MySQL, "maria://root:s3cret@127.0.0.1/test", "", `did you mean mariadb://?`, "s3cret"},
		{schema.Postgres, "postgress://u:s3cret@h/db", "", `unknown scheme "postgress": did you mean postgres://?`, "s3cret"},
		{schema.Postgres, "oracle://u:s3cret@h/db", "", `unknown scheme "oracle": use mysql://`, "s3cret"},
		{schema.Postgres, "mysql://u:s3cret@h/db", "", "open it with store/mysql", "s3cret"},
		{schema.MySQL, "sqlite://e.db", "", "open it with store/sqlite", ""},
		{schema.Postgres, "u:s3c://ret@h/db", "", "unknown scheme: use", "s3c"},
	} {
		got, err := ForDialect(tc.d, tc.in)
		switch {
		case tc.err == "" && (err != nil || got.Driver != tc.driver || got.Dialect != tc.d):
			t.Errorf("ForDialect(%s, %q) = %+v, %v; want driver %q", tc.d, tc.in, got, err, tc.driver)
		case tc.err != "" && (!errors.Is(err, ErrBad) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ForDialect(%s, %q) = %v, want ErrBad saying %q", tc.d, tc.in, err, tc.err)
		case tc.notEcho != "" && strings.Contains(err.Error(), tc.notEcho):
			t.Errorf("ForDialect(%s, %q) = %v echoes the password", tc.d, tc.in, err)
		}
	}
}
