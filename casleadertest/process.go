//go:build linux

package casleadertest

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/rs/zerolog"

	"golang.org/x/sys/unix"

	"github.com/casleader/casleader/internal/freeze"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
	mysqlstore "github.com/casleader/casleader/store/mysql"
	"github.com/casleader/casleader/store/sqlite"
)

// networkFaults are the fault kinds that act on a candidate's link to the
// database: none applies to SQLite, whose candidates open the file directly.
var networkFaults = map[string]bool{
	CutLeader: true, RefuseLeader: true, CutAll: true, SlowLeader: true, ResetLeader: true,
	CutFollower: true, SlowFollower: true, ResetFollower: true,
}

// ProcessConfig configures a [ProcessCluster].
type ProcessConfig struct {
	Dialect schema.Dialect // schema.MySQL, schema.Postgres or schema.SQLite
	// DSN is an account that may create tables. A PostgreSQL DSN may list several
	// hosts (postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write, a
	// primary and its standbys): every candidate then reaches each host through
	// a proxy of its own, and connects to whichever is the primary. For SQLite it
	// is the path of the database file that the candidates share ([DB.DSN] of
	// [NewDB]); they open it directly, without a proxy.
	DSN string
	// Nodes, for MySQL, are the DSNs of the nodes of a multi-primary cluster
	// (Galera), the same account: the candidate in slot i connects to node
	// i mod len(Nodes), through its proxy. DSN is then the parent's connection.
	Nodes []string
	Table string // election table (created, and dropped by Close)

	Candidates int // candidate processes alive at any time (default 3)
	// Keys, when not zero, makes every candidate run a group (casleader.Group) over
	// this many keys instead of an Elector on one key. Faults then hit the candidate
	// that leads the most keys, and the history is checked on each key by itself.
	Keys int
	// Balance makes every candidate's group a balanced one (GroupConfig.Balance):
	// the keys are spread over the live candidates. With Keys; not with
	// Priorities. See [ProcessCluster.RunBalanced].
	Balance bool

	Lease, Renew, Heartbeat, Poll time.Duration
	Slack                         time.Duration // added to Lease + Poll for the liveness bound
	// Leases, when not nil, are the lease durations of the candidates in slots 0,
	// 1, ... (0, or a slot past the end: Lease): candidates of one key that run
	// with different timings, as in a rolling deploy that changes them. A slot's
	// renew deadline, heartbeat and poll interval are Renew, Heartbeat and Poll
	// scaled by its lease over Lease. Faults last by their target's timings, and
	// the liveness bound is that of the longest lease in the cluster.
	Leases []time.Duration
	// IDs, when not nil, are the candidate IDs (Config.ID) of the candidates in
	// slots 0, 1, ... ("", or a slot past the end: an ID of its own per process).
	// Slots given one ID run processes that share it by mistake: see
	// [ProcessCluster.RunHandovers]. Beliefs and actions always name the process
	// (its slot and start), whatever its ID.
	IDs []string

	// Trials is the number of faults to inject; Duration, when not zero, runs
	// trials until it has passed instead.
	Trials   int
	Duration time.Duration
	Seed     uint64
	// Kinds restricts the faults injected on the leader (or the row) to these kinds;
	// empty means all of them. On SQLite only the faults on processes and rows
	// apply ([KillLeader], [StopLeader], [RollbackRow], and on followers
	// [KillFollower], [StopFollower]): the candidates open the file, there is no
	// link to cut, slow or reset. The schedule leaves the network faults out there,
	// and naming one in Kinds is an error.
	Kinds []string
	// ClockOffsets starts every candidate but the one in slot 0 in a time namespace
	// of its own (`unshare --time`), with CLOCK_MONOTONIC and CLOCK_BOOTTIME offset
	// by a random 1 to 48 hours, so candidates whose clocks disagree by hours run
	// side by side. Where time namespaces are not available, candidates run on the
	// host's clocks and the report says so.
	ClockOffsets bool
	// Priorities, when not nil, are the priorities (Config.Priority) of the
	// candidates in slots 0, 1, ...; a slot past the end has priority 0. See
	// [Cluster.RunPreferred].
	Priorities []int

	// Lead, when set, is what each candidate runs while it leads instead of the
	// suite's own fenced actions: the application's code, as in [Cluster.Lead],
	// with [Candidate.DB] reached through the candidate's proxy. It must be a
	// function that the binary's TestMain passes to [Main], which finds it by name
	// in the candidate process. Not with Keys.
	Lead func(ctx context.Context, c *Candidate)

	// Logf receives progress lines (nil: none).
	Logf func(format string, args ...any)
}

