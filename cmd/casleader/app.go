package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/internal/secret"
	"github.com/casleader/casleader/schema"
	"github.com/casleader/casleader/store"
)

// Exit codes. A child's own exit code (run) is passed through, so scripts that need
// to tell casleader's codes apart from the child's should let the child avoid 1-4.
const (
	exitOK       = 0   // success; for run: the child exited 0
	exitFailure  = 1   // the operation did not succeed: no such election, no leader, --wait timed out, demo failed
	exitUsage    = 2   // bad command line: unknown command or flag, missing --key, bad duration or DSN, run --listen address that cannot be listened on
	exitDatabase = 3   // database or deployment error: unreachable, missing table (run migrate), wrong columns, privileges
	exitLost     = 4   // run --exit-on-loss: leadership was lost and the child was terminated
	exitNoExec   = 126 // run: the command cannot be executed
	exitNotFound = 127 // run: the command was not found
	exitSignal   = 128 // + N: interrupted by signal N (before a child ran), or the child was killed by signal N
)

// opTimeout bounds one command-line database operation (connect, check, read, write).
const opTimeout = 10 * time.Second

const exitCodesHelp = `Exit codes:
  0        success (run: the child exited 0)
  1        the operation did not succeed: no such election, no leader to ask,
           --wait timed out, the demo did not complete
  2        usage error: unknown command or flag, missing --key, bad duration, bad DSN,
           run --listen address that cannot be listened on (port in use)
  3        database or deployment error: database unreachable, table missing
           (run "casleader migrate"), wrong columns, missing privileges
  4        run --exit-on-loss: leadership was lost and the child was terminated
  126/127  run: the command cannot be executed / was not found
  128+N    interrupted by signal N before a child ran, or the child died of signal N
  other    run: the child's own exit code
`

// exitError carries an exit code, the error to print and a hint that says what to do.
// A nil err prints nothing (a child's exit code passed through).
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// errHelp reports that --help was asked for and printed: exit 0.
var errHelp = errors.New("help printed")

func usageError(cmd string, err error) error {
	hint := "run 'casleader help' for the commands"
	if cmd != "" {
		hint = fmt.Sprintf("run 'casleader %s --help' for its usage", cmd)
	}
	return &exitError{code: exitUsage, err: err, hint: hint}
}

func usagef(cmd, format string, args ...any) error {
	return usageError(cmd, fmt.Errorf(format, args...))
}

func failf(format string, args ...any) error {
	return &exitError{code: exitFailure, err: fmt.Errorf(format, args...)}
}

func exitCode(code int) error { return &exitError{code: code} }

// common are the flags every command takes, also accepted before the command name.
type common struct {
	dsn      string
	table    string
	logLevel string
}

// app is one invocation of the command.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	common
	cmd  string   // the command being run, for messages
	help func()   // prints the usage of the command being run (--help)
	dsns []string // DSNs to redact in every message and log line
	log  *slog.Logger
}

func mainCode(args []string) int {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	a.table = schema.DefaultTable
	a.logLevel = "info"
	return a.report(a.main(args))
}

// report prints err (redacted) with its hint and returns the exit code.
func (a *app) report(err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitFailure, err: err}
	}
	if ee.err != nil {
		prefix := "casleader"
		if a.cmd != "" {
			prefix += " " + a.cmd
		}
		fmt.Fprintf(a.stderr, "%s: %s\n", prefix, a.redactString(ee.err.Error()))
		if ee.hint != "" {
			fmt.Fprintf(a.stderr, "%s\n", a.redactString(ee.hint))
		}
	}
	return ee.code
}

func (a *app) main(args []string) error {
	fs := flag.NewFlagSet("casleader", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.registerCommon(fs)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.topUsage(a.stdout)
			return errHelp
		}
		return usageError("", err)
	}
	if fs.NArg() == 0 {
		return &exitError{code: exitUsage, err: errors.New("no command given"),
			hint: fmt.Sprintf("the commands are %s; run 'casleader help' for more", commandNames())}
	}
	name := fs.Arg(0)
	for _, c := range commands {
		if c.name == name {
			a.cmd = name
			return c.run(a, fs.Args()[1:])
		}
	}
	return usagef("", "unknown command %q: the commands are %s", name, commandNames())
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	hidden  bool // internal helpers, not listed
	run     func(a *app, args []string) error
}

