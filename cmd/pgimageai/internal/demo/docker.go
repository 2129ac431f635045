package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The demo's PostgreSQL comes from the machine's server binaries or, when there are none,
// from a Docker engine: PGIMAGEAI_DEMO_SERVER picks (auto, the default: binaries first;
// local; docker), PGIMAGEAI_DEMO_IMAGE names the image.
const (
	demoServerEnv = "PGIMAGEAI_DEMO_SERVER"
	demoImageEnv  = "PGIMAGEAI_DEMO_IMAGE"
	// demoImage is the official image; demoLocalImage is the one scripts/build-test-image.sh
	// builds from Debian packages where no registry can be reached.
	demoImage      = "postgres:17"
	demoLocalImage = "pgimageai-postgres:17"
	demoLabel      = "org.pgimageai.demo"
	pullTimeout    = 2 * time.Minute
)

// errNoDocker reports that no Docker engine answered.
var errNoDocker = errors.New("no Docker engine answers")

// docker runs the docker CLI and returns its trimmed standard output; a failure carries
// its standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("docker %s: %s", args[0], msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerImage picks the image for the demo's server and says how it got it: the one
// PGIMAGEAI_DEMO_IMAGE names; else postgres:17 when present or pullable; else the locally
// built pgimageai-postgres:17.
func dockerImage(ctx context.Context, getenv func(string) string) (image, how string, err error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return "", "", fmt.Errorf("%w (no docker command)", errNoDocker)
	}
	ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := docker(ictx, "version", "--format", "{{.Server.Version}}"); err != nil {
		return "", "", fmt.Errorf("%w: %v", errNoDocker, err)
	}
	present := func(image string) bool {
		_, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", image)
		return err == nil
	}
	if image := getenv(demoImageEnv); image != "" {
		if present(image) {
			return image, "chosen by " + demoImageEnv, nil
		}
		pctx, cancel := context.WithTimeout(ctx, pullTimeout)
		defer cancel()
		if _, err := docker(pctx, "pull", "-q", image); err != nil {
			return "", "", fmt.Errorf("%s=%s is not present and cannot be pulled: %v", demoImageEnv, image, err)
		}
		return image, "chosen by " + demoImageEnv + ", pulled", nil
	}
	if present(demoImage) {
		return demoImage, "the official image, present locally", nil
	}
	pctx, cancel := context.WithTimeout(ctx, pullTimeout)
	defer cancel()
	_, pullErr := docker(pctx, "pull", "-q", demoImage)
	if pullErr == nil {
		return demoImage, "the official image, pulled", nil
	}
	if present(demoLocalImage) {
		return demoLocalImage, "built locally from Debian packages; " + demoImage + " cannot be pulled", nil
	}
	return "", "", fmt.Errorf("Docker answers, but %s cannot be pulled (%v) and %s, which scripts/build-test-image.sh builds offline, is not present",
		demoImage, pullErr, demoLocalImage)
}

// startDockerCluster starts a throwaway PostgreSQL container from image, published on a
// free port of 127.0.0.1, with trust authentication and logical decoding. On error the
// container is removed again.
func startDockerCluster(ctx context.Context, image, how string) (_ *cluster, err error) {
	id, err := docker(ctx, "run", "--detach", "--rm",
		"--label", demoLabel+"=1",
		"--publish", "127.0.0.1::5432",
		"--env", "POSTGRES_HOST_AUTH_METHOD=trust",
		"--env", "POSTGRES_USER=postgres",
		image,
		"postgres", "-c", "wal_level=logical", "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=30")
	if err != nil {
		return nil, err
	}
	c := &cluster{Container: id, Image: image, ImageHow: how}
	c.pgInstall.BinDir = "Docker image " + image
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	addr, err := docker(ctx, "port", id, "5432/tcp")
	if err != nil {
		return nil, err
	}
	addr, _, _ = strings.Cut(addr, "\n") // one line per address family
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		c.Port, err = strconv.Atoi(port)
	}
	if err != nil {
		return nil, fmt.Errorf("docker port %s: %q: %v", id, addr, err)
	}
	c.exited = make(chan struct{})
	go func() {
		_, _ = docker(context.Background(), "wait", id)
		close(c.exited)
	}()
	// The images' init-time server listens on the Unix socket only: a TCP connection
	// means the final server.
	return c, c.waitReady(ctx, 2*time.Minute)
}

// stopContainer removes the demo's container with its anonymous volume (the data).
func (c *cluster) stopContainer() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := docker(ctx, "rm", "--force", "--volumes", c.Container)
	if err != nil && !strings.Contains(err.Error(), "No such container") {
		return err
	}
	return nil
}

// demoServerMode reads PGIMAGEAI_DEMO_SERVER.
func demoServerMode(getenv func(string) string) (string, error) {
	switch m := getenv(demoServerEnv); m {
	case "", "auto":
		return "auto", nil
	case "local", "docker":
		return m, nil
	default:
		return "", fmt.Errorf("%w: %s must be auto, local or docker, got %q", ErrUsage, demoServerEnv, m)
	}
}

// startDemoServer starts the demo's throwaway PostgreSQL: from the machine's binaries,
// or (mode docker, or auto without binaries) in Docker.
func startDemoServer(ctx context.Context, getenv func(string) string) (*cluster, error) {
	mode, err := demoServerMode(getenv)
	if err != nil {
		return nil, err
	}
	if mode != "docker" {
		pg, err := findPostgres(pgBinDirs(), postgresVersion)
		if err == nil {
			return startCluster(ctx, pg)
		}
		if mode == "local" || !errors.Is(err, errNoPostgres) {
			return nil, err
		}
	}
	image, how, derr := dockerImage(ctx, getenv)
	if derr != nil {
		if mode == "auto" && errors.Is(derr, errNoDocker) {
			return nil, fmt.Errorf("%w; nor does a Docker engine answer, which the demo would use instead (%v)", errNoPostgres, derr)
		}
		return nil, derr
	}
	return startDockerCluster(ctx, image, how)
}

// shortID is the 12-character form of a container ID that docker ps shows.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