// ProcessCluster is a set of candidate processes, their proxies and the fault schedule.
//
// # SQLite
//
// On SQLite the candidates are processes on this host that share the database file.
// Kills and freezes apply; faults of the network do not (see [ProcessConfig.Kinds]).
// A process frozen while it holds SQLite's write lock would block every writer,
// the next leader's election included, for as long as it stays frozen (docs/operations.md
// in the casleader repository, "Assumptions"). So a freeze ([StopLeader], [StopFollower]) never lands inside a
// write: the harness stops the process, looks in /proc/locks, and while the
// process holds a write lock resumes it and stops it again a few milliseconds
// later. Frozen between two writes, it blocks nobody, and the next leader takes
// over as on a server: the liveness bound ([Bounds.Liveness], counted from the
// heal) is the same, and the freeze lasts its full time from the moment the
// process was stopped outside its write. A candidate that holds a write lock each
// of 100 times it is stopped (about a second) fails the run.
type ProcessCluster struct {
	cfg     ProcessConfig
	rng     *rand.Rand
	key     string
	keys    []string // the elections: key alone, or the group's keys
	actions string
	db      *sql.DB // direct connection of the parent (no proxy)
	server  *toxiproxy.ApiServer

	mu       sync.Mutex
	slots    []*proc
	all      []*proc
	open     map[belief]Interval // beliefs not ended yet
	hist     History
	snaps    []snapSet
	failures []string // unexpected exits of candidates
	nextID   int
	timens   bool   // candidates may be started with offset clocks
	lead     string // the name of cfg.Lead ("" for the suite's own actions)
	recorded int64  // actions reported by Lead functions
	missed   misses // what the candidates reported did not answer them in time

	stopProbe context.CancelFunc // ends probe

	// History is what the last Run observed, for a closer look when a check fails.
	History History
}

type proc struct {
	id      string
	slot    int
	dsn     string             // the DSN its candidate uses
	proxies []*toxiproxy.Proxy // one per database host the candidate may use, in the DSN's order
	cmd     *exec.Cmd
	stderr  *tail
	exited  chan struct{}
	killed  bool // by the harness: its exit is expected
	// stopping: the harness sent SIGTERM; ending by that signal is expected too (a
	// candidate that has not installed its handler yet, just started).
	stopping bool
	err      error
	// ready is closed when the candidate begins to take part (its Run starts).
	ready chan struct{}
	// refused: the candidate reported that it stopped with ErrDuplicateID.
	refused bool
	// logFile keeps the whole log under EnvLogDir; closed when the process has exited.
	logFile *os.File
}

// belief names an open belief: candidate cand on key.
type belief struct{ cand, key string }

// snapshot is an election row as the parent read it.
type snapshot struct {
	key                 string
	version, term, tick int64 // tick in microseconds since the epoch
	leader              string
}

// snapSet is every election row of the table, read at the same time.
type snapSet struct {
	at   int64
	rows []snapshot
}

// NewProcessCluster prepares a cluster of candidate processes: tables, proxies.
// It starts no process.
func NewProcessCluster(cfg ProcessConfig) (*ProcessCluster, error) {
	cfg.Candidates = max(cfg.Candidates, 2)
	if cfg.Lease == 0 || cfg.Renew == 0 || cfg.Heartbeat == 0 || cfg.Poll == 0 {
		return nil, errors.New("casleadertest: Lease, Renew, Heartbeat and Poll are required")
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	for _, name := range []string{cfg.Table, cfg.Table + "_actions"} {
		if _, err := ident.Quote(cfg.Dialect, name); err != nil {
			return nil, fmt.Errorf("casleadertest: Table %q (and its action table %q): %w", cfg.Table, cfg.Table+"_actions", err)
		}
	}
	if cfg.Lead != nil && cfg.Keys > 0 {
		return nil, errors.New("casleadertest: Lead is for candidates of one Elector: leave Keys at 0")
	}
	for i, l := range cfg.Leases {
		if l < 0 {
			return nil, fmt.Errorf("casleadertest: Leases[%d] (%v) must not be negative", i, l)
		}
	}
	if cfg.Keys < 0 {
		return nil, fmt.Errorf("casleadertest: Keys (%d) must not be negative", cfg.Keys)
	}
	if cfg.Balance && (cfg.Keys == 0 || slices.ContainsFunc(cfg.Priorities, func(p int) bool { return p != 0 })) {
		return nil, errors.New("casleadertest: Balance spreads the keys of groups: set Keys, and leave Priorities out")
	}
	if cfg.Dialect == schema.SQLite {
		var net []string
		for _, k := range cfg.Kinds {
			if networkFaults[k] {
				net = append(net, k)
			}
		}
		if len(net) > 0 {
			return nil, fmt.Errorf("casleadertest: Kinds %v: faults of the network do not apply to SQLite, whose candidates open the file directly: leave them out", net)
		}
		if len(cfg.Nodes) > 0 {
			return nil, errors.New("casleadertest: Nodes is for MySQL multi-primary clusters, not SQLite")
		}
	}
	c := &ProcessCluster{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		key:     "chaos",
		keys:    []string{"chaos"},
		actions: cfg.Table + "_actions",
		open:    map[belief]Interval{},
	}
	if cfg.Keys > 0 {
		c.keys = GroupKeys(c.key, cfg.Keys)
	}
	c.hist = History{Keys: c.keys, Rejected: map[string]int{}}
	if cfg.Lead != nil {
		c.lead = funcName(cfg.Lead)
	}
	if cfg.ClockOffsets {
		c.timens = timeNamespaces()
		if !c.timens {
			cfg.Logf("clock offsets unavailable (unshare --time failed): every candidate runs on the host's clocks")
		}
	}
	var err error
	// The DSN and database hosts of the candidate in each slot.
	dsns := make([]string, cfg.Candidates)
	ups := make([][]string, cfg.Candidates)
	switch cfg.Dialect {
	case schema.MySQL:
		for i := range dsns {
			dsns[i] = cfg.DSN
			if len(cfg.Nodes) > 0 {
				dsns[i] = cfg.Nodes[i%len(cfg.Nodes)]
			}
			var mc *mysql.Config
			if mc, err = mysql.ParseDSN(dsns[i]); err != nil {
				return nil, secret.RedactError(err, dsns[i])
			}
			up := mc.Addr
			if !strings.Contains(up, ":") {
				up += ":3306"
			}
			ups[i] = []string{up}
		}
		c.db, err = mysqlstore.Open(cfg.DSN)
	case schema.Postgres:
		if len(cfg.Nodes) > 0 {
			return nil, errors.New("casleadertest: Nodes is for MySQL multi-primary clusters: list PostgreSQL hosts in the DSN")
		}
		var hosts []string
		if hosts, err = PgHosts(cfg.DSN); err != nil {
			return nil, err
		}
		for i := range dsns {
			dsns[i], ups[i] = cfg.DSN, hosts
		}
		c.db, err = sql.Open("pgx", cfg.DSN)
	case schema.SQLite:
		for i := range dsns {
			dsns[i] = cfg.DSN // no proxy: the file is opened directly
		}
		c.db, err = sqlite.Open(cfg.DSN)
	default:
		return nil, fmt.Errorf("casleadertest: dialect %q: want mysql, postgres or sqlite", cfg.Dialect)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.createTables(ctx); err != nil {
		c.db.Close()
		return nil, err
	}
	pctx, stopProbe := context.WithCancel(context.Background())
	c.stopProbe = stopProbe
	go c.probe(pctx)
	c.server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	for i := range cfg.Candidates {
		sp := &proc{slot: i, dsn: dsns[i]}
		c.slots = append(c.slots, sp)
		for j, up := range ups[i] {
			p := toxiproxy.NewProxy(c.server, fmt.Sprintf("slot%d-host%d", i, j), "127.0.0.1:0", up)
			if err := c.server.Collection.Add(p, true); err != nil {
				c.Close()
				return nil, fmt.Errorf("casleadertest: proxy: %w", err)
			}
			sp.proxies = append(sp.proxies, p)
		}
	}
	return c, nil
}

// PgHosts returns the host:port of every host that a PostgreSQL DSN lists, in its
// order, each once.
func PgHosts(dsn string) ([]string, error) {
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, secret.RedactError(err, dsn)
	}
	hosts := []string{net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))}
	for _, f := range pc.Fallbacks {
		if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts, nil
}