// commands is filled in init to break the initialization cycle through cmdHelp.
var commands []command

func init() {
	commands = []command{
		{name: "migrate", summary: "create the election table, or check that it exists and has casleader's columns", run: cmdMigrate},
		{name: "status", summary: "show the leader, term, version and lease age of one or all elections", run: cmdStatus},
		{name: "run", summary: "run a command only while this instance leads an election (like consul lock)", run: cmdRun},
		{name: "resign", summary: "ask the current leader (another process) to step down", run: cmdResign},
		{name: "handover", summary: "ask the current leader (another process) to hand over to a named candidate", run: cmdHandover},
		{name: "demo", summary: "watch three local candidates elect, fail over and hand over (no setup)", run: cmdDemo},
		{name: "help", summary: "show help for a command", run: cmdHelp},
		{name: "demo-candidate", hidden: true, run: cmdDemoCandidate},
		{name: superviseCommand, hidden: true, run: cmdSupervise},
	}
}

func commandNames() string {
	var names []string
	for _, c := range commands {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ", ")
}

func (a *app) topUsage(w io.Writer) {
	fmt.Fprint(w, `casleader: leader election over one SQL row (MySQL/MariaDB, PostgreSQL, SQLite)

Usage:
  casleader [global flags] <command> [flags] [-- command args]

Commands:
`)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Global flags (accepted before or after the command name):
  --dsn DSN          the database (default: $CASLEADER_DSN; without either, migrate,
                     status, resign and handover use the SQLite file ./casleader.db,
                     and run refuses to start: name the database every candidate shares)
  --table NAME       the election table (default casleader_election)
  --log-level LEVEL  debug, info, warn or error (default info); logs go to stderr

`+dsnHelp+`
Quick start:
  casleader demo                                   # a failover on a temporary SQLite file
  casleader --dsn postgres://u:p@db/app migrate    # create the table once
  casleader --dsn postgres://u:p@db/app run --key nightly-report -- ./report.sh
  casleader --dsn postgres://u:p@db/app status

`+exitCodesHelp+`
Run 'casleader <command> --help' for a command's flags.
`)
}

const dsnHelp = `Database DSNs (--dsn or $CASLEADER_DSN; passwords are never printed):
  mysql://user:pass@host:3306/db?param=value     MySQL 8.0+, MariaDB 10.6+ (mariadb:// too;
                                                 percent-encode special characters;
                                                 ?socket=/path for a Unix socket)
  mysql://user:pass@tcp(host:3306)/db?params     a go-sql-driver DSN after mysql:// also works
  postgres://user:pass@host:5432/db?sslmode=...  PostgreSQL 12+ (postgresql:// too)
  sqlite://path/file.db, sqlite:///abs/file.db   SQLite, for candidates on one host
  path/file.db                                   a plain path is a SQLite file
