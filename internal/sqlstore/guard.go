package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// The guard is the fencing check of the protocol: inside the caller's own
// transaction, on the same database as the election row, it reads the row with a
// shared row lock and verifies, by the database clock, that
//
//   - the row exists and names id as its leader (not released),
//   - its term is token (no newer term was won, and the row was not rolled back to
//     an older one),
//   - the lease has not expired: the last renewal is less than lease old.
//
// The shared lock is held until the caller's transaction ends, and every write of
// the election row (an election, a renewal, a release) needs an exclusive lock on
// it, so no newer leader can win while the guarded transaction is open: the
// caller's writes commit before any takeover, never after. The pattern is:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	defer tx.Rollback()
//	if err := st.Guard(ctx, tx, key, id, token, lease); err != nil {
//		return err // errors.Is(err, store.ErrFenced): not the leader any more
//	}
//	// ... the writes that only the leader may do ...
//	return tx.Commit()
//
// Call the guard first in the transaction (a REPEATABLE READ or SERIALIZABLE
// snapshot taken before it may make PostgreSQL report a serialization failure) and
// keep the transaction short: it delays the leader's own renewals too.
//
// Per database:
//   - MySQL/MariaDB: SELECT … LOCK IN SHARE MODE (understood by MySQL 8 and MariaDB);
//     the age is computed with NOW(6), the statement's start. On a Galera node
//     (wsrep_on = ON) the guard also writes the row, so that the transaction
//     conflicts in certification with a takeover on another node (see Galera below).
//   - PostgreSQL: SELECT … FOR SHARE (it needs the UPDATE privilege on the table,
//     which the election user has anyway); the age is computed with
//     clock_timestamp().
//   - SQLite has no row locks: a write transaction locks the whole database file
//     against other writers. The guard first runs a write statement that changes
//     nothing, so the transaction holds SQLite's write lock (RESERVED) from then on
//     even when it was begun DEFERRED; a takeover's UPDATE then waits (busy timeout)
//     until the transaction ends. If another connection committed after the
//     transaction's snapshot, that statement fails with SQLITE_BUSY(_SNAPSHOT) and
//     the guard returns an [store.ErrTransient] error.

// guardQueries returns the guard's statements for dialect d and the quoted table:
// lock (may be empty) takes the write lock where the database has no row locks; read
// selects leader_id, term, the age in microseconds and the lease of the row of key,
// locked.
func guardQueries(d schema.Dialect, t string) (lock, read string) {
	switch d {
	case schema.MySQL:
		return "", `SELECT leader_id, term, ` + mysqlAge + `, lease FROM ` + t + ` WHERE elect_key = ? LOCK IN SHARE MODE`
	case schema.Postgres:
		return "", `SELECT leader_id, term, ` + pgAge + `, lease FROM ` + t + ` WHERE elect_key = $1 FOR SHARE`
	default: // SQLite
		return `UPDATE ` + t + ` SET version = version WHERE 0`,
			`SELECT leader_id, term, ` + sqliteNow + ` - tick_time, lease FROM ` + t + ` WHERE elect_key = ?`
	}
}

// Galera: row locks are local to a node; only write-set certification conflicts
// across nodes. A shared lock taken on node A does not hold off a takeover on node
// B, and a fenced transaction can commit on A after B's takeover has committed
// (TestGaleraGuard measured it in about a third of the trials). So on a Galera node
// the guard also writes the election row, inside the caller's transaction: it moves
// update_time forward by one microsecond and back again. Each of the two statements
// changes the row, so the transaction's write set holds the row's key and its
// exclusive lock, and the row ends as it was: version, tick_time and the
// "tick_time = update_time" test of the batched renewals are untouched, so the
// leader's own compare-and-set renewals stay valid. Then:
//
//   - a takeover committed on another node before the guarded transaction commits
//     either aborts it when the takeover is applied on the guard's node (the
//     applier takes the row's lock by force) or fails it in certification at
//     commit (deadlock error 1213, transient): the fenced write never lands after
//     a newer term was won;
//   - a guarded transaction that commits first makes a takeover on another node
//     fail certification (1213, retried by the candidate), and the takeover then
//     sees the row as the guarded transaction left it.
//
// On one node the exclusive lock holds a takeover off just as the shared lock
// does. The cost: guarded transactions of one key no longer run concurrently, and
// a renewal by a leader on another node aborts a guarded transaction that is open
// at that moment (a transient error: retry it, or keep guarded transactions on the
// leader's node and shorter than the heartbeat interval).

