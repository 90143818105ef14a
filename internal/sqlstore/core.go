package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/notify"
	"github.com/casleader/casleader/internal/rules"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Backend runs single autocommit statements. It hides database/sql and pgx: the
// PostgreSQL package implements it on a pgx pool, [SQLBackend] and [SQLiteBackend] on
// a *sql.DB.
type Backend interface {
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	QueryRow(ctx context.Context, query string, args ...any) Scanner
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Scanner is one row of a reply.
type Scanner interface {
	Scan(dest ...any) error
}

// queries holds one dialect's statements. Arguments are passed in the order given
// in the comments; each placeholder is used exactly once.
type queries struct {
	observe string // key
	insert  string // key, id; reports the new term
	elect   string // id, key, oldVersion, leaseMicros; reports the new term
	// electReleased: id, incarnation, leaseMicros, key (then id twice on MySQL);
	// reports the new term. It wins only a row whose version is valid (1 ..
	// rules.VersionLimit-2), whatever the version, and whose lease is released or
	// handed over to id and not yet claimed.
	electReleased string
	renew         string // newVersion, key, oldVersion, id
	release       string // newVersion, key, oldVersion, id
	handover      string // to, key, oldVersion, id; reports the new term
	request       string // newVersion, to, key, oldVersion
	check         string // (none): selects every column, matches no row

	// termByLastInsertID: the statements that report a new term do it through
	// LAST_INSERT_ID(expr) in the reply (MySQL, which has no UPDATE ... RETURNING);
	// otherwise they return one row holding it (RETURNING term).
	termByLastInsertID bool
}

// Core is the dialect-independent part of every store.
type Core struct {
	dialect  schema.Dialect
	table    string
	q        queries
	b        Backend
	classify func(error) error
	bq       batchQueries
	wsrep    *atomic.Int32 // guard.go: whether the server is a Galera node (0: not known yet)
	checked  *atomic.Bool  // the table passed Check
	hub      *notify.Hub
	wakeups  *notify.Wakeups // see Wakeups
	// membersInc is whether the members table has the incarnation column
	// (membersUnknown, membersWithIncarnation, membersWithout; see membersShape).
	membersInc *atomic.Int32
}

// New returns the engine of a store for dialect d on b, for the election table
// (empty means [schema.DefaultTable]). classify marks the driver's errors with the
// kinds of package store and the markers below, and hands the rest to
// [ClassifyCommon].
func New(d schema.Dialect, table string, b Backend, classify func(error) error) (Core, error) {
	if table == "" {
		table = schema.DefaultTable
	}
	quoted, err := ident.Quote(d, table)
	if err != nil {
		return Core{}, err
	}
	if sch, _, ok := strings.Cut(table, "."); ok && d == schema.SQLite && sch != "main" {
		return Core{}, fmt.Errorf("%w %q: on SQLite the part before the dot names an attached database, and the store attaches none: name the table without %q",
			schema.ErrInvalidTable, table, sch+".")
	}
	var bq batchQueries
	var build func(quoted, table string) queries
	switch d {
	case schema.MySQL:
		bq, build = mysqlBatch{quoted}, mysqlQueries
	case schema.Postgres:
		bq, build = postgresBatch{t: quoted, notify: pgNotify(table, "elect_key", "0"),
			handover: pgNotify(table, "elect_key, term", pgHandedTo)}, postgresQueries
	case schema.SQLite:
		bq, build = sqliteBatch{quoted}, sqliteQueries
	default:
		return Core{}, fmt.Errorf("%w: unknown dialect %q", store.ErrInvalidArgument, d)
	}
	hub := notify.NewHub()
	return Core{dialect: d, table: table, q: build(quoted, table), b: b, classify: classify, bq: bq, wsrep: new(atomic.Int32), checked: new(atomic.Bool),
		hub: hub, wakeups: notify.NewWakeups(table, hub, nil), membersInc: new(atomic.Int32)}, nil
}

// Listen makes lis (built on [Core.Hub]) the cross-process part of the store's
// wake-ups. The dialect stores call it once, in their constructor.
func (c *Core) Listen(lis notify.Listener) { c.wakeups = notify.NewWakeups(c.table, c.hub, lis) }

// Hub returns the hub that the store's wake-ups deliver to.
func (c *Core) Hub() *notify.Hub { return c.hub }

// Subscribe is [store.Driver.Subscribe]: this store's own releases and handovers
// wake the subscribers in this process directly; writes by other processes reach
// them through the dialect's listener, which runs while anybody subscribes.
func (c *Core) Subscribe(key, id string, wake func(version int64)) (unsubscribe func()) {
	return c.wakeups.Subscribe(key, id, wake)
}

// Observed is [store.Driver.Observed]: it forwards to the listener.
func (c *Core) Observed(key string, rec store.Record) { c.wakeups.Observed(key, rec) }

// Leading is [store.Driver.Leading]: it forwards to the listener.
func (c *Core) Leading(key string, token int64, leading bool) { c.wakeups.Leading(key, token, leading) }

// Listening reports whether wake-ups from other processes are being delivered
// (see [notify.Wakeups.Listening]).
func (c *Core) Listening() bool { return c.wakeups.Listening() }

// Dialect returns the store's SQL dialect.
func (c *Core) Dialect() schema.Dialect { return c.dialect }

// Table returns the election table's name.
func (c *Core) Table() string { return c.table }

// wrap classifies err and adds the operation and key. It keeps driver errors in
// the chain for errors.As, and adds what to do for deployment errors.
func (c *Core) wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	err = c.classify(err)
	if errors.Is(err, ErrMissingTable) {
		return &store.MissingTableError{Table: c.table, Dialect: string(c.dialect), Op: op, Key: key, Err: err}
	}
	if errors.Is(err, ErrWrongColumns) {
		return fmt.Errorf("%w: table %q does not have casleader's columns %v, or one has another type: `casleader migrate` names each wrong column and how to fix it (ALTER it, or drop the table and re-create it), or configure another table name (%s): %w",
			store.ErrDeployment, c.table, catalog.Columns, where(op, key, string(c.dialect)), err)
	}
	if errors.Is(err, ErrNoPrivilege) {
		return fmt.Errorf("%w: missing privilege on table %q: grant SELECT, INSERT, UPDATE on it to the election user (%s): %w",
			store.ErrDeployment, c.table, where(op, key, string(c.dialect)), err)
	}
	return fmt.Errorf("%s %s: %w", where(op, key, ""), c.table, err)
}

