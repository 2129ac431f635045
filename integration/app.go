package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

const (
	// AppImageEnv names the environment variable that selects pgimageai's own image.
	AppImageEnv = "PGIMAGEAI_IMAGE"
	// DefaultAppImage is built by scripts/build-image.sh (scripts/test builds it when it is
	// missing or out of date): the static binary in an image with no base.
	DefaultAppImage = "pgimageai:dev"
	appMetricsPort  = "9187/tcp"
)

// NetworkDSN returns a URL connecting to the database as the superuser from another
// container on the server's Docker network (its address there and port 5432), and the
// network's name.
func (d *Database) NetworkDSN(ctx context.Context) (dsn, network string, err error) {
	if !d.pg.InDocker() {
		return "", "", errNotDocker
	}
	c, err := d.pg.pool.Client.InspectContainerWithContext(d.pg.res.Container.ID, ctx)
	if err != nil {
		return "", "", fmt.Errorf("inspect postgres container: %w", err)
	}
	for name, n := range c.NetworkSettings.Networks {
		if n.IPAddress == "" {
			continue
		}
		u := url.URL{
			Scheme:   "postgres",
			User:     url.UserPassword(Superuser, password),
			Host:     net.JoinHostPort(n.IPAddress, "5432"),
			Path:     "/" + d.Name,
			RawQuery: "sslmode=disable",
		}
		return u.String(), name, nil
	}
	return "", "", errors.New("the postgres container has no network address")
}

// App is a pgimageai container started from the image of AppImageEnv.
type App struct {
	pool *dockertest.Pool
	res  *dockertest.Resource
	host string
}

// StartApp starts pgimageai's image on network with env and (when not empty) cmd as the
// command after the entrypoint, and purges it in tb.Cleanup. The metrics port 9187 is
// published; MetricsURL reaches it.
func StartApp(tb testing.TB, network string, env, cmd []string) *App {
	tb.Helper()
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		fail(tb, fmt.Errorf("%w: %v", ErrDockerUnavailable, err))
	}
	image := os.Getenv(AppImageEnv)
	if image == "" {
		image = DefaultAppImage
	}
	if _, err := pool.Client.InspectImage(image); err != nil {
		tb.Fatalf("integration: image %s is not present (%v); build it with scripts/build-image.sh, or run scripts/test", image, err)
	}
	host, local, err := engineHost(pool.Client.Endpoint())
	if err != nil {
		tb.Fatal(err)
	}
	binding := docker.PortBinding{}
	if local {
		binding.HostIP = "127.0.0.1"
	}
	repo, tag := splitImage(image)
	name := fmt.Sprintf("pgimageai-app-%d-%d", os.Getpid(), containerSeq.Add(1))
	opts := &dockertest.RunOptions{
		Name:         name,
		Repository:   repo,
		Tag:          tag,
		Env:          env,
		Cmd:          cmd,
		Labels:       map[string]string{label: "integration"},
		PortBindings: map[docker.Port][]docker.PortBinding{appMetricsPort: {binding}},
		ExposedPorts: []string{appMetricsPort},
	}
	if network != "" && network != "bridge" {
		opts.NetworkID = network
	}
	res, err := pool.RunWithOptions(opts, func(hc *docker.HostConfig) {
		hc.AutoRemove = false // the exit code and the logs are read after the exit
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		_ = pool.RemoveContainerByName(name)
		tb.Fatalf("integration: run %s: %v", image, err)
	}
	_ = res.Expire(expireSeconds)
	a := &App{pool: pool, res: res, host: host}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("pgimageai container log:\n%s", a.Logs(context.Background()))
		}
		if err := pool.Purge(res); err != nil {
			tb.Errorf("purge pgimageai container: %v", err)
		}
	})
	return a
}

// MetricsURL returns http://host:port of the published metrics port.
func (a *App) MetricsURL() string {
	return "http://" + net.JoinHostPort(a.host, a.res.GetPort(appMetricsPort))
}

// Inspect returns the container as the engine describes it.
func (a *App) Inspect(ctx context.Context) (*docker.Container, error) {
	return a.pool.Client.InspectContainerWithContext(a.res.Container.ID, ctx)
}

// Running reports whether the container still runs.
func (a *App) Running(ctx context.Context) bool {
	c, err := a.Inspect(ctx)
	return err == nil && c.State.Running
}

// Signal sends sig to the container's main process (pgimageai itself: there is no init).
func (a *App) Signal(ctx context.Context, sig docker.Signal) error {
	return a.pool.Client.KillContainer(docker.KillContainerOptions{ID: a.res.Container.ID, Signal: sig, Context: ctx})
}

// Wait waits until the container exits and returns its exit code.
func (a *App) Wait(ctx context.Context) (int, error) {
	return a.pool.Client.WaitContainerWithContext(a.res.Container.ID, ctx)
}

// Exec runs cmd in the container and returns its exit code and output.
func (a *App) Exec(ctx context.Context, cmd ...string) (int, string, error) {
	var out bytes.Buffer
	code, err := a.res.Exec(cmd, dockertest.ExecOptions{StdOut: &out, StdErr: &out})
	return code, out.String(), err
}

// File returns the contents of the file at path in the container (a tar stream of it).
func (a *App) File(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := a.pool.Client.DownloadFromContainer(a.res.Container.ID, docker.DownloadFromContainerOptions{
		Path: path, OutputStream: &buf, Context: ctx,
	})
	return buf.Bytes(), err
}

// Logs returns the container's whole output, stdout and stderr.
func (a *App) Logs(ctx context.Context) string {
	var buf bytes.Buffer
	_ = a.pool.Client.Logs(docker.LogsOptions{
		Context: ctx, Container: a.res.Container.ID,
		OutputStream: &buf, ErrorStream: &buf, Stdout: true, Stderr: true,
	})
	return buf.String()
}
