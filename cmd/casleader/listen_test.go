package main

// End-to-end tests of run --listen: the /metrics and /healthz endpoints of leaders
// and followers, through the harness of main_test.go.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/casleader/casleader/internal/testdb"
)

// listenRE finds the address run logs when it starts serving.
var listenRE = regexp.MustCompile(`msg="casleader: listening[^"]*" addr=(\S+)`)

// listenAddr waits for p to log the address it serves /metrics and /healthz on.
func listenAddr(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	waitFor(t, p.name+" to log its listen address", func() bool {
		m := listenRE.FindStringSubmatch(p.stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, func() string { return p.stderr.String() })
	return addr
}

var httpClient = &http.Client{Timeout: waitLimit / 3}

// get fetches http://addr+path and returns the status code and the body.
func get(addr, path string) (int, string, error) {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// series parses a Prometheus text exposition: "name{labels}" (as printed) -> value.
func series(body string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("bad line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// electionSeries names the series of package metrics for one election key.
type electionSeries struct {
	isLeader, token, started, stopped, leaderChanges string
}

func seriesOf(key string) electionSeries {
	l := `key="` + key + `"`
	return electionSeries{
		isLeader:      `casleader_is_leader{` + l + `}`,
		token:         `casleader_token{` + l + `}`,
		started:       `casleader_leadership_transitions_total{` + l + `,transition="started"}`,
		stopped:       `casleader_leadership_transitions_total{` + l + `,transition="stopped"}`,
		leaderChanges: `casleader_leader_changes_total{` + l + `}`,
	}
}

// waitMetrics scrapes p's /metrics until cond holds for the series, and returns them.
func waitMetrics(t *testing.T, p *proc, addr, what string, cond func(m map[string]float64) bool) map[string]float64 {
	t.Helper()
	var m map[string]float64
	var last string
	waitFor(t, p.name+"'s /metrics to show "+what, func() bool {
		code, body, err := get(addr, "/metrics")
		switch {
		case err != nil:
			last = err.Error()
			return false
		case code != http.StatusOK:
			last = fmt.Sprintf("status %d:\n%s", code, body)
			return false
		}
		last = body
		if m, err = series(body); err != nil {
			last = err.Error() + "\n" + body
			return false
		}
		return cond(m)
	}, func() string { return "last scrape:\n" + last })
	return m
}

// waitHealthy waits until p's /healthz (with ?verbose) answers 200 with "ok" and
// every string of want, and returns the body.
func waitHealthy(t *testing.T, p *proc, addr string, want ...string) string {
	t.Helper()
	var last string
	waitFor(t, p.name+"'s /healthz to answer 200", func() bool {
		code, body, err := get(addr, "/healthz?verbose")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("status %d:\n%s", code, body)
		if code != http.StatusOK || !strings.HasSuffix(body, "ok\n") {
			return false
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, func() string { return "last answer: " + last })
	return last
}

func TestRunListenServesMetricsAndHealthz(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		migrate(t, db)
		dir := t.TempDir()
		log := filepath.Join(dir, "child.log")
		key := testdb.Name(t)
		s := seriesOf(key)

		// cand-A starts alone and leads; cand-B follows.
		a := startRun(t, db, key, "cand-A", dir, "--listen=127.0.0.1:0")
		first := waitChildLines(t, log, "start", 1)[0]
		if first.id != "cand-A" {
			t.Fatalf("first child: %+v, want cand-A's", first)
		}
		b := startRun(t, db, key, "cand-B", dir, "--listen=127.0.0.1:0")
		addrA, addrB := listenAddr(t, a), listenAddr(t, b)

		ma := waitMetrics(t, a, addrA, "the leader", func(m map[string]float64) bool {
			return m[s.isLeader] == 1 && m[s.started] == 1 && m[s.token] == float64(first.token)
		})
		if ma[s.stopped] != 0 {
			t.Fatalf("the leader's %s = %v, want 0", s.stopped, ma[s.stopped])
		}
		mb := waitMetrics(t, b, addrB, "a follower that has seen the leader", func(m map[string]float64) bool {
			_, ok := m[s.isLeader]
			return ok && m[s.leaderChanges] >= 1
		})
		if mb[s.isLeader] != 0 || mb[s.token] != 0 || mb[s.started] != 0 {
			t.Fatalf("the follower's metrics: %s=%v %s=%v %s=%v, want 0",
				s.isLeader, mb[s.isLeader], s.token, mb[s.token], s.started, mb[s.started])
		}
		for _, name := range []string{"go_goroutines", "process_start_time_seconds", "promhttp_metric_handler_requests_total{code=\"200\"}"} {
			if _, ok := mb[name]; !ok {
				t.Errorf("the follower's /metrics lacks %s", name)
			}
		}
		waitHealthy(t, a, addrA, `candidate "cand-A": leading (term `+strconv.FormatInt(first.token, 10)+`)`)
		waitHealthy(t, b, addrB, `candidate "cand-B": following, leader "cand-A"`)

		// Only GET (and HEAD) are served; other paths are not found.
		if code, _, err := get(addrB, "/nothing-here"); err != nil || code != http.StatusNotFound {
			t.Errorf("GET /nothing-here: %d, %v; want 404", code, err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+addrB+"/metrics", nil)
		if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /metrics: %v, %v; want 405", resp, err)
		} else {
			resp.Body.Close()
		}

		// A resign moves leadership to cand-B: its gauge turns 1 and its started
		// counter counts the transition; cand-A's gauge turns 0 and it counts a stop.
		must(t, append(db.args(), "resign", "--key", key)...)
		second := waitChildLines(t, log, "start", 2)[1]
		if second.id != "cand-B" || second.token <= first.token {
			t.Fatalf("after the resign: child %+v, first %+v", second, first)
		}
		waitMetrics(t, b, addrB, "the new leader", func(m map[string]float64) bool {
			return m[s.isLeader] == 1 && m[s.started] == 1 && m[s.token] == float64(second.token)
		})
		waitMetrics(t, a, addrA, "the resigned leader", func(m map[string]float64) bool {
			return m[s.isLeader] == 0 && m[s.token] == 0 && m[s.started] == 1 && m[s.stopped] == 1
		})
		waitHealthy(t, b, addrB, `candidate "cand-B": leading`)
		waitHealthy(t, a, addrA, `candidate "cand-A": following`)

		// Killing cand-B hands leadership back to cand-A once the lease expires.
		b.signal(syscall.SIGKILL)
		b.wait()
		third := waitChildLines(t, log, "start", 3)[2]
		if third.id != "cand-A" || third.token <= second.token {
			t.Fatalf("after the kill: child %+v, second %+v", third, second)
		}
		waitMetrics(t, a, addrA, "the leader again", func(m map[string]float64) bool {
			return m[s.isLeader] == 1 && m[s.started] == 2 && m[s.stopped] == 1 && m[s.token] == float64(third.token)
		})
		waitHealthy(t, a, addrA, `candidate "cand-A": leading`)
		assertNoOverlap(t, log)

		// The server stops with run, and the port is free again.
		a.signal(syscall.SIGTERM)
		if code := a.wait(); code != 0 {
			t.Fatalf("run after SIGTERM: exit %d, want the child's 0", code)
		}
		ln, err := net.Listen("tcp", addrA)
		if err != nil {
			t.Fatalf("the port of the exited run is still taken: %v", err)
		}
		ln.Close()
	})
}

func TestRunListenOnATakenPortExits2WithoutCampaigning(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	dir := t.TempDir()
	log := filepath.Join(dir, "child.log")
	key := testdb.Name(t)

	p := startRun(t, db, key, "cand-A", dir, "--listen="+taken.Addr().String())
	if code := p.wait(); code != exitUsage {
		t.Fatalf("run --listen on a taken port: exit %d, want %d\n%s", code, exitUsage, p.stderr)
	}
	stderr := p.stderr.String()
	for _, want := range []string{"--listen " + taken.Addr().String(), "address already in use", "casleader run --help"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "campaigning") {
		t.Errorf("run campaigned before failing:\n%s", stderr)
	}
	if starts := linesOf(readChildLog(t, log), "start"); len(starts) != 0 {
		t.Fatalf("a child started: %v", starts)
	}
	if row := status(t, db, key); row.Found {
		t.Fatalf("the election has a row: %+v", row)
	}
}
