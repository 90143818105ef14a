package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/store"
)

// A members table made by a version before the incarnation column lacks it until
// `casleader migrate` or CreateTable adds it (as a user who may alter it). The
// store reads the table's columns once and writes and reads the rows with the
// column or without it: a least-privilege user on a table that is not upgraded
// yet keeps its members view, with no incarnation.

// What the store knows of the members table's incarnation column.
const (
	membersUnknown         int32 = iota // not read yet, or to be read again
	membersWithIncarnation              // the table has it (or is missing: the current DDL creates it)
	membersWithout                      // a table of an earlier version
)

// membersShape reports whether the members table has the incarnation column. The
// catalog is read the first time, unless a check that reads it anyway (Check,
// CreateMembersTable) noted it first, and again after a members statement failed
// on its columns. A missing table counts as one with the column: its statements
// fail, and say what to do.
func (c *Core) membersShape(ctx context.Context) bool {
	switch c.membersInc.Load() {
	case membersWithIncarnation:
		return true
	case membersWithout:
		return false
	}
	found, _, err := c.columns(ctx, c.MembersTable())
	if err != nil {
		return true // nothing noted: the statement reports the error, and the next call reads again
	}
	c.noteMembers(found)
	return c.membersInc.Load() != membersWithout
}

// noteMembers records whether the columns found in the members table include
// incarnation (see [Core.membersShape]).
func (c *Core) noteMembers(found []catalog.FoundColumn) {
	if len(found) > 0 && !slices.ContainsFunc(found, isIncarnation) {
		c.membersInc.Store(membersWithout)
		return
	}
	c.membersInc.Store(membersWithIncarnation)
}

// upgradeMembers adds to a members table made by an earlier version the columns
// added since (see [catalog.UpgradeMembers]). A user who may not alter the table
// (or a read-only SQLite connection) leaves it as it is: the store reads and
// writes its rows without them. A replica that added them at the same moment is
// success.
func (c *Core) upgradeMembers(ctx context.Context) error {
	name := c.MembersTable()
	return c.upgradeTable(ctx, name, func(found []catalog.FoundColumn) ([]string, error) {
		return catalog.UpgradeMembers(c.dialect, name, found)
	}, func(stmt string, err error) error {
		if errors.Is(err, ErrNoPrivilege) || errors.Is(err, store.ErrNotWritable) {
			return nil
		}
		return fmt.Errorf("upgrade members table %q (%s) with %s: %w (run `casleader migrate` once as a user with ALTER on it, or run that statement)",
			name, c.dialect, stmt, err)
	})
}

// isIncarnation reports whether col is the incarnation column.
func isIncarnation(col catalog.FoundColumn) bool { return strings.EqualFold(col.Name, "incarnation") }
