// Command surface measures the size of the root module's public surface and of its
// election code, the numbers that the v1 issue sets targets for:
//
//   - public packages: packages of the root module outside internal/ (the command,
//     a main package, is counted apart);
//   - exported top-level names (types, functions, variables, constants) across the
//     public packages and in the root package, and the exported methods of exported
//     types;
//   - library functions over 60 lines: function and method declarations in the
//     production files (not _test.go) of the module's packages, internal ones
//     included, but not of commands or test rigs (packages whose production files
//     import package testing), from the func keyword to the closing brace;
//   - executor lines: the lines of the production files of the root package, group,
//     heartbeat, detector and term (internal/term once it moved there);
//   - README.md lines;
//   - Example functions in the module's test files, and how many of them have an
//     Output comment (go test runs only those; the others need a server).
//
// Run it from the repository root: go run ./internal/tools/surface (or pass the
// module's directory). Nested modules (directories with a go.mod of their own) and
// testdata are skipped. Build constraints are those of the machine it runs on.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: surface [module directory, default .]")
		flag.PrintDefaults()
	}
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	if err := run(os.Stdout, dir); err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, dir string) error {
	m, err := Measure(dir)
	if err != nil {
		return err
	}
	return m.Print(w)
}
