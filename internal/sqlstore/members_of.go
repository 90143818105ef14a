package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/store"
)

// listOf reads the rows of n keys (the first n arguments) seen within a bound in
// microseconds (argument n+1), like list.
func (m membersQueries) listOf(n int) string {
	var in strings.Builder
	for i := range n {
		if i > 0 {
			in.WriteString(", ")
		}
		in.WriteString(m.ph(i + 1))
	}
	return `SELECT elect_key, member_id, role, paused, priority, incarnation, age FROM (SELECT elect_key, member_id, role, paused, priority, ` +
		m.incarnation() + ` AS incarnation, ` + m.age() + ` AS age FROM ` + m.t +
		` WHERE elect_key IN (` + in.String() + `)) AS m WHERE age <= ` + m.ph(n+1) + ` ORDER BY elect_key, member_id`
}

// MembersOf returns the members of the election keys seen within the last within
// by the database clock, ordered by key and ID: one statement per
// [store.MaxBatch] keys. A leader that prefers candidates of higher priority
// reads the members of the keys it leads with it.
func (c *Core) MembersOf(ctx context.Context, keys []string, within time.Duration) ([]store.Member, error) {
	q, name, err := c.members()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := rules.ValidateName("key", k); err != nil {
			return nil, err
		}
	}
	if within <= 0 {
		return nil, fmt.Errorf("%w: members within %v: the bound must be positive", store.ErrInvalidArgument, within)
	}
	q.inc = c.membersShape(ctx)
	var out []store.Member
	for len(keys) > 0 {
		n := min(len(keys), store.MaxBatch)
		args := make([]any, 0, n+1)
		for _, k := range keys[:n] {
			args = append(args, k)
		}
		args = append(args, within.Microseconds())
		if err := c.readMembers(ctx, q.listOf(n), name, args, &out); err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return out, nil
}

func (c *Core) readMembers(ctx context.Context, query, name string, args []any, out *[]store.Member) error {
	rows, err := c.b.Query(ctx, query, args...)
	if err != nil {
		return c.wrapMembers("read", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			m                        store.Member
			paused, priority, micros int64
		)
		if err := rows.Scan(&m.Key, &m.ID, &m.Role, &paused, &priority, &m.Incarnation, &micros); err != nil {
			return c.wrapMembers("read", name, err)
		}
		m.Paused, m.Priority = paused != 0, priority
		m.Age = max(time.Duration(micros)*time.Microsecond, 0)
		*out = append(*out, m)
	}
	if err := rows.Err(); err != nil {
		return c.wrapMembers("read", name, err)
	}
	return nil
}
