package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/casleader/casleader/internal/timing"
	"github.com/casleader/casleader/store"
)

const statusUsage = `
Usage: casleader status [--key KEY] [--json] [--members] [--watch [--interval D]] [--lease D]

Shows one line per election (all keys in the table, or only --key): the leader, its
term (the fencing token), the row's version, how long ago the leader last renewed
(by the database's clock, never this host's), and whether the lease is live, expired
or released. A pending step-down or handover request is shown too.

Expiry is judged by the lease the row records (the leader's own). --lease (default
15s, the library's default) judges rows written before the row recorded its lease, and
sets the members' window below.

--json prints JSON instead of the table: with --key one object, otherwise an array of
them, one per key and line ("[]" when the table holds no election). Each object has
key, found, leader, term, version, age_seconds, lease_seconds, expired, released,
remaining_seconds, stepdown_requested, handover_to, and invalid (why the row is
unreadable) for a row casleader never wrote. The output is the table unless --json is
given, on a terminal or not.

--watch refreshes every --interval until interrupted: on a terminal the table is
redrawn in place; otherwise the tables follow each other, and with --json each
refresh is one line holding one JSON document (an object with --key, else an array).

With --members, a second table below the elections lists their members: the
candidates that take part (each records itself once a lease), with their role (leader, follower or
observer), whether they are paused, their priority and when they were last seen by
the database's clock. Only members seen within two leases (--lease) are shown: a
candidate that stopped cleanly removed itself, one that died drops out. With --json
each object always has members (an array of objects with id, role, paused, priority,
seen_seconds_ago), and members_error when the members table cannot be read (it is
missing: run casleader migrate).

Keys, leader IDs and handover targets that hold spaces, quotes or characters that are
not printable are shown quoted, with Go escapes, as the logs show them.

Exits 1 when --key names no election (without --watch), 3 on database errors and
invalid rows (which are still shown, with the other keys).
`

func cmdStatus(a *app, args []string) error {
	fs := a.flagSet("status", statusUsage)
	key := fs.String("key", "", "show only the election `KEY`")
	asJSON := fs.Bool("json", false, "print JSON: an object with --key, else an array of them")
	showMembers := fs.Bool("members", false, "list the members of each election below the table (JSON always has them)")
	watch := fs.Bool("watch", false, "refresh until interrupted")
	interval := fs.Duration("interval", time.Second, "time between two refreshes with --watch")
	lease := fs.Duration("lease", timing.DefaultLease, "the candidates' lease, for rows that record none and the members' window")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if *interval <= 0 {
		return usagef("status", "--interval %v: it must be positive", *interval)
	}
	if *lease <= 0 {
		return usagef("status", "--lease %v: it must be positive", *lease)
	}
	ctx, stop := signalContext()
	defer stop()
	d, err := a.open(ctx, mustExist)
	if err != nil {
		return err
	}
	defer d.close()
	if err := a.check(ctx, d); err != nil {
		return err
	}
	s := &statusCmd{a: a, d: d, key: *key, lease: *lease, json: *asJSON, members: *showMembers}
	if !*watch {
		rows, err := s.snapshot(ctx)
		if err != nil {
			return err
		}
		if err := s.print(a.stdout, rows); err != nil {
			return err
		}
		for _, r := range rows {
			if r.Invalid != "" {
				return &exitError{code: exitDatabase, err: fmt.Errorf("election %q: %s", r.Key, r.Invalid),
					hint: "the row holds values casleader never writes: fix or delete it (candidates of this election cannot proceed)"}
			}
		}
		if *key != "" && !rows[0].Found {
			return exitCode(exitFailure)
		}
		return nil
	}
	return s.watch(ctx, *interval)
}

type statusCmd struct {
	a     *app
	d     *database
	key   string
	lease time.Duration
	json  bool
	// members: show the members table below the elections (text); JSON always
	// has the members.
	members bool
}

// statusRow is one election as status prints it; its JSON form is documented in
// statusUsage.
type statusRow struct {
	Key               string         `json:"key"`
	Found             bool           `json:"found"`
	Leader            string         `json:"leader"`
	Term              int64          `json:"term"`
	Version           int64          `json:"version"`
	AgeSeconds        float64        `json:"age_seconds"`
	LeaseSeconds      float64        `json:"lease_seconds"`
	Expired           bool           `json:"expired"`
	Released          bool           `json:"released"`
	RemainingSeconds  float64        `json:"remaining_seconds"`
	StepDownRequested bool           `json:"stepdown_requested"`
	HandoverTo        string         `json:"handover_to"`
	Invalid           string         `json:"invalid,omitempty"` // why the row cannot be read, when it holds values casleader never writes
	Members           []statusMember `json:"members"`
	MembersError      string         `json:"members_error,omitempty"` // why the members table cannot be read

	age, remaining time.Duration
	lease          time.Duration // the lease expiry is judged by
}

