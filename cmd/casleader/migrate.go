package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

const migrateUsage = `
Usage: casleader migrate [--dsn DSN] [--table NAME]

Creates the election table if it does not exist, or checks that the existing table
has casleader's columns, each of a type that holds what casleader writes. It is idempotent: run it as often as you like, e.g. in a
deployment step. It needs the right to create tables; elections afterwards need only
SELECT, INSERT and UPDATE on the table. For SQLite it creates the file if needed.

It prints "created table NAME" or "table NAME already exists and has casleader's
columns", and exits 3 (with what to do) when the table cannot be created, or has
other columns or other column types (each is named with the type found and the type
needed).
`

func cmdMigrate(a *app, args []string) error {
	fs := a.flagSet("migrate", migrateUsage)
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	d, err := a.open(ctx, mayCreate)
	if err != nil {
		return err
	}
	defer d.close()
	where := fmt.Sprintf("%s (%s)", redact(d.raw), d.dialect)

	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err = d.st.Check(cctx)
	if err == nil {
		fmt.Fprintf(a.stdout, "table %s already exists and has casleader's columns in %s\n", d.st.Table(), where)
		// A table created before the members table existed gets it now.
		if err := d.st.CreateMembersTable(cctx); err != nil {
			return a.storeError("create members table "+d.st.MembersTable(), d.target, err)
		}
		return nil
	}
	if errors.Is(err, schema.ErrWrongTable) {
		// The table exists with other columns or types: creating it would change
		// nothing. The error names each column and says how to fix it.
		return a.storeError("table "+d.st.Table()+" in "+where, d.target, err)
	}
	if !errors.Is(err, store.ErrDeployment) {
		// Not a missing table: the database cannot be reached, or answers oddly.
		return a.storeError("check table "+d.st.Table(), d.target, err)
	}
	// Missing table (or not readable): CreateTable creates it, and checks it again;
	// its error says what to do (a user with CREATE, a qualifier that names no
	// database).
	a.log.Debug("casleader: table check failed, creating it", "table", d.st.Table(), "error", err)
	if cerr := d.st.CreateTable(cctx); cerr != nil {
		return a.storeError("create table "+d.st.Table(), d.target, cerr)
	}
	if err := d.st.Check(cctx); err != nil {
		return a.storeError("check table "+d.st.Table()+" after creating it", d.target, err)
	}
	fmt.Fprintf(a.stdout, "created table %s in %s\n", d.st.Table(), where)
	return nil
}
