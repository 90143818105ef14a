package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/casleader/casleader/store"
)

// Defaults of the dialects' Open functions: a short dial timeout and a small pool
// (elections need few connections; see docs/timing.md on a dedicated pool).
const (
	DefaultDialTimeout = 5 * time.Second
	DefaultPoolSize    = 4
)

// ClassifyCommon marks the driver-independent transient errors: timeouts, cancelled
// statements, broken connections. Anything else is returned as it is; callers treat
// an unclassified error like a transient one.
func ClassifyCommon(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne):
		return fmt.Errorf("%w: %w", store.ErrTransient, err)
	}
	return err
}
