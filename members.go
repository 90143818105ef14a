package casleader

import (
	"context"

	"github.com/casleader/casleader/store"
)

// Members returns the candidates of this election seen within the last two leases by
// the database clock, ordered by ID: their role as each last recorded it, whether it
// is paused, its priority and how long ago it was last seen. Each running candidate
// records itself once a lease (see docs/operations.md, "The members view"); one
// that stopped cleanly is gone, one that died drops out after two leases. It fails
// when the members table is missing (create it with `casleader migrate`) or the
// store keeps none.
func (e *Elector) Members(ctx context.Context) ([]store.Member, error) {
	return e.g.Members(ctx, e.cfg.Key)
}
