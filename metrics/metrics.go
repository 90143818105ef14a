// Package metrics exports Prometheus metrics for casleader electors, so that the
// core library does not depend on Prometheus.
//
// The metrics are fed from inside the candidate: [Metrics.Hooks] goes into
// [casleader.Config.Hooks] of an elector, or into the Config.Hooks of a
// casleader.Group, beside healthz's hooks and the user's own, in any order. The store
// is not wrapped (so [casleader.Elector.Guard] works as without metrics). The
// is-leader gauge is computed at every scrape from the last trust deadline the
// hooks reported, by the monotonic clock, so it turns 0 the moment the candidate
// stops trusting its leadership, even in a process whose election goroutine is
// stuck and reports nothing:
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg)
//	...
//	hc := healthz.New(0)
//	cfg.Hooks = []casleader.Hooks{m.Hooks(), hc.Hooks()} // casleader.Config or casleader.GroupConfig
//	el, err := casleader.New(sqlStore, cfg)
//	...
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//	http.Handle("/healthz", hc)
//
// # Metrics
//
// Every series has the label key, the election key. A key's series appear with its
// first event (for a candidate that runs, its first read) and stay until the
// process ends, also after a group's Remove.
//
//	casleader_is_leader                        gauge: 1 while this process leads the election
//	casleader_token                            gauge: fencing token of the current term, 0 when not leading
//	casleader_leadership_transitions_total     counter, label transition: "started" or "stopped"
//	casleader_renewal_duration_seconds         histogram: round-trip time of the leader's renewals
//	casleader_renewal_failures_total           counter, label kind: why a renewal did not succeed
//	casleader_store_errors_total               counter, labels op and kind: every failed store call
//	casleader_leader_changes_total             counter: changes of the observed leader (a release counts)
//	casleader_clock_skew_seconds               gauge: clock skew between database servers seen by the candidates
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
// Candidates with the same key in one process (tests, mostly) share their series:
// the counters add up and the gauges show the highest value.
//
// # Many keys
//
// The series are per key: about 30 for a key the process has led (the renewal
// histogram's 16, from the key's first renewal on, the 7 renewal failure kinds, 2
// transitions, 3 gauges, the leader changes, and the store errors that occurred),
// about 13 for a key it only followed, so a group that leads 10,000 keys exports
// about 300,000 series. Keep that in mind before pointing a scrape at a process
// that leads thousands of keys; aggregate with recording rules (sum without
// (key)). A group's batched statement is counted once per key it carried: the
// renewal histogram then observes the statement's round trip once for each key
// it renewed, and casleader_store_errors_total counts a failed statement once per
// key. The hooks take a lock per event; a group of 10,000 keys calls them about
// twice per key per heartbeat.
package metrics

import (
	"context"
	"errors"
	"slices"
	"strings"
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

// Metrics collects the metrics of any number of candidates and keys. It is a
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

	mu   sync.Mutex
	keys map[string]*keyState // every key seen, for the gauges
}

// keyState is what the gauges of one key are computed from, guarded by
// Metrics.mu.
type keyState struct {
	terms map[string]term          // the lead phase of each candidate ID that has one
	skews map[string]time.Duration // the last skew reported by each candidate ID
	// renewals is the key's series of the renewal histogram, from its first
	// renewal on: looked up once, not at every renewal.
	renewals prometheus.Observer
}

