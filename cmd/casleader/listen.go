package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	casleader "github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/metrics"
)

// observer is run's --listen server: Prometheus metrics at /metrics and the health
// check at /healthz, for the elector of this run. Its life: newObserver (before
// casleader.New), listen (before campaigning: an address that cannot be listened on
// is reported at once), serve (just before Run), close (after Run). Its hooks
// go into the elector's Config.
type observer struct {
	reg *prometheus.Registry
	m   *metrics.Metrics
	hc  *healthz.Checker
	ln  net.Listener
	srv *http.Server
	// served is closed when srv.Serve has returned (nil before serve).
	served chan struct{}
}

// Timeouts of the HTTP server. A scrape reads in-memory state only, so the limits
// are there against slow or idle clients, not for the handlers.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpIdleTimeout       = 2 * time.Minute
	httpShutdownTimeout   = 2 * time.Second
)

// newObserver returns the metrics and the health check of one elector; put its
// hooks in the elector's Config.
func newObserver() (*observer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m, err := metrics.New(reg)
	if err != nil {
		return nil, fmt.Errorf("register the metrics: %w", err)
	}
	hc := healthz.New(0) // unhealthy once a lead phase outlives the lease
	return &observer{reg: reg, m: m, hc: hc}, nil
}

// hooks returns the hooks that feed the metrics and the health check.
func (o *observer) hooks() []casleader.Hooks {
	return []casleader.Hooks{o.m.Hooks(), o.hc.Hooks()}
}

// listen opens the listening socket on addr, so that a port that is taken is a
// usage error (exit 2) before this instance campaigns. The socket is close-on-exec:
// the child does not inherit it.
func (o *observer) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &exitError{code: exitUsage,
			err: fmt.Errorf("--listen %s: cannot serve /metrics and /healthz: %w", addr, err),
			hint: "choose a free address for --listen (port 0 picks a free port and logs it), or stop the process that uses it; " +
				"run 'casleader run --help' for its usage"}
	}
	o.ln = ln
	return nil
}

// addr returns the address the server listens on (the port chosen for port 0).
func (o *observer) addr() string { return o.ln.Addr().String() }

// serve serves GET (and HEAD) /metrics and /healthz in the background until
// close.
func (o *observer) serve(log *slog.Logger) {
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(o.reg, promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{
		ErrorLog: errLog,
		Registry: o.reg, // promhttp_metric_handler_errors_total
	})))
	mux.Handle("GET /healthz", o.hc)
	o.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      httpWriteTimeout,
		IdleTimeout:       httpIdleTimeout,
		ErrorLog:          errLog,
	}
	o.served = make(chan struct{})
	go func() {
		defer close(o.served)
		if err := o.srv.Serve(o.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// The election goes on: leadership does not depend on the scrapes.
			log.Error("casleader: the /metrics and /healthz server stopped", "addr", o.addr(), "error", err)
		}
	}()
	log.Info("casleader: listening: serving /metrics and /healthz", "addr", o.addr())
}

// close stops the server: it waits a little for requests in flight, then closes
// their connections. It closes the socket when serve was not called.
func (o *observer) close() {
	if o.ln == nil {
		return
	}
	if o.srv == nil {
		o.ln.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
	defer cancel()
	if err := o.srv.Shutdown(ctx); err != nil {
		o.srv.Close()
	}
	<-o.served
}
