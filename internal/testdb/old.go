package testdb

import (
	"strings"
	"testing"

	"github.com/casleader/casleader/schema"
)

// MembersDDLBeforeIncarnation returns the CREATE TABLE statement of the members
// table of the election table table, as the versions before its incarnation
// column created it: today's without that column.
func MembersDDLBeforeIncarnation(t testing.TB, d schema.Dialect, table string) string {
	t.Helper()
	ddl, err := schema.MembersDDL(d, table)
	if err != nil {
		t.Fatalf("members DDL of %q (%s): %v", table, d, err)
	}
	var old []string
	dropped := 0
	for _, l := range strings.Split(ddl, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "incarnation" {
			dropped++
			continue
		}
		old = append(old, l)
	}
	if dropped != 1 {
		t.Fatalf("members DDL of %s has not one incarnation column to leave out:\n%s", d, ddl)
	}
	return strings.Join(old, "\n")
}
