// Package integration holds pgimageai's end-to-end tests and the harness they share:
// PostgreSQL 17 (with pgvector and wal_level=logical) in Docker, started through dockertest,
// with a fresh database per test.
//
// One container serves a whole test binary. Wire it up once per package:
//
//	func TestMain(m *testing.M) { os.Exit(integration.Main(m)) }
//
// and give every test its own database:
//
//	db := integration.NewDatabase(t)
//	conn := db.Connect(t)
//
// Tests that stop, pause or restart the server take a container of their own with
// StartPostgres, so that they never disturb the shared one.
//
// WaitFor, RandomBytes and WithUser (wait.go) are the helpers both suites of this
// directory (the package's own tests and integration_test's) share.
//
// StartLlama (llama.go) starts a real llama.cpp llama-server with a tiny random-weight
// vision model, from PGIMAGEAI_LLAMA_IMAGE (default pgimageai-llama:test, built by
// scripts/build-llama-image.sh), for the tests of the openai and llamacpp providers.
//
// The image comes from PGIMAGEAI_TEST_IMAGE (default postgres:17); scripts/test sets it to
// a locally built image when no registry is reachable. When Docker has no engine or the
// image is missing and cannot be pulled, the shared server (Shared, NewDatabase) is a
// throwaway server from the host's PostgreSQL binaries instead (internal/pgtest: no
// pgvector unless the host has it); PGIMAGEAI_TEST_POSTGRES=host asks for that server
// whatever Docker offers. Tests that take a container of their own (StartPostgres) need
// Docker. Without either the harness fails the test; only with -short outside CI (CI unset
// or false) does it skip.
//
// Layer: test.
package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"

	"github.com/pgimageai/pgimageai/internal/pgtest"
)

const (
	// ImageEnv names the environment variable that selects the PostgreSQL image.
	ImageEnv = "PGIMAGEAI_TEST_IMAGE"
	// ServerEnv set to "host" makes the shared server one from the host's binaries
	// (internal/pgtest) even when Docker is there.
	ServerEnv = "PGIMAGEAI_TEST_POSTGRES"
	// DefaultImage is the image used when ImageEnv is unset.
	DefaultImage = "postgres:17"
	// Superuser is the superuser every DSN of the harness connects as.
	Superuser = "postgres"

	password     = "pgimageai-test"
	readyTimeout = 2 * time.Minute
	pullTimeout  = 5 * time.Minute
	// expireSeconds bounds the life of a container that the test binary failed to purge
	// (a panic, a kill): Docker kills it this long after each start. The shared container
	// lives as long as the whole suite, so this is well above the suite's run time.
	expireSeconds = 3600
	// label marks the harness's containers; leftovers can be removed with
	// docker container prune --filter label=org.pgimageai.test
	label = "org.pgimageai.test"
)

// serverArgs are the server settings of every container: logical decoding with room for
// many slots, and no fsync because the data is thrown away.
var serverArgs = []string{
	"-c", "wal_level=logical",
	"-c", "max_replication_slots=20",
	"-c", "max_wal_senders=20",
	"-c", "fsync=off",
}

// ErrDockerUnavailable reports that no Docker engine answered.
var ErrDockerUnavailable = errors.New("docker engine unavailable")

// ErrNoImage reports that the PostgreSQL image is not present and cannot be pulled.
var ErrNoImage = errors.New("postgres image unavailable")

// Postgres is one PostgreSQL server in a Docker container. Its methods are safe for
// concurrent use; Stop, Start, Pause and Unpause affect every user of the container.
//
// The host port is fixed when the container is created (for a local engine), so a DSN
// stays valid across Stop and Start: a client under test can reconnect to the same address.
type Postgres struct {
	pool *dockertest.Pool
	res  *dockertest.Resource
	host string // the address that reaches the engine's published ports

	// local is the server from the host's binaries that stands in for the shared
	// container without Docker; pool and res are nil then.
	local *pgtest.Server

	mu   sync.Mutex
	port string // host port published for 5432/tcp
}

// StartPostgres starts a container for tb alone and purges it in tb.Cleanup. Use it when a
// test stops, pauses or reconfigures the server; otherwise prefer NewDatabase.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	return StartPostgresWith(tb)
}

// StartPostgresWith is StartPostgres with more server settings after the
// harness's own ("-c", "wal_level=replica": the last one counts).
func StartPostgresWith(tb testing.TB, args ...string) *Postgres {
	tb.Helper()
	p, err := start(context.Background(), append(append([]string{}, serverArgs...), args...))
	if err != nil {
		fail(tb, err)
	}
	tb.Cleanup(func() {
		if err := p.Purge(); err != nil {
			tb.Errorf("purge postgres container: %v", err)
		}
	})
	return p
}

