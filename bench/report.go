package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"
)

// stats summarises one value over trials.
type stats struct {
	N                             int
	P50, P90, P99, Max, Mean, Min float64
}

func summarize(vs []float64) stats {
	if len(vs) == 0 {
		return stats{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		// nearest rank
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(min(i, len(s)-1), 0)]
	}
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return stats{N: len(s), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: s[len(s)-1], Min: s[0], Mean: sum / float64(len(s))}
}

func writeJSONL(w io.Writer, rs []result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// values collects metric m of scenario sc per system, in first-seen order.
func values(rs []result, sc, m string) ([]string, map[string][]float64, map[string]int) {
	var order []string
	out := map[string][]float64{}
	errs := map[string]int{}
	for _, r := range rs {
		if r.Scenario != sc {
			continue
		}
		if _, ok := out[r.System]; !ok {
			order = append(order, r.System)
			out[r.System] = nil
		}
		if r.Error != "" {
			errs[r.System]++
			continue
		}
		if v, ok := r.Values[m]; ok {
			out[r.System] = append(out[r.System], v)
		}
	}
	return order, out, errs
}

func f1(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// markdown renders the summary tables.
func markdown(w io.Writer, rs []result, ref map[string]string) {
	latency := func(sc, m, title, refName string) {
		order, vals, errs := values(rs, sc, m)
		if len(order) == 0 {
			return
		}
		fmt.Fprintf(w, "\n### %s\n\n", title)
		fmt.Fprintf(w, "| system | trials | p50 ms | p99 ms | max ms | mean ms | errors | p50 vs %s |\n|---|---|---|---|---|---|---|---|\n", ref[refName])
		base := summarize(vals[ref[refName]])
		for _, sys := range order {
			s := summarize(vals[sys])
			ratio := "–"
			if base.P50 > 0 && s.P50 > 0 && sys != ref[refName] {
				ratio = fmt.Sprintf("%.2g×", s.P50/base.P50)
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %d | %s |\n", sys, s.N, f1(s.P50), f1(s.P99), f1(s.Max), f1(s.Mean), errs[sys], ratio)
		}
	}
	latency("failover", "after_expiry_ms", "Crash failover: new leader's win after the dead leader's lease expired", "failover")
	failoverTable(w, rs)
	latency("handover", "after_release_ms", "Graceful handover: new leader's win after the release committed", "handover")
	handoverBreakdown(w, rs)

	// Steady state: requests per second per candidate count.
	var steadyRows []result
	for _, r := range rs {
		if r.Scenario == "steady" {
			steadyRows = append(steadyRows, r)
		}
	}
	if len(steadyRows) > 0 {
		fmt.Fprintf(w, "\n### Steady-state load (requests per second to the database or etcd)\n\n")
		fmt.Fprintf(w, "| system | candidates | total/s | writes/s | reads/s | other/s | max leaders seen |\n|---|---|---|---|---|---|---|\n")
		for _, r := range steadyRows {
			if r.Error != "" {
				fmt.Fprintf(w, "| %s | %v | error: %s | | | | |\n", r.System, r.Params["candidates"], r.Error)
				continue
			}
			var wr, rd, other float64
			for k, v := range r.Values {
				switch {
				case !strings.HasPrefix(k, "per_s_"):
				case k == "per_s_renew" || k == "per_s_elect" || k == "per_s_insert" || k == "per_s_upsert" || k == "per_s_release":
					wr += v
				case k == "per_s_observe" || k == "per_s_is_leader":
					rd += v
				default:
					other += v
				}
			}
			fmt.Fprintf(w, "| %s | %v | %s | %s | %s | %s | %v |\n", r.System, r.Params["candidates"], f1(r.Values["per_s"]), f1(wr), f1(rd), f1(other), r.Values["max_leaders"])
		}
	}

	order, vals, errs := values(rs, "herd", "first_leader_ms")
	if len(order) > 0 {
		fmt.Fprintf(w, "\n### Herd: 64 candidates, each on its own connection, start together on a new key\n\n")
		fmt.Fprintf(w, "| system | trials | first leader p50 ms | max ms | max leaders at once | store errors (all trials) | Run errors | failed trials |\n|---|---|---|---|---|---|---|---|\n")
		for _, sys := range order {
			s := summarize(vals[sys])
			_, ml, _ := values(rs, "herd", "max_leaders")
			_, se, _ := values(rs, "herd", "store_errors")
			_, re, _ := values(rs, "herd", "run_errors")
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %d |\n", sys, s.N, f1(s.P50), f1(s.Max), f1(summarize(ml[sys]).Max), f1(total(se[sys])), f1(total(re[sys])), errs[sys])
		}
	}

	var keyRows []result
	for _, r := range rs {
		if r.Scenario == "keys" {
			keyRows = append(keyRows, r)
		}
	}
	if len(keyRows) > 0 {
		fmt.Fprintf(w, "\n### Many keys: one process (casleader/group), pool of 8 connections, heartbeat 1 s, lease 5 s\n\n")
		fmt.Fprintf(w, "| system | keys | seconds | statements/s | CPU %% of one core | renewal p50 ms | p99 ms | max ms | leases lost | time to lead all ms |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range keyRows {
			if r.Error != "" {
				fmt.Fprintf(w, "| %s | %v | %v | error: %s | | | | | | |\n", r.System, r.Params["keys"], r.Params["seconds"], r.Error)
				continue
			}
			v := r.Values
			fmt.Fprintf(w, "| %s | %v | %v | %s | %s | %s | %s | %s | %v | %s |\n", r.System, r.Params["keys"], r.Params["seconds"],
				f1(v["per_s"]), f1(v["cpu_percent"]), f1(v["renew_p50_ms"]), f1(v["renew_p99_ms"]), f1(v["renew_max_ms"]), v["lost_leases"]+v["not_led_at_end"], f1(v["acquire_all_ms"]))
		}
	}
	generic(w, rs, "scale", "Scale: one process leads the keys, another process follows them (pool of 8 each, heartbeat 1 s)")
	generic(w, rs, "electors", "Many single-key electors in one process on one store")
	generic(w, rs, "saturate", "Election under a saturating load on the same server (default timings)")
}

// generic renders the runs of a scenario as one row each, with every value they
// recorded as a column (sorted by name).
func generic(w io.Writer, rs []result, sc, title string) {
	var rows []result
	cols := map[string]bool{}
	for _, r := range rs {
		if r.Scenario == sc {
			rows = append(rows, r)
			for k := range r.Values {
				cols[k] = true
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	names := make([]string, 0, len(cols))
	for k := range cols {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "\n### %s\n\n| system | params | %s | error |\n|---|---|%s---|\n", title, strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, r := range rows {
		ps := make([]string, 0, len(r.Params))
		for k, v := range r.Params {
			ps = append(ps, fmt.Sprintf("%s=%v", k, v))
		}
		sort.Strings(ps)
		vals := make([]string, len(names))
		for i, k := range names {
			if v, ok := r.Values[k]; ok {
				vals[i] = f1(v)
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.System, strings.Join(ps, " "), strings.Join(vals, " | "), r.Error)
	}
}

func total(vs []float64) float64 {
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s
}

// svg draws timelines, one panel per system: who believed it led when (bars) and
// the scenario's events (dashed lines, listed under the panel with their offsets).
func svg(path, title string, tls []*timeline) error {
	if len(tls) == 0 {
		return nil
	}
	const width, left, right, rowH = 980, 120, 20, 18
	type panel struct {
		tl       *timeline
		y        int
		from, to time.Time
	}
	var panels []panel
	y := 40
	for _, tl := range tls {
		evs := tl.Events
		if tl.Zoom {
			evs = evs[tl.ZoomFrom:]
		}
		first, last := evs[0].At, evs[0].At
		for _, e := range evs {
			if e.At.Before(first) {
				first = e.At
			}
			if e.At.After(last) {
				last = e.At
			}
		}
		margin := max(last.Sub(first)/5, 2*time.Millisecond)
		if !tl.Zoom {
			margin = max(margin, 200*time.Millisecond)
		}
		panels = append(panels, panel{tl, y, first.Add(-margin), last.Add(margin)})
		y += 24 + rowH*len(tl.Rows) + 16 + 16*len(tl.Events) + 18
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, y)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2"}
	evColors := []string{"#555555", "#d62728", "#2ca02c"}
	for _, p := range panels {
		span := p.to.Sub(p.from)
		x := func(t time.Time) float64 {
			return left + float64(width-left-right)*float64(t.Sub(p.from))/float64(span)
		}
		name := p.tl.System
		if p.tl.Zoom {
			name += " (close-up)"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text><text x="%d" y="%d" fill="#777" text-anchor="end">window %s ms</text>`+"\n",
			p.y+12, html.EscapeString(name), width-right, p.y+12, f1(ms(span)))
		top := p.y + 20
		for i, id := range p.tl.Rows {
			ry := top + i*rowH
			fmt.Fprintf(&b, `<text x="10" y="%d">%s leads</text>`+"\n", ry+13, html.EscapeString(id))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f0f0f0"/>`+"\n", left, ry+2, width-left-right, rowH-4)
			for _, s := range p.tl.Spans[id] {
				a, e := s[0], s[1]
				if e.Before(p.from) || a.After(p.to) {
					continue
				}
				if a.Before(p.from) {
					a = p.from
				}
				if e.After(p.to) {
					e = p.to
				}
				fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x(a), ry+2, math.Max(x(e)-x(a), 1), rowH-4, colors[i%len(colors)])
			}
		}
		bottom := top + rowH*len(p.tl.Rows)
		for i, e := range p.tl.Events {
			c := evColors[i%len(evColors)]
			if !e.At.Before(p.from) && !e.At.After(p.to) {
				ex := x(e.At)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="4,2"/>`+"\n", ex, top-2, ex, bottom+2, c)
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">– – %s at %s ms</text>`+"\n", left, bottom+16+16*i, c,
				html.EscapeString(e.Label), signed(ms(e.At.Sub(p.tl.Events[0].At))))
		}
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func signed(v float64) string {
	if v >= 0 {
		return "+" + f1(v)
	}
	return f1(v)
}

// handoverBreakdown renders the medians of the handover's breakdown per system
// (see breakdown), for the systems that have one.
func handoverBreakdown(w io.Writer, rs []result) {
	cols := []struct{ key, title string }{
		{"after_release_ms", "total ms"},
		{"wake_ms", "release reply → wake-up ms"},
		{"follower_ms", "wake-up → election sent, less reads (follower) ms"},
		{"reads_after_wake", "reads after wake-up"},
		{"read_ms", "reads ms"},
		{"elections_after_wake", "elections after wake-up"},
		{"elect_rtt_ms", "winning election round trip ms"},
		{"elect_executed_after_send_ms", "of which: send → executed (database clock) ms"},
		{"elect_reply_after_executed_ms", "executed → reply (commit, reply) ms"},
		{"release_rtt_ms", "release round trip ms (leader)"},
	}
	order, _, _ := values(rs, "handover", "elect_rtt_ms")
	var rows []string
	for _, sys := range order {
		_, woken, _ := values(rs, "handover", "wake_ms")
		if len(woken[sys]) == 0 {
			continue
		}
		row := fmt.Sprintf("| %s | %d |", sys, len(woken[sys]))
		for _, c := range cols {
			_, vals, _ := values(rs, "handover", c.key)
			if len(vals[sys]) == 0 {
				row += " – |"
				continue
			}
			row += " " + f1(summarize(vals[sys]).P50) + " |"
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Graceful handover, where the time goes (medians over the trials with a recorded wake-up)\n\n")
	fmt.Fprintf(w, "| system | trials woken |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.title)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(cols)))
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
}

// failoverTable renders the crash failover's tail, with the expiry by the
// database clock where the system has one, and the takeovers before the expiry.
func failoverTable(w io.Writer, rs []result) {
	order, after, errs := values(rs, "failover", "after_expiry_ms")
	if len(order) == 0 {
		return
	}
	_, executed, _ := values(rs, "failover", "executed_after_expiry_ms")
	_, byDB, _ := values(rs, "failover", "expiry_by_database_clock")
	early := map[string]int{}
	for _, r := range rs {
		if r.Scenario == "failover" && strings.Contains(r.Error, "before the lease expired") {
			early[r.System]++
		}
	}
	fmt.Fprintf(w, "\n### Crash failover, the tail (kill at a random moment; expiry = the dead leader's last write + lease)\n\n")
	fmt.Fprintf(w, "| system | trials | expiry by | p50 ms | p90 ms | p99 ms | max ms | executed p50 / p99 / max ms (database clock) | early takeovers | other errors |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sys := range order {
		a, x := summarize(after[sys]), summarize(executed[sys])
		by := "last renewal sent"
		if len(byDB[sys]) > 0 && len(byDB[sys]) == len(after[sys]) {
			by = "database clock"
		}
		ex := "–"
		if x.N > 0 {
			ex = fmt.Sprintf("%s / %s / %s (%d)", f1(x.P50), f1(x.P99), f1(x.Max), x.N)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %d | %d |\n", sys, a.N, by, f1(a.P50), f1(a.P90), f1(a.P99), f1(a.Max), ex, early[sys], errs[sys]-early[sys])
	}
}
