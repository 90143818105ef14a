package secret

import (
	"regexp"
	"slices"
	"testing"
)

// The regular expressions that the hand-written matchers replace: the matchers
// must agree with them on every input.
var (
	urlSchemeRE     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)
	queryPasswordRE = regexp.MustCompile(`[?&]password=([^&]*)`)
	kvPasswordRE    = regexp.MustCompile(`(?:^|\s)password\s*=\s*`)
)

func FuzzMatchersAgreeWithTheirRegexps(f *testing.F) {
	for _, s := range []string{
		"", "postgres", "mysql+tcp", "9x", "a.b-c+d", "post gres",
		"?password=a&password=b", "x?a=1&password=&password=z&&password=q", "?passwordx=1", "&&password=a",
		"password=x", " password = 'a b'", "host=h\tpassword\n=\fy", "xpassword=1 password=2", "password", "password =",
		"user=u passwordpassword=1 password=\v2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsURLScheme(s), urlSchemeRE.MatchString(s); got != want {
			t.Errorf("IsURLScheme(%q) = %v, the regexp says %v", s, got, want)
		}
		var want []string
		for _, m := range queryPasswordRE.FindAllStringSubmatch(s, -1) {
			want = append(want, m[1])
		}
		if got := queryPasswords(s); !slices.Equal(got, want) {
			t.Errorf("queryPasswords(%q) = %q, the regexp says %q", s, got, want)
		}
		at, ok := kvPassword(s)
		loc := kvPasswordRE.FindStringIndex(s)
		if ok != (loc != nil) || (ok && at != loc[1]) {
			t.Errorf("kvPassword(%q) = %d, %v; the regexp says %v", s, at, ok, loc)
		}
	})
}