`

func cmdHelp(a *app, args []string) error {
	if len(args) == 0 {
		a.topUsage(a.stdout)
		return nil
	}
	for _, c := range commands {
		if c.name == args[0] && c.name != "help" {
			a.cmd = c.name
			return c.run(a, []string{"--help"})
		}
	}
	if args[0] == "help" {
		a.topUsage(a.stdout)
		return nil
	}
	return usagef("", "unknown command %q: the commands are %s", args[0], commandNames())
}

func (a *app) registerCommon(fs *flag.FlagSet) {
	fs.Func("dsn", "the database `DSN` (default: $CASLEADER_DSN, else sqlite://casleader.db; run needs one of the two)", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("the DSN is empty: name a database (see 'casleader help'), or leave out --dsn to use $" + envDSN)
		}
		a.dsn = s
		return nil
	})
	fs.StringVar(&a.table, "table", a.table, "the election table `NAME`")
	fs.StringVar(&a.logLevel, "log-level", a.logLevel, "log `LEVEL`: debug, info, warn or error")
}

// flagSet returns the flag set of command name with the common flags. usage is the
// synopsis and description printed by --help before the flags.
func (a *app) flagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.registerCommon(fs)
	// The flag package calls Usage on every parse error too: the usage is printed by
	// parse, for --help only. A bad flag gets its one-line error and a short hint.
	fs.Usage = func() {}
	a.help = func() {
		fmt.Fprint(a.stdout, strings.TrimLeft(usage, "\n"))
		fmt.Fprintln(a.stdout, "\nFlags:")
		printFlags(a.stdout, fs)
	}
	return fs
}

// printFlags lists fs's flags with two dashes, the command's own flags first.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	commonNames := map[string]bool{"dsn": true, "table": true, "log-level": true}
	var own, shared []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if commonNames[f.Name] {
			shared = append(shared, f)
		} else {
			own = append(own, f)
		}
	})
	for _, f := range append(own, shared...) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%-24s %s\n", line, usage)
	}
}

// parse parses args with fs. It returns errHelp after the help for -h is printed, and
// a usage error for a bad flag. It sets up the logger.
func (a *app) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if a.help != nil {
				a.help()
			}
			return errHelp
		}
		msg := err.Error()
		if strings.Contains(msg, "parse error") && strings.Contains(msg, "invalid value") {
			err = fmt.Errorf("%w (durations look like 300ms, 1.5s, 2m)", err)
		}
		return usageError(fs.Name(), err)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
		return usagef(fs.Name(), "--log-level %q: use debug, info, warn or error", a.logLevel)
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: lvl, ReplaceAttr: a.redactAttr}))
	return nil
}

// noArgs returns a usage error when fs has positional arguments left.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usagef(fs.Name(), "unexpected argument %q (flags go before it; values with spaces need quotes)", fs.Arg(0))
	}
	return nil
}

// explicitDSN reports whether the database is named, by --dsn or $CASLEADER_DSN.
func (a *app) explicitDSN() bool {
	return a.dsn != "" || strings.TrimSpace(a.getenv(envDSN)) != ""
}

// target resolves the database from --dsn, $CASLEADER_DSN or the default file, and
// remembers it for redaction.
func (a *app) target() (target, error) {
	dsn := a.dsn
	if dsn == "" {
		dsn = a.getenv(envDSN)
	}
	if strings.TrimSpace(dsn) == "" {
		dsn = defaultSQLiteFile
	}
	a.dsns = append(a.dsns, dsn)
	t, err := parseDSN(dsn)
	if err != nil {
		return t, usageError(a.cmd, fmt.Errorf("--dsn: %w", err))
	}
	a.dsns = append(a.dsns, t.driver)
	if err := ident.ValidateTable(a.table); err != nil {
		return t, usageError(a.cmd, fmt.Errorf("--table: %w", err))
	}
	return t, nil
}

// redactString redacts every quote of a known DSN in s (its password field only).
func (a *app) redactString(s string) string { return secret.RedactString(s, a.dsns...) }

// redactAttr removes passwords from log messages and attribute values.
func (a *app) redactAttr(_ []string, at slog.Attr) slog.Attr {
	switch at.Value.Kind() {
	case slog.KindString:
		if s := at.Value.String(); s != a.redactString(s) {
			at.Value = slog.StringValue(a.redactString(s))
		}
	case slog.KindAny:
		if err, ok := at.Value.Any().(error); ok {
			at.Value = slog.StringValue(a.redactString(err.Error()))
		}
	}
	return at
}

// signalContext returns a context cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// storeError turns a database error into an exit error with advice.
func (a *app) storeError(what string, t target, err error) error {
	err = redactError(err, t)
	ee := &exitError{code: exitDatabase, err: fmt.Errorf("%s: %w", what, err)}
	switch {
	case errors.Is(err, store.ErrDeployment):
		// The store's message says what to do. A missing table is the common case:
		// give the exact command.
		if mt := (*store.MissingTableError)(nil); errors.As(err, &mt) {
			ee.hint = fmt.Sprintf("create the table with: casleader --dsn '%s' --table %s migrate", redact(t.raw), mt.Table)
		}
	case errors.Is(err, store.ErrInvalidRow):
		ee.hint = "the row holds values casleader never writes: fix or delete it"
	case errors.Is(err, store.ErrNotWritable):
		ee.hint = "the server refuses writes (read-only replica or after a failover): point --dsn at the primary"
	case errors.Is(err, context.Canceled):
		ee.code = exitSignal + int(syscall.SIGINT)
	default:
		ee.hint = fmt.Sprintf("check that the database at %s is up and that --dsn (or $%s) is right", redact(t.raw), envDSN)
	}
	return ee
}
