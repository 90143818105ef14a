package casleadertest

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/casleader/casleader/internal/retry"
)

// engine describes how to run one dialect's server in a container.
type engine struct {
	image    string   // repository:tag
	port     string   // the server's port in the container, "3306/tcp"
	env      []string // the official image's variables for a passwordless root / trusted postgres and a database test
	args     []string // server options appended to the image's command
	stopWith string   // the signal that shuts the server down fast
	dsn      func(hostPort string) string
}

func engineFor(d Dialect) engine {
	if d == MySQL {
		return engine{
			image:    imageOf(EnvMySQLImage, DefaultMySQLImage),
			port:     "3306/tcp",
			env:      []string{"MYSQL_ALLOW_EMPTY_PASSWORD=yes", "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=yes", "MYSQL_DATABASE=test"},
			args:     []string{"--max-connections=500"},
			stopWith: "TERM",
			dsn:      func(hp string) string { return "root@tcp(" + hp + ")/test" },
		}
	}
	return engine{
		image:    imageOf(EnvPostgresImage, DefaultPostgresImage),
		port:     "5432/tcp",
		env:      []string{"POSTGRES_HOST_AUTH_METHOD=trust", "POSTGRES_DB=test"},
		args:     []string{"-c", "max_connections=300"},
		stopWith: "INT", // fast shutdown: TERM would wait for the clients to leave
		dsn:      func(hp string) string { return "postgres://postgres@" + hp + "/test?sslmode=disable" },
	}
}

func imageOf(env, def string) string {
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return v
	}
	return def
}

