package catalog

import (
	"github.com/casleader/casleader/schema"

	"errors"
	"strings"
	"testing"
)

func TestCheckKey(t *testing.T) {
	for _, tc := range []struct {
		d           schema.Dialect
		found, want []string
		ok          bool
		says        string
	}{
		{schema.MySQL, []string{"elect_key"}, Key, true, ""},
		{schema.Postgres, []string{"member_id", "elect_key"}, MembersKey, true, ""},
		{schema.MySQL, nil, Key, false, "has no primary key, not (elect_key)"},
		{schema.Postgres, []string{"id"}, Key, false, "DROP CONSTRAINT"},
		{schema.MySQL, []string{"elect_key"}, MembersKey, false, "ADD PRIMARY KEY (elect_key, member_id)"},
		{schema.SQLite, []string{"version"}, Key, false, "re-create it with `casleader migrate`"},
	} {
		err := CheckKey(tc.d, "elect", tc.found, tc.want)
		if tc.ok {
			if err != nil {
				t.Errorf("CheckKey(%s, %v, %v) = %v", tc.d, tc.found, tc.want, err)
			}
			continue
		}
		if !errors.Is(err, schema.ErrWrongTable) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "elect") {
			t.Errorf("CheckKey(%s, %v, %v) = %v, want ErrWrongTable saying %q", tc.d, tc.found, tc.want, err, tc.says)
		}
	}
}
