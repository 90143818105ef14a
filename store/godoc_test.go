package store_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/casleader/casleader/store"
)

// TestStoresShowTheirSetUpInGoDoc: go doc (and pkg.go.dev) list every method of
// [store.Driver] and the set-up methods of each dialect store, declared on the
// store's own type; methods promoted from an embedded type of another package
// would not show.
func TestStoresShowTheirSetUpInGoDoc(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"mysql", "postgres", "sqlite"} {
		fset := token.NewFileSet()
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files := []*ast.File{}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		p, err := doc.NewFromFiles(fset, files, "github.com/casleader/casleader/store/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		shown := map[string]string{}
		for _, typ := range p.Types {
			if typ.Name == "Store" {
				for _, m := range typ.Methods {
					shown[m.Name] = m.Doc
				}
			}
		}
		want := []string{"CreateMembersTable", "Listening", "Dialect", "Table", "MembersTable"}
		driver := reflect.TypeFor[store.Driver]()
		for i := range driver.NumMethod() {
			want = append(want, driver.Method(i).Name)
		}
		for _, m := range want {
			if doc, ok := shown[m]; !ok || !strings.HasPrefix(doc, m+" ") {
				t.Errorf("go doc ./store/%s Store.%s: not shown with its doc (%q)", dir, m, doc)
			}
		}
	}
}