// splitImage splits "repo[:tag]" (the repository may hold a registry's host:port).
func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// idleSeconds returns how long a container may run without a client, 0 for ever.
func idleSeconds() (int, error) {
	if os.Getenv(EnvKeep) == "1" {
		return 0, nil
	}
	v := os.Getenv(EnvIdle)
	if v == "" {
		return int((10 * time.Minute).Seconds()), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second || d%time.Second != 0 {
		return 0, fmt.Errorf("%s=%q is not a duration of whole seconds of at least 10s (e.g. 10m); set %s=1 to keep the containers", EnvIdle, v, EnvKeep)
	}
	return int(d.Seconds()), nil
}

// watchdog is the entrypoint of the kit's containers: it runs the image's own
// entrypoint and command in the background and stops the server once no TCP client
// has been connected to its port for the idle time ($2 seconds, 0 for never). It
// reads /proc/net/tcp{,6}, so it needs nothing but a POSIX shell and grep in the
// image. Arguments: port, idle seconds, stop signal, then the server command.
//
// It also restarts the server for [DB.Restart]: SIGUSR1 stops the server (with the
// stop signal) and keeps the container running; SIGUSR2 starts the server again,
// with the same command and data directory, once it has stopped. SIGTERM, SIGINT
// and SIGWINCH stop the server and the container. The traps only set flags and the
// loop sends the stop signal: a signal that comes between the server's start and
// `pid=$!` would otherwise signal nobody and leave the server running.
const watchdog = `port=$1 idle=$2 sig=$3
shift 3
quit=0 stopped=0 start=0 sent=0
trap 'quit=1' TERM INT WINCH
trap 'stopped=1; start=0' USR1
trap 'start=1' USR2
"$@" &
pid=$!
hex=$(printf '%04X' "$port")
quiet=0
while :; do
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid"
		rc=$?
		if [ "$quit" = 1 ] || [ "$stopped" = 0 ]; then
			exit "$rc"
		fi
		echo "casleadertest: the server stopped for a restart (exit $rc)" >&2
		while [ "$start" = 0 ] && [ "$quit" = 0 ]; do
			sleep 1 & wait $!
		done
		[ "$quit" = 0 ] || exit 0
		echo "casleadertest: starting the server again" >&2
		stopped=0 start=0 sent=0 quiet=0
		"$@" &
		pid=$!
		continue
	fi
	if [ "$stopped" = 1 ] || [ "$quit" = 1 ]; then
		# Stopping: signal the server once, then notice its exit soon.
		[ "$sent" = 1 ] || kill -s "$sig" "$pid" 2>/dev/null
		sent=1
		{ sleep 0.1 2>/dev/null || sleep 1; } & wait $!
		continue
	fi
	sleep 5 & wait $!
	[ "$idle" -gt 0 ] || continue
	if grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]+ 01 " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
		quiet=0
	else
		quiet=$((quiet + 5))
	fi
	if [ "$quiet" -ge "$idle" ]; then
		echo "casleadertest: no client for ${idle}s: stopping the server" >&2
		quit=1
		quiet=0
	fi
done
`

// startTimeout bounds the wait for a container's server to answer.
const startTimeout = 2 * time.Minute

// containers holds, per dialect, the DSN of this process's container (or the error
// that stopped it), so that the engine is asked once per test binary.
var containers struct {
	sync.Mutex
	dsn map[Dialect]string
	err map[Dialect]error
}

// containerDSN returns the DSN of the dialect's container, started if need be.
func containerDSN(d Dialect) (string, error) {
	containers.Lock()
	defer containers.Unlock()
	if v, ok := containers.dsn[d]; ok {
		return v, nil
	}
	if err, ok := containers.err[d]; ok {
		return "", err
	}
	v, _, err := startContainer(d, false)
	if containers.dsn == nil {
		containers.dsn, containers.err = map[Dialect]string{}, map[Dialect]error{}
	}
	if err != nil {
		containers.err[d] = err
		return "", err
	}
	containers.dsn[d] = v
	return v, nil
}

// startContainer finds the dialect's container, or starts it, and returns the DSN
// of its server and the container's name. own asks for a container of the caller's
// alone (a name nobody else finds), whose server [DB.Restart] may restart; the
// caller removes it ([removeContainer]).
func startContainer(d Dialect, own bool) (dsn, name string, err error) {
	e := engineFor(d)
	idle, err := idleSeconds()
	if err != nil {
		return "", "", err
	}
	pool, err := newPool()
	if err != nil {
		return "", "", err
	}
	// The client's idle keep-alive connections each hold two goroutines: close them,
	// so that goleak finds none when the test binary ends.
	defer pool.Client.HTTPClient.CloseIdleConnections()

	img, err := pool.Client.InspectImage(e.image)
	if errors.Is(err, dc.ErrNoSuchImage) {
		return "", "", fmt.Errorf("the Docker image %s is not present, and casleadertest never pulls: run `docker pull %s` (or, in casleader's repository without a registry, `bash .ci/docker up`, which builds a stand-in), or name an image you have in %s", e.image, e.image, envOfImage(d))
	}
	if err != nil {
		return "", "", fmt.Errorf("inspect image %s: %w", e.image, err)
	}

	if img.Config == nil || len(img.Config.Entrypoint)+len(img.Config.Cmd) == 0 {
		return "", "", fmt.Errorf("the Docker image %s has no entrypoint or command to start the server with: name an image that has (in %s)", e.image, envOfImage(d))
	}
	cmd := append(append(append([]string{}, img.Config.Entrypoint...), img.Config.Cmd...), e.args...)
	port := strings.TrimSuffix(e.port, "/tcp")
	entrypoint := append([]string{"/bin/sh", "-c", watchdog, "casleadertest-watchdog", port, strconv.Itoa(idle), e.stopWith}, cmd...)
	sum := sha256.Sum256([]byte(strings.Join(append([]string{img.ID}, append(entrypoint, e.env...)...), "\x00")))
	name = "casleadertest-" + string(d) + "-" + hex.EncodeToString(sum[:6])
	labels := map[string]string{"casleadertest": string(d), "casleadertest.image": e.image}
	if own {
		// A server of the caller's alone: a name nobody else finds.
		var r [6]byte
		_, _ = crand.Read(r[:])
		name += "-own-" + hex.EncodeToString(r[:])
		labels["casleadertest.own"] = "1"
	}

	// Find the container, or create it. Where several test binaries start at once,
	// the engine lets one create the name and refuses the others, which then find
	// it; a container of that name that is still being removed is waited for.
	var c *dc.Container
	give := time.Now().Add(30 * time.Second)
	for attempt := 1; c == nil; attempt++ {
		if c, err = runningContainer(pool, name); err != nil || c != nil {
			break
		}
		if time.Now().After(give) {
			return "", "", fmt.Errorf("container %s of %s does not run within 30s: see `docker logs %s` (with %s=1 it is not removed)", name, e.image, name, EnvKeep)
		}
		repo, tag := splitImage(e.image)
		_, err = pool.RunWithOptions(&dockertest.RunOptions{
			Name:         name,
			Repository:   repo,
			Tag:          tag,
			Env:          e.env,
			Entrypoint:   entrypoint,
			ExposedPorts: []string{e.port},
			PortBindings: map[dc.Port][]dc.PortBinding{dc.Port(e.port): {{HostIP: "127.0.0.1", HostPort: ""}}},
			Labels:       labels,
		}, func(hc *dc.HostConfig) {
			hc.AutoRemove = idle > 0 // kept with CASLEADERTEST_KEEP=1, for its logs too
			hc.PublishAllPorts = false
		})
		if errors.Is(err, dc.ErrContainerAlreadyExists) {
			time.Sleep(retry.Backoff(attempt, 100*time.Millisecond, time.Second))
		} else if err != nil {
			return "", "", fmt.Errorf("start a container of %s: %w", e.image, err)
		}
	}
	if err != nil {
		return "", "", err
	}
	b := c.NetworkSettings.Ports[dc.Port(e.port)]
	if len(b) == 0 || b[0].HostPort == "" {
		return "", "", fmt.Errorf("container %s publishes no host port for %s", name, e.port)
	}
	dsn = e.dsn("127.0.0.1:" + b[0].HostPort)
	if err := awaitServer(d, name, dsn, 2*time.Second, func() bool { return containerGone(pool, name) }); err != nil {
		if own {
			_ = removeContainer(name)
		}
		return "", "", err
	}
	return dsn, name, nil
}

// newPool returns a client of the Docker engine of DOCKER_HOST (or the default
// socket), once the engine answers. The caller closes its idle connections.
func newPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("no Docker client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		pool.Client.HTTPClient.CloseIdleConnections()
		return nil, fmt.Errorf("no Docker engine answers at %s (start one, or point DOCKER_HOST at one): %w", pool.Client.Endpoint(), err)
	}
	return pool, nil
}