// listens returns the addresses of p's proxies, comma-separated.
func (p *proc) listens() string {
	var out []string
	for _, x := range p.proxies {
		out = append(out, x.Listen)
	}
	return strings.Join(out, ",")
}

func (c *ProcessCluster) quote(name string) string {
	q, err := ident.Quote(c.cfg.Dialect, name)
	if err != nil {
		panic(err) // NewProcessCluster checked both names
	}
	return q
}

func (c *ProcessCluster) createTables(ctx context.Context) error {
	if err := schema.Apply(ctx, c.db, c.cfg.Dialect, c.cfg.Table); err != nil {
		return err
	}
	id := "id BIGINT AUTO_INCREMENT PRIMARY KEY"
	switch c.cfg.Dialect {
	case schema.Postgres:
		id = "id BIGSERIAL PRIMARY KEY"
	case schema.SQLite:
		id = "id INTEGER PRIMARY KEY AUTOINCREMENT"
	}
	_, err := c.db.ExecContext(ctx, "CREATE TABLE "+c.quote(c.actions)+" ("+id+
		", ekey VARCHAR(255) NOT NULL, token BIGINT NOT NULL, cand VARCHAR(64) NOT NULL, seq BIGINT NOT NULL, chk BIGINT NOT NULL)")
	if err != nil || c.cfg.Dialect == schema.SQLite {
		return err // SQLite: the probe only reads (a write would queue the candidates')
	}
	return createProbeTable(ctx, c.db, c.quote(c.probeTable()))
}

