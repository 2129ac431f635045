package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/replication"
)

// flakyAI is a fakeAI on a fixed address that can stop listening (its
// connections are refused), answer 503, hang past the model's timeout, or
// answer; it counts the answers (200s) per image.
type flakyAI struct {
	*fakeAI
	addr string

	mu       sync.Mutex
	srv      *http.Server
	answered map[string]int // 200s by data URL
	order    []string       // data URLs of the 200s, in order
}

func newFlakyAI(t *testing.T) *flakyAI {
	t.Helper()
	f := &flakyAI{fakeAI: newFakeAI(t), answered: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serveOn(ln)
	t.Cleanup(func() { f.refuse() })
	f.answer()
	return f
}

// BaseURL is the flaky server's, whatever its mode.
func (f *flakyAI) BaseURL() string { return "http://" + f.addr + "/v1" }

func (f *flakyAI) serveOn(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(f.fakeAI.serve)}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

// refuse stops listening: every connection is refused.
func (f *flakyAI) refuse() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// listen listens again on the same address.
func (f *flakyAI) listen(t *testing.T) {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			f.serveOn(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("listen again on %s: %v", f.addr, err)
}

// fail503 answers every request with a 503 (no Retry-After).
func (f *flakyAI) fail503() {
	f.SetHook(nil)
	f.Set(0, func(aiRequest) (int, string) { return http.StatusServiceUnavailable, "the server is overloaded" })
}

// hang holds every request until the client gives up.
func (f *flakyAI) hang() {
	f.SetHook(func(w http.ResponseWriter, r *http.Request, _ aiRequest) bool {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		return true
	})
}

// answer answers every request with the image's caption.
func (f *flakyAI) answer() {
	f.SetHook(nil)
	f.Set(0, func(r aiRequest) (int, string) {
		f.mu.Lock()
		f.answered[r.DataURL]++
		f.order = append(f.order, r.DataURL)
		f.mu.Unlock()
		return http.StatusOK, captionOf(r.DataURL)
	})
}

func (f *flakyAI) answers() (map[string]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.answered))
	for k, v := range f.answered {
		m[k] = v
	}
	return m, append([]string(nil), f.order...)
}

