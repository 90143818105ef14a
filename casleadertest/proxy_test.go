package casleadertest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryHostOfAMultiHostDSNGoesThroughItsProxy: a candidate on a PostgreSQL DSN
// listing a primary and a standby reaches each of them through a proxy of its own,
// so that after a switchover (the first host a replica) target_session_attrs
// still finds the primary; its read-write validation is kept.
func TestEveryHostOfAMultiHostDSNGoesThroughItsProxy(t *testing.T) {
	for _, tc := range []struct {
		name, dsn string
		hosts     []string
	}{
		{"TwoHosts", "postgres://u@10.0.0.1:5432,10.0.0.2:5433/db?sslmode=disable&target_session_attrs=read-write",
			[]string{"10.0.0.1:5432", "10.0.0.2:5433"}},
		// sslmode=prefer gives each host two fallbacks (with and without TLS).
		{"TwoHostsTwoTLSModes", "postgres://u@10.0.0.1:5432,10.0.0.2:5433/db?sslmode=prefer&target_session_attrs=read-write",
			[]string{"10.0.0.1:5432", "10.0.0.2:5433"}},
		{"OneHost", "postgres://u@10.0.0.1:5432/db?sslmode=disable", []string{"10.0.0.1:5432"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts, err := PgHosts(tc.dsn)
			require.NoError(t, err)
			assert.Equal(t, tc.hosts, hosts)

			cfg, err := pgconn.ParseConfig(tc.dsn)
			require.NoError(t, err)
			validate := cfg.ValidateConnect
			proxies := []string{"127.0.0.1:40001", "127.0.0.1:40002"}[:len(hosts)]
			require.NoError(t, viaProxies(cfg, strings.Join(proxies, ",")))
			got := map[string]bool{cfg.Host + ":" + itoa(cfg.Port): true}
			for _, f := range cfg.Fallbacks {
				got[f.Host+":"+itoa(f.Port)] = true
			}
			want := map[string]bool{}
			for _, p := range proxies {
				want[p] = true
			}
			assert.Equal(t, want, got, "every host, and only the proxies")
			assert.Equal(t, "127.0.0.1:40001", cfg.Host+":"+itoa(cfg.Port), "the first host stays first")
			assert.Equal(t, validate == nil, cfg.ValidateConnect == nil, "target_session_attrs is kept")

			assert.Error(t, viaProxies(cfg, "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"), "one proxy per host")
		})
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
