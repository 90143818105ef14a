//go:build linux

package chaos

import "github.com/casleader/casleader/casleadertest"

// The cluster of candidate processes is package casleadertest's too; this package
// keeps its names for the suite's scenarios.
type (
	Config  = casleadertest.ProcessConfig
	Cluster = casleadertest.ProcessCluster
)

// Environment of a candidate process (see package casleadertest).
const (
	EnvChild  = casleadertest.EnvChild
	EnvLogDir = casleadertest.EnvLogDir
)

// New is [casleadertest.NewProcessCluster].
func New(cfg Config) (*Cluster, error) { return casleadertest.NewProcessCluster(cfg) }

// Child is [casleadertest.RunChild].
func Child() int { return casleadertest.RunChild() }

// GroupKeys is [casleadertest.GroupKeys].
func GroupKeys(key string, n int) []string { return casleadertest.GroupKeys(key, n) }

// PgHosts is [casleadertest.PgHosts].
func PgHosts(dsn string) ([]string, error) { return casleadertest.PgHosts(dsn) }

// Mono is [casleadertest.Mono].
func Mono() int64 { return casleadertest.Mono() }
