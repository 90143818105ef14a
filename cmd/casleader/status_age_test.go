package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/casleader/casleader/internal/testdb/pgdb"
	"github.com/casleader/casleader/store"
	"github.com/casleader/casleader/store/sqlite"
)

func TestAgesBeyondHoursReadAsDaysOrCenturies(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		math.MaxInt64:           "more than 292 years",
		72 * time.Hour:          "3 days",
		1718109 * time.Hour:     "71587 days",
		90 * time.Minute:        "1h30m0s",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestStatusShowsAFarFutureTickAsInvalid: a tick_time in the year 3000 is an invalid
// row, not a lease that expired centuries ago.
func TestStatusShowsAFarFutureTickAsInvalid(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			db := newTestDB(t, kind)
			migrate(t, db)
			var err error
			switch kind {
			case "postgres":
				_, err = pgdb.Postgres(t).Exec(t.Context(), `INSERT INTO "`+db.table+`" (elect_key, version, leader_id, term, tick_time)`+
					` VALUES ('k', 3, 'x', 2, '3000-01-01 00:00:00+00')`)
			default:
				sq, oerr := sqlite.Open(strings.TrimPrefix(db.dsn, "sqlite://"))
				if oerr != nil {
					t.Fatal(oerr)
				}
				defer sq.Close()
				_, err = sq.Exec(`INSERT INTO "` + db.table + `" VALUES ('k', 3, 'x', 2, 32503680000000000, '', 0, 0, '', 0, 0)`)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := runCL(t, nil, append(db.args(), "status")...)
			if !strings.Contains(r.stdout, "INVALID ROW") || !strings.Contains(r.stdout, "future") || strings.Contains(r.stdout, "expired") {
				t.Fatalf("status of a tick_time in the year 3000: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestStatusJudgesTheLeaseTheRowRecords: without --lease, status judges a lease by
// the one its leader runs with, as the row records it: a 3 s lease shows less than
// 3 s left, not the 15 s default's.
func TestStatusJudgesTheLeaseTheRowRecords(t *testing.T) {
	t.Parallel()
	db := newTestDB(t, "sqlite")
	migrate(t, db)
	sq, err := sqlite.Open(strings.TrimPrefix(db.dsn, "sqlite://"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st, err := sqlite.New(sq, db.table)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Insert(t.Context(), "k", store.Candidate{ID: "x", Lease: 3 * time.Second}); err != nil || !ok {
		t.Fatalf("insert: %v %v", ok, err)
	}
	r := runCL(t, nil, append(db.args(), "status", "--json", "--key", "k")...)
	var row statusRow
	if err := json.Unmarshal([]byte(r.stdout), &row); err != nil {
		t.Fatalf("status --json: %q (%v)", r.stdout, err)
	}
	// However long the command took to start, what is left is the 3 s lease less
	// the age it read.
	left := max(3-row.AgeSeconds, 0)
	if row.LeaseSeconds != 3 || math.Abs(row.RemainingSeconds-left) > 0.001 || row.Expired != (left == 0) {
		t.Fatalf("status of a 3 s lease: lease %vs, age %vs, %vs left, expired %v\n%s", row.LeaseSeconds, row.AgeSeconds, row.RemainingSeconds, row.Expired, r.stdout)
	}
}