// galeraWrite makes the guarded transaction conflict, on a Galera cluster, with
// every write of the election row of key committed on any node (see above). It
// does nothing on a server that is not a Galera node; the first call asks the
// server, the answer is kept for the store's life.
func (c *Core) galeraWrite(ctx context.Context, tx txQuerier, quoted, key string) error {
	if c.wsrep.Load() == 0 {
		var name, value string
		err := tx.QueryRowContext(ctx, `SHOW VARIABLES LIKE 'wsrep_on'`).Scan(&name, &value)
		switch {
		case errors.Is(err, sql.ErrNoRows): // MySQL without wsrep
			c.wsrep.Store(1)
		case err != nil:
			return c.wrap("guard: is the server a Galera node?", key, err)
		case value == "ON":
			c.wsrep.Store(2)
		default:
			c.wsrep.Store(1)
		}
	}
	if c.wsrep.Load() != 2 {
		return nil
	}
	for _, op := range []string{"+", "-"} {
		q := `UPDATE ` + quoted + ` SET update_time = update_time ` + op + ` INTERVAL 1 MICROSECOND WHERE elect_key = ?`
		if _, err := tx.ExecContext(ctx, q, key); err != nil {
			return c.wrap("guard", key, err)
		}
	}
	return nil
}

// txQuerier is what the guard needs from *sql.Tx (or *sql.Conn).
type txQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// guardSQL runs the guard in a database/sql transaction.
func (c *Core) guardSQL(ctx context.Context, tx txQuerier, key, id string, token int64, lease time.Duration) error {
	if err := c.guardArgs(key, id, token, lease); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", store.ErrInvalidArgument)
	}
	quoted, err := ident.Quote(c.dialect, c.table)
	if err != nil {
		return err
	}
	lock, read := guardQueries(c.dialect, quoted)
	if lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return c.wrap("guard", key, err)
		}
	}
	if c.dialect == schema.MySQL {
		if err := c.galeraWrite(ctx, tx, quoted, key); err != nil {
			return err
		}
	}
	var r guardRow
	err = tx.QueryRowContext(ctx, read, key).Scan(&r.leader, &r.term, &r.age, &r.lease)
	return c.judge(key, id, token, lease, r, err)
}

// RowQuerier is a transaction that reads one row: the PostgreSQL package adapts a
// pgx.Tx to it, in exec mode.
type RowQuerier interface {
	QueryRow(ctx context.Context, query string, args ...any) Scanner
}

// GuardRow runs the guard of c in a transaction of another driver than
// database/sql (a pgx transaction, in exec mode: no named prepared statement, so
// it works through PgBouncer in transaction pooling mode). It is a function, not a
// method, so that the dialect stores do not expose it.
func GuardRow(ctx context.Context, c *Core, tx RowQuerier, key, id string, token int64, lease time.Duration) error {
	if err := c.guardArgs(key, id, token, lease); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", store.ErrInvalidArgument)
	}
	quoted, err := ident.Quote(c.dialect, c.table)
	if err != nil {
		return err
	}
	_, read := guardQueries(c.dialect, quoted)
	var r guardRow
	err = tx.QueryRow(ctx, read, key).Scan(&r.leader, &r.term, &r.age, &r.lease)
	return c.judge(key, id, token, lease, r, err)
}