// Close stops every process and proxy and drops the tables.
func (c *ProcessCluster) Close() {
	c.stopAll()
	c.stopProbe()
	for _, p := range c.slots {
		for _, x := range p.proxies {
			x.Stop()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, _ := ident.MembersTable(c.cfg.Table)
	for _, t := range []string{c.cfg.Table, c.actions, members, c.probeTable()} {
		_, _ = c.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+c.quote(t))
	}
	c.db.Close()
}

// idleVariable is the MySQL session variable that aborts idle transactions.
func (c *ProcessCluster) idleVariable(ctx context.Context) string {
	var v string
	if err := c.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err == nil && strings.Contains(strings.ToLower(v), "mariadb") {
		return "idle_transaction_timeout"
	}
	return "wait_timeout"
}

// start launches a candidate in slot.
func (c *ProcessCluster) start(slot int) error {
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("c%d.%d", slot, c.nextID)
	sp := c.slots[slot]
	c.mu.Unlock()

	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cfg := c.cfg
	var offset time.Duration
	if c.timens && slot != 0 {
		offset = time.Hour + time.Duration(c.rng.IntN(47*60))*time.Minute
	}
	cmd := exec.Command(os.Args[0])
	if offset > 0 {
		// unshare execs the binary in the new namespace: same process, same pid.
		secs := strconv.FormatInt(int64(offset/time.Second), 10)
		cmd = exec.Command("unshare", "--time", "--monotonic", secs, "--boottime", secs, "--", os.Args[0])
	}
	cmd.Env = append(os.Environ(),
		envMonoOffset+"="+strconv.FormatInt(int64(offset), 10),
		EnvChild+"=1",
		envDialect+"="+string(cfg.Dialect),
		envDSN+"="+sp.dsn,
		envAddr+"="+sp.listens(),
		envTable+"="+cfg.Table,
		envActions+"="+c.actions,
		envKey+"="+c.key,
		envKeys+"="+strconv.Itoa(cfg.Keys),
		envLead+"="+c.lead,
		envID+"="+id,
		envTimings+"="+c.timing(slot).String(),
		envCandID+"="+cmp.Or(c.candID(slot), id),
		envIdle+"="+c.idleVariable(context.Background()),
		envPriority+"="+strconv.Itoa(c.priority(slot)),
		envBalance+"="+strconv.FormatBool(cfg.Balance),
	)
	cmd.ExtraFiles = []*os.File{w}
	p := &proc{id: id, slot: slot, dsn: sp.dsn, proxies: sp.proxies, cmd: cmd, stderr: &tail{max: 64 << 10}, exited: make(chan struct{}), ready: make(chan struct{})}
	cmd.Stderr = p.stderr
	if dir := os.Getenv(EnvLogDir); dir != "" {
		// Keep each candidate's whole log too (slog text lines, Debug and up).
		// Named after the dialect and the mode too: runs on two databases, of
		// Electors and of groups, may share the directory.
		name := string(cfg.Dialect) + "-" + id + ".log"
		if cfg.Keys > 0 {
			name = string(cfg.Dialect) + "-group-" + id + ".log"
		}
		if f, err := os.Create(filepath.Join(dir, name)); err == nil {
			cmd.Stderr = io.MultiWriter(p.stderr, f)
			cmd.Env = append(cmd.Env, envDebug+"=1")
			p.logFile = f
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		if p.logFile != nil {
			p.logFile.Close()
		}
		return err
	}
	w.Close()
	c.mu.Lock()
	c.slots[slot] = p
	c.all = append(c.all, p)
	c.hist.ClockOffsets = append(c.hist.ClockOffsets, offset)
	c.mu.Unlock()
	go c.read(p, r)
	return nil
}

// timeNamespaces reports whether candidates can be started with offset clocks:
// util-linux unshare and a kernel with time namespaces (Linux 5.6+), and the right
// to create them.
func timeNamespaces() bool {
	out, err := exec.Command("unshare", "--time", "--monotonic", "3600", "--boottime", "3600", "--", "cat", "/proc/uptime").Output()
	if err != nil {
		return false
	}
	var shifted float64
	if _, err := fmt.Sscan(string(out), &shifted); err != nil {
		return false
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return false
	}
	return shifted-float64(ts.Sec) > 3000
}

// read consumes a candidate's event lines until it exits.
func (c *ProcessCluster) read(p *proc, r *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		c.mu.Lock()
		switch f[0] {
		case "B":
			if len(f) == 4 {
				at, _ := strconv.ParseInt(f[1], 10, 64)
				tok, _ := strconv.ParseInt(f[2], 10, 64)
				c.open[belief{p.id, f[3]}] = Interval{Cand: p.id, Token: tok, Start: at, Key: f[3]}
			}
		case "E":
			if len(f) == 3 {
				at, _ := strconv.ParseInt(f[1], 10, 64)
				c.closeBelief(belief{p.id, f[2]}, at)
			}
		case "S":
			select {
			case <-p.ready:
			default:
				close(p.ready)
			}
		case "D":
			p.refused = true
		case "R":
			if len(f) == 2 {
				c.hist.Rejected[f[1]]++
			}
		case "M", "L":
			c.missed.note(p.id, f)
		case "A": // an action of a Lead function: A <check> <done> <token> <key>
			if len(f) == 5 {
				check, _ := strconv.ParseInt(f[1], 10, 64)
				done, _ := strconv.ParseInt(f[2], 10, 64)
				tok, _ := strconv.ParseInt(f[3], 10, 64)
				c.recorded++
				c.hist.Actions = append(c.hist.Actions, Action{ID: c.recorded, Token: tok, Cand: p.id, Check: check, Done: done, Key: f[4]})
			}
		}
		c.mu.Unlock()
	}
	err := p.cmd.Wait() // returns once the stderr copy is done
	if p.logFile != nil {
		p.logFile.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p.err = err
	// Killed while leading: its beliefs ended when it died (the harness closed them
	// already at the kill). An unexpected death is closed here.
	c.closeBeliefs(p.id, Mono())
	// A candidate that shares its ID with another (ProcessConfig.IDs) stops with
	// ErrDuplicateID by design; with an ID of its own, that is a failure.
	expected := p.stopping && endedBy(err, syscall.SIGTERM) || p.refused && c.shared(p.slot)
	if !p.killed && err != nil && !expected {
		c.failures = append(c.failures, fmt.Sprintf("candidate %s exited: %v\n%s", p.id, err, p.stderr.String()))
	}
	close(p.exited)
}

// endedBy reports whether err says that the process ended by signal sig.
func endedBy(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func (c *ProcessCluster) closeBelief(k belief, end int64) {
	b, ok := c.open[k]
	if !ok {
		return
	}
	delete(c.open, k)
	b.End = max(end, b.Start)
	c.hist.Beliefs = append(c.hist.Beliefs, b)
}

// closeBeliefs ends every open belief of candidate id at end.
func (c *ProcessCluster) closeBeliefs(id string, end int64) {
	for k := range c.open {
		if k.cand == id {
			c.closeBelief(k, end)
		}
	}
}

// leader returns the candidate that believes it leads the most keys now (of those,
// the one whose latest belief began last), or nil if some key has no leader.
func (c *ProcessCluster) leader() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	led := map[string]bool{}
	var best *proc
	var bestN int
	var bestAt int64
	for _, p := range c.slots {
		if p.cmd == nil {
			continue
		}
		n, at := 0, int64(0)
		for _, key := range c.keys {
			if b, ok := c.open[belief{p.id, key}]; ok {
				led[key] = true
				n, at = n+1, max(at, b.Start)
			}
		}
		if n > 0 && (best == nil || n > bestN || n == bestN && at > bestAt) {
			best, bestN, bestAt = p, n, at
		}
	}
	if len(led) < len(c.keys) {
		return nil
	}
	return best
}

// waitTakeover waits up to d (not stalled, see waitFor) until every key has a leader other than frozen (whose
// own belief stays open while it is frozen), and reports whether it came.
func (c *ProcessCluster) waitTakeover(ctx context.Context, frozen *proc, d time.Duration) bool {
	taken := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, key := range c.keys {
			led := false
			for b := range c.open {
				if b.key == key && b.cand != frozen.id {
					led = true
					break
				}
			}
			if !led {
				return false
			}
		}
		return true
	}
	return c.waitFor(ctx, d, taken)
}

// waitLeader waits up to d (not stalled, see waitFor) until every key has a leader and returns the candidate
// that leads the most, or nil.
func (c *ProcessCluster) waitLeader(ctx context.Context, d time.Duration) *proc {
	var l *proc
	c.waitFor(ctx, d, func() bool { l = c.leader(); return l != nil })
	return l
}

// snapshotLoop reads the election rows every 200 ms for rollback faults.
func (c *ProcessCluster) snapshotLoop(ctx context.Context) {
	q := "SELECT elect_key, version, term, leader_id, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', tick_time) FROM " + c.quote(c.cfg.Table)
	switch c.cfg.Dialect {
	case schema.Postgres:
		q = "SELECT elect_key, version, term, leader_id, (EXTRACT(EPOCH FROM tick_time) * 1000000)::bigint FROM " + c.quote(c.cfg.Table)
	case schema.SQLite:
		q = "SELECT elect_key, version, term, leader_id, tick_time FROM " + c.quote(c.cfg.Table) // microseconds already
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		set, err := c.readRows(rctx, q)
		cancel()
		if err != nil || len(set.rows) == 0 {
			continue
		}
		c.mu.Lock()
		c.snaps = append(c.snaps, set)
		if len(c.snaps) > 100 {
			c.snaps = c.snaps[len(c.snaps)-100:]
		}
		c.mu.Unlock()
	}
}

func (c *ProcessCluster) readRows(ctx context.Context, q string) (snapSet, error) {
	rows, err := c.db.QueryContext(ctx, q)
	if err != nil {
		return snapSet{}, err
	}
	defer rows.Close()
	var set snapSet
	for rows.Next() {
		var s snapshot
		if err := rows.Scan(&s.key, &s.version, &s.term, &s.leader, &s.tick); err != nil {
			return snapSet{}, err
		}
		set.rows = append(set.rows, s)
	}
	set.at = Mono()
	return set, rows.Err()
}

// rollback writes back the rows of a snapshot between 1 and 8 seconds old, all in
// one transaction: a failover that lost the writes of the last seconds.
func (c *ProcessCluster) rollback(ctx context.Context) (string, error) {
	now := Mono()
	c.mu.Lock()
	var cands []snapSet
	for _, s := range c.snaps {
		if age := time.Duration(now - s.at); age >= time.Second && age <= 8*time.Second {
			cands = append(cands, s)
		}
	}
	c.mu.Unlock()
	if len(cands) == 0 {
		return "", errors.New("no snapshot old enough")
	}
	set := cands[c.rng.IntN(len(cands))]
	q := "UPDATE " + c.quote(c.cfg.Table) + " SET version = ?, term = ?, leader_id = ?, tick_time = TIMESTAMPADD(MICROSECOND, ?, '1970-01-01 00:00:00'), handover_to = '', stepdown = 0 WHERE elect_key = ?"
	switch c.cfg.Dialect {
	case schema.Postgres:
		q = "UPDATE " + c.quote(c.cfg.Table) + " SET version = $1, term = $2, leader_id = $3, tick_time = timestamptz 'epoch' + $4::bigint * interval '1 microsecond', handover_to = '', stepdown = 0 WHERE elect_key = $5"
	case schema.SQLite:
		q = "UPDATE " + c.quote(c.cfg.Table) + " SET version = ?, term = ?, leader_id = ?, tick_time = ?, handover_to = '', stepdown = 0 WHERE elect_key = ?"
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := c.db.BeginTx(wctx, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	for _, s := range set.rows {
		if _, err := tx.ExecContext(wctx, q, s.version, s.term, s.leader, s.tick, s.key); err != nil {
			return "", err
		}
	}
	age := time.Duration(now - set.at).Round(time.Millisecond)
	note := fmt.Sprintf("%d rows, %v old", len(set.rows), age)
	if len(set.rows) == 1 {
		s := set.rows[0]
		note = fmt.Sprintf("version %d term %d leader %q, %v old", s.version, s.term, s.leader, age)
	}
	return note, tx.Commit()
}

// toxic adds a toxic to p's proxies.
func toxic(p *proc, name, typ, stream string, attrs string) error {
	for _, x := range p.proxies {
		if _, err := x.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name, typ, stream, attrs))); err != nil {
			return err
		}
	}
	return nil
}

