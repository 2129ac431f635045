package integration_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// Tests of lanes: a target table's results are applied in source
// order, independently of other target tables; a big transaction is written
// in chunks; a restart resumes each lane after its own checkpoint.

// slowRule adds a second COMPLETE rule on public.photos.img writing
// public.slow_out.
func (s *source) slowRule(t testing.TB, model string) {
	t.Helper()
	s.rule(t, "slow", model, "public.slow_out", "caption")
}

// seenAt polls table for rows and records when each id first appeared.
type seenAt struct {
	mu   sync.Mutex
	when map[int]time.Time
}

// watchRows polls until stop is called, which waits for the poller to end.
func watchRows(t *testing.T, s *source, table string) (w *seenAt, stop func()) {
	t.Helper()
	conn := s.db.Connect(t)
	w = &seenAt{when: map[int]time.Time{}}
	done, ended := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-ended }) }
	t.Cleanup(stop) // before the connection closes
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			rows, err := conn.Query(context.Background(), "SELECT id FROM "+table+" WHERE caption IS NOT NULL")
			if err != nil {
				continue // not created yet
			}
			now := time.Now()
			var id int
			pgx.ForEachRow(rows, []any{&id}, func() error {
				w.mu.Lock()
				if _, ok := w.when[id]; !ok {
					w.when[id] = now
				}
				w.mu.Unlock()
				return nil
			})
		}
	}()
	return w, stop
}

func (w *seenAt) get(id int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.when[id]
	return at, ok
}

// TestLaneSlowModelBesideFast: a model answering in 10 s (4 at a time) is
// busy with a backlog; a rule on a healthy model writing another target
// table gets every result within 3 s of its source commit.
func TestLaneSlowModelBesideFast(t *testing.T) {
	s := newSource(t)
	fast, slow := newFakeAI(t), newFakeAI(t)
	slow.Set(10*time.Second, nil)
	s.model(t, "fast", fast, `{"max_concurrency": 8}`)
	s.model(t, "slow", slow, `{"max_concurrency": 4, "timeout": "60s"}`)
	s.rule(t, "caption", "fast", "public.captions", "caption")
	s.slowRule(t, "slow")
	cfg := s.config(t)
	cfg.Timing.DrainTimeout = 30 * time.Second
	_, stop := s.start(t, cfg)

	want := map[int]string{}
	insertRows(t, s, 1, 9, 1, want) // eight rows keep the slow model busy
	integration.WaitFor(t, 10*time.Second, "the slow model to be busy", func() bool { return slow.Count() >= 4 })

	seen, stopWatching := watchRows(t, s, "public.captions")
	committed := map[int]time.Time{}
	for id := 9; id <= 28; id++ {
		insertRows(t, s, id, id+1, 1, want)
		committed[id] = time.Now()
		time.Sleep(100 * time.Millisecond)
	}
	integration.WaitFor(t, 20*time.Second, "the fast rule's results", func() bool {
		for id := range committed {
			if _, ok := seen.get(id); !ok {
				return false
			}
		}
		return true
	})
	stopWatching()
	var delays []time.Duration
	for id, at := range committed {
		got, _ := seen.get(id)
		delays = append(delays, got.Sub(at))
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("fast rule behind a 10 s model: median %s, worst %s over %d rows", delays[len(delays)/2], delays[len(delays)-1], len(delays))
	if worst := delays[len(delays)-1]; worst > 3*time.Second {
		t.Errorf("a fast result landed %s after its commit, want within 3s", worst)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.slow_out WHERE caption IS NOT NULL"); n >= 28 {
		t.Errorf("the slow lane has all %d results already: the test did not hold it back", n)
	}
	// The slot is confirmed only at what every lane made durable: the slow
	// lane holds it back.
	var confirmed, fastAt string
	s.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", s.slot).Scan(&confirmed)
	s.conn.QueryRow(context.Background(), "SELECT lsn::text FROM pgimageai.lane_checkpoints WHERE slot = $1 AND lane = 'public.captions'", s.slot).Scan(&fastAt)
	if lsnGreater(confirmed, fastAt) {
		t.Errorf("slot confirmed at %s, beyond the slow lane (fast lane at %s)", confirmed, fastAt)
	}
	slow.Set(0, nil)
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), want)
}