// confirmedLSN is the slot's confirmed_flush_lsn.
func (s *source) confirmedLSN(t testing.TB) replication.LSN {
	t.Helper()
	var lsn replication.LSN
	if err := s.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", s.slot).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// outageStatus is what status --format json says of the models' outages.
type outageStatusJSON struct {
	Outages []struct {
		Model      string  `json:"model"`
		State      string  `json:"state"`
		Since      *string `json:"since"`
		ParkedRows int64   `json:"parked_rows"`
	} `json:"model_outages"`
	Parked []struct {
		Rule string `json:"rule"`
		Rows int64  `json:"rows"`
	} `json:"parked"`
}

func outageOf(t *testing.T, s *source, model string) (state string, parked int64) {
	t.Helper()
	var doc outageStatusJSON
	out := runCLI(t, s, "status", "--format", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	for _, m := range doc.Outages {
		if m.Model == model {
			return m.State, m.ParkedRows
		}
	}
	return "", 0
}

// TestOutageParksAndHeals: a model's provider refuses connections, then
// answers 503, then hangs past its timeout, while a healthy model beside it
// writes another target table; the bridge is SIGKILLed with rows parked and
// started again; then the provider answers. No row fails, every parked row
// is answered by itself once (no retry), in order of arrival, the slot
// advances during the outage, the provider is probed at a bounded pace,
// status and metrics say down and then up, and the log says so in two
// warnings. With max_concurrency 1 the parked rows are answered strictly in
// their order of arrival; with 8 they start in that order.
func TestOutageParksAndHeals(t *testing.T) {
	for _, conc := range []int{1, 8} {
		t.Run(fmt.Sprintf("max_concurrency %d", conc), func(t *testing.T) { outageParksAndHeals(t, conc) })
	}
}

func outageParksAndHeals(t *testing.T, conc int) {
	s := newSource(t)
	down := newFlakyAI(t)
	healthy := newFakeAI(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('vision', 'openai', $1, 'gpt-test', $2)`,
		down.BaseURL(), fmt.Sprintf(`{"timeout": "2s", "max_concurrency": %d}`, conc))
	s.model(t, "other", healthy, `{"max_concurrency": 4}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.rule(t, "alt", "other", "public.alts", "alt")
	metricsAddr := freeAddr(t)
	env := []string{"PGIMAGEAI_PROBE_MAX=5s", "PGIMAGEAI_METRICS_ADDR=" + metricsAddr}
	p1 := s.runProcess(t, env...)

	want := map[int]string{}
	insertRows(t, s, 1, 11, 5, want) // the model answers these
	s.sync(t, 60*time.Second)
	assertCaptions(t, captions(t, s.conn), want)

	// Each phase: rows come, the healthy rule's results arrive, and the
	// slot moves past them — the outage pins no WAL.
	next := 11
	phase := func(name string, rows int) {
		t.Helper()
		before := s.confirmedLSN(t)
		insertRows(t, s, next, next+rows, 5, want)
		next += rows
		s.sync(t, 60*time.Second)
		if after := s.confirmedLSN(t); after <= before {
			t.Errorf("%s: the slot did not move (%s, was %s)", name, after, before)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM public.alts WHERE alt IS NOT NULL"); n != next-1 {
			t.Errorf("%s: %d results of the healthy model, want %d", name, n, next-1)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
			t.Errorf("%s: %d errors rows", name, n)
		}
	}
	down.refuse()
	phase("refused", 20)
	integration.WaitFor(t, 30*time.Second, "the model down in status", func() bool { st, _ := outageOf(t, s, "vision"); return st == "down" })
	down.listen(t)
	down.fail503()
	started503 := down.Count()
	t503 := time.Now()
	phase("503", 20)
	time.Sleep(10 * time.Second) // probes only, for a while
	down.hang()
	phase("hanging", 20)
	time.Sleep(5 * time.Second)
	outageRequests, outageFor := down.Count()-started503, time.Since(t503)

	// SIGKILL with rows parked; the next process finds the model down.
	parkedBefore := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.parked WHERE rule = 'caption'")
	if parkedBefore != 60 {
		t.Errorf("%d rows parked before the kill, want 60", parkedBefore)
	}
	if err := p1.signal(t, syscall.SIGKILL); err == nil {
		t.Fatal("pgimageai exited cleanly on SIGKILL")
	}
	p2 := s.runProcess(t, env...)
	if st, n := outageOf(t, s, "vision"); st != "down" || n != 60 {
		t.Errorf("status after the restart: %s with %d parked, want down with 60", st, n)
	}
	integration.WaitFor(t, 30*time.Second, "the metrics to say the model is down", func() bool {
		m := scrape(t, "http://"+metricsAddr)
		up, ok := m[`pgimageai_model_up{model="vision"}`]
		return ok && up == 0 && m[`pgimageai_parked_rows{rule="caption"}`] == 60 && m[`pgimageai_model_up{model="other"}`] == 1
	})
	phase("hanging, after the restart", 10)
	// A parked row changed while parked: its newer image wins, the older
	// is never asked for; a parked row deleted is never asked for.
	old11 := magic.DataURL(magic.PNG, pngImage(t, 11))
	new11img := pngImage(t, 1011)
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 11", new11img)
	s.exec(t, "DELETE FROM public.photos WHERE id = 12")
	want[11] = captionOf(magic.DataURL(magic.PNG, new11img))
	delete(want, 12)
	s.sync(t, 60*time.Second)

	// The provider answers: every parked row is sent, by itself.
	rank := map[int]int{} // each parked row's place in the order of arrival
	rows, err := s.conn.Query(context.Background(), "SELECT (source_key->>'id')::int FROM pgimageai.parked WHERE rule = 'caption' ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		rank[id] = len(rank)
	}
	if rows.Err() != nil || len(rank) != 69 {
		t.Fatalf("%d parked rows (%v), want 69", len(rank), rows.Err())
	}
	down.answer()
	tBack := time.Now()
	integration.WaitFor(t, 90*time.Second, "every parked row answered", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.parked") == 0 &&
			queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NOT NULL") == len(want)
	})
	healed := time.Since(tBack)
	s.sync(t, 60*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors"); n != 0 {
		t.Errorf("%d errors rows after the outage, want 0", n)
	}
	answered, order := down.answers()
	ids := map[string]int{}
	for id := 1; id < next; id++ {
		ids[magic.DataURL(magic.PNG, pngImage(t, id))] = id
	}
	ids[magic.DataURL(magic.PNG, new11img)] = 11
	for url, id := range ids {
		if n, w := answered[url], 1; id >= 11 && url != old11 && id != 12 && n != w {
			t.Errorf("row %d answered %d times, want once", id, n)
		}
	}
	if answered[old11] != 0 || answered[magic.DataURL(magic.PNG, pngImage(t, 12))] != 0 {
		t.Errorf("the older image of a row changed while parked answered %d times, a deleted row's %d; want neither",
			answered[old11], answered[magic.DataURL(magic.PNG, pngImage(t, 12))])
	}
	// In order of arrival (max_concurrency 1): the first answer is the
	// probe's, any row; the others follow the parked rows' order.
	var got []int
	for _, u := range order {
		if id := ids[u]; id >= 11 {
			got = append(got, id)
		}
	}
	for i := 2; i < len(got) && conc == 1; i++ {
		if rank[got[i]] < rank[got[i-1]] {
			t.Errorf("parked rows answered out of their order of arrival: %v", got)
			break
		}
	}
	if st, n := outageOf(t, s, "vision"); st != "up" || n != 0 {
		t.Errorf("status after the outage: %s with %d parked, want up with 0", st, n)
	}
	integration.WaitFor(t, 30*time.Second, "the metrics to say the model is up", func() bool {
		m := scrape(t, "http://"+metricsAddr)
		return m[`pgimageai_model_up{model="vision"}`] == 1 && m[`pgimageai_parked_rows{rule="caption"}`] == 0
	})
	// Probes at a bounded pace: at most one per half of ProbeMax (5 s,
	// with jitter) and a few more (the live rows' calls that took a
	// probe's turn) — against five requests per row without the circuit.
	perMinute := float64(outageRequests) / outageFor.Minutes()
	if limit := 60/2.5 + 6; perMinute > limit {
		t.Errorf("%d requests in %s of 503s and hangs (%.1f a minute), want at most %.0f a minute", outageRequests, outageFor.Round(time.Second), perMinute, limit)
	}
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	var warns []string
	for _, p := range []*process{p1, p2} {
		b, _ := os.ReadFile(p.log.Name())
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=WARN") {
				warns = append(warns, line)
			}
		}
	}
	downs, ups := 0, 0
	for _, w := range warns {
		downs += strings.Count(w, "msg=\"model down")
		ups += strings.Count(w, "msg=\"model answers again")
	}
	if downs != 1 || ups != 1 || len(warns) > 4 {
		t.Errorf("%d warnings (%d down, %d up), want one down, one up and at most 4 in all:\n%s", len(warns), downs, ups, strings.Join(warns, "\n"))
	}
	t.Log(fmt.Sprintf("max_concurrency %d: %d rows parked; %d requests to the model in %s of 503s and hangs (%.1f a minute); all answered %s after it came back",
		conc, parkedBefore, outageRequests, outageFor.Round(time.Second), perMinute, healed.Round(time.Millisecond)))
}
