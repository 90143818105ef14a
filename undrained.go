package casleader

import "fmt"

// notDrained logs and returns the error of a release or handover (to) of term
// token that is not sent because OnStartedLeading did not return within
// DrainTimeout. A callback that calls Resign or HandoverTo waits for itself (see
// Elector.ResignFor): the advice names that case too, since a longer DrainTimeout
// would only make it wait longer.
func (r *run) notDrained(token int64, to string) error {
	e := r.e
	e.log.Error("casleader: not releasing the lease: OnStartedLeading is still running after DrainTimeout; the lease expires by itself",
		"term", token, "drain_timeout", e.cfg.DrainTimeout, "handover_to", to)
	return fmt.Errorf("%w: key %q, term %d: the lease was not released and expires by itself: make OnStartedLeading return when its context is cancelled; if it resigns itself, call casleader.TermFrom(ctx).Resign(), which returns at once, then return (Resign and HandoverTo wait for the work, so it never calls them); raise DrainTimeout only if the work needs longer to stop",
		ErrNotDrained, e.cfg.Key, token)
}

// errAttr returns attrs with "error", err appended when err is not nil.
func errAttr(attrs []any, err error) []any {
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	return attrs
}
