package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/internal/retry"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// CreateTable creates the election table and its members table (see
// [ident.MembersTable]) if they are missing, through the store's own connection,
// and checks them. Every replica may call it at every start:
//
//   - tables that exist and are right are checked, not created: no CREATE right
//     is needed, only the election's own (SELECT on the tables);
//   - replicas that find a table missing at the same moment all succeed: a
//     replica whose CREATE fails checks again, and a table that another replica
//     created meanwhile is success (PostgreSQL's CREATE TABLE IF NOT EXISTS is
//     not atomic: concurrent ones fail with a unique violation in its catalog);
//   - a missing table that this user may not create is a deployment error that
//     says to run `casleader migrate` once as a user who may;
//   - a table made by an earlier version gets the columns added since (see
//     [catalog.Upgrade]): that needs the right to alter it, once;
//   - a transient error (SQLite's BUSY, or SCHEMA while another replica creates
//     its tables) is retried a few times before it is returned.
func (c *Core) CreateTable(ctx context.Context) error {
	err := c.createTable(ctx)
	for attempt := 1; attempt < createTries && errors.Is(err, store.ErrTransient); attempt++ {
		if serr := retry.Sleep(ctx, retry.Backoff(attempt, 20*time.Millisecond, time.Second)); serr != nil {
			return err
		}
		err = c.createTable(ctx)
	}
	return err
}

// createTries is how many times CreateTable tries when it fails with a transient
// error.
const createTries = 6

func (c *Core) createTable(ctx context.Context) error {
	ddl, err := schema.DDL(c.dialect, c.table)
	if err != nil {
		return err
	}
	// A table made by an earlier version first gets the columns added since
	// (catalog.Upgrade); a current one needs no statement, and so no right.
	if err := c.upgrade(ctx); err != nil {
		return err
	}
	if err := c.ensure(ctx, c.table, ddl, c.Check); err != nil {
		return err
	}
	return c.CreateMembersTable(ctx)
}

// CreateMembersTable creates the members table if it is missing, and checks its
// key, with the rules of [Core.CreateTable]. A members table made by an earlier
// version gets the columns added since (incarnation) when this user may alter
// it; otherwise the store reads and writes its rows without them.
func (c *Core) CreateMembersTable(ctx context.Context) error {
	ddl, err := schema.MembersDDL(c.dialect, c.table)
	if err != nil {
		return err
	}
	if err := c.upgradeMembers(ctx); err != nil {
		return err
	}
	return c.ensure(ctx, c.MembersTable(), ddl, c.checkMembers)
}

// ensure checks table, and creates it with ddl only when check finds it missing
// (or not readable); a CREATE that fails is success when the table passes check
// after it (another replica created it).
func (c *Core) ensure(ctx context.Context, table, ddl string, check func(context.Context) error) error {
	err := check(ctx)
	if err == nil || !(errors.Is(err, ErrMissingTable) || errors.Is(err, ErrNoPrivilege)) {
		return err
	}
	_, cerr := c.b.Exec(ctx, ddl)
	if err := check(ctx); err == nil || cerr == nil {
		return err
	}
	cerr = c.classify(cerr)
	if sch, _, qualified := strings.Cut(table, "."); qualified && errors.Is(cerr, ErrNoSchema) {
		what := "database"
		if c.dialect == schema.Postgres {
			what = "schema"
		}
		return fmt.Errorf("%w: table %s: on %s the part before the dot names a %s, and there is no %s %q: name the table without it (the connection's default is used), or create that %s first: %w",
			store.ErrDeployment, table, c.dialect, what, what, sch, what, cerr)
	}
	if errors.Is(cerr, ErrNoPrivilege) || c.dialect == schema.SQLite && errors.Is(cerr, store.ErrNotWritable) {
		return fmt.Errorf("%w: table %s is missing (or this user may not read it) and this user may not create it: run `casleader migrate` once as a user with CREATE on the database, then grant this user its rights on the table (see Least privilege in docs/operations.md): %w",
			store.ErrDeployment, table, cerr)
	}
	return fmt.Errorf("create table %s (%s): %w", table, c.dialect, cerr)
}

// checkMembers verifies that the members table exists with its primary key, and
// notes whether it has the incarnation column (see [Core.membersShape]).
func (c *Core) checkMembers(ctx context.Context) error {
	name := c.MembersTable()
	found, key, err := c.columns(ctx, name)
	if err != nil {
		return c.wrapMembers("check", name, err)
	}
	if len(found) == 0 {
		return &store.MissingTableError{Table: name, Dialect: string(c.dialect), Op: "check", Err: ErrMissingTable}
	}
	c.noteMembers(found)
	return schemaKeyError(c.dialect, name, key, catalog.MembersKey)
}

// schemaKeyError is [catalog.CheckKey]'s error as a deployment error.
func schemaKeyError(d schema.Dialect, table string, key, want []string) error {
	if err := catalog.CheckKey(d, table, key, want); err != nil {
		return fmt.Errorf("%w: %w", store.ErrDeployment, err)
	}
	return nil
}
