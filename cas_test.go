package casleader_test

import (
	"context"
	"sync"
	"testing"

	"github.com/casleader/casleader/internal/memstore"
	"github.com/casleader/casleader/internal/protocoltest"
)

// The timings of the protocol suite, shared by the root package's tests.
const (
	lease, renewDL, heartbeat, poll, settle = protocoltest.Lease, protocoltest.RenewDL, protocoltest.Heartbeat, protocoltest.Poll, protocoltest.Settle
)

// TestProtocol runs the protocol suite on the in-memory store, the reference
// every SQL store conforms to (internal/storetest); internal/e2e runs the same
// suite on MariaDB, PostgreSQL and SQLite. The root package's tests import no
// database driver, so a module that imports casleader and one store downloads
// only that store's driver.
func TestProtocol(t *testing.T) {
	var tables sync.Map // test name + table -> *memstore.Store
	memory := protocoltest.Dialect{Name: "Memory", Open: func(t *testing.T, table string, _ int) protocoltest.Store {
		s, _ := tables.LoadOrStore(t.Name()+"/"+table, memstore.New())
		return memTable{s.(*memstore.Store)}
	}}
	protocoltest.Run(t, []protocoltest.Dialect{memory})
}

// memTable is an in-memory store, whose table always exists.
type memTable struct{ *memstore.Store }

func (memTable) CreateTable(context.Context) error { return nil }
