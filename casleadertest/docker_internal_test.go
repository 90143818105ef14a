package casleadertest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitImage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ image, repo, tag string }{
		{"mariadb:10.11", "mariadb", "10.11"},
		{"postgres", "postgres", "latest"},
		{"localhost:5000/db/postgres:15", "localhost:5000/db/postgres", "15"},
		{"localhost:5000/postgres", "localhost:5000/postgres", "latest"},
	} {
		repo, tag := splitImage(tc.image)
		assert.Equal(t, tc.repo, repo, tc.image)
		assert.Equal(t, tc.tag, tag, tc.image)
	}
}

func TestIdleSeconds(t *testing.T) {
	for _, tc := range []struct {
		idle, keep string
		want       int
		bad        bool
	}{
		{"", "", 600, false},
		{"90s", "", 90, false},
		{"2m", "", 120, false},
		{"", "1", 0, false},
		{"5s", "", 0, true},
		{"1.5m", "", 90, false},
		{"10.5s", "", 0, true},
		{"soon", "", 0, true},
	} {
		t.Setenv(EnvIdle, tc.idle)
		t.Setenv(EnvKeep, tc.keep)
		got, err := idleSeconds()
		if tc.bad {
			require.Error(t, err, "%s=%q", EnvIdle, tc.idle)
			assert.Contains(t, err.Error(), EnvIdle)
			continue
		}
		require.NoError(t, err, "%s=%q", EnvIdle, tc.idle)
		assert.Equal(t, tc.want, got, "%s=%q %s=%q", EnvIdle, tc.idle, EnvKeep, tc.keep)
	}
}