// term is a candidate's lead phase: from Started to Stopped, trusted until until.
type term struct {
	token int64
	until time.Time
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
			Help: "Leadership transitions of this process: transition=\"started\" when it became leader (OnStartedLeading), \"stopped\" when its leadership ended and its work was drained.",
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
			"1 while this process leads the election (in a term whose trust deadline has not passed at scrape time, as IsLeader), else 0.",
			[]string{"key"}, nil),
		token: prometheus.NewDesc("casleader_token",
			"Fencing token (term) of this process's current leadership, 0 when it does not lead.",
			[]string{"key"}, nil),
		skew: prometheus.NewDesc("casleader_clock_skew_seconds",
			"Clock skew between database servers measured by this process's reads within the last minute (as Elector.ClockSkew): positive when the server it reads runs ahead of the one the leader writes through, negative when behind, 0 when none was seen. Elections stay safe at any skew; alert when its magnitude nears LeaseDuration - RenewDeadline: the servers' clocks are not kept in step.",
			[]string{"key"}, nil),
		keys: map[string]*keyState{},
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Hooks returns the hooks that feed the metrics: put them in
// [casleader.Config.Hooks] or a Group's GroupConfig.Hooks, beside any others
// (healthz's, your own), in any order. The store is not wrapped, so its guards work
// as without metrics. One Hooks value serves any number of electors, groups and
// keys.
//
// The counters and the histogram are fed by the hooks as the candidate works. The
// gauges are computed at every scrape from what the hooks reported: a key is led
// between Started and Stopped while the last trust deadline reported by Renewed
// has not passed (by the monotonic clock), so the is-leader gauge turns 0 at that
// deadline even when the candidate's goroutine is stuck and reports nothing. A term
// that ends before its deadline (a resign, a lost lease) turns it 0 at Stopped:
// after the term's work has returned and its release was sent, a little after
// IsLeader turned false.
func (m *Metrics) Hooks() casleader.Hooks {
	return casleader.Hooks{
		Call: m.call,
		Started: func(ev casleader.Event) {
			m.update(ev.Key, func(s *keyState) { s.terms[ev.ID] = term{token: ev.Token} })
			m.transitions.WithLabelValues(ev.Key, "started").Inc()
		},
		Renewed: func(ev casleader.Event) {
			m.update(ev.Key, func(s *keyState) {
				if t, ok := s.terms[ev.ID]; ok && t.token == ev.Token {
					s.terms[ev.ID] = term{token: ev.Token, until: ev.Until}
				}
			})
		},
		Stopped: func(ev casleader.Event) {
			m.update(ev.Key, func(s *keyState) {
				if t, ok := s.terms[ev.ID]; ok && t.token == ev.Token {
					delete(s.terms, ev.ID)
				}
			})
			m.transitions.WithLabelValues(ev.Key, "stopped").Inc()
		},
		Leader: func(ev casleader.Event) {
			m.update(ev.Key, func(*keyState) {})
			m.leaderChanges.WithLabelValues(ev.Key).Inc()
		},
		Skew: func(ev casleader.Event) {
			m.update(ev.Key, func(s *keyState) { s.skews[ev.ID] = ev.Skew })
		},
	}
}

// update applies change to the state of key, which it creates (with the key's
// counters at zero) at its first event.
func (m *Metrics) update(key string, change func(*keyState)) {
	m.mu.Lock()
	s, seen := m.keys[key]
	if !seen {
		s = &keyState{terms: map[string]term{}, skews: map[string]time.Duration{}}
		m.keys[key] = s
	}
	change(s)
	m.mu.Unlock()
	if !seen {
		m.init(key)
	}
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

// call accounts for one store call made for the election of c.Key.
func (m *Metrics) call(c casleader.Call) {
	key := c.Key
	var renewals prometheus.Observer
	m.update(key, func(s *keyState) {
		if c.Op == "renew" && !c.Cancelled {
			if s.renewals == nil {
				s.renewals = m.renewals.WithLabelValues(key)
			}
			renewals = s.renewals
		}
	})
	if c.Cancelled {
		return // the candidate stopped it: not the database's doing
	}
	kind := errorKind(c.Err)
	if kind != "" {
		m.storeErrors.WithLabelValues(key, c.Op, kind).Inc()
	}
	if c.Op != "renew" {
		return
	}
	renewals.Observe(c.Duration.Seconds())
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
}

// Collect implements [prometheus.Collector]. The gauges are computed now, from
// what the hooks reported.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.transitions.Collect(ch)
	m.renewals.Collect(ch)
	m.renewFailures.Collect(ch)
	m.storeErrors.Collect(ch)
	m.leaderChanges.Collect(ch)
	for _, g := range m.gauges(time.Now()) {
		ch <- prometheus.MustNewConstMetric(m.isLeader, prometheus.GaugeValue, g.leader, g.key)
		ch <- prometheus.MustNewConstMetric(m.token, prometheus.GaugeValue, g.token, g.key)
		ch <- prometheus.MustNewConstMetric(m.skew, prometheus.GaugeValue, g.skew, g.key)
	}
}

// gauge is the value of the gauges of one key.
type gauge struct {
	key                 string
	leader, token, skew float64
}

// gauges computes the gauges of every key at now, ordered by key.
func (m *Metrics) gauges(now time.Time) []gauge {
	m.mu.Lock()
	out := make([]gauge, 0, len(m.keys))
	for key, s := range m.keys {
		g := gauge{key: key}
		for _, t := range s.terms {
			if now.Before(t.until) { // a term whose trust deadline has not passed
				g.leader = 1
				g.token = max(g.token, float64(t.token))
			}
		}
		// The largest skew in magnitude, keeping its sign.
		for _, k := range s.skews {
			if v := k.Seconds(); max(v, -v) > max(g.skew, -g.skew) {
				g.skew = v
			}
		}
		out = append(out, g)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b gauge) int { return strings.Compare(a.key, b.key) })
	return out
}
