package catalog

import (
	"regexp"
	"strconv"
	"testing"
)

// The regular expressions that the hand-written matchers replace: the matchers
// must agree with them on every input.
var (
	myLenRE  = regexp.MustCompile(`^(?:var)?char\((\d+)\)$`)
	myIntRE  = regexp.MustCompile(`^(?:tiny|small|medium|big)?int(?:\(\d+\))?(?: unsigned)?(?: zerofill)?$`)
	myBigRE  = regexp.MustCompile(`^bigint(?:\(\d+\))?$`)
	pgLenRE  = regexp.MustCompile(`^character(?: varying)?\((\d+)\)$`)
	matchers = []string{
		"", "x", "_", "9a", "a9", "elections", "ops.elections", "a-b",
		"char(255)", "varchar(255)", "varchar(19)", "varvarchar(1)", "char()", "char(12a)", "char(99999999999999999999)",
		"int", "int(11)", "tinyint(1) unsigned zerofill", "bigint unsigned", "smallint zerofill unsigned", "bigint(20)", "bigint(", "bigint()", "mediumint(8) unsigned",
		"character(255)", "character varying(300)", "character varying", "character  varying(3)",
	}
)

func FuzzMatchersAgreeWithTheirRegexps(f *testing.F) {
	for _, s := range matchers {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := myBigint(s), myBigRE.MatchString(s); got != want {
			t.Errorf("myBigint(%q) = %v, the regexp says %v", s, got, want)
		}
		if got, want := myInt(s), myIntRE.MatchString(s); got != want {
			t.Errorf("myInt(%q) = %v, the regexp says %v", s, got, want)
		}
		for name, c := range map[string]struct {
			f  func(string) (int, bool)
			re *regexp.Regexp
		}{"myLength": {myLength, myLenRE}, "pgLength": {pgLength, pgLenRE}} {
			n, ok := c.f(s)
			m := c.re.FindStringSubmatch(s)
			if ok != (m != nil) {
				t.Fatalf("%s(%q) matched %v, the regexp says %v", name, s, ok, m != nil)
			}
			if ok {
				want, _ := strconv.Atoi(m[1])
				if n != want {
					t.Errorf("%s(%q) = %d, want %d", name, s, n, want)
				}
			}
		}
	})
}
