package postgres

import (
	"context"

	"github.com/casleader/casleader/schema"
)

// The methods below are the store's set-up and inspection operations; those of
// [store.Driver] are in driver.go. Each delegates to the shared engine.

// CreateMembersTable creates the members table ([Store.MembersTable]) if it is
// missing, with the same rules as [Store.CreateTable].
func (s *Store) CreateMembersTable(ctx context.Context) error {
	return s.core.CreateMembersTable(ctx)
}

// Listening reports whether the releases and handovers of other processes reach
// this store's subscribers now: the listener runs (some elector or group
// subscribes) and, where it can tell, has set its path up.
func (s *Store) Listening() bool { return s.core.Listening() }

// Dialect returns the store's SQL dialect.
func (s *Store) Dialect() schema.Dialect { return s.core.Dialect() }

// Table returns the election table's name.
func (s *Store) Table() string { return s.core.Table() }

// MembersTable returns the name of the members table: the election table's name
// and "_members" (see [schema.MembersDDL]).
func (s *Store) MembersTable() string { return s.core.MembersTable() }
