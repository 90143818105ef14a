package schema_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/casleader/casleader/internal/ident"
	"github.com/casleader/casleader/schema"
)

// quotedRE is all that a quoted name may be: one or two identifiers of letters,
// digits and underscores, each inside the dialect's quotes.
var quotedRE = regexp.MustCompile("^(`[A-Za-z0-9_]+`|\"[A-Za-z0-9_]+\")(\\.(`[A-Za-z0-9_]+`|\"[A-Za-z0-9_]+\"))?$")

// FuzzQuote: a table name either is refused or comes out as plain quoted identifiers
// that cannot close a quote, end a statement or start a comment; the DDL holds it
// and nothing else of the input.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"casleader_election", "ops.elections", "t; DROP TABLE users", "t`", `t"`, "a.b.c", "", "_", "9t", "t--", "Ünïcode", strings.Repeat("t", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		verr := ident.ValidateTable(name)
		for _, d := range []schema.Dialect{schema.MySQL, schema.Postgres, schema.SQLite} {
			q, err := ident.Quote(d, name)
			if (err == nil) != (verr == nil) {
				t.Fatalf("Quote(%s, %q) error %v, ValidateTable error %v", d, name, err, verr)
			}
			if err != nil {
				continue
			}
			if !quotedRE.MatchString(q) {
				t.Fatalf("Quote(%s, %q) = %q", d, name, q)
			}
			ddl, err := schema.DDL(d, name)
			if err != nil {
				t.Fatalf("DDL(%s, %q): %v", d, name, err)
			}
			plain, _ := schema.DDL(d, "t")
			qt, _ := ident.Quote(d, "t")
			if ddl != strings.ReplaceAll(plain, qt, q) {
				t.Fatalf("DDL(%s, %q) is not the template with %s", d, name, q)
			}
		}
	})
}
