package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// columnsQuery returns the catalog query that lists the columns of table in dialect
// d as (name, type, collation, 1 if the column is part of the primary key else 0),
// and its arguments. It lists nothing for a table that
// does not exist (or that the user may not see).
func columnsQuery(d schema.Dialect, table, quoted string) (string, []any) {
	sch, name, qualified := strings.Cut(table, ".")
	if !qualified {
		sch, name = "", table
	}
	switch d {
	case schema.MySQL:
		var s any // NULL: the connection's database
		if qualified {
			s = sch
		}
		return `SELECT COLUMN_NAME, COLUMN_TYPE, COALESCE(COLLATION_NAME, ''), COLUMN_KEY = 'PRI' FROM information_schema.COLUMNS` +
			` WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`, []any{s, name}
	case schema.Postgres:
		return `SELECT attname::text, format_type(atttypid, atttypmod), '', CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_index i` +
			` WHERE i.indrelid = attrelid AND i.indisprimary AND attnum = ANY(i.indkey)) THEN 1 ELSE 0 END FROM pg_catalog.pg_attribute` +
			` WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped`, []any{quoted}
	default:
		if !qualified {
			sch = "main"
		}
		return `SELECT name, type, '', pk > 0 FROM pragma_table_info(?, ?)`, []any{name, sch}
	}
}

// Check verifies that the election table exists with casleader's columns, each of a
// type that holds what casleader writes (see [catalog.CheckColumns]), with elect_key
// as its primary key ([catalog.CheckKey]), and that this user may read it; and that
// the members table, if it exists, has its primary key (elect_key, member_id). It writes nothing. A table with a wrong or missing column is a
// deployment error that wraps [schema.ErrWrongTable], names each column with the
// type found and the type needed, and says how to fix it.
//
// Every store runs the same check once before its first statement (until it has
// passed), so that an election never starts on a wrong table.
func (c *Core) Check(ctx context.Context) error {
	found, key, err := c.columns(ctx, c.table)
	if err != nil {
		return c.wrap("check", "", err)
	}
	if len(found) > 0 {
		err := catalog.CheckColumns(c.dialect, c.table, found)
		if err == nil {
			err = catalog.CheckKey(c.dialect, c.table, key, catalog.Key)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", store.ErrDeployment, err)
		}
	}
	// A missing table lists no columns: this read says so (or that the user may
	// not read it), with what to do.
	n := 0
	err = c.b.QueryRow(ctx, c.q.check).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return c.wrap("check", "", err)
	}
	if err := c.checkMembersKey(ctx); err != nil {
		return err
	}
	c.detectGalera(ctx)
	c.checked.Store(true)
	return nil
}

// checkMembersKey refuses a members table that exists without its primary key
// (rows would pile up, and the preferred-leader rule read them), and notes
// whether it has the incarnation column (see [Core.membersShape]). A missing
// members table, or one this user may not see, is left to the members view's own
// warnings: elections do not need it.
func (c *Core) checkMembersKey(ctx context.Context) error {
	name := c.MembersTable()
	found, key, err := c.columns(ctx, name)
	if err != nil || len(found) == 0 {
		return nil
	}
	c.noteMembers(found)
	return schemaKeyError(c.dialect, name, key, catalog.MembersKey)
}

// detectGalera asks a MySQL server once whether it is a Galera node (see
// [Core.oneClock]); an error leaves the answer unknown.
func (c *Core) detectGalera(ctx context.Context) {
	if c.dialect != schema.MySQL || c.wsrep.Load() != 0 {
		return
	}
	var name, value string
	err := c.b.QueryRow(ctx, `SHOW VARIABLES LIKE 'wsrep_on'`).Scan(&name, &value)
	switch {
	case errors.Is(err, sql.ErrNoRows): // MySQL without wsrep
		c.wsrep.Store(1)
	case err != nil:
	case strings.EqualFold(value, "ON"):
		c.wsrep.Store(2)
	default:
		c.wsrep.Store(1)
	}
}

// columns lists the columns of table as the catalog describes them, and the names
// of those in its primary key. It lists nothing for a table that does not exist
// (or that the user may not see).
func (c *Core) columns(ctx context.Context, table string) (found []catalog.FoundColumn, key []string, err error) {
	quoted, err := ident.Quote(c.dialect, table)
	if err != nil {
		return nil, nil, err
	}
	q, args := columnsQuery(c.dialect, table, quoted)
	rows, err := c.b.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			col   catalog.FoundColumn
			inKey int64
		)
		if err := rows.Scan(&col.Name, &col.Type, &col.Collation, &inKey); err != nil {
			return nil, nil, err
		}
		found = append(found, col)
		if inKey != 0 {
			key = append(key, col.Name)
		}
	}
	return found, key, rows.Err()
}

// upgrade adds to an existing election table the columns that later versions
// added (see [catalog.Upgrade]).
func (c *Core) upgrade(ctx context.Context) error {
	return c.upgradeTable(ctx, c.table, func(found []catalog.FoundColumn) ([]string, error) {
		return catalog.Upgrade(c.dialect, c.table, found)
	}, func(stmt string, err error) error {
		if errors.Is(err, ErrNoPrivilege) {
			return fmt.Errorf("%w: table %s lacks columns that this version adds, and this user may not add them: run `casleader migrate` once as a user with ALTER on it (it runs %s): %w",
				store.ErrDeployment, c.table, stmt, err)
		}
		return fmt.Errorf("upgrade table %q (%s) with %s: %w", c.table, c.dialect, stmt, err)
	})
}

// upgradeTable runs on table the statements that plan returns for the columns
// found in it. A statement that fails is success when a read of the columns then
// plans it no more (another replica of this version ran it at the same moment);
// otherwise failed says what its error, classified, means (nil: go on without it).
func (c *Core) upgradeTable(ctx context.Context, table string, plan func([]catalog.FoundColumn) ([]string, error),
	failed func(stmt string, err error) error) error {
	found, _, err := c.columns(ctx, table)
	if err != nil {
		return nil // the check that follows reports it, with what to do
	}
	stmts, err := plan(found)
	if err != nil {
		return err
	}
	for _, s := range stmts {
		_, err := c.b.Exec(ctx, s)
		if err == nil {
			continue
		}
		if again, _, cerr := c.columns(ctx, table); cerr == nil {
			if left, _ := plan(again); !slices.Contains(left, s) {
				continue // another replica ran it
			}
		}
		if err = failed(s, c.classify(err)); err != nil {
			return err
		}
	}
	return nil
}

// ready runs [Core.Check] before the store's first statement, until it passes.
func (c *Core) ready(ctx context.Context) error {
	if c.checked.Load() {
		return nil
	}
	return c.Check(ctx)
}
