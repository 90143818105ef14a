package ident

import (
	"regexp"
	"testing"
)

// identRE is the regular expression that isIdent replaces: they must agree on
// every input.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func FuzzIsIdentAgreesWithItsRegexp(f *testing.F) {
	for _, s := range []string{"", "x", "_", "9a", "a9", "elections", "ops.elections", "a-b", "char(255)", "Ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isIdent(s), identRE.MatchString(s); got != want {
			t.Errorf("isIdent(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