// plan is one fault of a trial on one target: apply starts it; heal ends it.
type plan struct {
	kind   string
	target *proc
	dur    time.Duration
	heal   func() error
}

// dur returns a random duration between lo and hi leases.
func (c *ProcessCluster) dur(lease time.Duration, lo, hi float64) time.Duration {
	return time.Duration((lo + c.rng.Float64()*(hi-lo)) * float64(lease))
}

// pick chooses the trial's faults: one on the leader (or the row, or everyone), and
// sometimes one on a follower.
func (c *ProcessCluster) pick(leader *proc) []*plan {
	primary := []struct {
		kind   string
		weight int
	}{
		{KillLeader, 2}, {StopLeader, 2}, {CutLeader, 2}, {RefuseLeader, 1}, {CutAll, 1},
		{SlowLeader, 1}, {ResetLeader, 2}, {RollbackRow, 1},
	}
	onSQLite := c.cfg.Dialect == schema.SQLite
	kept := primary[:0]
	for _, k := range primary {
		if (len(c.cfg.Kinds) == 0 || slices.Contains(c.cfg.Kinds, k.kind)) && !(onSQLite && networkFaults[k.kind]) {
			kept = append(kept, k)
		}
	}
	primary = kept
	total := 0
	for _, k := range primary {
		total += k.weight
	}
	n := c.rng.IntN(total)
	var kind string
	for _, k := range primary {
		if n -= k.weight; n < 0 {
			kind = k.kind
			break
		}
	}
	plans := []*plan{{kind: kind, target: leader}}
	if kind != CutAll && c.rng.IntN(10) < 3 {
		var followers []*proc
		c.mu.Lock()
		for _, p := range c.slots {
			if p != leader && p.cmd != nil && !p.killed {
				followers = append(followers, p)
			}
		}
		c.mu.Unlock()
		if len(followers) > 0 {
			f := followers[c.rng.IntN(len(followers))]
			kinds := []string{KillFollower, StopFollower, CutFollower, SlowFollower, ResetFollower}
			if onSQLite {
				kinds = []string{KillFollower, StopFollower}
			}
			fk := kinds[c.rng.IntN(len(kinds))]
			plans = append(plans, &plan{kind: fk, target: f})
		}
	}
	return plans
}