// where describes an operation for a message: op, then the election key quoted
// when there is one, then the dialect when given ("observe \"k\", postgres").
func where(op, key, dialect string) string {
	if key != "" {
		op += fmt.Sprintf(" %q", key)
	}
	if dialect != "" {
		op += ", " + dialect
	}
	return op
}

// Markers set by the dialects' classify functions: deployment errors whose message
// [Core] completes with what to do.
// Each is a [store.ErrDeployment] whose message does not repeat it: the message
// that completes it says "deployment error" once.
var (
	ErrMissingTable error = marker("missing table")
	ErrWrongColumns error = marker("wrong columns")
	ErrNoPrivilege  error = marker("missing privilege")
	// ErrNoSchema: the database (MySQL) or schema (PostgreSQL) that a statement
	// names does not exist.
	ErrNoSchema error = marker("no such database or schema")
)

// marker is a kind of deployment error.
type marker string

func (m marker) Error() string { return string(m) }

// Is reports whether target is [store.ErrDeployment].
func (m marker) Is(target error) bool { return target == store.ErrDeployment }

// checkVersion refuses a write from version when it would take the row to
// [rules.VersionLimit]: the write is not sent.
func (c *Core) checkVersion(op, key string, version int64) error {
	if err := rules.CheckVersion(version); err != nil {
		return fmt.Errorf("%s %s: %w", where(op, key, ""), c.table, err)
	}
	return nil
}