func envOfImage(d Dialect) string {
	if d == MySQL {
		return EnvMySQLImage
	}
	return EnvPostgresImage
}

// runningContainer returns the running container of that name, nil if there is
// none (yet). A stopped one (that did not remove itself) is removed.
func runningContainer(pool *dockertest.Pool, name string) (*dc.Container, error) {
	c, err := pool.Client.InspectContainer(name)
	var missing *dc.NoSuchContainer
	if errors.As(err, &missing) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", name, err)
	}
	if c.State.Running {
		return c, nil
	}
	if st := c.State.Status; st != "exited" && st != "dead" {
		return nil, nil // created and not started yet by another binary, or being removed
	}
	err = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true})
	var apiErr *dc.Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		return nil, nil // the engine is removing it already
	}
	if err != nil && !errors.As(err, &missing) {
		return nil, fmt.Errorf("remove stopped container %s: %w", name, err)
	}
	return nil, nil
}

// containerGone reports whether the container name is known not to run.
func containerGone(pool *dockertest.Pool, name string) bool {
	c, err := runningContainer(pool, name)
	return err == nil && c == nil
}

// awaitServer waits until the server of container name answers on dsn, or the
// container stopped (gone). It tries again at most every (it backs off up to it).
func awaitServer(d Dialect, name, dsn string, every time.Duration, gone func() bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var last error
	for attempt := 1; ; attempt++ {
		err := ping(ctx, d, dsn)
		if err == nil {
			return nil
		}
		last = err
		if gone() {
			return fmt.Errorf("container %s stopped before its server answered (%v): see `docker logs %s`, kept with %s=1", name, last, name, EnvKeep)
		}
		if retry.Sleep(ctx, retry.Backoff(attempt, min(100*time.Millisecond, every), every)) != nil {
			return fmt.Errorf("the server in container %s did not answer within %s: %w", name, startTimeout, last)
		}
	}
}

// ping connects to dsn once. The MySQL driver's logger is off: it would print
// "unexpected EOF" for each attempt that reaches the engine's port proxy before
// the server listens.
func ping(ctx context.Context, d Dialect, dsn string) error {
	var db *sql.DB
	if d == MySQL {
		cfg, err := mysqldriver.ParseDSN(dsn)
		if err != nil {
			return err
		}
		cfg.Logger = quiet{}
		cfg.Timeout = 5 * time.Second
		conn, err := mysqldriver.NewConnector(cfg)
		if err != nil {
			return err
		}
		db = sql.OpenDB(conn)
	} else {
		var err error
		if db, err = sql.Open("pgx", dsn); err != nil {
			return err
		}
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// quiet is a MySQL driver logger that drops every line.
type quiet struct{}

func (quiet) Print(...any) {}
