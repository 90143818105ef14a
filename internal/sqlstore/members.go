package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// The members table (see [ident.MembersTable]) records who takes part in each
// election. Its statements never touch the election table: registering is one
// upsert per candidate (per group) and period, on a path of its own.

// membersQueries builds one dialect's statements on the members table t (quoted).
type membersQueries struct {
	d schema.Dialect
	t string
	// inc reports that the table has the incarnation column: a members table made
	// by an earlier version, that this user may not alter, has not (see
	// [Core.membersShape]). Without it, writes leave it out and reads return "".
	inc bool
}

// written returns the columns that an upsert writes from its arguments, in the
// order of [membersQueries.row].
func (m membersQueries) written() []string {
	cols := []string{"elect_key", "member_id", "role", "paused", "priority"}
	if m.inc {
		cols = append(cols, "incarnation")
	}
	return cols
}

// row returns the arguments of an upsert for r, in the order of
// [membersQueries.written].
func (m membersQueries) row(r store.Member) []any {
	paused := 0
	if r.Paused {
		paused = 1
	}
	args := []any{r.Key, r.ID, r.Role, paused, r.Priority}
	if m.inc {
		args = append(args, r.Incarnation)
	}
	return args
}

// incarnation is what the reads select as the incarnation: the column, or an
// empty string for a table without it.
func (m membersQueries) incarnation() string {
	if m.inc {
		return "incarnation"
	}
	return "''"
}

// ph returns the i-th placeholder (1-based).
func (m membersQueries) ph(i int) string {
	if m.d == schema.Postgres {
		return fmt.Sprintf("$%d", i)
	}
	return "?"
}

// now is the database clock as the dialect stores seen_at.
func (m membersQueries) now() string {
	switch m.d {
	case schema.MySQL:
		return "NOW(6)"
	case schema.Postgres:
		return "clock_timestamp()"
	default:
		return sqliteNow
	}
}

// age is the age of seen_at by the database clock, in microseconds.
func (m membersQueries) age() string {
	switch m.d {
	case schema.MySQL:
		return `TIMESTAMPDIFF(MICROSECOND, seen_at, NOW(6))`
	case schema.Postgres:
		return `(EXTRACT(EPOCH FROM (clock_timestamp() - seen_at)) * 1000000)::bigint`
	default:
		return sqliteNow + ` - seen_at`
	}
}

// upsert writes n rows of the columns [membersQueries.written] (key, id, role,
// paused, priority, and incarnation when the table has it), seen now. MySQL's
// REPLACE is used because its upsert cannot name the inserted values without
// VALUES(), which is deprecated in MySQL and fails in its new form on MariaDB; the
// members table has no triggers or foreign keys, so a replaced row is just a new row.
func (m membersQueries) upsert(n int) string {
	var b strings.Builder
	if m.d == schema.MySQL {
		b.WriteString("REPLACE INTO ")
	} else {
		b.WriteString("INSERT INTO ")
	}
	cols := m.written()
	b.WriteString(m.t + " (" + strings.Join(cols, ", ") + ", seen_at) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for j := 1; j <= len(cols); j++ {
			b.WriteString(m.ph(i*len(cols)+j) + ", ")
		}
		b.WriteString(m.now() + ")")
	}
	if m.d != schema.MySQL {
		set := make([]string, 0, len(cols)-1)
		for _, c := range append(cols[2:len(cols):len(cols)], "seen_at") { // all but the key
			set = append(set, c+" = excluded."+c)
		}
		b.WriteString(" ON CONFLICT (elect_key, member_id) DO UPDATE SET " + strings.Join(set, ", "))
	}
	return b.String()
}

// remove deletes the rows of one member (first argument) for n keys.
func (m membersQueries) remove(n int) string {
	var b strings.Builder
	b.WriteString("DELETE FROM " + m.t + " WHERE member_id = " + m.ph(1) + " AND elect_key IN (")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.ph(i + 2))
	}
	b.WriteString(")")
	return b.String()
}

// list reads the rows of a key (first argument) seen within a bound in
// microseconds (second argument): ID, role, paused, priority, incarnation (empty
// when the table has no such column) and age.
func (m membersQueries) list() string {
	// The age is computed once per row, so that the bound and the age returned
	// agree (PostgreSQL's clock_timestamp() moves within a statement).
	return `SELECT member_id, role, paused, priority, incarnation, age FROM (SELECT member_id, role, paused, priority, ` +
		m.incarnation() + ` AS incarnation, ` + m.age() + ` AS age FROM ` + m.t +
		` WHERE elect_key = ` + m.ph(1) + `) AS m WHERE age <= ` + m.ph(2) + ` ORDER BY member_id`
}

// prune deletes every row not seen for a bound in microseconds (the argument).
func (m membersQueries) prune() string {
	return `DELETE FROM ` + m.t + ` WHERE ` + m.age() + ` > ` + m.ph(1)
}

// members returns the statements of the members table, or an error when its name
// is not valid.
func (c *Core) members() (membersQueries, string, error) {
	name, err := ident.MembersTable(c.table)
	if err != nil {
		return membersQueries{}, "", err
	}
	quoted, err := ident.Quote(c.dialect, name)
	if err != nil {
		return membersQueries{}, "", err
	}
	return membersQueries{d: c.dialect, t: quoted}, name, nil
}

