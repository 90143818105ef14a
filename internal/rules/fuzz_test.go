package rules

import (
	"errors"
	"strings"
	"testing"

	"github.com/casleader/casleader/store"
)

// FuzzValidateName: what validateName accepts every database stores and compares
// the same way.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"k", "", "k ", " k", "k\x00", "k\xff", "ключ", strings.Repeat("k", 256), "'; DROP TABLE x; --"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateName("key", s)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("%v is not ErrInvalidArgument", err)
			}
			return
		}
		if s == "" || len(s) > store.MaxKeyLen || strings.IndexByte(s, 0) >= 0 || strings.HasSuffix(s, " ") {
			t.Fatalf("accepted %q", s)
		}
	})
}
