package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/scanner"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxFuncLines is the house limit on a library function's length.
const maxFuncLines = 60

// executorDirs are the packages, relative to the module's root, whose production
// files execute the election protocol (the root package is the elector).
var executorDirs = []string{".", "heartbeat", "detector", "term", "internal/term"}

// Package is what Measure found in one package of the module.
type Package struct {
	Dir     string // relative to the module's root, "." for the root package
	Main    bool
	Public  bool     // outside internal/
	Rig     bool     // test support: its production files import package testing
	Names   []string // exported top-level names of its production files
	Methods []string // exported methods of its exported types, as Type.Method
}

// Func is a function declaration of the library's production code.
type Func struct {
	Name  string // F or Type.Method
	Pos   string // file:line, the file relative to the module's root
	Lines int
}

// Measures are the numbers of one module.
type Measures struct {
	Module     string
	Packages   []Package
	Long       []Func         // over maxFuncLines, longest first
	Executor   map[string]int // lines of production files per executor package
	Code       map[string]int // of those, the lines that hold code (not blank, not only comments)
	README     int            // lines of README.md; -1 without one
	Examples   int            // Example functions in test files
	WithOutput int            // those with an Output comment, which go test runs
	InPublic   int            // Examples in the test files of public packages
}

// Measure reads the module whose go.mod is in dir.
func Measure(dir string) (*Measures, error) {
	module, err := modulePath(dir)
	if err != nil {
		return nil, err
	}
	m := &Measures{Module: module, Executor: map[string]int{}, Code: map[string]int{}}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if path != dir && skipDir(path, d.Name()) {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return m.addDir(path, filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(m.Long, func(a, b Func) int { return b.Lines - a.Lines })
	m.README, err = countLines(filepath.Join(dir, "README.md"))
	if errors.Is(err, fs.ErrNotExist) {
		m.README, err = -1, nil
	}
	return m, err
}

// skipDir reports whether a directory holds no package of the module: a nested
// module, testdata, or a directory the go command ignores.
func skipDir(path, name string) bool {
	if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

func modulePath(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("%s is not a module's root: %w", dir, err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod has no module line", dir)
}

// addDir measures the package in path, if there is one.
func (m *Measures) addDir(path, rel string) error {
	bp, err := build.Default.ImportDir(path, 0)
	if _, ok := errors.AsType[*build.NoGoError](err); ok {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read package %s: %w", rel, err)
	}
	fset := token.NewFileSet()
	prod, err := parseFiles(fset, path, slices.Concat(bp.GoFiles, bp.CgoFiles))
	if err != nil {
		return err
	}
	tests, err := parseFiles(fset, path, slices.Concat(bp.TestGoFiles, bp.XTestGoFiles))
	if err != nil {
		return err
	}
	p := Package{Dir: rel, Main: bp.Name == "main", Public: !isInternal(rel), Rig: slices.Contains(bp.Imports, "testing")}
	for _, f := range prod {
		p.addNames(f)
		if !p.Main && !p.Rig {
			m.addLong(fset, rel, f)
		}
	}
	if len(prod) > 0 {
		m.Packages = append(m.Packages, p)
	}
	for _, ex := range doc.Examples(tests...) {
		m.Examples++
		if ex.Output != "" || ex.EmptyOutput {
			m.WithOutput++
		}
		if p.Public {
			m.InPublic++
		}
	}
	if slices.Contains(executorDirs, rel) {
		for _, name := range slices.Concat(bp.GoFiles, bp.CgoFiles) {
			n, code, err := goLines(filepath.Join(path, name))
			if err != nil {
				return err
			}
			m.Executor[rel] += n
			m.Code[rel] += code
		}
	}
	return nil
}

func isInternal(rel string) bool {
	return slices.Contains(strings.Split(rel, "/"), "internal")
}

func parseFiles(fset *token.FileSet, dir string, names []string) ([]*ast.File, error) {
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// addNames records the exported top-level names and methods declared in f.
func (p *Package) addNames(f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			recv := receiver(d)
			switch {
			case !d.Name.IsExported():
			case recv == "":
				p.Names = append(p.Names, d.Name.Name)
			case token.IsExported(recv):
				p.Methods = append(p.Methods, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				p.Names = append(p.Names, specNames(spec)...)
			}
		}
	}
}

// receiver is the name of a method's receiver type, "" for a function.
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.ParenExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

func specNames(spec ast.Spec) []string {
	var names []string
	switch s := spec.(type) {
	case *ast.TypeSpec:
		if s.Name.IsExported() {
			names = append(names, s.Name.Name)
		}
	case *ast.ValueSpec:
		for _, n := range s.Names {
			if n.IsExported() {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// addLong records the function declarations of f longer than maxFuncLines.
func (m *Measures) addLong(fset *token.FileSet, rel string, f *ast.File) {
	for _, decl := range f.Decls {
		d, ok := decl.(*ast.FuncDecl)
		if !ok || d.Body == nil {
			continue
		}
		start, end := fset.Position(d.Pos()), fset.Position(d.End())
		if n := end.Line - start.Line + 1; n > maxFuncLines {
			name := d.Name.Name
			if recv := receiver(d); recv != "" {
				name = recv + "." + name
			}
			file := filepath.ToSlash(filepath.Join(rel, filepath.Base(start.Filename)))
			m.Long = append(m.Long, Func{Name: name, Pos: fmt.Sprintf("%s:%d", file, start.Line), Lines: n})
		}
	}
}

// countLines returns the lines of the file at path.
func countLines(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return lineCount(data), nil
}

func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// goLines returns the lines of the Go file at path, and how many of them hold a
// token that is not a comment.
func goLines(path string) (lines, code int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	lines = lineCount(data)
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(data)), data, nil, 0) // comments skipped
	seen := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		line := fset.Position(pos).Line
		for i := range strings.Count(lit, "\n") + 1 { // a raw string's every line
			seen[line+i] = true
		}
	}
	if s.ErrorCount > 0 {
		return 0, 0, fmt.Errorf("%s: %d scan errors", path, s.ErrorCount)
	}
	return lines, len(seen), nil
}

// Public returns the public packages that are not commands, and the commands.
func (m *Measures) Public() (libs, cmds []Package) {
	for _, p := range m.Packages {
		switch {
		case !p.Public:
		case p.Main:
			cmds = append(cmds, p)
		default:
			libs = append(libs, p)
		}
	}
	return libs, cmds
}

// Names returns the number of exported top-level names across the public
// packages and in the root package, and the same for exported methods.
func (m *Measures) Names() (all, root, allMethods, rootMethods int) {
	libs, _ := m.Public()
	for _, p := range libs {
		all += len(p.Names)
		allMethods += len(p.Methods)
		if p.Dir == "." {
			root, rootMethods = len(p.Names), len(p.Methods)
		}
	}
	return all, root, allMethods, rootMethods
}

// Print writes the measures as text, one number a line, details indented.
func (m *Measures) Print(out io.Writer) error {
	w := bufio.NewWriter(out)
	libs, cmds := m.Public()
	all, root, allMethods, rootMethods := m.Names()
	fmt.Fprintf(w, "module %s\n", m.Module)
	fmt.Fprintf(w, "public packages: %d (commands besides: %d)\n", len(libs), len(cmds))
	for _, p := range slices.Concat(libs, cmds) {
		note := ""
		if p.Rig {
			note = " (test rig)"
		}
		fmt.Fprintf(w, "  %-16s %3d names %3d methods%s\n", p.Dir, len(p.Names), len(p.Methods), note)
	}
	fmt.Fprintf(w, "exported top-level names: %d across the public packages, %d in the root package\n", all, root)
	fmt.Fprintf(w, "exported methods of exported types: %d across the public packages, %d in the root package\n", allMethods, rootMethods)
	longest := 0
	if len(m.Long) > 0 {
		longest = m.Long[0].Lines
	}
	fmt.Fprintf(w, "library functions over %d lines: %d (longest %d)\n", maxFuncLines, len(m.Long), longest)
	for _, f := range m.Long {
		fmt.Fprintf(w, "  %4d %s %s\n", f.Lines, f.Pos, f.Name)
	}
	total, code, parts := 0, 0, []string{}
	for _, dir := range executorDirs {
		if n, ok := m.Executor[dir]; ok {
			total, code = total+n, code+m.Code[dir]
			parts = append(parts, fmt.Sprintf("%s %d", dir, n))
		}
	}
	fmt.Fprintf(w, "executor lines: %d (%s); %d of them hold code, the others are comments or blank\n",
		total, strings.Join(parts, ", "), code)
	fmt.Fprintf(w, "README lines: %d\n", m.README)
	fmt.Fprintf(w, "Example functions: %d (%d with an Output comment, run by go test; %d in public packages)\n",
		m.Examples, m.WithOutput, m.InPublic)
	return w.Flush()
}
