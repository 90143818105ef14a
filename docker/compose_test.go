// Package docker_test checks docker-compose.yml and the Dockerfile without a Docker
// engine: the compose file must parse, and the demo it describes must hang together
// (services, dependencies, healthchecks, the replicas' flags and timings), and the
// override for machines without a registry must replace the images only. CI also
// runs `docker compose config` when a compose tool is installed, and demo-test.sh,
// which runs the demo; its commands must be those of docs/docker.md.
package docker_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

type compose struct {
	Services   map[string]service `yaml:"services"`
	Extensions map[string]any     `yaml:",inline"` // x-… keys, checked below
}

type service struct {
	Image       string                       `yaml:"image"`
	Build       *build                       `yaml:"build"`
	Command     []string                     `yaml:"command"`
	Environment map[string]string            `yaml:"environment"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	Ports           []string `yaml:"ports"`
	Restart         string   `yaml:"restart"`
	Init            bool     `yaml:"init"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
}

type build struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Args       map[string]string `yaml:"args"`
}

func load(t *testing.T) compose {
	t.Helper()
	return loadFile(t, "docker-compose.yml")
}

func loadFile(t *testing.T, name string) compose {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	var c compose
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true) // a misspelt key is an error, not a silently ignored setting
	require.NoError(t, dec.Decode(&c))
	for k := range c.Extensions {
		require.True(t, strings.HasPrefix(k, "x-"), "unknown top-level key %q", k)
	}
	return c
}

var replicas = []string{"casleader-1", "casleader-2", "casleader-3"}

func TestComposeHasTheDatabasesMigrateAndThreeReplicas(t *testing.T) {
	c := load(t)
	want := append([]string{"mysql", "postgres", "migrate"}, replicas...)
	have := make([]string, 0, len(c.Services))
	for name := range c.Services {
		have = append(have, name)
	}
	assert.ElementsMatch(t, want, have)
	assert.Equal(t, "mysql:8.4", c.Services["mysql"].Image)
	assert.Equal(t, "postgres:17", c.Services["postgres"].Image)
	for _, db := range []string{"mysql", "postgres"} {
		require.NotNil(t, c.Services[db].Healthcheck, db)
		assert.NotEmpty(t, c.Services[db].Healthcheck.Test, db)
	}
	m := c.Services["migrate"]
	assert.Equal(t, []string{"migrate"}, m.Command)
	assert.Equal(t, "service_healthy", m.DependsOn["mysql"]["condition"])
	assert.Equal(t, "service_healthy", m.DependsOn["postgres"]["condition"])
}

func TestEveryDependencyExists(t *testing.T) {
	c := load(t)
	for name, s := range c.Services {
		for dep, opts := range s.DependsOn {
			assert.Contains(t, c.Services, dep, "%s depends on %s", name, dep)
			assert.Contains(t, []string{"service_started", "service_healthy", "service_completed_successfully"},
				opts["condition"], "%s -> %s", name, dep)
		}
	}
}

var duration = regexp.MustCompile(`^--(lease|renew|heartbeat|poll)=(.+)$`)

func TestReplicasRunTheDemoElectionWithSoundTimings(t *testing.T) {
	c := load(t)
	ids := map[string]bool{}
	ports := map[string]bool{}
	for _, name := range replicas {
		s := c.Services[name]
		require.NotEmpty(t, s.Command, name)
		assert.Equal(t, "run", s.Command[0], name)
		sep := slices.Index(s.Command, "--")
		require.Positive(t, sep, "%s: the child command follows --", name)
		flags, child := s.Command[1:sep], s.Command[sep+1:]
		assert.NotEmpty(t, child, name)
		assert.Contains(t, flags, "--key=demo", name)
		assert.Contains(t, flags, "--listen=:9090", name)
		d := map[string]time.Duration{}
		for _, f := range flags {
			if strings.HasPrefix(f, "--id=") {
				assert.False(t, ids[f], "%s: %s is taken by another replica", name, f)
				ids[f] = true
			}
			if m := duration.FindStringSubmatch(f); m != nil {
				v, err := time.ParseDuration(m[2])
				require.NoError(t, err, "%s: %s", name, f)
				d[m[1]] = v
			}
		}
		assert.Contains(t, ids, "--id="+name, "%s has its own ID", name)
		assert.Less(t, d["heartbeat"], d["renew"], "%s: heartbeat < renew", name)
		assert.Less(t, d["renew"], d["lease"], "%s: renew < lease", name)

		// A single $ would be replaced by compose (from the host's environment)
		// before the shell sees it: the child's variables must be written $$.
		for _, arg := range child {
			assert.NotRegexp(t, `(^|[^$])\$([^$]|$)`, strings.ReplaceAll(arg, "$$", ""), "%s: use $$ in %q", name, arg)
		}
		assert.Contains(t, strings.Join(child, " "), "$$CASLEADER_TOKEN", "%s: the child shows the token", name)

		require.NotNil(t, s.Healthcheck, name)
		assert.Contains(t, strings.Join(s.Healthcheck.Test, " "), "http://127.0.0.1:9090/healthz", name)
		assert.Equal(t, "service_completed_successfully", s.DependsOn["migrate"]["condition"], name)
		assert.Equal(t, "no", s.Restart, "%s: a killed leader must stay dead for the demo", name)
		assert.Contains(t, s.Environment["CASLEADER_DSN"], "mysql://", name)
		require.Len(t, s.Ports, 1, name)
		assert.False(t, ports[s.Ports[0]], "%s: port %s is taken", name, s.Ports[0])
		ports[s.Ports[0]] = true
		assert.Equal(t, c.Services["migrate"].Environment, s.Environment, "%s and migrate use one database", name)
	}
}

func TestImageIsAStaticBuildOfTheCommand(t *testing.T) {
	c := load(t)
	for _, name := range append([]string{"migrate"}, replicas...) {
		s := c.Services[name]
		require.NotNil(t, s.Build, name)
		assert.Equal(t, "..", s.Build.Context, name)
		assert.Equal(t, "docker/Dockerfile", s.Build.Dockerfile, name)
		assert.Equal(t, "casleader:dev", s.Image, name)
	}
	b, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	df := string(b)
	assert.Contains(t, df, "CGO_ENABLED=0")
	assert.Contains(t, df, "./cmd/casleader")
	assert.Contains(t, df, `ENTRYPOINT ["casleader"]`)
	_, err = os.Stat("../cmd/casleader/main.go")
	require.NoError(t, err, "the Dockerfile builds ./cmd/casleader")
	_, err = os.Stat("Dockerfile.dockerignore")
	assert.NoError(t, err, "the build context (the repository root) is filtered")
}
