package sqlstore

import (
	"strings"
	"testing"

	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// TestMembersStatementsWithAndWithoutIncarnation: on a members table with the
// incarnation column the upsert writes it and the reads select it; on one
// without, the statements are those of the versions before it, and the reads
// select an empty incarnation in its place.
func TestMembersStatementsWithAndWithoutIncarnation(t *testing.T) {
	for _, c := range []struct {
		d        schema.Dialect
		inc      bool
		upsert   string
		list     string
		listOf   string
		rowWidth int
	}{
		{schema.Postgres, true,
			`INSERT INTO "m" (elect_key, member_id, role, paused, priority, incarnation, seen_at) VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp()), ($7, $8, $9, $10, $11, $12, clock_timestamp())` +
				` ON CONFLICT (elect_key, member_id) DO UPDATE SET role = excluded.role, paused = excluded.paused, priority = excluded.priority, incarnation = excluded.incarnation, seen_at = excluded.seen_at`,
			`SELECT member_id, role, paused, priority, incarnation, age FROM (SELECT member_id, role, paused, priority, incarnation AS incarnation, `,
			`SELECT elect_key, member_id, role, paused, priority, incarnation, age FROM (SELECT elect_key, member_id, role, paused, priority, incarnation AS incarnation, `,
			6},
		{schema.Postgres, false,
			`INSERT INTO "m" (elect_key, member_id, role, paused, priority, seen_at) VALUES ($1, $2, $3, $4, $5, clock_timestamp()), ($6, $7, $8, $9, $10, clock_timestamp())` +
				` ON CONFLICT (elect_key, member_id) DO UPDATE SET role = excluded.role, paused = excluded.paused, priority = excluded.priority, seen_at = excluded.seen_at`,
			`SELECT member_id, role, paused, priority, incarnation, age FROM (SELECT member_id, role, paused, priority, '' AS incarnation, `,
			`SELECT elect_key, member_id, role, paused, priority, incarnation, age FROM (SELECT elect_key, member_id, role, paused, priority, '' AS incarnation, `,
			5},
		{schema.MySQL, true,
			"REPLACE INTO `m` (elect_key, member_id, role, paused, priority, incarnation, seen_at) VALUES (?, ?, ?, ?, ?, ?, NOW(6)), (?, ?, ?, ?, ?, ?, NOW(6))",
			"SELECT member_id, role, paused, priority, incarnation, age FROM (SELECT member_id, role, paused, priority, incarnation AS incarnation, ",
			"SELECT elect_key, member_id, role, paused, priority, incarnation, age FROM (SELECT elect_key, member_id, role, paused, priority, incarnation AS incarnation, ",
			6},
		{schema.MySQL, false,
			"REPLACE INTO `m` (elect_key, member_id, role, paused, priority, seen_at) VALUES (?, ?, ?, ?, ?, NOW(6)), (?, ?, ?, ?, ?, NOW(6))",
			"SELECT member_id, role, paused, priority, incarnation, age FROM (SELECT member_id, role, paused, priority, '' AS incarnation, ",
			"SELECT elect_key, member_id, role, paused, priority, incarnation, age FROM (SELECT elect_key, member_id, role, paused, priority, '' AS incarnation, ",
			5},
	} {
		quoted := `"m"`
		if c.d == schema.MySQL {
			quoted = "`m`"
		}
		q := membersQueries{d: c.d, t: quoted, inc: c.inc}
		if got := q.upsert(2); got != c.upsert {
			t.Errorf("%s inc=%v upsert:\n got %s\nwant %s", c.d, c.inc, got, c.upsert)
		}
		if got := q.list(); !strings.HasPrefix(got, c.list) {
			t.Errorf("%s inc=%v list:\n got %s\nwant prefix %s", c.d, c.inc, got, c.list)
		}
		if got := q.listOf(1); !strings.HasPrefix(got, c.listOf) {
			t.Errorf("%s inc=%v listOf:\n got %s\nwant prefix %s", c.d, c.inc, got, c.listOf)
		}
		row := q.row(store.Member{Key: "k", ID: "a", Incarnation: "i"})
		if len(row) != c.rowWidth || len(q.written()) != c.rowWidth {
			t.Errorf("%s inc=%v: a row has %d arguments for %d columns, want %d", c.d, c.inc, len(row), len(q.written()), c.rowWidth)
		}
	}
}
