package casleadertest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/casleader/casleader/internal/sqlstore"
	"github.com/casleader/casleader/store/sqlite"
)

// This file is the wire between an action and the database: [DB.SQL] is opened
// through holdConnector, whose connections hold the statement of an action of a
// paused leader until the pause heals (see [PauseLeader]).

// actKey is the context key of the action an [Candidate.Act] call runs.
type actKey struct{}

// act is one call of [Candidate.Act]: the statement of it that a pause held.
type act struct {
	n        *node
	released atomic.Int64 // when its held statement was let through (Mono); 0 if none
	applied  atomic.Bool  // the held statement took effect
}

// trap is a pause armed on a node: the next statement of its actions that would
// take effect is caught, and held until heal is closed.
type trap struct {
	caught chan struct{} // closed when a statement is caught
	heal   chan struct{} // closed when the pause heals
	once   sync.Once
}

// release heals the pause: the held statement, if any, goes on.
func (t *trap) release() { t.once.Do(func() { close(t.heal) }) }

// arm makes the node's next statement that takes effect wait for the trap.
func (n *node) arm() *trap {
	t := &trap{caught: make(chan struct{}), heal: make(chan struct{})}
	n.mu.Lock()
	n.trap = t
	n.mu.Unlock()
	return t
}

// disarm removes t unless a statement was caught meanwhile; it reports whether t
// caught nothing.
func (n *node) disarm(t *trap) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.trap != t {
		return false
	}
	n.trap = nil
	return true
}

// hold holds a statement of the action of ctx while its node's pause lasts: the
// first statement after the pause was armed is caught, the others go on. It
// returns the context to run the statement with: a held statement is delivered
// whatever happened to ctx meanwhile, as a packet already sent is.
func hold(ctx context.Context) (context.Context, *act) {
	a, _ := ctx.Value(actKey{}).(*act)
	if a == nil || a.n == nil {
		return ctx, nil
	}
	a.n.mu.Lock()
	t := a.n.trap
	a.n.trap = nil
	a.n.mu.Unlock()
	if t == nil {
		return ctx, nil
	}
	close(t.caught)
	<-t.heal
	a.released.Store(Mono())
	return context.WithoutCancel(ctx), a
}

// settle records whether a held statement took effect.
func settle(a *act, err error) {
	if a != nil && err == nil {
		a.applied.Store(true)
	}
}

// takesEffect reports whether a statement outside a transaction may change the
// database: any but a plain SELECT or SHOW.
func takesEffect(query string) bool {
	f := strings.Fields(query)
	return len(f) == 0 || !strings.EqualFold(f[0], "SELECT") && !strings.EqualFold(f[0], "SHOW")
}

// connector returns the driver connector of a database of dialect d, with the
// settings of the dialect's Open in the library (store/mysql.Open,
// store/sqlite.Open), wrapped so that its connections can hold statements.
func connector(d Dialect, dsn string) (driver.Connector, error) {
	var inner driver.Connector
	switch d {
	case MySQL:
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		cfg.InterpolateParams = true
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		if _, ok := cfg.Params["time_zone"]; !ok {
			cfg.Params["time_zone"] = "'+00:00'"
		}
		if cfg.Timeout == 0 {
			cfg.Timeout = sqlstore.DefaultDialTimeout
		}
		if inner, err = gomysql.NewConnector(cfg); err != nil {
			return nil, err
		}
	case Postgres:
		c, err := stdlib.GetDefaultDriver().(driver.DriverContext).OpenConnector(dsn)
		if err != nil {
			return nil, err
		}
		inner = c
	default:
		db, err := sqlite.Open(dsn) // registers the driver and checks the path
		if err != nil {
			return nil, err
		}
		drv := db.Driver()
		db.Close()
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(5000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		inner = dsnConnector{drv, "file:" + dsn + "?" + q.Encode()}
	}
	return holdConnector{inner}, nil
}

// openHeld opens a pool of dialect d whose statements a pause can hold.
func openHeld(d Dialect, dsn string) (*sql.DB, error) {
	c, err := connector(d, dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// dsnConnector is a connector of a driver without one.
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// holdConnector wraps the connections of a connector in holdConn.
type holdConnector struct{ driver.Connector }

func (c holdConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &holdConn{Conn: dc}, nil
}

// holdConn holds, during a pause of the action's node, a statement outside a
// transaction that may change the database (Exec, or a query other than SELECT or
// SHOW), or the Commit of a transaction the action began.
type holdConn struct {
	driver.Conn
	inTx bool
}

var errNotContext = errors.New("casleadertest: the driver lacks the context methods the kit needs")

func (c *holdConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	var a *act
	if !c.inTx {
		ctx, a = hold(ctx)
	}
	r, err := e.ExecContext(ctx, query, args)
	settle(a, err)
	return r, err
}

func (c *holdConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	var a *act
	if !c.inTx && takesEffect(query) {
		ctx, a = hold(ctx)
	}
	r, err := q.QueryContext(ctx, query, args)
	settle(a, err)
	return r, err
}

func (c *holdConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	p, ok := c.Conn.(driver.ConnPrepareContext)
	if !ok {
		return nil, errNotContext
	}
	s, err := p.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &holdStmt{Stmt: s, c: c, query: query}, nil
}

func (c *holdConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	b, ok := c.Conn.(driver.ConnBeginTx)
	if !ok {
		return nil, errNotContext
	}
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &holdTx{Tx: tx, c: c, ctx: ctx}, nil
}

func (c *holdConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *holdConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *holdConn) IsValid() bool {
	v, ok := c.Conn.(driver.Validator)
	return !ok || v.IsValid()
}

func (c *holdConn) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := c.Conn.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// holdTx holds its Commit when it was begun by an action of a paused node.
type holdTx struct {
	driver.Tx
	c   *holdConn
	ctx context.Context // BeginTx's: it names the action
}

func (t *holdTx) Commit() error {
	defer func() { t.c.inTx = false }()
	_, a := hold(t.ctx)
	err := t.Tx.Commit()
	settle(a, err)
	return err
}

func (t *holdTx) Rollback() error {
	t.c.inTx = false
	return t.Tx.Rollback()
}

// holdStmt is a prepared statement of a holdConn, held as the conn's statements.
type holdStmt struct {
	driver.Stmt
	c     *holdConn
	query string
}

func (s *holdStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.Stmt.(driver.StmtExecContext)
	if !ok {
		return nil, errNotContext
	}
	var a *act
	if !s.c.inTx {
		ctx, a = hold(ctx)
	}
	r, err := e.ExecContext(ctx, args)
	settle(a, err)
	return r, err
}

func (s *holdStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.Stmt.(driver.StmtQueryContext)
	if !ok {
		return nil, errNotContext
	}
	var a *act
	if !s.c.inTx && takesEffect(s.query) {
		ctx, a = hold(ctx)
	}
	r, err := q.QueryContext(ctx, args)
	settle(a, err)
	return r, err
}

func (s *holdStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if n, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return n.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
