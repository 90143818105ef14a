package metrics_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casleader/casleader"
	"github.com/casleader/casleader/healthz"
	"github.com/casleader/casleader/internal/testdb"
	"github.com/casleader/casleader/metrics"
	"github.com/casleader/casleader/store/mysql"
)

// Metrics, health check and fenced writes at once, on MariaDB or MySQL: the hooks
// of both packages go into the Config, and the elector keeps the store it is
// given, so el.Guard fences the leader's transaction. (No output: it needs the
// server named by CASLEADER_MYSQL_DSN; TestExampleGuardOnMariaDB runs it.)
func Example_guard() {
	ctx := context.Background()
	db, err := mysql.Open(os.Getenv("CASLEADER_MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := mysql.New(db, "")
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS example_invoices (id INT PRIMARY KEY, sent_in_term BIGINT NOT NULL DEFAULT 0)",
		"INSERT IGNORE INTO example_invoices (id) VALUES (42)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			log.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	hc := healthz.New(0) // unhealthy once a lead phase outlives the lease
	sent := make(chan int64, 1)
	var el *casleader.Elector
	el, err = casleader.New(st, casleader.Config{
		Key:           "invoices-metrics-example",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
		Hooks: []casleader.Hooks{m.Hooks(), hc.Hooks()}, // in any order, beside your own
		OnStartedLeading: func(ctx context.Context, token int64) {
			// The leader's write, fenced: guard, write, commit in one transaction.
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return
			}
			defer tx.Rollback()
			if err := el.Guard(ctx, tx, token); err != nil {
				return // errors.Is(err, casleader.ErrNotLeader): stop acting
			}
			if _, err := tx.ExecContext(ctx, "UPDATE example_invoices SET sent_in_term = ? WHERE id = 42", token); err != nil {
				return
			}
			if tx.Commit() == nil {
				select {
				case sent <- token:
				default: // a later term: the example reads the first only
				}
			}
			<-ctx.Done()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", hc)
	srv := httptest.NewServer(mux) // http.ListenAndServe(":9090", mux) in a real process
	defer srv.Close()

	runCtx, stop := context.WithCancel(ctx)
	running := make(chan error, 1)
	go func() { running <- el.Run(runCtx) }()
	var token int64
	select {
	case token = <-sent:
	case <-time.After(30 * time.Second):
		log.Fatal("no fenced write within 30s")
	}

	var inTerm int64
	if err := db.QueryRowContext(ctx, "SELECT sent_in_term FROM example_invoices WHERE id = 42").Scan(&inTerm); err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice 42 sent in the leader's term:", inTerm == token)

	// A token of an earlier term is refused by the guard.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = el.Guard(ctx, tx, token-1)
	_ = tx.Rollback()
	fmt.Println("stale token refused:", errors.Is(err, casleader.ErrNotLeader))

	scrape := func(path, prefix string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				return resp.Status + " " + sc.Text()
			}
		}
		return resp.Status
	}
	fmt.Println(scrape("/healthz", ""))
	fmt.Println(scrape("/metrics", `casleader_is_leader{key="invoices-metrics-example"}`))
	tokenLine := scrape("/metrics", `casleader_token{key="invoices-metrics-example"}`)
	gauge, _ := strconv.ParseFloat(tokenLine[strings.LastIndexByte(tokenLine, ' ')+1:], 64)
	fmt.Println("token gauge is the term:", gauge == float64(token) || !el.IsLeader())

	stop()
	if err := <-running; err != nil {
		log.Fatal(err)
	}
	fmt.Println(scrape("/metrics", `casleader_is_leader{key="invoices-metrics-example"}`))
	fmt.Println(scrape("/metrics", `casleader_leadership_transitions_total{key="invoices-metrics-example",transition="stopped"}`))
	fmt.Println(scrape("/healthz", ""))
}

// TestExampleGuardOnMariaDB runs Example_guard, which needs a server, and checks
// what it prints, as `go test` checks an example's Output.
func TestExampleGuardOnMariaDB(t *testing.T) {
	testdb.MySQLDSN(t) // skips, naming the variable, when it is not set
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	func() {
		defer func() { os.Stdout = stdout; w.Close() }()
		Example_guard()
	}()
	assert.Equal(t, `invoice 42 sent in the leader's term: true
stale token refused: true
200 OK ok
200 OK casleader_is_leader{key="invoices-metrics-example"} 1
token gauge is the term: true
200 OK casleader_is_leader{key="invoices-metrics-example"} 0
200 OK casleader_leadership_transitions_total{key="invoices-metrics-example",transition="stopped"} 1
200 OK ok
`, <-out)
}