// apply starts one planned fault. It sets p.dur (how long to keep it) and p.heal.
//
// Faults on one candidate last by its own timings (ProcessConfig.Leases): a
// freeze or a cut lasts past its lease, a slow link is slower than its renew
// deadline; a fault on every candidate lasts by the longest lease.
func (c *ProcessCluster) apply(ctx context.Context, p *plan) (string, error) {
	cfg := c.cfg
	noop := func() error { return nil }
	t := p.target
	tm := c.timing(t.slot)
	switch p.kind {
	case KillLeader, KillFollower:
		p.heal = noop
		return "", c.kill(t)
	case StopLeader, StopFollower:
		p.dur = tm.lease + c.dur(tm.lease, 0.2, 1.2)
		p.heal = func() error { return t.cmd.Process.Signal(syscall.SIGCONT) }
		if cfg.Dialect != schema.SQLite {
			return "", t.cmd.Process.Signal(syscall.SIGSTOP)
		}
		// Never inside a write: the process would keep SQLite's write lock and
		// block every writer while it stays frozen.
		n, err := freeze.OutsideWrite(t.cmd.Process)
		if err != nil {
			p.heal = nil
			return "", err
		}
		if n > 1 {
			return fmt.Sprintf("stopped outside a write at attempt %d", n), nil
		}
	case CutLeader, CutFollower:
		p.dur = tm.lease + c.dur(tm.lease, 0.2, 1.0)
		if err := c.cut(t); err != nil {
			return "", err
		}
		p.heal = func() error { return c.clear(t) }
	case CutAll:
		p.dur = c.dur(c.bounds().Lease, 0.5, 2.0)
		var cut []*proc
		for _, s := range c.liveSlots() {
			if err := c.cut(s); err != nil {
				return "", err
			}
			cut = append(cut, s)
		}
		p.heal = func() error {
			var errs []error
			for _, s := range cut {
				errs = append(errs, c.clear(s))
			}
			return errors.Join(errs...)
		}
	case RefuseLeader:
		p.dur = tm.lease + c.dur(tm.lease, 0.2, 1.0)
		for _, x := range t.proxies {
			x.Stop()
		}
		p.heal = func() error {
			var errs []error
			for _, x := range t.proxies {
				errs = append(errs, x.Start())
			}
			return errors.Join(errs...)
		}
	case SlowLeader, SlowFollower:
		p.dur = c.dur(tm.lease, 1.5, 2.5)
		lat := tm.renew + time.Duration(c.rng.Int64N(int64(tm.renew)))
		attrs := fmt.Sprintf(`"latency":%d,"jitter":0`, lat.Milliseconds()/2)
		if err := toxic(t, "slow_up", "latency", "upstream", attrs); err != nil {
			return "", err
		}
		if err := toxic(t, "slow_down", "latency", "downstream", attrs); err != nil {
			return "", err
		}
		p.heal = func() error { return c.clear(t) }
		return fmt.Sprintf("round trip +%v", lat.Round(time.Millisecond)), nil
	case ResetLeader, ResetFollower:
		// Replies are reset as they come back: writes sent before commit, their
		// replies are lost (ambiguous commit), for one to three heartbeats.
		p.dur = tm.heartbeat + time.Duration(c.rng.Int64N(int64(2*tm.heartbeat)))
		if err := toxic(t, "reset_down", "reset_peer", "downstream", `"timeout":0`); err != nil {
			return "", err
		}
		p.heal = func() error { return c.clear(t) }
	case RollbackRow:
		p.heal = noop
		return c.rollback(ctx)
	default:
		return "", fmt.Errorf("unknown fault %q", p.kind)
	}
	return "", nil
}

