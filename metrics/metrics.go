// Package metrics exports Prometheus metrics for casleader electors, so that the
// core library does not depend on Prometheus.
//
// The metrics are fed from inside the elector: [Metrics.Hooks] goes into
// [casleader.Config.Hooks], beside healthz's hooks and the user's own, in any
// order. The elector's store is not wrapped (so [casleader.Elector.Guard] works
// as without metrics), and the gauges read the elector at every scrape, so the
// is-leader gauge turns 0 the moment the elector stops trusting its leadership,
// even in a process whose elector goroutine is stuck and reports nothing:
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg)
//	...
//	hc := healthz.New(0)
//	cfg.Hooks = []casleader.Hooks{m.Hooks(), hc.Hooks()}
//	el, err := casleader.New(sqlStore, cfg)
//	...
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//	http.Handle("/healthz", hc)
//
// # Metrics
//
// Every series has the label key, the election key.
//
//	casleader_is_leader                        gauge: 1 while this process leads the election
//	casleader_token                            gauge: fencing token of the current term, 0 when not leading
//	casleader_leadership_transitions_total     counter, label transition: "started" or "stopped"
//	casleader_renewal_duration_seconds         histogram: round-trip time of the leader's renewals
//	casleader_renewal_failures_total           counter, label kind: why a renewal did not succeed
//	casleader_store_errors_total               counter, labels op and kind: every failed store call
//	casleader_leader_changes_total             counter: changes of the observed leader (a release counts)
//	casleader_clock_skew_seconds               gauge: clock skew between database servers seen by the electors
//	casleader_members                          gauge: live members of the election (the members view), read at scrape time
//
// The kinds are those of package store's error sentinels ("transient" for
// [store.ErrTransient] and a timeout, "not_writable", "deployment", "invalid_row",
// "invalid_argument"), "other" for unclassified errors, and, for renewals only,
// "lost": the renewal lost its compare-and-set (somebody else wrote the row; the elector then
// settles with one read). A call that the elector itself cancelled (to resign,
// pause or exit) is not a failure and is not counted, nor timed. Alert on
// casleader_renewal_failures_total{kind="deployment"} and
// casleader_store_errors_total{kind="deployment"}: an operator must act.
//
// Electors with the same key in one process (tests, mostly) share their series: the
// counters add up and the gauges show the highest value.
package metrics

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/store"
)

// Failure kinds, the values of the kind label.
const (
	kindLost            = "lost"             // a renewal lost its compare-and-set
	kindTransient       = "transient"        // [store.ErrTransient]: timeout, reset, deadlock; retried
	kindNotWritable     = "not_writable"     // [store.ErrNotWritable]: read-only server
	kindDeployment      = "deployment"       // [store.ErrDeployment]: missing table, column or privilege
	kindInvalidRow      = "invalid_row"      // [store.ErrInvalidRow]: a row casleader cannot have written
	kindInvalidArgument = "invalid_argument" // [store.ErrInvalidArgument]
	kindOther           = "other"            // an error that the store did not classify
)

// kinds lists every kind, for the series created up front.
var kinds = []string{kindLost, kindTransient, kindNotWritable, kindDeployment, kindInvalidRow, kindInvalidArgument, kindOther}

// errorKind returns the failure kind of a store error: one of the kind constants
// other than [kindLost], or "" for nil.
func errorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, store.ErrDeployment):
		return kindDeployment
	case errors.Is(err, store.ErrNotWritable):
		return kindNotWritable
	case errors.Is(err, store.ErrInvalidRow):
		return kindInvalidRow
	case errors.Is(err, store.ErrInvalidArgument):
		return kindInvalidArgument
	case errors.Is(err, store.ErrTransient), errors.Is(err, context.DeadlineExceeded):
		return kindTransient
	}
	return kindOther
}

// membersTimeout bounds the read of the members view at a scrape.
const membersTimeout = 2 * time.Second

// Metrics collects the metrics of any number of electors. It is a
// [prometheus.Collector]. Its methods are safe for concurrent use.
type Metrics struct {
	transitions   *prometheus.CounterVec
	renewals      *prometheus.HistogramVec
	renewFailures *prometheus.CounterVec
	storeErrors   *prometheus.CounterVec
	leaderChanges *prometheus.CounterVec
	isLeader      *prometheus.Desc
	token         *prometheus.Desc
	skew          *prometheus.Desc
	members       *prometheus.Desc

	mu       sync.Mutex
	electors []*casleader.Elector
}