func (c *Core) guardArgs(key, id string, token int64, lease time.Duration) error {
	if err := rules.ValidateNames(key, id); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("%w: lease %v is not positive", store.ErrInvalidArgument, lease)
	}
	if token <= 0 {
		return fmt.Errorf("%w: token %d is not a term (not leading?) (guard %s %q)", store.ErrFenced, token, c.table, key)
	}
	return nil
}

// guardRow is the guard's read of the row.
type guardRow struct {
	leader           sql.NullString
	term, age, lease sql.NullInt64
}

// judge turns the guard's read into nil (the token holds the lease) or an error.
// The lease is judged by the shorter of own, the leader's setting, and the lease
// the row records, by which the followers judge it.
func (c *Core) judge(key, id string, token int64, own time.Duration, r guardRow, err error) error {
	leader, term, age := r.leader, r.term, r.age
	lease := own
	if rl := time.Duration(r.lease.Int64) * time.Microsecond; rl > 0 {
		lease = min(lease, rl)
	}
	fenced := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s (guard %s %q, token %d, id %q)", store.ErrFenced, fmt.Sprintf(format, args...), c.table, key, token, id)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fenced("the election row does not exist")
	case err != nil:
		return c.wrap("guard", key, err)
	case !leader.Valid || !term.Valid || !age.Valid || !r.lease.Valid:
		return fmt.Errorf("guard %s %q: %w: a column is NULL: fix or delete the row", c.table, key, store.ErrInvalidRow)
	case term.Int64 > token:
		return fenced("a newer term %d was won by %q", term.Int64, leader.String)
	case term.Int64 < token:
		return fenced("the row's term %d is older than the token: the row was rolled back (a failover that lost writes?)", term.Int64)
	case leader.String == "":
		return fenced("the lease of term %d was released", term.Int64)
	case leader.String != id:
		return fenced("term %d is held by %q: the row was rolled back and the term issued again", term.Int64, leader.String)
	}
	if a := time.Duration(age.Int64) * time.Microsecond; a >= lease {
		return fenced("the lease of term %d expired: last renewed %v ago by the database clock, lease %v", term.Int64, a.Round(time.Millisecond), lease)
	}
	return nil
}

// Guard verifies, inside tx and with a shared lock on the election row of key held
// until tx ends, that token is the term of an unexpired lease (by the database
// clock, for the given lease duration) held by candidate id. It returns nil if so,
// an error matching [store.ErrFenced] if not, and a classified database error
// ([store.ErrTransient], [store.ErrNotWritable], [store.ErrDeployment]) if the check
// could not be made. In every case but nil the caller must roll tx back.
//
// MySQL and MariaDB use SELECT … LOCK IN SHARE MODE (and on a Galera node also
// write the row), PostgreSQL (pgx's stdlib driver) SELECT … FOR SHARE; SQLite locks
// the database file, not rows: the guard takes the write lock first, so the
// transaction blocks every other writer, including a takeover, until it ends. The
// guard section of this package's source describes the locking per database.
//
// tx is a *sql.Tx, or a [RowQuerier] (the PostgreSQL package's adapter of a pgx
// transaction); any other value is refused.
func (c *Core) Guard(ctx context.Context, tx any, key, id string, token int64, lease time.Duration) error {
	switch tx := tx.(type) {
	case *sql.Tx:
		if tx == nil {
			return c.guardSQL(ctx, nil, key, id, token, lease)
		}
		return c.guardSQL(ctx, tx, key, id, token, lease)
	case RowQuerier:
		return GuardRow(ctx, c, tx, key, id, token, lease)
	case nil:
		return c.guardSQL(ctx, nil, key, id, token, lease)
	default:
		return fmt.Errorf("%w: guard %q: a %s store cannot fence a transaction of type %T: pass the *sql.Tx of a transaction on the election database", store.ErrInvalidArgument, key, c.dialect, tx)
	}
}