var shared struct {
	once sync.Once
	pg   *Postgres
	err  error
}

// Shared returns the container shared by the tests of this test binary, starting it on
// first use. Main purges it when the tests are done; without Main in TestMain the container
// is only stopped by its expiry and stays behind for "docker container prune".
func Shared(tb testing.TB) *Postgres {
	tb.Helper()
	shared.once.Do(func() { shared.pg, shared.err = startShared(context.Background()) })
	if shared.err != nil {
		fail(tb, shared.err)
	}
	return shared.pg
}

// Main runs the tests of m and then purges the shared container, if one was started. It
// returns the exit code for os.Exit; a failed purge turns success into failure.
func Main(m *testing.M) int {
	code := m.Run()
	shared.once.Do(func() {}) // no start after this point
	if shared.pg != nil {
		if err := shared.pg.Purge(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: purge shared postgres container: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// startShared starts the shared server: a container, or a server from the host's
// binaries when Docker has no engine or no image (or ServerEnv says host).
func startShared(ctx context.Context) (*Postgres, error) {
	if os.Getenv(ServerEnv) != "host" {
		p, err := start(ctx, serverArgs)
		if err == nil || !(errors.Is(err, ErrDockerUnavailable) || errors.Is(err, ErrNoImage)) {
			return p, err
		}
		local, lerr := pgtest.Start(ctx)
		if lerr != nil {
			return nil, fmt.Errorf("%w; and no server from the host's binaries: %v", err, lerr)
		}
		fmt.Fprintf(os.Stderr, "integration: %v; using PostgreSQL from %s instead\n", err, local.BinDir)
		return &Postgres{local: local, host: "127.0.0.1", port: strconv.Itoa(local.Port)}, nil
	}
	local, err := pgtest.Start(ctx)
	if err != nil {
		return nil, err
	}
	return &Postgres{local: local, host: "127.0.0.1", port: strconv.Itoa(local.Port)}, nil
}

// fail ends tb because the harness could not provide a server. Only a missing Docker
// engine under -short outside CI skips; everything else fails.
func fail(tb testing.TB, err error) {
	tb.Helper()
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	if errors.Is(err, ErrDockerUnavailable) && !ci && testing.Short() {
		tb.Skipf("integration: %v (skipped because of -short outside CI)", err) // ok-to-skip: -short outside CI
	}
	tb.Fatalf("integration: %v", err)
}

// start starts a container whose command (after the image's entrypoint) is
// cmd: serverArgs for a plain server.
func start(ctx context.Context, cmd []string) (*Postgres, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDockerUnavailable, err)
	}
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDockerUnavailable, err)
	}
	pool.MaxWait = readyTimeout

	image := os.Getenv(ImageEnv)
	if image == "" {
		image = DefaultImage
	}
	if err := ensureImage(ctx, pool, image); err != nil {
		return nil, err
	}
	host, local, err := engineHost(pool.Client.Endpoint())
	if err != nil {
		return nil, err
	}

	// A local engine gets a fixed port so that DSNs survive Stop/Start; another process may
	// take the free port before Docker binds it, hence the retries.
	var res *dockertest.Resource
	for attempt := 1; ; attempt++ {
		binding := docker.PortBinding{}
		if local {
			if binding.HostPort, err = freePort(); err != nil {
				return nil, err
			}
			binding.HostIP = "127.0.0.1"
		}
		res, err = run(pool, image, binding, cmd)
		if err == nil || !local || attempt == 3 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", image, err)
	}

	p := &Postgres{pool: pool, res: res, host: host}
	_ = res.Expire(expireSeconds) // never fails; it stops the container in the background
	err = p.refresh(ctx)
	if err == nil {
		err = p.waitReady(ctx)
	}
	if err != nil {
		logs := p.logs(ctx)
		_ = p.Purge()
		return nil, fmt.Errorf("start %s: %w\ncontainer log (tail):\n%s", image, err, logs)
	}
	return p, nil
}

// run creates and starts the container; a container that was created but failed to start
// is removed again.
func run(pool *dockertest.Pool, image string, binding docker.PortBinding, cmd []string) (*dockertest.Resource, error) {
	repo, tag := splitImage(image)
	name := fmt.Sprintf("pgimageai-test-%d-%d", os.Getpid(), containerSeq.Add(1))
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Name:         name,
		Repository:   repo,
		Tag:          tag,
		Env:          []string{"POSTGRES_PASSWORD=" + password, "POSTGRES_USER=" + Superuser},
		Cmd:          cmd,
		Labels:       map[string]string{label: "integration"},
		PortBindings: map[docker.Port][]docker.PortBinding{"5432/tcp": {binding}},
	}, func(hc *docker.HostConfig) {
		hc.AutoRemove = false // Stop and Start need the container to outlive its process
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		_ = pool.RemoveContainerByName(name)
		return nil, err
	}
	return res, nil
}

