package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

const (
	// LlamaImageEnv names the environment variable that selects the llama-server image.
	LlamaImageEnv = "PGIMAGEAI_LLAMA_IMAGE"
	// DefaultLlamaImage is built by scripts/build-llama-image.sh (scripts/test builds it
	// when it is missing): Debian's llama.cpp-tools with a tiny random-weight vision model.
	DefaultLlamaImage = "pgimageai-llama:test"
	llamaPort         = "8080/tcp"
)

// Llama is a real llama.cpp llama-server in a Docker container, serving a tiny
// random-weight vision model (a 64-wide 'llama' language model and a CLIP projector)
// with --embeddings and mean pooling: /v1/chat/completions and /v1/embeddings alike.
type Llama struct {
	pool *dockertest.Pool
	res  *dockertest.Resource
	url  string // http://host:port
}

// StartLlama starts a llama-server container for tb alone and purges it in tb.Cleanup;
// args go to llama-server after the image's own (e.g. "--parallel", "4").
// Like the PostgreSQL harness it fails tb when the image or the engine is missing, and
// skips only without an engine under -short outside CI.
func StartLlama(tb testing.TB, args ...string) *Llama {
	tb.Helper()
	l, err := startLlama(context.Background(), args...)
	if err != nil {
		fail(tb, err)
	}
	tb.Cleanup(func() {
		if err := l.pool.Purge(l.res); err != nil {
			tb.Errorf("purge llama-server container: %v", err)
		}
	})
	return l
}

// URL returns the server's root URL (http://host:port, no trailing slash); the
// OpenAI-compatible API is under URL()+"/v1".
func (l *Llama) URL() string { return l.url }

func startLlama(ctx context.Context, args ...string) (*Llama, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDockerUnavailable, err)
	}
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDockerUnavailable, err)
	}
	image := os.Getenv(LlamaImageEnv)
	if image == "" {
		image = DefaultLlamaImage
	}
	if _, err := pool.Client.InspectImage(image); err != nil {
		return nil, fmt.Errorf("image %s is not present (%v); build it with scripts/build-llama-image.sh, or run scripts/test", image, err)
	}
	host, local, err := engineHost(pool.Client.Endpoint())
	if err != nil {
		return nil, err
	}
	// A local engine gets a fixed port so that the URL survives Restart; another process
	// may take the free port before Docker binds it, hence the retries.
	var res *dockertest.Resource
	for attempt := 1; ; attempt++ {
		binding := docker.PortBinding{}
		if local {
			if binding.HostPort, err = freePort(); err != nil {
				return nil, err
			}
			binding.HostIP = "127.0.0.1"
		}
		res, err = runLlama(pool, image, binding, args)
		if err == nil || !local || attempt == 3 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", image, err)
	}
	_ = res.Expire(expireSeconds)
	l := &Llama{pool: pool, res: res, url: "http://" + net.JoinHostPort(host, res.GetPort(llamaPort))}
	if err := l.waitReady(ctx); err != nil {
		logs := containerLogs(ctx, pool, res.Container.ID)
		_ = pool.Purge(res)
		return nil, fmt.Errorf("start %s: %w\ncontainer log (tail):\n%s", image, err, logs)
	}
	return l, nil
}

// runLlama creates and starts the container; one that was created but failed to start
// is removed again.
func runLlama(pool *dockertest.Pool, image string, binding docker.PortBinding, args []string) (*dockertest.Resource, error) {
	repo, tag := splitImage(image)
	name := fmt.Sprintf("pgimageai-llama-%d-%d", os.Getpid(), containerSeq.Add(1))
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Name:         name,
		Repository:   repo,
		Tag:          tag,
		Labels:       map[string]string{label: "integration"},
		PortBindings: map[docker.Port][]docker.PortBinding{llamaPort: {binding}},
		ExposedPorts: []string{llamaPort},
		Cmd:          args, // after the image's ENTRYPOINT
	}, func(hc *docker.HostConfig) {
		hc.AutoRemove = false // Restart needs the container to outlive its process
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		_ = pool.RemoveContainerByName(name)
		return nil, err
	}
	return res, nil
}

// Restart restarts llama-server (docker restart, SIGKILL after 1s) and waits until it is
// ready again. The URL stays valid for a local engine; the server draws a new media marker.
func (l *Llama) Restart(ctx context.Context) error {
	if err := l.pool.Client.RestartContainer(l.res.Container.ID, 1); err != nil {
		return fmt.Errorf("restart llama-server: %w", err)
	}
	_ = l.res.Expire(expireSeconds)
	if err := l.waitReady(ctx); err != nil {
		return fmt.Errorf("restart llama-server: %w", err)
	}
	return nil
}

// waitReady waits until GET /health answers 200: the model is loaded.
func (l *Llama) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.url+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /health: HTTP %d", resp.StatusCode)
		}
		last = err
		if c, ierr := l.pool.Client.InspectContainerWithContext(l.res.Container.ID, ctx); ierr == nil && !c.State.Running {
			return fmt.Errorf("container exited with status %d", c.State.ExitCode)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("wait for llama-server: %w", ctx.Err()), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