// Observe reads the row of key and the database's current time in one statement.
// found is false when the row does not exist.
func (c *Core) Observe(ctx context.Context, key string) (rec store.Record, found bool, err error) {
	if err := rules.ValidateNames(key); err != nil {
		return store.Record{}, false, err
	}
	if err := c.ready(ctx); err != nil {
		return store.Record{}, false, err
	}
	var r scanned
	err = c.b.QueryRow(ctx, c.q.observe, key).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, false, nil
	}
	if err != nil {
		return store.Record{}, false, c.wrap("observe", key, err)
	}
	rec, err = r.decode(key, c.oneClock())
	if err != nil {
		return store.Record{}, false, fmt.Errorf("observe %s %q: %w", c.table, key, err)
	}
	return rec, true, nil
}

// scanned is a row as a read scans it, in the order of the observe statements.
type scanned struct {
	version, term, ageMicros, stepdown, leaseMicros sql.NullInt64
	leader, handover, incarnation                   sql.NullString
}

func (r *scanned) dest() []any {
	return []any{&r.version, &r.leader, &r.term, &r.ageMicros, &r.handover, &r.stepdown, &r.leaseMicros, &r.incarnation}
}

// decode turns r into the Record of key; oneClock says whether the age was read
// on a single-primary server (see [store.Record.OneClock]).
func (r *scanned) decode(key string, oneClock bool) (store.Record, error) {
	if !r.leaseMicros.Valid || !r.incarnation.Valid {
		return store.Record{}, fmt.Errorf("%w: column lease or incarnation is NULL: fix or delete the row", store.ErrInvalidRow)
	}
	rec, err := decode(key, r.version, r.leader, r.term, r.ageMicros, r.handover, r.stepdown)
	if err != nil {
		return store.Record{}, err
	}
	rec.Lease = time.Duration(max(r.leaseMicros.Int64, 0)) * time.Microsecond
	rec.Incarnation = r.incarnation.String
	rec.OneClock = oneClock
	return rec, nil
}

// oneClock reports whether the store's server is single-primary, so that a row's
// age is read by the clock that wrote it: PostgreSQL (a promoted standby takes
// over from the primary, it never writes beside it), SQLite, and MySQL/MariaDB
// that is not a Galera node. Check asks MySQL once; until then, and when it could
// not tell, the answer is no.
func (c *Core) oneClock() bool {
	return c.dialect != schema.MySQL || c.wsrep.Load() == 1
}

// decode turns scanned columns into a store.Record, rejecting values casleader never writes.
func decode(key string, version sql.NullInt64, leader sql.NullString, term, ageMicros sql.NullInt64, handover sql.NullString, stepdown sql.NullInt64) (store.Record, error) {
	for _, col := range []struct {
		name  string
		valid bool
	}{
		{"version", version.Valid}, {"leader_id", leader.Valid}, {"term", term.Valid},
		{"tick_time", ageMicros.Valid}, {"handover_to", handover.Valid}, {"stepdown", stepdown.Valid},
	} {
		if !col.valid {
			return store.Record{}, fmt.Errorf("%w: column %s is NULL: fix or delete the row", store.ErrInvalidRow, col.name)
		}
	}
	if version.Int64 < 1 {
		return store.Record{}, fmt.Errorf("%w: version %d is not positive: fix or delete the row", store.ErrInvalidRow, version.Int64)
	}
	if version.Int64 >= rules.VersionLimit {
		return store.Record{}, rules.CheckRowVersion(version.Int64)
	}
	if term.Int64 < 0 || term.Int64 > version.Int64 {
		return store.Record{}, fmt.Errorf("%w: term %d is outside 0..version (%d): fix or delete the row", store.ErrInvalidRow, term.Int64, version.Int64)
	}
	const maxMicros = math.MaxInt64 / int64(time.Microsecond)
	switch {
	case ageMicros.Int64 > maxMicros:
		// Centuries old (a corrupt tick_time): expired, not wrapped.
		return record(key, version, leader, term, math.MaxInt64, handover, stepdown), nil
	case ageMicros.Int64 < -maxMicros:
		// Centuries in the future: reported, not wrapped into a past time.
		return store.Record{}, fmt.Errorf("%w: tick_time is more than %d years in the future of the database clock: fix the row (set tick_time to the database's current time) or delete it",
			store.ErrInvalidRow, maxMicros/(365*24*3600*1_000_000))
	}
	age := time.Duration(ageMicros.Int64) * time.Microsecond
	if age < -rules.FutureTolerance {
		return store.Record{}, fmt.Errorf("%w: tick_time is %v in the future of the database clock (clock stepped back, or the row was written by another server): fix the row or wait", store.ErrInvalidRow, -age)
	}
	rec := record(key, version, leader, term, max(age, 0), handover, stepdown)
	rec.Ahead = max(-age, 0)
	return rec, nil
}