// statusMember is one member of an election as status prints it.
type statusMember struct {
	ID             string  `json:"id"`
	Role           string  `json:"role"`
	Paused         bool    `json:"paused"`
	Priority       int64   `json:"priority"`
	SeenSecondsAgo float64 `json:"seen_seconds_ago"`

	age time.Duration
}

// readMembers reads the live members of key into r. A members table that cannot be
// read is reported in the row, not as an error: it is a view, the elections work
// without it.
func (s *statusCmd) readMembers(ctx context.Context, r *statusRow) {
	r.Members = []statusMember{}
	ms, err := s.d.st.Members(ctx, r.Key, 2*s.lease)
	if err != nil {
		r.MembersError = s.a.redactString(err.Error())
		return
	}
	for _, m := range ms {
		r.Members = append(r.Members, statusMember{ID: m.ID, Role: m.Role, Paused: m.Paused, Priority: m.Priority,
			SeenSecondsAgo: m.Age.Seconds(), age: m.Age})
	}
}

func newStatusRow(key string, rec store.Record, found bool, lease time.Duration) statusRow {
	r := statusRow{Key: key, Found: found, LeaseSeconds: lease.Seconds(), lease: lease}
	if !found {
		return r
	}
	r.lease = rec.LeaseOr(lease)
	r.LeaseSeconds = r.lease.Seconds()
	r.Leader, r.Term, r.Version = rec.LeaderID, rec.Term, rec.Version
	r.age, r.remaining = rec.Age, rec.Remaining(lease)
	r.AgeSeconds, r.RemainingSeconds = rec.Age.Seconds(), r.remaining.Seconds()
	r.Expired, r.Released = rec.Expired(lease), rec.Released()
	r.StepDownRequested, r.HandoverTo = rec.StepDown, rec.HandoverTo
	return r
}

// snapshot reads the rows to show.
func (s *statusCmd) snapshot(ctx context.Context) ([]statusRow, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	keys := []string{s.key}
	if s.key == "" {
		var err error
		if keys, err = s.d.keys(ctx); err != nil {
			return nil, s.a.storeError("list elections", s.d.target, err)
		}
	}
	rows := make([]statusRow, 0, len(keys))
	for _, k := range keys {
		rec, found, err := s.d.st.Observe(ctx, k)
		if errors.Is(err, store.ErrInvalidRow) {
			// Show it and go on with the other keys.
			rows = append(rows, statusRow{Key: k, Found: true, LeaseSeconds: s.lease.Seconds(), lease: s.lease,
				Invalid: s.a.redactString(err.Error())})
			continue
		}
		if err != nil {
			if errors.Is(err, store.ErrInvalidArgument) {
				return nil, usagef("status", "--key: %v", err)
			}
			return nil, s.a.storeError("read election "+fmt.Sprintf("%q", k), s.d.target, err)
		}
		if !found && s.key == "" {
			continue // deleted since the listing
		}
		rows = append(rows, newStatusRow(k, rec, found, s.lease))
	}
	if s.json || s.members {
		for i := range rows {
			s.readMembers(ctx, &rows[i])
		}
	}
	return rows, nil
}

func (s *statusCmd) print(w io.Writer, rows []statusRow) error {
	return s.render(w, rows, false)
}