var containerSeq atomic.Int64

// ensureImage pulls image when it is not present locally, with a bounded wait.
func ensureImage(ctx context.Context, pool *dockertest.Pool, image string) error {
	if _, err := pool.Client.InspectImage(image); err == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	repo, tag := splitImage(image)
	err := pool.Client.PullImage(docker.PullImageOptions{Repository: repo, Tag: tag, Context: ctx}, docker.AuthConfiguration{})
	if err != nil {
		return fmt.Errorf("%w: image %s is not present and cannot be pulled (%v); "+
			"build one with scripts/build-test-image.sh and set %s=pgimageai-postgres:17, or run scripts/test",
			ErrNoImage, image, err, ImageEnv)
	}
	return nil
}

// splitImage splits "repo[:tag]" (the repo may hold a registry host:port).
func splitImage(image string) (repo, tag string) {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, "latest"
}

// engineHost returns the host that reaches ports published by the engine at endpoint and
// whether the engine is local (so that a free port can be picked here).
func engineHost(endpoint string) (host string, local bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("docker endpoint %q: %w", endpoint, err)
	}
	switch u.Scheme {
	case "unix", "npipe":
		return "127.0.0.1", true, nil
	default:
		return u.Hostname(), false, nil
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// refresh reads the published port from the engine; it can change across Start only when
// the engine is remote.
func (p *Postgres) refresh(ctx context.Context) error {
	c, err := p.pool.Client.InspectContainerWithContext(p.res.Container.ID, ctx)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	bindings := c.NetworkSettings.Ports["5432/tcp"]
	if len(bindings) == 0 || bindings[0].HostPort == "" {
		return errors.New("inspect container: port 5432/tcp is not published")
	}
	p.mu.Lock()
	p.port = bindings[0].HostPort
	p.mu.Unlock()
	return nil
}

// waitReady waits until the server accepts a real TCP connection. The images' init-time
// temporary server listens on the Unix socket only, so success means the final server.
func (p *Postgres) waitReady(ctx context.Context) error {
	var last, stop error
	err := p.pool.Retry(func() error {
		if stop = ctx.Err(); stop != nil {
			return nil
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(attemptCtx, p.DSN("postgres"))
		if err == nil {
			err = conn.Ping(attemptCtx)
			conn.Close(attemptCtx)
		}
		if err == nil {
			return nil
		}
		last = err
		if c, ierr := p.pool.Client.InspectContainerWithContext(p.res.Container.ID, ctx); ierr == nil && !c.State.Running {
			stop = fmt.Errorf("container exited with status %d", c.State.ExitCode)
			return nil
		}
		return err
	})
	switch {
	case stop != nil:
		return fmt.Errorf("wait for postgres: %w (last connection error: %v)", stop, last)
	case err != nil:
		return fmt.Errorf("wait for postgres: %w", err)
	}
	return nil
}

func (p *Postgres) logs(ctx context.Context) string {
	if p.local != nil {
		return ""
	}
	return containerLogs(ctx, p.pool, p.res.Container.ID)
}

// containerLogs returns the last lines of a container's output.
func containerLogs(ctx context.Context, pool *dockertest.Pool, id string) string {
	var buf bytes.Buffer
	_ = pool.Client.Logs(docker.LogsOptions{
		Context:      ctx,
		Container:    id,
		OutputStream: &buf,
		ErrorStream:  &buf,
		Stdout:       true,
		Stderr:       true,
		Tail:         "40",
	})
	return buf.String()
}

// ContainerID returns the Docker ID of the container; "" for a server from the
// host's binaries.
func (p *Postgres) ContainerID() string {
	if p.local != nil {
		return ""
	}
	return p.res.Container.ID
}

// InDocker reports whether p is a container (not a server from the host's binaries):
// Pause, Disconnect and the container's network need one.
func (p *Postgres) InDocker() bool { return p.local == nil }

// errNotDocker is what the container-only methods return for a host server.
var errNotDocker = errors.New("the server is not in Docker (started from the host's binaries)")

// DSN returns a URL connecting to database db as the superuser over TCP.
func (p *Postgres) DSN(db string) string {
	p.mu.Lock()
	port := p.port
	p.mu.Unlock()
	user := url.UserPassword(Superuser, password)
	if p.local != nil {
		user = url.User(Superuser) // trust authentication
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     user,
		Host:     net.JoinHostPort(p.host, port),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// ReplicationDSN returns DSN(db) for a logical replication connection
// (replication=database), as pglogrepl expects.
func (p *Postgres) ReplicationDSN(db string) string {
	return p.DSN(db) + "&replication=database"
}

// Exec runs sql with args in database db on a connection of its own.
func (p *Postgres) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, p.DSN(db))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", db, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("exec in %s: %w", db, err)
	}
	return nil
}

// Stop shuts the server down with a fast shutdown (SIGINT) and waits until the container
// has exited. (A plain "docker stop" would not do: dockertest gives its containers the
// stop signal SIGWINCH, which PostgreSQL ignores, so it would wait and then SIGKILL.)
func (p *Postgres) Stop(ctx context.Context) error {
	if p.local != nil {
		p.local.Kill()
		return nil
	}
	id := p.res.Container.ID
	err := p.pool.Client.KillContainer(docker.KillContainerOptions{ID: id, Signal: docker.SIGINT, Context: ctx})
	if err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	if _, err := p.pool.Client.WaitContainerWithContext(id, ctx); err != nil {
		return fmt.Errorf("stop postgres: wait for exit: %w", err)
	}
	return nil
}

// Start starts the stopped container again and waits until the server accepts
// connections. The data directory survives; DSNs stay valid for a local engine.
func (p *Postgres) Start(ctx context.Context) error {
	if p.local != nil {
		return p.local.Restart(ctx)
	}
	if err := p.pool.Client.StartContainerWithContext(p.res.Container.ID, nil, ctx); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	_ = p.res.Expire(expireSeconds) // the previous expiry ended with the stop
	if err := p.refresh(ctx); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	if err := p.waitReady(ctx); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// Pause freezes every process of the container (docker pause): connections stay open
// but nothing answers, like a network cut without resets.
func (p *Postgres) Pause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.local != nil {
		return errNotDocker
	}
	if err := p.pool.Client.PauseContainer(p.res.Container.ID); err != nil {
		return fmt.Errorf("pause postgres: %w", err)
	}
	return nil
}

// Unpause resumes a paused container.
func (p *Postgres) Unpause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.local != nil {
		return errNotDocker
	}
	if err := p.pool.Client.UnpauseContainer(p.res.Container.ID); err != nil {
		return fmt.Errorf("unpause postgres: %w", err)
	}
	return nil
}

