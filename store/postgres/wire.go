package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/casleader/casleader/internal/sqlstore"
)

// pgxBackend runs statements through a pgx pool, one round trip each, with the
// extended protocol and the unnamed statement (no named prepared statements, so
// PgBouncer's transaction pooling works), as pgx's exec mode does.
//
// It talks to pgconn, pgx's wire layer, with text-format parameters and results
// instead of going through pgx's type system: the store's few value types (text,
// bigint and arrays of them) need no more, and a program that uses the store then
// links hardly more of pgx than the pool itself (see "Binary size" in
// BENCHMARKS.md). Parameter types are left for the server to infer from the
// statement; every statement casts those it cannot infer.
type pgxBackend struct{ pool *pgxpool.Pool }

func (b pgxBackend) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	rows, err := b.Query(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	r := rows.(*wireRows)
	for r.Next() {
	}
	return r.tag.RowsAffected(), r.Err()
}

func (b pgxBackend) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Scanner {
	rows, err := b.Query(ctx, query, args...)
	return wireRow{rows: rows, err: err}
}

func (b pgxBackend) Query(ctx context.Context, query string, args ...any) (sqlstore.Rows, error) {
	params, err := encodeParams(args)
	if err != nil {
		return nil, err
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	rr := conn.Conn().PgConn().ExecParams(ctx, query, params, nil, nil, nil)
	return &wireRows{release: conn.Release, rr: rr}, nil
}

// wireRows reads a statement's reply row by row, and gives the connection back
// (release) when the reply has been read or the rows are closed.
type wireRows struct {
	release func()
	rr      *pgconn.ResultReader
	tag     pgconn.CommandTag
	err     error
	closed  bool
}

func (r *wireRows) Next() bool {
	if r.closed {
		return false
	}
	if r.rr.NextRow() {
		return true
	}
	r.Close()
	return false
}

func (r *wireRows) Scan(dest ...any) error {
	if r.closed {
		return errors.New("postgres: scan after the last row")
	}
	return scanText(r.rr.Values(), dest)
}

func (r *wireRows) Err() error { return r.err }

func (r *wireRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.tag, r.err = r.rr.Close()
	r.release()
}

// wireRow is the first row of a reply: Scan reads it and closes the rows, and
// returns sql.ErrNoRows when there is none.
type wireRow struct {
	rows sqlstore.Rows
	err  error
}

func (r wireRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// encodeParams writes the store's arguments in PostgreSQL's text format.
func encodeParams(args []any) ([][]byte, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			// NULL
		case string:
			params[i] = []byte(v)
		case int64:
			params[i] = strconv.AppendInt(nil, v, 10)
		case int:
			params[i] = strconv.AppendInt(nil, int64(v), 10)
		case []string:
			b := []byte{'{'}
			for j, s := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, '"')
				for k := 0; k < len(s); k++ {
					if s[k] == '"' || s[k] == '\\' {
						b = append(b, '\\')
					}
					b = append(b, s[k])
				}
				b = append(b, '"')
			}
			params[i] = append(b, '}')
		case []int64:
			b := []byte{'{'}
			for j, n := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, n, 10)
			}
			params[i] = append(b, '}')
		default:
			return nil, fmt.Errorf("postgres: argument %d has type %T, which the store does not send", i+1, a)
		}
	}
	return params, nil
}

// scanText reads a row of text-format values into the store's destinations.
func scanText(values [][]byte, dest []any) error {
	if len(values) != len(dest) {
		return fmt.Errorf("postgres: scan %d columns into %d values", len(values), len(dest))
	}
	for i, v := range values {
		if err := scanValue(v, dest[i]); err != nil {
			return fmt.Errorf("postgres: column %d: %w", i+1, err)
		}
	}
	return nil
}

func scanValue(v []byte, dest any) error {
	switch d := dest.(type) {
	case *sql.NullString:
		d.String, d.Valid = string(v), v != nil
		return nil
	case *sql.NullInt64:
		if v == nil {
			*d = sql.NullInt64{}
			return nil
		}
		n, err := parseInt(v)
		*d = sql.NullInt64{Int64: n, Valid: err == nil}
		return err
	case *string:
		if v == nil {
			return errors.New("NULL into a string")
		}
		*d = string(v)
		return nil
	case *int64:
		if v == nil {
			return errors.New("NULL into an integer")
		}
		n, err := parseInt(v)
		*d = n
		return err
	case *int:
		if v == nil {
			return errors.New("NULL into an integer")
		}
		n, err := parseInt(v)
		*d = int(n)
		return err
	case *bool:
		switch string(v) {
		case "t", "true":
			*d = true
		case "f", "false":
			*d = false
		default:
			return fmt.Errorf("%q is not a boolean", v)
		}
		return nil
	}
	return fmt.Errorf("cannot scan into %T", dest)
}

func parseInt(v []byte) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 64-bit integer", v)
	}
	return n, nil
}
