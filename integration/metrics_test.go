package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/metrics"
)

// scrape reads a Prometheus text exposition into series → value, the
// series written as the exposition writes it: name{label="v",...}.
func scrape(t testing.TB, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// health returns the status code and state of /healthz.
func health(t testing.TB, base string) (int, string) {
	t.Helper()
	return probe(t, base, "/healthz")
}

// probe returns the status code and state of a health check path.
func probe(t testing.TB, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		State string `json:"state"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s body: %v", path, err)
	}
	return resp.StatusCode, body.State
}

// waitHealth waits until /healthz answers code with state and returns how
// long that took.
func waitHealth(t testing.TB, base string, timeout time.Duration, code int, state string) time.Duration {
	t.Helper()
	t0 := time.Now()
	var gotCode int
	var gotState string
	integration.WaitFor(t, timeout, fmt.Sprintf("/healthz %d %s", code, state), func() bool {
		gotCode, gotState = health(t, base)
		return gotCode == code && gotState == state
	})
	return time.Since(t0)
}

// TestMetricsAndHealth runs a bridge with metrics, through inserts, an
// update, a delete, a retried call, a cache hit, a bad image and a NULL,
// scrapes /metrics and checks every counter against what happened; then it
// stops PostgreSQL and checks that /healthz says disconnected (503) until the
// stream is back (200).
func TestMetricsAndHealth(t *testing.T) {
	pg := integration.StartPostgres(t)
	s := newSourceOn(t, pg.NewDatabase(t))
	ai := newFakeAI(t)
	retried := pngImage(t, 1)
	var failedOnce atomic.Bool
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.DataURL == magic.DataURL(magic.PNG, retried) && !failedOnce.Swap(true) {
			return http.StatusServiceUnavailable, "overloaded"
		}
		return http.StatusOK, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{"max_retries": 3}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	m := metrics.New()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if code, state := health(t, srv.URL); code != http.StatusServiceUnavailable || state != "standby" {
		t.Errorf("before Run: /healthz %d %s, want 503 standby", code, state)
	}

	cfg := s.config(t)
	cfg.Metrics = m
	_, stop := s.start(t, cfg)
	waitHealth(t, srv.URL, 10*time.Second, http.StatusOK, "streaming")

	// Rows 1-5 distinct PNGs; 6 repeats 5's image in a later transaction
	// (a cache hit); 7 is not an image; 8 is NULL.
	for id := 1; id <= 5; id++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
	}
	s.sync(t, 30*time.Second)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (6, $1)", pngImage(t, 5))
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (7, 'not an image'::bytea), (8, NULL)")
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 2", pngImage(t, 102))
	beforeDelete := time.Now()
	s.exec(t, "DELETE FROM public.photos WHERE id = 3")
	s.sync(t, 30*time.Second)

	got := scrape(t, srv.URL)
	want := map[string]float64{
		`pgimageai_changes_total{op="insert"}`:                                          8,
		`pgimageai_changes_total{op="update"}`:                                          1,
		`pgimageai_changes_total{op="delete"}`:                                          1,
		`pgimageai_provider_calls_total{model="vision",outcome="ok",rule="caption"}`:    6,
		`pgimageai_provider_call_duration_seconds_count{model="vision",rule="caption"}`: 6,
		`pgimageai_provider_retries_total{model="vision"}`:                              1,
		`pgimageai_cache_hits_total{rule="caption"}`:                                    1,
		`pgimageai_errors_total{reason="unknown_format"}`:                               1,
		`pgimageai_rows_written_total{op="upsert"}`:                                     9,
		`pgimageai_rows_written_total{op="delete"}`:                                     1,
		`pgimageai_bytes_in_flight`:                                                     0,
		`pgimageai_streaming`:                                                           1,
		`pgimageai_leader`:                                                              1,
	}
	for series, w := range want {
		if v, ok := got[series]; !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, w)
		}
	}
	if n := ai.Count(); n != 7 { // 6 calls, one of them retried once
		t.Errorf("%d provider requests, want 7", n)
	}
	// The lag is what the server reported beyond the confirmed position;
	// after a sync it is at most the WAL of the sync itself and keepalives.
	if lag, ok := got["pgimageai_replication_lag_bytes"]; !ok || lag < 0 || lag > 1<<20 {
		t.Errorf("replication lag %v (present %v), want within 1 MB", lag, ok)
	}
	// The last batch written ends with the DELETE, or with the sync's
	// transaction when both were written together: at or after the
	// DELETE's commit, and not in the future.
	if ts := got["pgimageai_last_applied_commit_timestamp_seconds"]; ts < float64(beforeDelete.Unix()-1) || ts > float64(time.Now().Unix()+1) {
		t.Errorf("last_applied_commit_timestamp_seconds %v, want the commit time of the last change (%d..now)", ts, beforeDelete.Unix())
	}
	if lsn := got["pgimageai_confirmed_lsn"]; lsn <= 0 {
		t.Errorf("confirmed_lsn %v, want the slot's position", lsn)
	}

	// A server outage: /healthz goes 503 while the stream is down, and back.
	ctx := context.Background()
	t0 := time.Now()
	if err := pg.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("server stopped in %s", time.Since(t0).Round(time.Millisecond))
	down := waitHealth(t, srv.URL, 10*time.Second, http.StatusServiceUnavailable, "disconnected")
	t.Logf("healthz 503 disconnected %s after the stop returned", down.Round(time.Millisecond))
	t1 := time.Now()
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	back := waitHealth(t, srv.URL, 60*time.Second, http.StatusOK, "streaming")
	t.Logf("healthz 200 again %s after the server start was called (server start took part of it: %s)",
		back.Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
	if r := scrape(t, srv.URL)["pgimageai_replication_reconnects_total"]; r < 1 {
		t.Errorf("reconnects_total %v after a server restart, want >= 1", r)
	}
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// The kernel may hand the port just closed out again: never twice
		// in one test binary, so that two processes of a test never collide.
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}

// handedOut are the addresses freeAddr returned.
var handedOut sync.Map
