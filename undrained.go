package casleader

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
)

// notDrained logs and returns the error of a release or handover (to) of term
// token that is not sent because OnStartedLeading did not return within
// DrainTimeout. req is the request that asked for it, nil when Run's end or the
// row did.
//
// When the goroutine that waits for req is the one running OnStartedLeading, the
// callback resigned with another context than its own and waited for itself: a
// longer DrainTimeout would only make it wait longer, so the advice differs.
func (r *run) notDrained(token int64, to string, req *request) error {
	e := r.e
	if req != nil && req.caller != 0 && req.caller == r.worker.Load() {
		e.log.Error("casleader: not releasing the lease: OnStartedLeading resigned with another context than its own and waited DrainTimeout for itself; the lease expires by itself: resign with its own context",
			"term", token, "drain_timeout", e.cfg.DrainTimeout, "handover_to", to)
		return fmt.Errorf("%w: key %q, term %d: OnStartedLeading called Resign or HandoverTo with another context than its own, which waits for OnStartedLeading itself to return; the lease was not released and expires by itself: pass the callback its own context (el.Resign(ctx), or casleader.TermFrom(ctx).Resign()), which returns at once, then return from the callback",
			ErrNotDrained, e.cfg.Key, token)
	}
	e.log.Error("casleader: not releasing the lease: OnStartedLeading is still running after DrainTimeout; the lease expires by itself",
		"term", token, "drain_timeout", e.cfg.DrainTimeout, "handover_to", to)
	return fmt.Errorf("%w: key %q, term %d: the lease was not released and expires by itself: make OnStartedLeading return when its context is cancelled, or raise DrainTimeout if it needs longer to stop",
		ErrNotDrained, e.cfg.Key, token)
}

// goid returns the ID of the calling goroutine, 0 if it cannot be read. It is
// used only to tell whether a resign waits for the very callback that sent it,
// to give the right advice; nothing is decided by it.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return 0
	}
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// errAttr returns attrs with "error", err appended when err is not nil.
func errAttr(attrs []any, err error) []any {
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	return attrs
}