// render prints rows as a table or, with --json, as one JSON document: an object for
// --key, else an array (one object per line, or all on one line when compact).
func (s *statusCmd) render(w io.Writer, rows []statusRow, compact bool) error {
	if s.json {
		var b []byte
		var err error
		switch {
		case s.key != "" && len(rows) == 1:
			b, err = json.Marshal(rows[0])
		case compact:
			if rows == nil {
				rows = []statusRow{}
			}
			b, err = json.Marshal(rows)
		default:
			var buf bytes.Buffer
			buf.WriteString("[")
			for i, r := range rows {
				o, err := json.Marshal(r)
				if err != nil {
					return err
				}
				if i > 0 {
					buf.WriteString(",")
				}
				buf.WriteString("\n")
				buf.Write(o)
			}
			if len(rows) > 0 {
				buf.WriteString("\n")
			}
			buf.WriteString("]")
			b = buf.Bytes()
		}
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintf(w, "no elections in table %s yet\n", s.d.st.Table())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tLEADER\tTERM\tVERSION\tAGE\tSTATE")
	for _, r := range rows {
		key := quoteName(r.Key)
		if !r.Found {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tno such election (no candidate has run with this key)\n", key)
			continue
		}
		if r.Invalid != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tINVALID ROW: %s\n", key, printable(r.Invalid))
			continue
		}
		leader := "-"
		if r.Leader != "" {
			leader = quoteName(r.Leader)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", key, leader, r.Term, r.Version, fmtDur(r.age), r.state())
	}
	if err := tw.Flush(); err != nil || !s.members {
		return err
	}
	return s.renderMembers(w, rows)
}

// renderMembers prints the members table below the elections.
func (s *statusCmd) renderMembers(w io.Writer, rows []statusRow) error {
	for _, r := range rows {
		if r.MembersError != "" {
			_, err := fmt.Fprintf(w, "\nmembers of %s cannot be read: %s\n", quoteName(r.Key), printable(r.MembersError))
			return err
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nKEY\tMEMBER\tROLE\tPAUSED\tPRIORITY\tLAST SEEN\n")
	n := 0
	for _, r := range rows {
		for _, m := range r.Members {
			paused := "no"
			if m.Paused {
				paused = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s ago\n", quoteName(r.Key), quoteName(m.ID), m.Role, paused, m.Priority, fmtDur(m.age))
			n++
		}
	}
	if n == 0 {
		_, err := fmt.Fprintf(w, "\nno members seen within %s (two leases) in table %s\n", fmtDur(2*s.lease), s.d.st.MembersTable())
		return err
	}
	return tw.Flush()
}

// quoteName returns a key or ID as the logs show it: as it is when it is printable
// and holds no space, '"' or '=', otherwise quoted with Go escapes. A quoted name
// can neither break the table's columns and lines nor send escape sequences to a
// terminal.
func quoteName(s string) string {
	if s == "" || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r == '"' || r == '=' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// printable returns a message as it is when it is valid UTF-8 and printable (spaces
// allowed), otherwise quoted with Go escapes.
func printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// state describes the lease: live, expired or released, and a pending request.
func (r statusRow) state() string {
	lease := r.lease
	var st string
	switch {
	case r.Released:
		st = "released"
	case r.Expired:
		st = fmt.Sprintf("expired %s ago (lease %s)", fmtDur(r.age-lease), fmtDur(lease))
	default:
		st = fmt.Sprintf("live, %s left", fmtDur(r.remaining))
	}
	switch {
	case r.StepDownRequested && r.HandoverTo != "":
		st += "; handover to " + quoteName(r.HandoverTo) + " requested"
	case r.StepDownRequested:
		st += "; step-down requested"
	}
	return st
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= math.MaxInt64-time.Hour: // the store's age of a tick_time centuries old
		return "more than 292 years"
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// watch prints a snapshot every interval until ctx ends. On a terminal the table is
// redrawn in place; otherwise snapshots follow each other (JSON: one document per
// line and snapshot).
func (s *statusCmd) watch(ctx context.Context, interval time.Duration) error {
	tty := isTerminal(s.a.stdout) && !s.json
	lines := 0
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rows, err := s.snapshot(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			var ee *exitError
			if errors.As(err, &ee) && (errors.Is(err, store.ErrDeployment) || ee.code == exitUsage) {
				return err
			}
			s.a.log.Warn("casleader: status: reading the table failed; retrying", "error", err)
		default:
			var buf bytes.Buffer
			if !s.json {
				fmt.Fprintf(&buf, "table %s at %s, every %s (lease %s); Ctrl-C to stop\n",
					s.d.st.Table(), time.Now().Format("15:04:05"), interval, fmtDur(s.lease))
			}
			if err := s.render(&buf, rows, true); err != nil {
				return err
			}
			if tty {
				if lines > 0 {
					fmt.Fprintf(s.a.stdout, "\x1b[%dF\x1b[J", lines) // up to the first line, clear below
				}
				lines = strings.Count(buf.String(), "\n")
			} else if !s.json {
				buf.WriteString("\n")
			}
			if _, err := s.a.stdout.Write(buf.Bytes()); err != nil {
				return nil // stdout closed (e.g. piped into head)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