func (c *ProcessCluster) cut(p *proc) error {
	if err := toxic(p, "cut_up", "timeout", "upstream", `"timeout":0`); err != nil {
		return err
	}
	return toxic(p, "cut_down", "timeout", "downstream", `"timeout":0`)
}

func (c *ProcessCluster) clear(p *proc) error {
	for _, x := range p.proxies {
		x.Toxics.ResetToxics(context.Background())
	}
	return nil
}

func (c *ProcessCluster) liveSlots() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc
	for _, p := range c.slots {
		if p.cmd != nil && !p.killed {
			out = append(out, p)
		}
	}
	return out
}

// kill sends SIGKILL to p and closes its belief at the moment of death.
func (c *ProcessCluster) kill(p *proc) error {
	c.mu.Lock()
	p.killed = true
	c.mu.Unlock()
	err := p.cmd.Process.Kill()
	now := Mono()
	c.mu.Lock()
	c.closeBeliefs(p.id, now)
	c.mu.Unlock()
	<-p.exited
	return err
}

// stopAll ends every process: SIGCONT (in case), SIGTERM, then SIGKILL after 20 s.
func (c *ProcessCluster) stopAll() {
	c.mu.Lock()
	procs := slices.Clone(c.all)
	c.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		c.mu.Lock()
		p.stopping = true
		c.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			c.mu.Lock()
			c.failures = append(c.failures, fmt.Sprintf("candidate %s did not exit within 20s of SIGTERM\n%s", p.id, p.stderr.String()))
			p.killed = true
			c.mu.Unlock()
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// Run starts the candidates, injects the trials, stops everything and checks the
// history. The error reports a harness failure (a candidate that crashed, a leader
// that never came back); the report says whether the protocol held.
func (c *ProcessCluster) Run(ctx context.Context) (Report, error) {
	cfg := c.cfg
	sctx, stopSnaps := context.WithCancel(ctx)
	defer stopSnaps()
	go c.snapshotLoop(sctx)
	for i := range c.slots {
		if err := c.start(i); err != nil {
			return Report{}, err
		}
	}
	bound := c.bounds().Liveness()
	if c.waitLeader(ctx, 30*time.Second) == nil {
		return Report{}, c.harnessError("no leader (of every key) within 30s of the start")
	}
	begin := time.Now()
	for trial := 0; ; trial++ {
		if cfg.Duration > 0 && time.Since(begin) >= cfg.Duration || cfg.Duration == 0 && trial >= cfg.Trials {
			break
		}
		if ctx.Err() != nil {
			return Report{}, ctx.Err()
		}
		if err := c.failure(); err != nil {
			return Report{}, err
		}
		time.Sleep(time.Duration(300+c.rng.IntN(1200)) * time.Millisecond) // let it work
		waited := time.Now()
		leader := c.waitLeader(ctx, bound)
		if leader == nil && ctx.Err() == nil {
			// No fault is active: the database is not answering the candidates in
			// time. Wait as long as after a heal, and report the stretch.
			cfg.Logf("%s trial %d: no leader (of every key) within %v with no fault active; waiting", time.Now().Format("15:04:05.000"), trial, bound)
			leader = c.waitLeader(ctx, 30*time.Second)
			if leader != nil {
				c.mu.Lock()
				c.hist.Unled = append(c.hist.Unled, time.Since(waited))
				c.mu.Unlock()
			}
		}
		if leader == nil {
			if ctx.Err() != nil {
				return Report{}, ctx.Err()
			}
			return Report{}, c.harnessError(fmt.Sprintf("trial %d: no leader to hit (of every key) within %v", trial, bound+30*time.Second))
		}
		plans := c.pick(leader)
		f := Fault{Leader: leader.id, Start: Mono()}
		var notes []string
		for _, p := range plans {
			note, err := c.apply(ctx, p)
			if err != nil {
				if p.kind == RollbackRow && p.heal != nil {
					notes = append(notes, "rollback skipped: "+err.Error())
					continue
				}
				return Report{}, fmt.Errorf("trial %d: apply %s: %w", trial, p.kind, err)
			}
			f.Kinds = append(f.Kinds, p.kind)
			f.Targets = append(f.Targets, p.target.id)
			if note != "" {
				notes = append(notes, p.kind+": "+note)
			}
		}
		if len(f.Kinds) == 0 {
			continue
		}
		// Each fault is healed when its own duration has passed.
		slices.SortFunc(plans, func(a, b *plan) int { return int(a.dur - b.dur) })
		began := time.Now()
		var longest time.Duration
		for _, p := range plans {
			time.Sleep(time.Until(began.Add(p.dur)))
			if p.kind == StopLeader && !c.waitTakeover(ctx, p.target, bound) {
				notes = append(notes, fmt.Sprintf("no takeover within %v while frozen", bound))
			}
			longest = max(longest, time.Since(began))
			if p.heal != nil {
				if err := p.heal(); err != nil {
					return Report{}, fmt.Errorf("trial %d: heal %s: %w", trial, p.kind, err)
				}
			}
		}
		f.Heal = Mono()
		f.Note = strings.Join(notes, "; ")
		c.mu.Lock()
		c.hist.Faults = append(c.hist.Faults, f)
		c.mu.Unlock()
		after := c.waitLeader(ctx, bound+30*time.Second)
		back := time.Duration(Mono() - f.Heal)
		cfg.Logf("%s trial %d: %s on %v (leader %s) for %v %s; leader %s after heal (%v)", time.Now().Format("15:04:05.000"), trial, f.Name(), f.Targets, leader.id,
			longest.Round(time.Millisecond), strings.Join(notes, "; "), procID(after), back.Round(time.Millisecond))
		if after == nil {
			return Report{}, c.harnessError(fmt.Sprintf("trial %d: no leader (of every key) within %v of healing %s", trial, bound+30*time.Second, f.Name()))
		}
		// Replace killed candidates.
		for i, p := range c.slots {
			if p.killed {
				if err := c.start(i); err != nil {
					return Report{}, err
				}
			}
		}
	}
	time.Sleep(time.Second) // a last stretch of history after the last heal
	stopSnaps()
	c.mu.Lock()
	c.hist.End = Mono()
	c.mu.Unlock()
	c.stopAll()
	if err := c.failure(); err != nil {
		return Report{}, err
	}
	c.mu.Lock()
	for k := range c.open {
		c.closeBelief(k, Mono())
	}
	h := c.hist
	c.mu.Unlock()
	acts, err := c.readActions(ctx)
	if err != nil {
		return Report{}, err
	}
	h.Actions = append(acts, h.Actions...) // the suite's (the table's), or a Lead function's
	c.History = h
	rep := Check(h, c.bounds())
	// A run without any action proved nothing (the fault kinds are drawn at random
	// here, over trials that the caller counts: they are not required each).
	rep.Violations = append(rep.Violations, untested(h, nil)...)
	return rep, nil
}

func procID(p *proc) string {
	if p == nil {
		return "none"
	}
	return p.id
}

func (c *ProcessCluster) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) > 0 {
		return errors.New(strings.Join(c.failures, "\n"))
	}
	return nil
}

func (c *ProcessCluster) harnessError(msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString(msg)
	if n := len(c.hist.Stalls); n > 0 {
		last := c.hist.Stalls[n-1]
		fmt.Fprintf(&b, " (waits do not count stalls: the probe found the database stalled %d times, for %v in all, the last for %v ending %v ago)",
			n, stalled(c.hist.Stalls, 0, Mono()).Round(time.Millisecond), time.Duration(last.End-last.Start).Round(time.Millisecond),
			time.Duration(Mono()-last.End).Round(time.Millisecond))
	}
	for _, p := range c.slots {
		if p.stderr != nil {
			fmt.Fprintf(&b, "\n--- %s stderr (tail) ---\n%s", p.id, p.stderr.String())
		}
	}
	return errors.New(b.String())
}

func (c *ProcessCluster) readActions(ctx context.Context) ([]Action, error) {
	rows, err := c.db.QueryContext(ctx, "SELECT id, ekey, token, cand, chk FROM "+c.quote(c.actions)+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		var a Action
		if err := rows.Scan(&a.ID, &a.Key, &a.Token, &a.Cand, &a.Check); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
