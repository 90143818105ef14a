package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/casleader/casleader/store/mysql"
)

// serverStats reads, at the database server, counters that only grow: the
// statements it has run and the rows it has written, and the CPU time of its
// processes. The shards run takes their deltas over each event's window.
//
// PostgreSQL: xact_commit + xact_rollback of the DSN's database in
// pg_stat_database (one transaction per statement: the election's statements run
// outside explicit transactions), and tup_inserted + tup_updated + tup_deleted;
// the counts of one database, flushed by each backend at most once a second.
// MariaDB: SHOW GLOBAL STATUS Questions, and Handler_write + Handler_update +
// Handler_delete (rows written by the storage engines); the whole server's (MariaDB keeps no per-database statement count
// unless userstat is on), so other clients of the server count too. CPU: the sum
// of user + system time of the processes named postgres, or mariadbd and mysqld,
// from /proc, over the processes that are there at the window's end (one started
// in it counts from 0; one that exited in it is left out).
type serverStats struct {
	read  func(ctx context.Context) (statements, rows int64, err error)
	comm  []string // process names of the server
	close func()
}

// serverCounters holds one reading of serverStats.
type serverCounters struct {
	statements, rows int64
	cpu              map[int]time.Duration // per server process
	at               time.Time
	ok               bool
}

// newServerStats connects to the server of dialect (nil, nil for SQLite: it has no
// server).
func newServerStats(ctx context.Context, dialect string, d dbs) (*serverStats, error) {
	switch dialect {
	case "postgres":
		conn, err := pgx.Connect(ctx, d.Postgres)
		if err != nil {
			return nil, fmt.Errorf("server statistics: connect to PostgreSQL: %w", err)
		}
		return &serverStats{comm: []string{"postgres"}, close: func() { _ = conn.Close(context.Background()) },
			read: func(ctx context.Context) (st, rows int64, err error) {
				err = conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
					FROM pg_stat_database WHERE datname = current_database()`).Scan(&st, &rows)
				return st, rows, err
			}}, nil
	case "mariadb":
		db, err := mysql.Open(d.MySQL)
		if err != nil {
			return nil, fmt.Errorf("server statistics: open MariaDB: %w", err)
		}
		db.SetMaxOpenConns(1)
		return &serverStats{comm: []string{"mariadbd", "mysqld"}, close: func() { db.Close() },
			read: func(ctx context.Context) (int64, int64, error) { return mysqlCounters(ctx, db) }}, nil
	}
	return nil, nil
}

func mysqlCounters(ctx context.Context, db *sql.DB) (st, rows int64, err error) {
	rs, err := db.QueryContext(ctx, `SHOW GLOBAL STATUS WHERE Variable_name IN
		('Questions', 'Handler_write', 'Handler_update', 'Handler_delete')`)
	if err != nil {
		return 0, 0, err
	}
	defer rs.Close()
	for rs.Next() {
		var name string
		var v int64
		if err := rs.Scan(&name, &v); err != nil {
			return 0, 0, err
		}
		if name == "Questions" {
			st = v
		} else {
			rows += v
		}
	}
	return st, rows, rs.Err()
}

// sample reads the counters now; ok is false when they could not be read.
func (s *serverStats) sample(ctx context.Context) serverCounters {
	if s == nil {
		return serverCounters{}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, rows, err := s.read(rctx)
	return serverCounters{statements: st, rows: rows, cpu: commCPU(s.comm), at: time.Now(), ok: err == nil}
}

// rates returns what the server did per second between a and b.
func rates(a, b serverCounters) (statements, rows, cpuPercent float64, ok bool) {
	secs := b.at.Sub(a.at).Seconds()
	if !a.ok || !b.ok || secs <= 0 {
		return 0, 0, 0, false
	}
	var cpu time.Duration
	for pid, c := range b.cpu {
		cpu += c - a.cpu[pid] // a process started in the window counts from 0
	}
	return float64(b.statements-a.statements) / secs, float64(b.rows-a.rows) / secs, 100 * cpu.Seconds() / secs, true
}

// commCPU returns the CPU time (user + system) of each process named one of
// names, by PID.
func commCPU(names []string) map[int]time.Duration {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := map[int]time.Duration{}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || !slices.Contains(names, strings.TrimSpace(string(b))) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		if c, ok := procCPU(pid); ok {
			total[pid] = c
		}
	}
	return total
}
