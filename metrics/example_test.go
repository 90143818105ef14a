package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/metrics"
	"github.com/casleader/casleader/store/sqlite"
)

// Serve /metrics and /healthz for an elector, as `casleader run --listen` does:
// put the hooks of both packages in the Config; the metrics read the elector at
// every scrape.
func Example() {
	dir, err := os.MkdirTemp("", "casleader-metrics-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "election.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(context.Background()); err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	hc := healthz.New(0) // unhealthy once a lead phase outlives the lease
	cfg := casleader.Config{
		Key: "nightly-report", ID: "replica-1",
		Hooks: []casleader.Hooks{m.Hooks(), hc.Hooks()},
	}
	el, err := casleader.New(st, cfg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", hc)
	srv := httptest.NewServer(mux) // http.ListenAndServe(":9090", mux) in a real process
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan error, 1)
	go func() { running <- el.Run(ctx) }()
	for !el.IsLeader() {
		time.Sleep(10 * time.Millisecond)
	}

	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("/healthz:", resp.Status)
	resp.Body.Close()
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "casleader_is_leader{") {
			fmt.Println(sc.Text())
		}
	}
	resp.Body.Close()

	cancel()
	if err := <-running; err != nil {
		log.Fatal(err)
	}
	// Output:
	// /healthz: 200 OK
	// casleader_is_leader{key="nightly-report"} 1
}

// Metrics and a health check per key for a group: the same hooks go into
// casleader.GroupConfig.Hooks. Every series has the key's label; /healthz names each key
// that breaks the rule.
func Example_group() {
	dir, err := os.MkdirTemp("", "casleader-metrics-group-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(filepath.Join(dir, "election.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(context.Background()); err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	hc := healthz.New(0)
	keys := []string{"shard-1", "shard-2", "shard-3"}
	g, err := casleader.NewGroup(st, casleader.GroupConfig{
		ID: "replica-1", Keys: keys,
		Hooks: []casleader.Hooks{m.Hooks(), hc.Hooks()},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan error, 1)
	go func() { running <- g.Run(ctx) }()
	for g.Stats().Leading < len(keys) {
		time.Sleep(10 * time.Millisecond)
	}

	fmt.Println("healthy:", hc.Check() == nil)
	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "casleader_is_leader" {
			continue
		}
		for _, s := range f.GetMetric() {
			fmt.Printf("casleader_is_leader{key=%q} %v\n", s.GetLabel()[0].GetValue(), s.GetGauge().GetValue())
		}
	}

	cancel()
	if err := <-running; err != nil {
		log.Fatal(err)
	}
	// Output:
	// healthy: true
	// casleader_is_leader{key="shard-1"} 1
	// casleader_is_leader{key="shard-2"} 1
	// casleader_is_leader{key="shard-3"} 1
}