func record(key string, version sql.NullInt64, leader sql.NullString, term sql.NullInt64, age time.Duration, handover sql.NullString, stepdown sql.NullInt64) store.Record {
	return store.Record{
		Key:        key,
		Version:    version.Int64,
		LeaderID:   leader.String,
		Term:       term.Int64,
		Age:        age,
		HandoverTo: handover.String,
		StepDown:   stepdown.Int64 != 0,
	}
}

// Insert creates the row of key with candidate c as its first leader and returns the
// new term (see [Core.Elect] for how terms are chosen). It never overwrites: inserted
// is false when the row exists.
func (c *Core) Insert(ctx context.Context, key string, cand store.Candidate) (term int64, inserted bool, err error) {
	if err := c.validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	if err := c.ready(ctx); err != nil {
		return 0, false, err
	}
	term, inserted, err = c.writeTerm(ctx, c.q.insert, key, cand.ID, cand.Incarnation, cand.Lease.Microseconds())
	return term, inserted, c.wrap("insert", key, err)
}

// Elect makes candidate c the leader of key if the row is still at version and its
// lease is released, has expired by the database clock at execution (judged by the
// lease the row records, or c.Lease when it records none), or was handed over to
// c.ID and not claimed yet ([store.Record.Handed]; of two processes that share an
// ID, one wins the claim). The row records c's incarnation and lease. On success it
// returns the new term, which is also the row's new version.
//
// A term is the greater of version+1 and the database clock in microseconds since
// the Unix epoch, at execution. So terms increase with every election even when the
// row itself went back in time: a database failover that lost the latest writes
// cannot hand out a term again, or a lower one, as long as the new server's clock is
// not behind the old one's by more than the time between the lost term's election
// and the next (at least the failover's duration; see docs/SAFETY.md).
func (c *Core) Elect(ctx context.Context, key string, cand store.Candidate, version int64) (term int64, won bool, err error) {
	if err := c.validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	if err := c.checkVersion("elect", key, version); err != nil {
		return 0, false, err
	}
	if err := c.ready(ctx); err != nil {
		return 0, false, err
	}
	lease := cand.Lease.Microseconds()
	args := []any{cand.ID, cand.Incarnation, lease, key, version}
	if c.dialect == schema.MySQL { // MySQL's ? placeholders cannot name one argument twice
		args = append(args, lease, cand.ID, cand.ID)
	}
	term, won, err = c.writeTerm(ctx, c.q.elect, args...)
	return term, won, c.wrap("elect", key, err)
}

