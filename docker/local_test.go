package docker_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ciDockerDefault returns the value that ../.ci/docker gives the variable name, the
// image it builds.
func ciDockerDefault(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../.ci/docker")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + name + `="(?:\$\{[A-Z_]+:-)?([^"}]+)\}?"$`).FindSubmatch(b)
	require.NotNil(t, m, ".ci/docker sets %s", name)
	return string(m[1])
}

func TestLocalOverrideReplacesTheImagesOnly(t *testing.T) {
	c := loadFile(t, "docker-compose.local.yml")
	base := load(t)
	have := make([]string, 0, len(c.Services))
	for name := range c.Services {
		have = append(have, name)
		assert.Contains(t, base.Services, name, "the override adds no service")
	}
	assert.ElementsMatch(t, append([]string{"mysql", "postgres", "migrate"}, replicas...), have)
	assert.Equal(t, ciDockerDefault(t, "MARIADB_IMAGE"), c.Services["mysql"].Image, "the stand-in that .ci/docker builds")
	assert.Equal(t, ciDockerDefault(t, "POSTGRES_IMAGE"), c.Services["postgres"].Image, "the stand-in that .ci/docker builds")
	for _, name := range append([]string{"migrate"}, replicas...) {
		s := c.Services[name]
		require.NotNil(t, s.Build, name)
		assert.Equal(t, build{Context: ".", Dockerfile: "Dockerfile.local",
			Args: map[string]string{"BASE": ciDockerDefault(t, "BASE_IMAGE")}}, *s.Build, name)
		assert.Empty(t, s.Image, "%s keeps the image name of docker-compose.yml", name)
		assert.Empty(t, s.Command, "%s runs what docker-compose.yml says", name)
		assert.Empty(t, s.Environment, "%s: the database is docker-compose.yml's", name)
	}
	df, err := os.ReadFile("Dockerfile.local")
	require.NoError(t, err)
	assert.Contains(t, string(df), "COPY bin/casleader /usr/local/bin/casleader")
	assert.Contains(t, string(df), `ENTRYPOINT ["casleader"]`)
	ignore, err := os.ReadFile(".dockerignore")
	require.NoError(t, err)
	assert.Contains(t, strings.Fields(string(ignore)), "!bin/casleader", "the build context sends the binary")
}

// docDemo returns the lines of the shell blocks of docs/docker.md, the page of the
// demo, without comments, continuation backslashes and leading variable assignments.
func docDemo(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/docker.md")
	require.NoError(t, err)
	sec := string(b)
	require.True(t, strings.HasPrefix(sec, "# Watch a failover with Docker\n"), "docs/docker.md is the demo's page")
	var lines []string
	in := false
	for l := range strings.Lines(sec) {
		l = strings.TrimSpace(l)
		switch {
		case l == "```sh":
			in = true
		case l == "```":
			in = false
		case in:
			l, _, _ = strings.Cut(l, "  #")
			l = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(l), `\`))
			for _, part := range strings.Split(l, " && ") {
				lines = append(lines, strings.TrimSpace(part))
			}
		}
	}
	return lines
}

var scriptCompose = regexp.MustCompile(`(?m)^\s*(?:if ! )?(?:compose|timeout \d+ "\$\{COMPOSE\[@\]\}") ((?:up|kill|start|stop|down)\b[^>|\n]*)`)

func TestDemoScriptRunsTheDocumentedCommands(t *testing.T) {
	doc := docDemo(t)
	b, err := os.ReadFile("demo-test.sh")
	require.NoError(t, err)
	script := string(b)

	cmds := scriptCompose.FindAllStringSubmatch(script, -1)
	require.GreaterOrEqual(t, len(cmds), 5, "up, kill, start, stop, down")
	verbs := map[string]bool{}
	for _, m := range cmds {
		args := strings.TrimSpace(m[1])
		verbs[strings.Fields(args)[0]] = true
		// "$first" and the like name a replica.
		named := regexp.MustCompile(`"\$\w+"`).ReplaceAllString(args, "REPLICA")
		want := "^docker compose " + strings.ReplaceAll(regexp.QuoteMeta(named), "REPLICA", "casleader-[123]") + "$"
		assert.True(t, slicesContainsMatch(doc, want), "docs/docker.md shows the script's `compose %s` (as %s)", args, want)
	}
	assert.Equal(t, map[string]bool{"up": true, "kill": true, "start": true, "stop": true, "down": true}, verbs)

	build := regexp.MustCompile(`\(cd \.\. && (CGO_ENABLED=0 go build [^)]*)\)`).FindStringSubmatch(script)
	require.NotNil(t, build, "the script builds the binary from the repository root")
	assert.Contains(t, doc, build[1], "docs/docker.md shows the script's build command")
	file := regexp.MustCompile(`export COMPOSE_FILE="\$\{COMPOSE_FILE:-([^}]+)\}"`).FindStringSubmatch(script)
	require.NotNil(t, file, "the script picks the override by COMPOSE_FILE")
	assert.Contains(t, doc, "export COMPOSE_FILE="+file[1], "docs/docker.md shows the script's COMPOSE_FILE")
	assert.Contains(t, doc, "bash .ci/docker up")
}

func slicesContainsMatch(lines []string, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
