package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTree writes files (path relative to dir: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// function returns the text of a function called name that is lines long.
func function(name string, lines int) string {
	return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
}

func TestMeasureCountsAKnownModule(t *testing.T) {
	dir := t.TempDir()
	root := "package m\n\nconst A = 1\n\nvar b, C = 1, 2\n\ntype T struct{}\n\nfunc (T) M()  {}\nfunc (*T) m() {}\n\ntype u int\n\nfunc (u) X() {}\n\nfunc F() {}\n\n" +
		function("long", 61) + function("fits", 60)
	writeTree(t, dir, map[string]string{
		"go.mod":                 "module example.com/m\n\ngo 1.26\n",
		"README.md":              "# m\n\ntext\n",
		"m.go":                   root,
		"m_test.go":              "package m\n\nimport \"fmt\"\n\nfunc Example() {\n\tfmt.Println(1)\n\t// Output: 1\n}\n\nfunc ExampleT_M() {}\n\nfunc TestX() {}\n",
		"heartbeat/h.go":         "// Package heartbeat.\npackage heartbeat\n\n/* a\nblock */\nfunc Run() { // trailing\n\t_ = `x\ny`\n}\n",
		"heartbeat/h_test.go":    "package heartbeat\n\nfunc ExampleRun() {}\n",
		"internal/x/x.go":        "package x\n\nfunc Exported() {}\n\n" + function("internalLong", 70),
		"internal/x/x_test.go":   "package x\n\nfunc ExampleExported() {}\n",
		"rig/rig.go":             "package rig\n\nimport \"testing\"\n\nfunc Helper(t *testing.T) {}\n\n" + function("rigLong", 80),
		"cmd/c/main.go":          "package main\n\nfunc main() {}\n\n" + function("mainLong", 90),
		"nested/go.mod":          "module example.com/n\n",
		"nested/n.go":            "package n\n\nfunc N() {}\n\n" + function("nestedLong", 90),
		"testdata/t.go":          "package t\n\nfunc T() {}\n",
		"other/other_windows.go": "package other\n\nfunc Windows() {}\n",
		"other/other.go":         "package other\n",
	})

	m, err := Measure(dir)
	require.NoError(t, err)
	assert.Equal(t, "example.com/m", m.Module)
	libs, cmds := m.Public()
	var dirs []string
	for _, p := range libs {
		dirs = append(dirs, p.Dir)
	}
	assert.Equal(t, []string{".", "heartbeat", "other", "rig"}, dirs, "internal, nested modules and testdata are not public")
	require.Len(t, cmds, 1)
	assert.Equal(t, "cmd/c", cmds[0].Dir)
	assert.Equal(t, []string{"A", "C", "T", "F"}, libs[0].Names)
	assert.Equal(t, []string{"T.M"}, libs[0].Methods, "no unexported method, no method of an unexported type")
	all, rootNames, allMethods, rootMethods := m.Names()
	assert.Equal(t, []int{6, 4, 1, 1}, []int{all, rootNames, allMethods, rootMethods},
		"A C T F, Run, Helper; windows-only files do not count on linux")

	require.Len(t, m.Long, 2, "long and internalLong; fits, rig, command and nested module are not counted")
	assert.Equal(t, Func{Name: "internalLong", Pos: "internal/x/x.go:5", Lines: 70}, m.Long[0])
	assert.Equal(t, "long", m.Long[1].Name)
	assert.Equal(t, 61, m.Long[1].Lines)

	assert.Equal(t, strings.Count(root, "\n"), m.Executor["."])
	assert.Equal(t, 9, m.Executor["heartbeat"])
	assert.Equal(t, 130, m.Code["."], "138 lines less 8 blank ones")
	assert.Equal(t, 5, m.Code["heartbeat"], "package, func, both lines of the raw string, }: no comment, no blank line")
	assert.Equal(t, 3, m.README)
	assert.Equal(t, 4, m.Examples)
	assert.Equal(t, 1, m.WithOutput)
	assert.Equal(t, 3, m.InPublic)

	var out bytes.Buffer
	require.NoError(t, m.Print(&out))
	for _, line := range []string{
		"public packages: 4 (commands besides: 1)",
		"exported top-level names: 6 across the public packages, 4 in the root package",
		"library functions over 60 lines: 2 (longest 70)",
		"executor lines: " + strconv.Itoa(strings.Count(root, "\n")+9),
		"135 of them hold code",
		"README lines: 3",
		"Example functions: 4 (1 with an Output comment, run by go test; 3 in public packages)",
	} {
		assert.Contains(t, out.String(), line)
	}
}

func TestMeasureFindsThisModule(t *testing.T) {
	m, err := Measure("../../..")
	require.NoError(t, err)
	assert.Equal(t, "github.com/casleader/casleader", m.Module)
	libs, cmds := m.Public()
	require.NotEmpty(t, libs)
	assert.Equal(t, ".", libs[0].Dir)
	assert.Contains(t, libs[0].Names, "Elector")
	require.Len(t, cmds, 1)
	assert.Equal(t, "cmd/casleader", cmds[0].Dir)
	for _, p := range m.Packages {
		assert.NotEqual(t, "casleadertest", p.Dir, "a nested module is not measured")
	}
}

func TestMeasureRefusesADirectoryWithoutGoMod(t *testing.T) {
	_, err := Measure(t.TempDir())
	require.ErrorContains(t, err, "is not a module's root")
}
