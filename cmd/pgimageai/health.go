package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// Probes of pgimageai health: the paths of the metrics endpoint (metrics.Handler).
var probes = map[string]string{"ready": "/readyz", "live": "/livez", "leader": "/healthz"}

// healthTimeout bounds one health check, below the usual probe timeouts.
const healthTimeout = 3 * time.Second

const healthHelp = `
health asks the metrics endpoint of a pgimageai run in the same network namespace (the same
container or pod) and exits 0 when it answers 200, 1 otherwise: a health check for images
without curl (docker HEALTHCHECK, Compose healthcheck). The address is --metrics-addr /
PGIMAGEAI_METRICS_ADDR, with 127.0.0.1 for an empty or wildcard host.
  --probe ready   /readyz: streaming, or a standby connected to the source (default)
  --probe live    /livez: the process serves HTTP
  --probe leader  /healthz: this instance streams
`

// health checks the metrics endpoint of a running bridge.
func health(ctx context.Context, c config, stdout, _ io.Writer) error {
	if c.MetricsAddr == "" {
		return fmt.Errorf("%w: health needs --metrics-addr or PGIMAGEAI_METRICS_ADDR (the address pgimageai run serves /readyz on)", errUsage)
	}
	u, err := healthURL(c.MetricsAddr, probes[c.Query.Probe])
	if err != nil {
		return fmt.Errorf("%w: --metrics-addr: %v", errUsage, err)
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	resp, err := provider.NewHTTPClient(nil).Do(req) // a redirect is a failed check, not followed
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %s", u, resp.StatusCode, text)
	}
	fmt.Fprintln(stdout, text)
	return nil
}

// healthURL is the URL of path on the metrics endpoint listening at addr (host:port),
// reached over loopback when addr listens on every address.
func healthURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("%q has no fixed port", addr)
	}
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