// wrapMembers classifies err and adds the operation and what to do when the
// members table is missing.
func (c *Core) wrapMembers(op, name string, err error) error {
	if err == nil {
		return nil
	}
	err = c.classify(err)
	if errors.Is(err, ErrMissingTable) {
		return fmt.Errorf("%w: members table %q does not exist: create it with `casleader migrate`, schema.Apply or the store's CreateTable (%s %s): %w",
			store.ErrDeployment, name, op, c.dialect, err)
	}
	if errors.Is(err, ErrWrongColumns) {
		// The table changed since its columns were read (re-created by an earlier
		// version, say): the next call reads them again.
		c.membersInc.Store(membersUnknown)
		return fmt.Errorf("%w: members table %q lacks a column that this store reads or writes (%s %s): the next call reads its columns again; `casleader migrate` adds the missing ones: %w",
			store.ErrDeployment, name, op, c.dialect, err)
	}
	return fmt.Errorf("%s members table %q: %w", op, name, err)
}

// MembersTable returns the name of the members table (see [ident.MembersTable]).
func (c *Core) MembersTable() string {
	name, _ := ident.MembersTable(c.table)
	return name
}

// validateMember checks the names of a row to write: its key and ID, and its
// incarnation when it has one.
func validateMember(m store.Member) error {
	if err := rules.ValidateNames(m.Key, m.ID); err != nil {
		return err
	}
	if m.Incarnation != "" {
		return rules.ValidateName("incarnation", m.Incarnation)
	}
	return nil
}

// PutMembers records members as seen now by the database clock: one statement per
// [store.MaxBatch] rows. Their Age is ignored; their Incarnation is written when
// the table has the column (see [Core.membersShape]). It never touches the
// election table.
func (c *Core) PutMembers(ctx context.Context, ms []store.Member) error {
	q, name, err := c.members()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := validateMember(m); err != nil {
			return err
		}
	}
	q.inc = c.membersShape(ctx)
	for len(ms) > 0 {
		n := min(len(ms), store.MaxBatch)
		args := make([]any, 0, n*len(q.written()))
		for _, m := range ms[:n] {
			args = append(args, q.row(m)...)
		}
		if _, err := c.b.Exec(ctx, q.upsert(n), args...); err != nil {
			return c.wrapMembers("write", name, err)
		}
		ms = ms[n:]
	}
	return nil
}

// DeleteMembers removes the rows of member id for keys: one statement per
// [store.MaxBatch] keys.
func (c *Core) DeleteMembers(ctx context.Context, id string, keys []string) error {
	q, name, err := c.members()
	if err != nil {
		return err
	}
	if err := rules.ValidateName("id", id); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), store.MaxBatch)
		args := make([]any, 0, n+1)
		args = append(args, id)
		for _, k := range keys[:n] {
			args = append(args, k)
		}
		if _, err := c.b.Exec(ctx, q.remove(n), args...); err != nil {
			return c.wrapMembers("delete from", name, err)
		}
		keys = keys[n:]
	}
	return nil
}

// Members returns the members of the election key seen within the last within by
// the database clock, ordered by ID. Rows of candidates that stopped writing
// (crashed, cut off) drop out once older than within.
func (c *Core) Members(ctx context.Context, key string, within time.Duration) ([]store.Member, error) {
	q, name, err := c.members()
	if err != nil {
		return nil, err
	}
	if err := rules.ValidateNames(key); err != nil {
		return nil, err
	}
	if within <= 0 {
		return nil, fmt.Errorf("%w: members within %v: the bound must be positive", store.ErrInvalidArgument, within)
	}
	q.inc = c.membersShape(ctx)
	rows, err := c.b.Query(ctx, q.list(), key, within.Microseconds())
	if err != nil {
		return nil, c.wrapMembers("read", name, err)
	}
	defer rows.Close()
	var out []store.Member
	for rows.Next() {
		var (
			m                        store.Member
			paused, priority, micros int64
		)
		if err := rows.Scan(&m.ID, &m.Role, &paused, &priority, &m.Incarnation, &micros); err != nil {
			return nil, c.wrapMembers("read", name, err)
		}
		m.Key, m.Paused, m.Priority = key, paused != 0, priority
		m.Age = max(time.Duration(micros)*time.Microsecond, 0)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, c.wrapMembers("read", name, err)
	}
	return out, nil
}

// PruneMembers deletes the rows of every key not written for longer than
// olderThan by the database clock (candidates that died), and returns how many.
func (c *Core) PruneMembers(ctx context.Context, olderThan time.Duration) (int64, error) {
	q, name, err := c.members()
	if err != nil {
		return 0, err
	}
	if olderThan <= 0 {
		return 0, fmt.Errorf("%w: prune members older than %v: the bound must be positive", store.ErrInvalidArgument, olderThan)
	}
	n, err := c.b.Exec(ctx, q.prune(), olderThan.Microseconds())
	return n, c.wrapMembers("prune", name, err)
}
