package integration_test

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestStandbyTakesOver runs two `pgimageai run` on one slot: exactly one
// streams, the other waits as a standby. SIGKILL of the leader in the
// middle of a backlog: the standby takes over within 15 s, and the target
// ends up exactly as one uninterrupted run would leave it.
func TestStandbyTakesOver(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	// The provider answers the first 200 requests; later ones wait at a
	// gate that opens only after A is killed, so that the kill always lands
	// in the middle of A's backlog, whatever the machine's speed.
	const answered = 200
	gate := make(chan struct{})
	openGate := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(openGate)
	var served atomic.Int64
	ai.Set(5*time.Millisecond, func(r aiRequest) (int, string) {
		if served.Add(1) > answered {
			<-gate
		}
		return http.StatusOK, captionOf(r.DataURL)
	})
	s.model(t, "vision", ai, `{"max_concurrency": 8}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")

	addrA, addrB := freeAddr(t), freeAddr(t)
	a := s.runProcess(t, "PGIMAGEAI_METRICS_ADDR="+addrA)
	waitHealth(t, "http://"+addrA, 20*time.Second, http.StatusOK, "streaming")
	b := s.runProcess(t, "PGIMAGEAI_METRICS_ADDR="+addrB, "PGIMAGEAI_LOG_FORMAT=json")
	waitHealth(t, "http://"+addrB, 20*time.Second, http.StatusServiceUnavailable, "standby")

	leaderA := statusLeader(t, s)
	if leaderA == 0 {
		t.Error("status shows no leader while A streams")
	}

	want := map[int]string{}
	insertRows(t, s, 1, 501, 10, want)
	waitResults(t, s, 100, "before the kill")
	integration.WaitFor(t, 60*time.Second, "A to reach the gate", func() bool { return ai.Count() > answered })
	// Exactly one streams: one walsender on this database, and B still waits.
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender' AND datname = current_database()"); n != 1 {
		t.Errorf("%d walsenders on the database, want 1", n)
	}
	if code, state := health(t, "http://"+addrB); code != http.StatusServiceUnavailable || state != "standby" {
		t.Errorf("B: /healthz %d %s, want 503 standby", code, state)
	}
	if code, state := probe(t, "http://"+addrB, "/readyz"); code != http.StatusOK || state != "standby" {
		t.Errorf("B: /readyz %d %s, want 200 standby (a connected standby is ready)", code, state)
	}
	if m := scrape(t, "http://"+addrB); m["pgimageai_leader"] != 0 || m[`pgimageai_changes_total{op="insert"}`] != 0 {
		t.Errorf("standby B: leader %v, inserts read %v; want 0 and 0", m["pgimageai_leader"], m[`pgimageai_changes_total{op="insert"}`])
	}

	if err := a.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("A exited cleanly on SIGKILL?")
	}
	killed := time.Now()
	atKill, before := captions(t, s.conn), ai.Count()
	openGate()
	if len(atKill) > answered {
		t.Fatalf("A committed %d rows with only %d answers", len(atKill), answered)
	}
	waitHealth(t, "http://"+addrB, 15*time.Second, http.StatusOK, "streaming")
	t.Logf("standby streaming %s after the kill", time.Since(killed).Round(time.Millisecond))
	if leaderB := statusLeader(t, s); leaderB == 0 || leaderB == leaderA {
		t.Errorf("status shows leader pid %d after the takeover (A's was %d)", leaderB, leaderA)
	}
	insertRows(t, s, 501, 801, 10, want)
	s.sync(t, 120*time.Second)
	t.Logf("backlog applied %s after the kill", time.Since(killed).Round(time.Millisecond))
	if err := b.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop of B: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), want)

	// B requested exactly the rows A had not committed, each once.
	assertRequestedOnceAfter(t, ai, before, atKill, 800)
	after := ai.Count() - before
	t.Logf("A committed %d rows and made %d requests; B made %d requests for the other %d rows", len(atKill), before, after, 800-len(atKill))
	// B logs JSON (--log-format json): one object per line, with the
	// standby's story in it.
	logB, _ := os.ReadFile(b.log.Name())
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(logB)), "\n") {
		var rec struct{ Time, Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time == "" || rec.Level == "" || rec.Msg == "" {
			t.Errorf("B's log line is not a JSON record (%v): %s", err, line)
			continue
		}
		msgs = append(msgs, rec.Msg)
	}
	for _, want := range []string{"standby: another pgimageai streams this slot; waiting to take over", "standby taking over: leader lock acquired", "stopped"} {
		if !slices.Contains(msgs, want) {
			t.Errorf("B's log lacks %q; messages: %q", want, msgs)
		}
	}
}

// statusLeader returns the PID of the leader's lock session as
// `pgimageai status --format json` shows it; 0 when it shows none.
func statusLeader(t testing.TB, s *source) int {
	t.Helper()
	out, errOut, code := cli(t, nil, "status", "--format", "json", "--dsn", s.db.DSN(), "--slot", s.slot)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var doc struct {
		Slot struct {
			Leader *struct {
				PID         int    `json:"pid"`
				Application string `json:"application"`
			} `json:"leader"`
		} `json:"slot"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	if doc.Slot.Leader == nil {
		return 0
	}
	if app := doc.Slot.Leader.Application; app != "pgimageai" {
		t.Errorf("leader's application_name %q, want pgimageai", app)
	}
	return doc.Slot.Leader.PID
}
