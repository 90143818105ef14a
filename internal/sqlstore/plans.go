package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Statement is one batched statement as a store sends it, for the plan tests.
type Statement struct {
	Name  string
	Query string
	Args  []any
}

// BatchStatements returns the batched statements a store of dialect d on table sends
// for kvs (already unique), with their arguments laid out as it lays them out.
func BatchStatements(d schema.Dialect, table string, kvs []store.KeyVersion) ([]Statement, error) {
	c, err := New(d, table, nil, nil)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(kvs))
	for i, kv := range kvs {
		keys[i] = kv.Key
	}
	n := len(kvs)
	cand := c.candidateArgs(store.Candidate{ID: "me", Incarnation: "inc", Lease: 5 * time.Second})
	var electExtra []any
	if d == schema.MySQL {
		electExtra = []any{(5 * time.Second).Microseconds(), "me", "me"}
	}
	var out []Statement
	add := func(name string, build func(int) (string, string), pre, extra []any) {
		write, back := build(n)
		out = append(out, Statement{name, write, c.casArgs("me", pre, kvs, extra)})
		if back != "" {
			out = append(out, Statement{name + " (read back)", back, c.keyArgs(keys)})
		}
	}
	out = append(out, Statement{"observe many", c.bq.observeMany(n), c.keyArgs(keys)})
	add("renew many", c.bq.renewMany, nil, nil)
	add("elect many", c.bq.electMany, cand, electExtra)
	add("release many", c.bq.releaseMany, nil, nil)
	add("insert many", c.bq.insertMany, cand, nil)
	return out, nil
}

// FillStatement returns a statement that adds n rows to table, keyed "fill-1" to
// "fill-n", led by "filler".
func FillStatement(d schema.Dialect, table string, n int) (string, error) {
	q, err := ident.Quote(d, table)
	if err != nil {
		return "", err
	}
	cols := ` (elect_key, version, leader_id, term, tick_time, handover_to, stepdown, create_time, update_time) `
	switch d {
	case schema.Postgres:
		return `INSERT INTO ` + q + cols + `SELECT 'fill-' || g, ` + pgEpochMicros + `, 'filler', ` + pgEpochMicros +
			`, clock_timestamp(), '', 0, clock_timestamp(), clock_timestamp() FROM generate_series(1, ` + fmt.Sprint(n) + `) AS g`, nil
	case schema.MySQL:
		// n rows from a cross join of digit tables: no recursion limit applies.
		digits := `(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
		var from, num []string
		for i, p := 0, 1; p < n; i, p = i+1, p*10 {
			from = append(from, fmt.Sprintf("%s AS d%d", digits, i))
			num = append(num, fmt.Sprintf("d%d.d * %d", i, p))
		}
		return `INSERT INTO ` + q + cols + `SELECT * FROM (SELECT CONCAT('fill-', 1 + ` + strings.Join(num, " + ") + `) AS k, ` + mysqlEpochMicros + ` AS v, 'filler' AS l, ` +
			mysqlEpochMicros + ` AS t, NOW(6) AS tt, '' AS h, 0 AS s, NOW(6) AS c, NOW(6) AS u FROM ` + strings.Join(from, " CROSS JOIN ") +
			`) AS f WHERE CAST(SUBSTRING(f.k, 6) AS UNSIGNED) <= ` + fmt.Sprint(n), nil
	case schema.SQLite:
		return `WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ` + fmt.Sprint(n) + `) INSERT INTO ` + q + cols +
			`SELECT 'fill-' || i, ` + sqliteNow + `, 'filler', ` + sqliteNow + `, ` + sqliteNow + `, '', 0, ` + sqliteNow + `, ` + sqliteNow + ` FROM g`, nil
	}
	return "", fmt.Errorf("unknown dialect %q", d)
}