// ElectReleased makes candidate c the leader of key if its lease is released (the
// row has no leader) or was handed over to c.ID and not claimed yet
// ([store.Record.Handed]), whatever the row's version, and returns the new term,
// chosen as [Core.Elect] chooses it, which is also the row's new version. It is
// the election of a follower woken by a release that carries no version (a MySQL
// named lock), and the claim of a handover's target woken by its wake-up: one
// round trip instead of a read and then [Core.Elect].
//
// It is as safe as Elect from the version a read showed released or handed to c:
// no clock is involved (such a lease is free for the taking at once, by anybody
// or by c alone), the statement judges the row as it stands when it executes, and
// once one racer has won, the row has a leader that no condition matches (a claim
// clears handover_to) and every other racer's statement changes nothing. A row
// with a live lease, handed to another candidate, or whose version is invalid is
// not won.
func (c *Core) ElectReleased(ctx context.Context, key string, cand store.Candidate) (term int64, won bool, err error) {
	if err := c.validCandidate(key, cand); err != nil {
		return 0, false, err
	}
	if err := c.ready(ctx); err != nil {
		return 0, false, err
	}
	args := []any{cand.ID, cand.Incarnation, cand.Lease.Microseconds(), key}
	if c.dialect == schema.MySQL { // see mysqlHanded
		args = append(args, cand.ID, cand.ID)
	}
	term, won, err = c.writeTerm(ctx, c.q.electReleased, args...)
	return term, won, c.wrap("elect released", key, err)
}

// validCandidate checks the key and the candidate of an election write.
func (c *Core) validCandidate(key string, cand store.Candidate) error {
	if err := rules.ValidateNames(key, cand.ID); err != nil {
		return err
	}
	return rules.ValidateCandidate(cand)
}

// releasedVersions is the WHERE condition on the version of a row that an
// election of a released row may take: a version that [decode] accepts and that
// [rules.CheckVersion] lets a write start from. NULL never matches.
var releasedVersions = fmt.Sprintf(`version > 0 AND version < %d`, rules.VersionLimit-1)

// writeTerm runs a write that starts a term and returns the term, or won == false
// when the write changed no row.
func (c *Core) writeTerm(ctx context.Context, query string, args ...any) (term int64, won bool, err error) {
	if c.q.termByLastInsertID {
		b, ok := c.b.(lastIDExecer)
		if !ok {
			return 0, false, fmt.Errorf("%w: the %s store needs a database/sql Backend", store.ErrInvalidArgument, c.dialect)
		}
		n, id, err := b.execLastID(ctx, query, args...)
		if err != nil || n != 1 {
			return 0, false, err
		}
		if id < 1 {
			return 0, false, fmt.Errorf("%w: the server reported term %d for a won write; check that no proxy rewrites LAST_INSERT_ID", store.ErrInvalidRow, id)
		}
		return id, true, nil
	}
	if b, ok := c.b.(sqliteBackend); ok {
		return b.writeTerm(ctx, query, args...)
	}
	err = c.b.QueryRow(ctx, query, args...).Scan(&term)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return term, true, nil
}

// lastIDExecer runs a statement and reports the LAST_INSERT_ID of its reply.
type lastIDExecer interface {
	execLastID(ctx context.Context, query string, args ...any) (affected, lastID int64, err error)
}

// Renew records a heartbeat of leader id: the row's tick_time becomes the database's
// current time and its version version+1, if the row is still at version and held by id.
func (c *Core) Renew(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	if err := rules.ValidateNames(key, id); err != nil {
		return false, err
	}
	if err := c.checkVersion("renew", key, version); err != nil {
		return false, err
	}
	if err := c.ready(ctx); err != nil {
		return false, err
	}
	n, err := c.b.Exec(ctx, c.q.renew, version+1, key, version, id)
	return n == 1, c.wrap("renew", key, err)
}

// Release gives up id's lease on key, if the row is still at version and held by id.
// Followers may take over at once.
func (c *Core) Release(ctx context.Context, key, id string, version int64) (swapped bool, err error) {
	if err := rules.ValidateNames(key, id); err != nil {
		return false, err
	}
	if err := c.checkVersion("release", key, version); err != nil {
		return false, err
	}
	if err := c.ready(ctx); err != nil {
		return false, err
	}
	n, err := c.b.Exec(ctx, c.q.release, version+1, key, version, id)
	if n == 1 && err == nil {
		c.wakeups.Released(key, version+1)
	}
	return n == 1, c.wrap("release", key, err)
}