// renewalBuckets are the buckets of casleader_renewal_duration_seconds, in seconds:
// from 1 ms to the default renew deadline.
var renewalBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New returns the metrics, registered with reg when reg is not nil (a nil reg
// leaves registering to the caller: Metrics is a Collector). The error is reg's: a
// collector with the same metric names is registered already.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "casleader_leadership_transitions_total",
			Help: "Leadership transitions of this process: transition=\"started\" when it became leader (OnStartedLeading), \"stopped\" when its leadership ended and its work was drained (OnStoppedLeading).",
		}, []string{"key", "transition"}),
		renewals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "casleader_renewal_duration_seconds",
			Help:    "Round-trip time of the leader's renewals (a compare-and-set on the election row), whatever their outcome.",
			Buckets: renewalBuckets,
		}, []string{"key"}),
		renewFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "casleader_renewal_failures_total",
			Help: "Renewals that did not succeed, by kind: lost (compare-and-set lost), transient, not_writable, deployment, invalid_row, invalid_argument, other.",
		}, []string{"key", "kind"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "casleader_store_errors_total",
			Help: "Store calls (observe, insert, elect, renew, release, handover) that returned an error, by operation and kind.",
		}, []string{"key", "op", "kind"}),
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "casleader_leader_changes_total",
			Help: "Changes of the leader observed by this process (a released lease counts as a change to no leader).",
		}, []string{"key"}),
		isLeader: prometheus.NewDesc("casleader_is_leader",
			"1 while this process leads the election (Elector.IsLeader at scrape time), else 0.",
			[]string{"key"}, nil),
		token: prometheus.NewDesc("casleader_token",
			"Fencing token (term) of this process's current leadership, 0 when it does not lead.",
			[]string{"key"}, nil),
		skew: prometheus.NewDesc("casleader_clock_skew_seconds",
			"Clock skew between database servers measured by this process's reads within the last minute (Elector.ClockSkew at scrape time): positive when the server it reads runs ahead of the one the leader writes through, negative when behind, 0 when none was seen. Elections stay safe at any skew; alert when its magnitude nears LeaseDuration - RenewDeadline: the servers' clocks are not kept in step.",
			[]string{"key"}, nil),
		members: prometheus.NewDesc("casleader_members",
			"Candidates of the election seen within the last two leases by the database clock (the members view, Elector.Members at scrape time): leader, followers and observers, paused or not.",
			[]string{"key"}, nil),
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Hooks returns the hooks that feed the metrics from an elector: put them in
// [casleader.Config.Hooks], beside any others (healthz's, your own), in any order.
// The elector's store is not wrapped, so its guards work as without metrics.
//
// [casleader.New] attaches the elector: from then on the gauges read it at every
// scrape ([casleader.Elector.IsLeader], Token, ClockSkew, Members), so the
// is-leader gauge turns 0 the moment the elector stops trusting its leadership,
// even in a process whose elector goroutine is stuck and reports nothing. The
// counters and the histogram are fed by the hooks as the elector works. One
// Hooks value serves any number of electors.
func (m *Metrics) Hooks() casleader.Hooks {
	return casleader.Hooks{
		Attach: m.attach,
		Call:   func(e *casleader.Elector, c casleader.Call) { m.call(e.Key(), c) },
		Started: func(e *casleader.Elector, _ int64) {
			m.transitions.WithLabelValues(e.Key(), "started").Inc()
		},
		Stopped: func(e *casleader.Elector, _ int64) {
			m.transitions.WithLabelValues(e.Key(), "stopped").Inc()
		},
		Leader: func(e *casleader.Elector, _ string) {
			m.leaderChanges.WithLabelValues(e.Key()).Inc()
		},
	}
}

// attach makes the gauges read el at every scrape.
func (m *Metrics) attach(el *casleader.Elector) {
	m.init(el.Key())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.electors = append(m.electors, el)
}

// init creates the counters of key at zero, so that rates and increases work from
// the first scrape.
func (m *Metrics) init(key string) {
	m.transitions.WithLabelValues(key, "started")
	m.transitions.WithLabelValues(key, "stopped")
	m.leaderChanges.WithLabelValues(key)
	for _, k := range kinds {
		m.renewFailures.WithLabelValues(key, k)
	}
}

// call accounts for one store call of an elector of key.
func (m *Metrics) call(key string, c casleader.Call) {
	if c.Cancelled {
		return // the elector stopped it: not the database's doing
	}
	kind := errorKind(c.Err)
	if kind != "" {
		m.storeErrors.WithLabelValues(key, string(c.Op), kind).Inc()
	}
	if c.Op != casleader.OpRenew {
		return
	}
	m.renewals.WithLabelValues(key).Observe(c.Duration.Seconds())
	if kind == "" && !c.Swapped {
		kind = kindLost
	}
	if kind != "" {
		m.renewFailures.WithLabelValues(key, kind).Inc()
	}
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.transitions.Describe(ch)
	m.renewals.Describe(ch)
	m.renewFailures.Describe(ch)
	m.storeErrors.Describe(ch)
	m.leaderChanges.Describe(ch)
	ch <- m.isLeader
	ch <- m.token
	ch <- m.skew
	ch <- m.members
}

// Collect implements [prometheus.Collector]. The gauges are read now, from the
// attached electors.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.transitions.Collect(ch)
	m.renewals.Collect(ch)
	m.renewFailures.Collect(ch)
	m.storeErrors.Collect(ch)
	m.leaderChanges.Collect(ch)

	type gauges struct {
		leader, token, skew float64
	}
	byKey := map[string]gauges{}
	listers := map[string]*casleader.Elector{} // one per key, for the members view
	m.mu.Lock()
	electors := slices.Clone(m.electors)
	m.mu.Unlock()
	for _, e := range electors {
		key := e.Key()
		if listers[key] == nil {
			listers[key] = e
		}
		var token int64
		leading := e.IsLeader()
		if leading {
			token = e.Token()
		}
		g := byKey[key]
		if leading {
			g.leader = 1
		}
		// The largest skew in magnitude, keeping its sign.
		if v := e.ClockSkew().Seconds(); max(v, -v) > max(g.skew, -g.skew) {
			g.skew = v
		}
		g.token = max(g.token, float64(token))
		byKey[key] = g
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		g := byKey[k]
		ch <- prometheus.MustNewConstMetric(m.isLeader, prometheus.GaugeValue, g.leader, k)
		ch <- prometheus.MustNewConstMetric(m.token, prometheus.GaugeValue, g.token, k)
		ch <- prometheus.MustNewConstMetric(m.skew, prometheus.GaugeValue, g.skew, k)
		if l := listers[k]; l != nil {
			ctx, cancel := context.WithTimeout(context.Background(), membersTimeout)
			ms, err := l.Members(ctx)
			cancel()
			if err == nil {
				ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(len(ms)), k)
			}
		}
	}
}