// Disconnect cuts the container off every Docker network it is on (docker network
// disconnect): the engine's proxy for the published port goes away with the network, so
// clients' connections through it end, new ones are refused, and nothing reaches the
// server until Reconnect. The server keeps running; its side of the old connections
// learns of the cut only when it sends (or by wal_sender_timeout, tcp_keepalives_*).
func (p *Postgres) Disconnect(ctx context.Context) error {
	if p.local != nil {
		return errNotDocker
	}
	c, err := p.pool.Client.InspectContainerWithContext(p.res.Container.ID, ctx)
	if err != nil {
		return fmt.Errorf("disconnect postgres: %w", err)
	}
	for name, n := range c.NetworkSettings.Networks {
		err := p.pool.Client.DisconnectNetwork(n.NetworkID, docker.NetworkConnectionOptions{
			Container: p.res.Container.ID, Force: true, Context: ctx,
		})
		if err != nil {
			return fmt.Errorf("disconnect postgres from network %s: %w", name, err)
		}
	}
	return nil
}

// Reconnect attaches the container again to the networks it was created on, which
// Disconnect took it off, and waits until the server accepts connections. The published
// port is kept (the engine maps it again), so DSNs stay valid.
func (p *Postgres) Reconnect(ctx context.Context) error {
	if p.local != nil {
		return errNotDocker
	}
	c, err := p.pool.Client.InspectContainerWithContext(p.res.Container.ID, ctx)
	if err != nil {
		return fmt.Errorf("reconnect postgres: %w", err)
	}
	for name, n := range p.res.Container.NetworkSettings.Networks {
		if _, ok := c.NetworkSettings.Networks[name]; ok {
			continue
		}
		err := p.pool.Client.ConnectNetwork(n.NetworkID, docker.NetworkConnectionOptions{
			Container: p.res.Container.ID, Context: ctx,
		})
		if err != nil {
			return fmt.Errorf("reconnect postgres to network %s: %w", name, err)
		}
	}
	if err := p.refresh(ctx); err != nil {
		return fmt.Errorf("reconnect postgres: %w", err)
	}
	if err := p.waitReady(ctx); err != nil {
		return fmt.Errorf("reconnect postgres: %w", err)
	}
	return nil
}

// Purge removes the container and its volumes, whatever its state.
func (p *Postgres) Purge() error {
	if p.local != nil {
		return p.local.Stop()
	}
	return p.pool.Purge(p.res)
}