// Handover passes id's lease on key to candidate to, with a fresh tick_time and a new
// term (chosen as [Core.Elect] does), if the row is still at version and held by id.
// It returns the new term, which is also the row's new version. The row records
// to's incarnation when it is named, and is handed and not claimed otherwise
// (see [store.Driver.Handover]).
func (c *Core) Handover(ctx context.Context, key, id string, version int64, to store.Candidate) (term int64, ok bool, err error) {
	if err := rules.ValidateNames(key, id); err != nil {
		return 0, false, err
	}
	if err := rules.ValidateTarget(to); err != nil {
		return 0, false, err
	}
	if err := c.checkVersion("handover", key, version); err != nil {
		return 0, false, err
	}
	if err := c.ready(ctx); err != nil {
		return 0, false, err
	}
	args := []any{to.ID, key, version, id, to.Incarnation, unclaimed(to)}
	if c.dialect == schema.MySQL { // MySQL's ? placeholders are positional
		args = []any{to.ID, to.Incarnation, unclaimed(to), key, version, id}
	}
	term, ok, err = c.writeTerm(ctx, c.q.handover, args...)
	if ok && err == nil {
		c.wakeups.HandedOver(key, to.ID)
	}
	return term, ok, c.wrap("handover", key, err)
}

// unclaimed is the handover_to that a handover to to writes: to's ID when it
// names no incarnation (the lease is handed and not claimed, [store.Record.Handed]),
// else none (the row records the target's incarnation: it holds the term).
func unclaimed(to store.Candidate) string {
	if to.Incarnation != "" {
		return ""
	}
	return to.ID
}

// RequestStepDown asks the leader of key to step down, handing over to candidate to
// when to is not empty, if the row is still at version and has a leader. It does not
// touch the lease: the leader sees the request at its next renewal, stops acting,
// and then releases or hands over.
func (c *Core) RequestStepDown(ctx context.Context, key string, version int64, to string) (swapped bool, err error) {
	if err := rules.ValidateNames(key); err != nil {
		return false, err
	}
	if to != "" {
		if err := rules.ValidateName("handover target", to); err != nil {
			return false, err
		}
	}
	if err := c.checkVersion("request step-down", key, version); err != nil {
		return false, err
	}
	if err := c.ready(ctx); err != nil {
		return false, err
	}
	n, err := c.b.Exec(ctx, c.q.request, version+1, to, key, version)
	return n == 1, c.wrap("request step-down", key, err)
}

// SQLBackend returns the backend that runs statements through db (MySQL, and
// PostgreSQL through pgx's stdlib driver).
func SQLBackend(db *sql.DB) Backend { return sqlBackend{db} }

// sqlBackend runs statements through database/sql.
type sqlBackend struct{ db *sql.DB }

func (b sqlBackend) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := b.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (b sqlBackend) QueryRow(ctx context.Context, query string, args ...any) Scanner {
	return b.db.QueryRowContext(ctx, query, args...)
}

func (b sqlBackend) execLastID(ctx context.Context, query string, args ...any) (affected, lastID int64, err error) {
	res, err := b.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, 0, err
	}
	if affected, err = res.RowsAffected(); err != nil {
		return 0, 0, err
	}
	lastID, err = res.LastInsertId()
	return affected, lastID, err
}

// wakeReleased wakes the subscribers in this process of the keys of held that
// were released (each at its version + 1).
func (c *Core) wakeReleased(held []store.KeyVersion, released []store.Won) {
	if len(released) == 0 {
		return
	}
	from := make(map[string]int64, len(held))
	for _, kv := range held {
		from[kv.Key] = kv.Version
	}
	for _, w := range released {
		c.wakeups.Released(w.Key, from[w.Key]+1)
	}
}
