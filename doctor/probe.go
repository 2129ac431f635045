package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// probeTimeout bounds the one request doctor sends to a model's server.
const probeTimeout = 10 * time.Second

// ErrUnreachable: a model's server did not answer, or answered that it is
// failing (5xx), or refused the key (401, 403).
var ErrUnreachable = errors.New("server does not answer")

// ProbeHTTP sends GET {baseURL}/models — the model listing of OpenAI's API,
// which OpenAI-compatible servers, vLLM, llama.cpp's llama-server, Voyage and
// Jina serve; no image, nothing paid for — with the key as a Bearer token
// when there is one. Any answer but 401, 403 and 5xx shows the server
// reachable (a 404 of a server without the listing included). Redirects are
// not followed, so the key never goes to another origin.
func ProbeHTTP(ctx context.Context, baseURL, key string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	url := strings.TrimRight(baseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := provider.NewHTTPClient(nil)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: GET %s: HTTP %d: the key is refused", ErrUnreachable, url, resp.StatusCode)
	case resp.StatusCode >= 500:
		return fmt.Errorf("%w: GET %s: HTTP %d", ErrUnreachable, url, resp.StatusCode)
	}
	return nil
}
