package testname

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestNamesMatchThePatternThatCIDrops(t *testing.T) {
	for _, n := range []string{Name(t), Name(t) + "_members", Name(t) + "_actions"} {
		if !Pattern.MatchString(n) {
			t.Errorf("%q does not match %s", n, Pattern)
		}
	}
	for _, n := range []string{"t_", "t_election", "casleader_election", "T_X_0123abcd", "t_x_0123abc"} {
		if Pattern.MatchString(n) {
			t.Errorf("%q matches %s, but Name never gives it", n, Pattern)
		}
	}
	run, err := os.ReadFile("../../.ci/droptables")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(run), "'"+Pattern.String()+"'") {
		t.Errorf(".ci/droptables does not drop the tables matching %s: update its pattern to match Pattern's", Pattern)
	}
}

func TestLikePrefixEscapesWildcards(t *testing.T) {
	if got, want := LikePrefix(`t_a%b\c`), `t\_a\%b\\c%`; got != want {
		t.Errorf("LikePrefix = %q, want %q", got, want)
	}
}

// fakeT is the part of a test that cleanup uses.
type fakeT struct {
	testing.TB
	failed bool
	logs   []string
}

func (f *fakeT) Failed() bool                    { return f.failed }
func (f *fakeT) Logf(format string, args ...any) { f.logs = append(f.logs, format) }

// recorder is a Dropper that records its calls and answers tables or err.
type recorder struct {
	prefix string
	keep   []bool
	tables []string
	err    error
}

func (r *recorder) drop(_ context.Context, prefix string, keep bool) ([]string, error) {
	r.prefix = prefix
	r.keep = append(r.keep, keep)
	return r.tables, r.err
}

func TestCleanupDropsUnlessTheTestFailed(t *testing.T) {
	for _, failed := range []bool{false, true} {
		a := &recorder{tables: []string{"t_x_0123abcd"}}
		b := &recorder{err: errors.New("connection refused")}
		ft := &fakeT{failed: failed}
		cleanup(ft, "t_x_0123abcd", []namedDropper{{"A", a.drop}, {"B", b.drop}})
		for _, r := range []*recorder{a, b} {
			if r.prefix != "t_x_0123abcd" || len(r.keep) != 1 || r.keep[0] != failed {
				t.Errorf("failed=%v: dropper called with prefix %q, keep %v; want once with keep=%v", failed, r.prefix, r.keep, failed)
			}
		}
		want := 1 // the error
		if failed {
			want = 2 // and the kept tables
		}
		if len(ft.logs) != want {
			t.Errorf("failed=%v: %d log lines (%q), want %d", failed, len(ft.logs), ft.logs, want)
		}
	}
}