// lsnGreater reports whether PostgreSQL text LSN a is greater than b.
func lsnGreater(a, b string) bool {
	parse := func(s string) uint64 {
		hi, lo, _ := strings.Cut(s, "/")
		h, _ := strconv.ParseUint(hi, 16, 32)
		l, _ := strconv.ParseUint(lo, 16, 32)
		return h<<32 | l
	}
	return parse(a) > parse(b)
}

// TestBigTransactionKill SIGKILLs `pgimageai run` in the middle of ONE source
// transaction of 1,500 rows: the results committed before the kill (written
// in chunks as they completed) stay, are not requested again, and the rest is
// requested exactly once after the restart.
func TestBigTransactionKill(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(20*time.Millisecond, nil)
	s.model(t, "vision", ai, `{"max_concurrency": 8}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	want := map[int]string{}
	insertRows(t, s, 1, 1501, 1500, want) // one transaction
	waitResults(t, s, 200, "before the kill")
	p1.signal(t, syscall.SIGKILL)
	atKill := captions(t, s.conn)
	before := ai.Count()
	if len(atKill) >= 1500 {
		t.Fatalf("the kill came too late: %d rows already done", len(atKill))
	}
	t.Logf("killed inside the transaction with %d of 1500 rows committed and %d requests made", len(atKill), before)

	p2 := s.runProcess(t)
	s.sync(t, 120*time.Second)
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop of the restarted bridge: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), want)
	assertRequestedOnceAfter(t, ai, before, atKill, 1500)
}

// TestSlowLaneKill SIGKILLs the bridge while a slow lane has calls in flight
// and a fast lane is ahead of it (and so of the slot): after the restart, no
// fast row is requested again, and each slow row at most once more.
func TestSlowLaneKill(t *testing.T) {
	s := newSource(t)
	fast, slow := newFakeAI(t), newFakeAI(t)
	slow.Set(3*time.Second, nil)
	s.model(t, "fast", fast, `{"max_concurrency": 8}`)
	s.model(t, "slow", slow, `{"max_concurrency": 2, "timeout": "60s"}`)
	s.rule(t, "caption", "fast", "public.captions", "caption")
	s.slowRule(t, "slow")
	p1 := s.runProcess(t)
	want := map[int]string{}
	insertRows(t, s, 1, 41, 5, want)
	waitResults(t, s, 40, "of the fast lane")
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.slow_out WHERE caption IS NOT NULL"); n >= 40 {
		t.Fatalf("the slow lane is done already (%d rows): nothing in flight to kill", n)
	}
	p1.signal(t, syscall.SIGKILL)
	slowDone := map[int]bool{}
	rows, _ := s.conn.Query(context.Background(), "SELECT id FROM public.slow_out WHERE caption IS NOT NULL")
	var id int
	pgx.ForEachRow(rows, []any{&id}, func() error { slowDone[id] = true; return nil })
	fastBefore, slowBefore := fast.Count(), slow.Count()
	t.Logf("killed with 40 fast and %d slow results committed; %d slow requests made", len(slowDone), slowBefore)

	slow.Set(0, nil)
	p2 := s.runProcess(t)
	s.sync(t, 120*time.Second)
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if n := fast.Count() - fastBefore; n != 0 {
		t.Errorf("%d fast rows requested again after the restart; the fast lane had committed them all", n)
	}
	again := map[string]int{}
	for _, r := range slow.Requests()[slowBefore:] {
		again[r.DataURL]++
	}
	for id := 1; id <= 40; id++ {
		n := again[magic.DataURL(magic.PNG, pngImage(t, id))]
		switch {
		case slowDone[id] && n != 0:
			t.Errorf("slow row %d was committed but requested again", id)
		case n > 1:
			t.Errorf("slow row %d requested %d times after the restart", id, n)
		}
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.slow_out WHERE caption IS NOT NULL"); n != 40 {
		t.Errorf("slow lane has %d results, want 40", n)
	}
}

// TestSchemaChangeInvalidatesRule renames the image column of one rule's
// table while another rule (on another table) streams: the first rule
// becomes invalid_rule at that position, the other goes on; renaming it back
// makes the rule valid again, and it backfills the rows it missed.
func TestSchemaChangeInvalidatesRule(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.exec(t, `CREATE TABLE public.d (id int PRIMARY KEY, img bytea)`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('d', 'public.d', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.d_out', 'caption')`)
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 500 * time.Millisecond
	_, stop := s.start(t, cfg)

	want := map[int]string{}
	insertRows(t, s, 1, 3, 1, want)
	s.exec(t, `INSERT INTO public.d VALUES (1, $1)`, pngImage(t, 101))
	s.sync(t, 30*time.Second)
	s.exec(t, `ALTER TABLE public.d RENAME COLUMN img TO photo`)
	s.exec(t, `INSERT INTO public.d VALUES (2, $1)`, pngImage(t, 102))
	insertRows(t, s, 3, 5, 1, want) // the other rule goes on
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 10*time.Second, "rule d to be invalid_rule", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'd' AND reason = 'invalid_rule'
AND resolved_at IS NULL AND (detail LIKE '%no longer has image column%' OR detail LIKE '%has no column "img"%')`) == 1
	})
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.d_out WHERE caption IS NOT NULL"); n != 1 {
		t.Errorf("d_out has %d results while the rule is invalid, want 1", n)
	}
	assertCaptions(t, captions(t, s.conn), want)

	s.exec(t, `ALTER TABLE public.d RENAME COLUMN photo TO img`)
	integration.WaitFor(t, 30*time.Second, "rule d to resume and backfill row 2", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.d_out WHERE caption IS NOT NULL") == 2
	})
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'd' AND resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors of rule d after the fix", n)
	}
	// Adding a column or widening the key's type changes nothing.
	s.exec(t, `ALTER TABLE public.photos ADD COLUMN extra int`)
	insertRows(t, s, 5, 6, 1, want)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors after adding a column", n)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	assertCaptions(t, captions(t, s.conn), want)
}

// TestDroppedTargetRecreated drops a rule's target table while the bridge
// runs: the table is created again as at rule load and backfilled, while a
// rule writing another target table goes on.
func TestDroppedTargetRecreated(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.slowRule(t, "vision") // any model: it writes public.slow_out
	_, stop := s.start(t, s.config(t))
	want := map[int]string{}
	insertRows(t, s, 1, 4, 1, want)
	s.sync(t, 30*time.Second)
	s.exec(t, `DROP TABLE public.slow_out`)
	insertRows(t, s, 4, 7, 1, want)
	s.sync(t, 30*time.Second)
	assertCaptions(t, captions(t, s.conn), want)
	integration.WaitFor(t, 30*time.Second, "public.slow_out to be re-created and backfilled", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'slow_out'") == 1 &&
			queryInt(t, s.conn, "SELECT count(*) FROM public.slow_out WHERE caption IS NOT NULL") == 6
	})
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// wideVector is a vector of dims values derived from the image's digest.
func wideVector(dims int) func(img []byte) []float32 {
	return func(img []byte) []float32 {
		sum := sha256.Sum256(img)
		v := make([]float32, dims)
		for i := range v {
			v[i] = float32(sum[i%32])/255 + float32(i)/float32(dims)
		}
		return v
	}
}

// TestBigTransactionsInBoundedMemory runs the two loads of the memory bound (scaled
// to the CI machine) through `pgimageai run` with a 32 MiB byte budget and
// checks the process's peak RSS against budget + 64 MiB: a 200 MB source
// transaction of 100 KB images, and 20,000 embeddings of 1,536 dimensions in
// one transaction (every vector would be 120 MB if held to the end).
func TestBigTransactionsInBoundedMemory(t *testing.T) {
	const budget = 32 << 20
	bound := int64(budget + 64<<20)
	t.Run("200 MB of 100 KB images in one transaction", func(t *testing.T) {
		s := newSource(t)
		ai := newFakeAI(t)
		s.model(t, "vision", ai, `{"max_concurrency": 16}`)
		s.rule(t, "caption", "vision", "public.captions", "caption")
		p := s.runProcess(t, fmt.Sprintf("PGIMAGEAI_BYTE_BUDGET=%d", budget))
		s.exec(t, `INSERT INTO public.photos (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || convert_to(repeat(md5(i::text), 3125), 'UTF8') FROM generate_series(1, 2000) AS i`)
		s.sync(t, 5*time.Minute)
		rss := vmHWM(t, p.cmd.Process.Pid)
		if err := p.signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v", err)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption LIKE 'caption:%'"); n != 2000 {
			t.Errorf("%d captions, want 2000", n)
		}
		t.Logf("peak RSS %.1f MiB for a 200 MB transaction (budget %d MiB, bound %d MiB)", float64(rss)/(1<<20), budget>>20, bound>>20)
		if rss > bound {
			t.Errorf("peak RSS %d MiB > budget + 64 MiB", rss>>20)
		}
	})
	t.Run("20000 embeddings of 1536 dimensions in one transaction", func(t *testing.T) {
		s := newSource(t)
		srv, calls := newFakeEmbedder(t, "m", wideVector(1536))
		s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ('emb', 'vllm', $1, 'm', '{"max_concurrency": 16}')`, srv.URL+"/v1")
		s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, target_table, target_column)
VALUES ('embed', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', 'public.vectors', 'v')`)
		p := s.runProcess(t, fmt.Sprintf("PGIMAGEAI_BYTE_BUDGET=%d", budget))
		s.exec(t, `INSERT INTO public.photos (id, img)
SELECT i, '\x89504e470d0a1a0a'::bytea || int4send(i) FROM generate_series(1, 20000) AS i`)
		s.sync(t, 5*time.Minute)
		rss := vmHWM(t, p.cmd.Process.Pid)
		if err := p.signal(t, syscall.SIGTERM); err != nil {
			t.Errorf("stop: %v", err)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vectors WHERE array_length(v, 1) = 1536"); n != 20000 {
			t.Errorf("%d vectors of 1536 dimensions, want 20000", n)
		}
		t.Logf("peak RSS %.1f MiB for 20000 embeddings in one transaction, %d calls (budget %d MiB, bound %d MiB)",
			float64(rss)/(1<<20), calls.Load(), budget>>20, bound>>20)
		if rss > bound {
			t.Errorf("peak RSS %d MiB > budget + 64 MiB", rss>>20)
		}
	})
}

// TestPermanentFailureIsNotPaidAgain: a row whose call failed for good (a
// 400) is not sent again when an UPDATE of a column the rule does not use
// streams it again — within a run, and after a restart — until the model
// changes or pgimageai retry asks for it.
func TestPermanentFailureIsNotPaidAgain(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(0, func(aiRequest) (int, string) { return http.StatusBadRequest, "image refused by policy" })
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (1, $1)`, pngImage(t, 1))
	s.sync(t, 30*time.Second)
	if n := ai.Count(); n != 1 {
		t.Fatalf("%d requests for one row, want 1", n)
	}
	update := func(note string) {
		t.Helper()
		s.exec(t, `UPDATE public.photos SET note = $1 WHERE id = 1`, note)
		s.sync(t, 30*time.Second)
	}
	update("unrelated")
	if n := ai.Count(); n != 1 {
		t.Errorf("%d requests after an unrelated UPDATE of a permanently failed row, want 1", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	_, stop = s.start(t, s.config(t))
	update("after a restart")
	if n := ai.Count(); n != 1 {
		t.Errorf("%d requests after a restart and an unrelated UPDATE, want 1", n)
	}
	if n := queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'caption' AND reason = 'provider_error'
AND resolved_at IS NULL AND input_key IS NOT NULL AND attempts = 3 AND image_bytes > 0`); n != 1 {
		t.Errorf("want one open provider_error row with its input key, 3 attempts and the image length")
	}
	runCLI(t, s, "retry", "--rule", "caption")
	integration.WaitFor(t, 30*time.Second, "the retried request", func() bool { return ai.Count() == 2 })
	// A changed model asks again.
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_retries": 1}' WHERE name = 'vision'`)
	update("after a model change")
	if n := ai.Count(); n != 3 {
		t.Errorf("%d requests after a model change and an UPDATE, want 3", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestLiveRuleChangeDuringBackfill adds and changes rules while a backfill
// reads pages, under -race: every backfill worker decodes on its own
// connection's type map, never on the engine's.
func TestLiveRuleChangeDuringBackfill(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	ai.Set(time.Millisecond, nil)
	s.model(t, "vision", ai, `{"max_concurrency": 4}`)
	s.exec(t, `INSERT INTO public.photos (id, img, note)
SELECT i, '\x89504e470d0a1a0a'::bytea || int4send(i), 'n' || i FROM generate_series(1, 1500) AS i`)
	_, stop := s.start(t, s.config(t))
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('a', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe {{note}}', 'public.a_out', 'caption')`)
	integration.WaitFor(t, 30*time.Second, "rule a's backfill to run", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'a' AND state = 'running'") == 1
	})
	for i, prompt := range []string{"Name {{note}}", "Tell {{ note }}", "Say {{note}}"} {
		s.exec(t, fmt.Sprintf(`INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('b%d', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', $1, 'public.b%d_out', 'caption')`, i, i), prompt)
		s.exec(t, `UPDATE pgimageai.rules SET prompt = $1 WHERE name = 'a'`, prompt+"!")
	}
	integration.WaitFor(t, 120*time.Second, "every backfill to finish", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE state = 'done'") == 4
	})
	for _, table := range []string{"public.a_out", "public.b0_out", "public.b1_out", "public.b2_out"} {
		if n := queryInt(t, s.conn, "SELECT count(*) FROM "+table+" WHERE caption IS NOT NULL"); n != 1500 {
			t.Errorf("%s has %d results, want 1500", table, n)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestSchemaChangesEachKind: every change of a source table that a rule no
// longer fits — its image column dropped or retyped, its primary key changed
// — turns that rule invalid_rule while a rule on another table keeps
// streaming; a dropped result column is added again and its rule backfills.
func TestSchemaChangesEachKind(t *testing.T) {
	for _, tc := range []struct {
		name, change, insert, wantDetail, orDetail string
	}{
		{"image column dropped", `ALTER TABLE public.d DROP COLUMN img`, `INSERT INTO public.d (id, k2) VALUES (2, 2)`,
			`no longer has image column "img"`, `has no column "img"`},
		{"image column retyped", `ALTER TABLE public.d ALTER COLUMN img TYPE text USING encode(img, 'hex')`, `INSERT INTO public.d (id, k2, img) VALUES (2, 2, 'x')`,
			`no longer bytea`, `not bytea`},
		{"primary key changed", `ALTER TABLE public.d DROP CONSTRAINT d_pkey, ADD PRIMARY KEY (k2)`, `INSERT INTO public.d (id, k2, img) VALUES (2, 2, '\x00')`,
			`primary key is no longer`, `key`},
		{"result column dropped", `ALTER TABLE public.d_out DROP COLUMN caption`, `INSERT INTO public.d (id, k2, img) VALUES (2, 2, $1)`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSource(t)
			ai := newFakeAI(t)
			s.model(t, "vision", ai, `{}`)
			s.rule(t, "caption", "vision", "public.captions", "caption")
			s.exec(t, `CREATE TABLE public.d (id int PRIMARY KEY, k2 int NOT NULL UNIQUE, img bytea)`)
			s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('d', 'public.d', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.d_out', 'caption')`)
			_, stop := s.start(t, s.config(t))
			want := map[int]string{}
			insertRows(t, s, 1, 2, 1, want)
			s.exec(t, `INSERT INTO public.d VALUES (1, 1, $1)`, pngImage(t, 101))
			s.sync(t, 30*time.Second)
			s.exec(t, tc.change)
			if strings.Contains(tc.insert, "$1") {
				s.exec(t, tc.insert, pngImage(t, 102))
			} else {
				s.exec(t, tc.insert)
			}
			insertRows(t, s, 2, 4, 1, want) // the other rule goes on
			s.sync(t, 30*time.Second)
			assertCaptions(t, captions(t, s.conn), want)
			if tc.wantDetail == "" {
				// The column is back, and the rule backfilled both rows.
				integration.WaitFor(t, 30*time.Second, "d_out.caption re-added and backfilled", func() bool {
					return queryInt(t, s.conn, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'd_out' AND column_name = 'caption'") == 1 &&
						queryInt(t, s.conn, "SELECT count(*) FROM public.d_out WHERE caption IS NOT NULL") == 2
				})
			} else {
				integration.WaitFor(t, 30*time.Second, "rule d to be invalid_rule", func() bool {
					return queryInt(t, s.conn, `SELECT count(*) FROM pgimageai.errors WHERE rule = 'd' AND reason = 'invalid_rule' AND resolved_at IS NULL`) == 1
				})
				var detail string
				s.conn.QueryRow(context.Background(), `SELECT detail FROM pgimageai.errors WHERE rule = 'd' AND reason = 'invalid_rule' AND resolved_at IS NULL`).Scan(&detail)
				// At the WAL position the table's new shape (pgoutput's
				// relation) says why; a reload compiled against the catalog
				// may say it first, in its words.
				if !strings.Contains(detail, tc.wantDetail) && !strings.Contains(detail, tc.orDetail) {
					t.Errorf("invalid_rule detail %q, want it to say %q or %q", detail, tc.wantDetail, tc.orDetail)
				}
			}
			if err := stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
}
