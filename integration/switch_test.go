package integration_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/provider/vllm"
)

// versionVector is the vector of model `marker` for img: dim values, the
// first the model's marker (so that a reader can tell versions apart), the
// others from the image's SHA-256.
func versionVector(marker float32, dim int, img []byte) []float32 {
	sum := sha256.Sum256(img)
	v := make([]float32, dim)
	v[0] = marker
	for i := 1; i < dim; i++ {
		v[i] = float32(binary.BigEndian.Uint16(sum[(2*i)%30:])) / 65536
	}
	return v
}

// switchSetup is a source of n photos embedded by model "emb" (a fake vLLM
// answering 8-dimension vectors with marker 1) into public.vecs.v, a
// pgvector vector(8) column with an HNSW index.
type switchSetup struct {
	s      *source
	aCalls *atomic.Int64
	b      *fakeModel
}

// fakeModel is a second model's fake vLLM server: dim-dimension vectors
// with marker 2, answered after delay; an image whose id is in fail gets
// an empty vector (a bad_response).
type fakeModel struct {
	url   string
	calls *atomic.Int64
	delay atomic.Int64 // nanoseconds
	mu    sync.Mutex
	fail  map[[32]byte]bool
}

func newFakeModel(t testing.TB, model string, marker float32, dim int) *fakeModel {
	f := &fakeModel{fail: map[[32]byte]bool{}}
	srv, calls := newFakeEmbedder(t, model, func(img []byte) []float32 {
		time.Sleep(time.Duration(f.delay.Load()))
		f.mu.Lock()
		bad := f.fail[sha256.Sum256(img)]
		f.mu.Unlock()
		if bad {
			return []float32{}
		}
		return versionVector(marker, dim, img)
	})
	f.url, f.calls = srv.URL+"/v1", calls
	return f
}

func newSwitchSetup(t testing.TB, n int) *switchSetup {
	t.Helper()
	a := newFakeModel(t, "model-a", 1, 8)
	b := newFakeModel(t, "model-b", 2, 16)
	s := newSource(t)
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	s.exec(t, "CREATE TABLE public.vecs (id int PRIMARY KEY, v vector(8))")
	s.exec(t, "CREATE INDEX vecs_v_hnsw ON public.vecs USING hnsw (v vector_cosine_ops) WITH (m = 8, ef_construction = 32)")
	ctx := context.Background()
	batch := &pgx.Batch{}
	for id := 1; id <= n; id++ {
		batch.Queue("INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
	}
	if err := s.conn.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ('emb', 'vllm', $1, 'model-a')`, a.url)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('vec', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', NULL, 'public.vecs', 'v')`)
	return &switchSetup{s: s, aCalls: a.calls, b: b}
}

func (x *switchSetup) start(t testing.TB) (stop func() error) {
	cfg := x.s.config(t)
	cfg.Registry.Register("vllm", vllm.Factory)
	_, stop = x.s.start(t, cfg)
	return stop
}

// toB switches model "emb" to model-b: a new version of rule vec.
func (x *switchSetup) toB(t testing.TB) {
	x.s.exec(t, "UPDATE pgimageai.models SET base_url = $1, model = 'model-b' WHERE name = 'emb'", x.b.url)
}

// waitA waits until n rows of public.vecs hold a vector.
func (x *switchSetup) waitA(t testing.TB, n int) {
	t.Helper()
	integration.WaitFor(t, 60*time.Second, fmt.Sprintf("%d vectors of model a", n), func() bool {
		return queryInt(t, x.s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL") == n
	})
}

// checkIndex checks that the HNSW index of public.vecs.v has its name,
// method, operator class and options after a switch.
func (x *switchSetup) checkIndex(t testing.TB) {
	t.Helper()
	var def string
	if err := x.s.conn.QueryRow(context.Background(), "SELECT pg_get_indexdef('public.vecs_v_hnsw'::regclass)").Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := "CREATE INDEX vecs_v_hnsw ON public.vecs USING hnsw (v vector_cosine_ops) WITH (m='8', ef_construction='32')"; def != want {
		t.Errorf("index after the switch:\n%s\nwant\n%s", def, want)
	}
}

// checkSwitched stops sm and checks that it never saw two versions, that
// the live column is vector(dim), and that n rows hold the vectors of the
// model of marker.
func (x *switchSetup) checkSwitched(t testing.TB, sm *sampler, marker, dim, n int) {
	t.Helper()
	sm.finish()
	if m := sm.mixed.Load(); m != 0 {
		t.Errorf("%d of %d samples saw both versions", m, sm.samples.Load())
	}
	if typ := vecsColumnType(t, x.s.conn, "v"); typ != fmt.Sprintf("vector(%d)", dim) {
		t.Errorf("live column is %q after the switch, want vector(%d)", typ, dim)
	}
	if got := queryInt(t, x.s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = $1 AND (v::real[])[1] = $2", dim, marker); got != n {
		t.Errorf("%d rows hold the vectors of model %d, want %d", got, marker, n)
	}
}

// waitOutcome waits for the switch history of rule vec to hold outcome.
func (x *switchSetup) waitOutcome(t *testing.T, outcome string, timeout time.Duration) {
	t.Helper()
	integration.WaitFor(t, timeout, "switch "+outcome, func() bool {
		return queryInt(t, x.s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec' AND outcome = $1", outcome) > 0
	})
}

// vecsColumnType returns public.vecs column's type, or "" when there is none.
func vecsColumnType(t testing.TB, conn *pgx.Conn, column string) string {
	var typ string
	err := conn.QueryRow(context.Background(), `SELECT coalesce((SELECT format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'public.vecs'::regclass AND attname = $1 AND NOT attisdropped), '')`, column).Scan(&typ)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// sampler reads public.vecs in one statement every few milliseconds until
// stopped, and counts the samples that saw both models' vectors, or a NULL.
type sampler struct {
	samples, mixed, nulls atomic.Int64
	worst                 atomic.Int64 // longest sample, nanoseconds
	stop                  chan struct{}
	done                  chan struct{}
}

func startSampler(t *testing.T, x *switchSetup) *sampler {
	conn := x.s.db.Connect(t)
	sm := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		for {
			select {
			case <-sm.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var a, b, nulls int
			began := time.Now()
			err := conn.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE v IS NOT NULL AND vector_dims(v) = 8 AND v::real[] @> ARRAY[1::real]),
  count(*) FILTER (WHERE v IS NOT NULL AND vector_dims(v) = 16), count(*) FILTER (WHERE v IS NULL) FROM public.vecs`,
				pgx.QueryExecModeSimpleProtocol).Scan(&a, &b, &nulls)
			if err != nil {
				t.Errorf("sample: %v", err)
				return
			}
			if d := time.Since(began).Nanoseconds(); d > sm.worst.Load() {
				sm.worst.Store(d)
			}
			sm.samples.Add(1)
			if a > 0 && b > 0 {
				sm.mixed.Add(1)
			}
			if nulls > 0 {
				sm.nulls.Add(1)
			}
		}
	}()
	return sm
}

func (sm *sampler) finish() { close(sm.stop); <-sm.done }

// TestSwitchDimensionHNSW: switching an AI_IMAGE_EMBED rule from an
// 8-dimension model to a 16-dimension one, on a vector(8) column with an
// HNSW index, while rows are inserted, updated, deleted and re-keyed: a
// reader sampling the column never sees two versions (nor a NULL); the
// column ends vector(16) with every row's new vector and the same index;
// each row's new vector was paid once.
func TestSwitchDimensionHNSW(t *testing.T) {
	x := newSwitchSetup(t, 200)
	x.start(t)
	s := x.s
	x.waitA(t, 200)
	sm := startSampler(t, x)
	x.b.delay.Store(int64(3 * time.Millisecond))
	x.toB(t)
	integration.WaitFor(t, 30*time.Second, "the switch to start", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE rule = 'vec'") == 1
	})
	// Meanwhile: 30 inserts, 20 new images, 10 deletes, 5 re-keys.
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 30; i++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", 1000+i, pngImage(t, 1000+i))
		if i < 20 {
			id := 1 + rnd.IntN(100)
			s.exec(t, "UPDATE public.photos SET img = $2 WHERE id = $1", id, pngImage(t, 5000+i))
		}
		if i < 10 {
			s.exec(t, "DELETE FROM public.photos WHERE id = $1", 101+i)
		}
		if i < 5 {
			s.exec(t, "UPDATE public.photos SET id = $2 WHERE id = $1", 150+i, 2000+i)
		}
		time.Sleep(20 * time.Millisecond)
	}
	x.waitOutcome(t, "switched", 120*time.Second)
	s.sync(t, 60*time.Second)
	time.Sleep(300 * time.Millisecond)
	sm.finish()

	if n := sm.samples.Load(); n < 20 {
		t.Errorf("only %d samples", n)
	}
	if m := sm.mixed.Load(); m != 0 {
		t.Errorf("%d of %d samples saw both versions' vectors", m, sm.samples.Load())
	}
	if m := sm.nulls.Load(); m != 0 {
		t.Errorf("%d of %d samples saw a NULL", m, sm.samples.Load())
	}
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(16)" {
		t.Fatalf("column v is %q after the switch, want vector(16)", typ)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.vecs'::regclass AND attnum > 0 AND NOT attisdropped"); n != 2 {
		t.Errorf("public.vecs has %d columns after the switch, want 2 (the shadow column is gone)", n)
	}
	// Every source row has its new vector, for its current image.
	rows, err := s.conn.Query(context.Background(), `SELECT p.id, p.img, v.v::real[] FROM public.photos p LEFT JOIN public.vecs v USING (id) ORDER BY p.id`)
	if err != nil {
		t.Fatal(err)
	}
	var id, checked int
	var img []byte
	var vec []float32
	_, err = pgx.ForEachRow(rows, []any{&id, &img, &vec}, func() error {
		want := versionVector(2, 16, img)
		if len(vec) != 16 || vec[0] != 2 || vec[5] != want[5] {
			t.Errorf("row %d: vector %v, want model b's of its image", id, vec)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked != 220 {
		t.Errorf("%d source rows, want 220", checked)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs v WHERE NOT EXISTS (SELECT FROM public.photos p WHERE p.id = v.id)"); n != 0 {
		t.Errorf("%d target rows without a source row (deleted or re-keyed)", n)
	}
	// The index: same name, method, operator class and options, on the new column.
	x.checkIndex(t)
	// Paid once: the probe, each row's image at the start, the 30 inserted and the 20 new images.
	if n, max := x.b.calls.Load(), int64(1+200+30+20); n > max || n < 200 {
		t.Errorf("model b was called %d times, want at most %d", n, max)
	}
	var version string
	if err := s.conn.QueryRow(context.Background(), "SELECT version FROM pgimageai.rule_versions WHERE rule = 'vec'").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'vec' AND version IS DISTINCT FROM $1", version); n != 0 {
		t.Errorf("%d stored results of rule vec are not of its live version", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule LIKE 'vec@%'"); n != 0 {
		t.Errorf("%d results of the side rule left", n)
	}
	var lockMS float64
	if err := s.conn.QueryRow(context.Background(), "SELECT lock_ms FROM pgimageai.switch_history WHERE rule = 'vec'").Scan(&lockMS); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples, longest %s; switch lock %.1f ms; model b calls %d", sm.samples.Load(), time.Duration(sm.worst.Load()), lockMS, x.b.calls.Load())
	// New rows after the switch get the new version in the live column.
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (9000, $1)", pngImage(t, 9000))
	integration.WaitFor(t, 30*time.Second, "a new row's vector", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE id = 9000 AND vector_dims(v) = 16") == 1
	})
}

// TestSwitchCancelled: changing the model back before the switch ends
// cancels it — the shadow column goes, the live column never changed — and
// changing it again starts a switch that completes.
func TestSwitchCancelled(t *testing.T) {
	x := newSwitchSetup(t, 100)
	x.start(t)
	s := x.s
	x.waitA(t, 100)
	sm := startSampler(t, x)
	x.b.delay.Store(int64(100 * time.Millisecond))
	x.toB(t)
	integration.WaitFor(t, 30*time.Second, "some of model b's calls", func() bool { return x.b.calls.Load() > 5 })
	var shadow string
	if err := s.conn.QueryRow(context.Background(), "SELECT shadow_column FROM pgimageai.switches WHERE rule = 'vec'").Scan(&shadow); err != nil {
		t.Fatal(err)
	}
	if typ := vecsColumnType(t, s.conn, shadow); typ != "vector(16)" {
		t.Fatalf("shadow column %s is %q, want vector(16)", shadow, typ)
	}
	s.exec(t, "UPDATE pgimageai.models SET base_url = (SELECT base_url FROM pgimageai.versions v JOIN pgimageai.rule_versions r ON r.version = v.id WHERE r.rule = 'vec'), model = 'model-a' WHERE name = 'emb'")
	x.waitOutcome(t, "cancelled", 60*time.Second)
	integration.WaitFor(t, 30*time.Second, "the shadow column dropped", func() bool { return vecsColumnType(t, s.conn, shadow) == "" })
	calls := x.b.calls.Load()
	time.Sleep(time.Second)
	if n := x.b.calls.Load(); n > calls+8 {
		t.Errorf("model b still called after the cancel: %d then %d", calls, n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches"); n != 0 {
		t.Errorf("%d switches left after the cancel", n)
	}
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Errorf("live column is %q, want vector(8)", typ)
	}
	// Again, slowly, and changed to a third model before it ends: the
	// second switch is cancelled for the third, which completes.
	x.toB(t)
	integration.WaitFor(t, 30*time.Second, "model b called again", func() bool { return x.b.calls.Load() > calls+3 })
	c := newFakeModel(t, "model-c", 3, 16)
	s.exec(t, "UPDATE pgimageai.models SET base_url = $1, model = 'model-c' WHERE name = 'emb'", c.url)
	x.waitOutcome(t, "switched", 120*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec' AND outcome = 'cancelled'"); n != 2 {
		t.Errorf("%d cancelled switches, want 2", n)
	}
	x.checkSwitched(t, sm, 3, 16, 100)
}

// TestSwitchHeldForcedAborted: rows the new model fails hold the switch
// (state held, their errors rows); a retry of the side rule's rows, once
// the model answers them, lets it switch. Failed rows again hold the next
// switch, and an operator's force switches with them NULL. An abort drops
// the side work and keeps the live column's version.
func TestSwitchHeldForcedAborted(t *testing.T) {
	x := newSwitchSetup(t, 40)
	failing := func(f *fakeModel, fail bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, id := range []int{3, 7} {
			f.fail[sha256.Sum256(pngImage(t, id))] = fail
		}
	}
	failing(x.b, true)
	x.start(t)
	s := x.s
	x.waitA(t, 40)
	x.toB(t)
	held := func(what string) {
		t.Helper()
		integration.WaitFor(t, 60*time.Second, what, func() bool {
			return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE rule = 'vec' AND state = 'held' AND detail LIKE '2 rows failed%'") == 1
		})
	}
	held("the switch to model b held")
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column is %q while held, want vector(8)", typ)
	}
	var side string
	if err := s.conn.QueryRow(context.Background(), "SELECT side_rule FROM pgimageai.switches WHERE rule = 'vec'").Scan(&side); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = $1 AND resolved_at IS NULL AND reason = 'bad_response'", side); n != 2 {
		t.Errorf("%d open bad_response rows of the side rule, want 2", n)
	}
	// The model is fixed; a retry of the side rule's rows resumes the switch.
	failing(x.b, false)
	s.exec(t, "INSERT INTO pgimageai.retry_requests (rule) VALUES ($1)", side)
	x.waitOutcome(t, "switched", 60*time.Second)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = 16"); n != 40 {
		t.Errorf("%d rows of model b after the retry and the switch, want 40", n)
	}

	// Model c fails two rows too: forced, they are left NULL.
	c := newFakeModel(t, "model-c", 3, 4)
	failing(c, true)
	s.exec(t, "UPDATE pgimageai.models SET base_url = $1, model = 'model-c' WHERE name = 'emb'", c.url)
	held("the switch to model c held")
	s.exec(t, "UPDATE pgimageai.switches SET request = 'force' WHERE rule = 'vec'")
	x.waitOutcome(t, "forced", 60*time.Second)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NULL"); n != 2 {
		t.Errorf("%d NULL rows after the forced switch, want 2", n)
	}
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(4)" {
		t.Errorf("live column is %q after the forced switch, want vector(4)", typ)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'vec' AND resolved_at IS NULL AND reason = 'bad_response'"); n != 2 {
		t.Errorf("%d open errors rows of rule vec after the forced switch, want its 2 failed rows", n)
	}

	// An abort: to model d, then aborted.
	d := newFakeModel(t, "model-d", 4, 6)
	d.delay.Store(int64(200 * time.Millisecond))
	s.exec(t, "UPDATE pgimageai.models SET base_url = $1, model = 'model-d' WHERE name = 'emb'", d.url)
	integration.WaitFor(t, 30*time.Second, "model d called", func() bool { return d.calls.Load() > 1 })
	s.exec(t, "UPDATE pgimageai.switches SET request = 'abort' WHERE rule = 'vec'")
	x.waitOutcome(t, "aborted", 60*time.Second)
	integration.WaitFor(t, 30*time.Second, "the shadow column dropped", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.vecs'::regclass AND attnum > 0 AND NOT attisdropped") == 2
	})
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE rule = 'vec' AND state = 'aborted'"); n != 1 {
		t.Errorf("the aborted switch is not kept as aborted (%d rows)", n)
	}
	// The rule goes on with the live version (model c) for new rows.
	cCalls := c.calls.Load()
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (500, $1)", pngImage(t, 500))
	integration.WaitFor(t, 30*time.Second, "the new row embedded by the live version", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE id = 500 AND vector_dims(v) = 4") == 1
	})
	if c.calls.Load() != cCalls+1 {
		t.Errorf("model c calls %d → %d, want one more", cCalls, c.calls.Load())
	}
}

// TestSwitchWriteBack: a write-back AI_IMAGE_EMBED rule (its target is its
// source table) switches too: the shadow column is added to the source
// table, filled by the bridge's own updates (which it does not read back
// as changes), and switched in one transaction; rows changed meanwhile
// get both versions, and no write loops.
func TestSwitchWriteBack(t *testing.T) {
	a := newFakeModel(t, "model-a", 1, 8)
	b := newFakeModel(t, "model-b", 2, 16)
	s := newSource(t)
	s.exec(t, "CREATE EXTENSION IF NOT EXISTS vector")
	s.exec(t, "ALTER TABLE public.photos ADD COLUMN emb vector(8)")
	for id := 1; id <= 30; id++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
	}
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ('emb', 'vllm', $1, 'model-a')`, a.url)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('wb', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'emb', NULL, 'public.photos', 'emb')`)
	cfg := s.config(t)
	cfg.Registry.Register("vllm", vllm.Factory)
	s.start(t, cfg)
	integration.WaitFor(t, 60*time.Second, "30 vectors of model a", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.photos WHERE emb IS NOT NULL") == 30
	})
	s.exec(t, "UPDATE pgimageai.models SET base_url = $1, model = 'model-b' WHERE name = 'emb'", b.url)
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (100, $1)", pngImage(t, 100))
	integration.WaitFor(t, 60*time.Second, "the switch", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'wb' AND outcome = 'switched'") == 1
	})
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.photos WHERE vector_dims(emb) = 16 AND (emb::real[])[1] = 2"); n != 31 {
		t.Errorf("%d rows hold model b's vector, want 31", n)
	}
	calls := b.calls.Load()
	time.Sleep(2 * time.Second)
	if n := b.calls.Load(); n != calls || n > 32 {
		t.Errorf("model b called %d then %d times (31 rows and a probe): a write-back loop", calls, n)
	}
}

// TestSwitchBudget: the new model's daily cap applies to the side work:
// the rows it refuses (budget_exhausted) hold the switch, the live column
// keeps serving; once the cap is raised and the rows retried, it switches,
// and no row was paid twice.
func TestSwitchBudget(t *testing.T) {
	x := newSwitchSetup(t, 30)
	x.start(t)
	s := x.s
	x.waitA(t, 30)
	s.exec(t, `UPDATE pgimageai.models SET base_url = $1, model = 'model-b', options = '{"max_calls_per_day": 10}' WHERE name = 'emb'`, x.b.url)
	integration.WaitFor(t, 60*time.Second, "the switch held by the budget", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE rule = 'vec' AND state = 'held'") == 1 &&
			queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule LIKE 'vec@%' AND reason = 'budget_exhausted' AND resolved_at IS NULL") > 0
	})
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column %q while the budget holds the switch, want vector(8)", typ)
	}
	if n := x.b.calls.Load(); n > 11 {
		t.Errorf("model b called %d times under a cap of 10 (and one probe)", n)
	}
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_calls_per_day": 1000}' WHERE name = 'emb'`)
	s.exec(t, `INSERT INTO pgimageai.retry_requests (reason) VALUES ('budget_exhausted')`)
	x.waitOutcome(t, "switched", 60*time.Second)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = 16"); n != 30 {
		t.Errorf("%d rows of model b, want 30", n)
	}
	if n := x.b.calls.Load(); n > 31 {
		t.Errorf("model b called %d times for 30 rows and a probe", n)
	}
}

// TestSwitchGroups: a switch of one rule group's rule goes on while the
// bridge of another group on the same database reloads its rules: that
// bridge neither cancels it nor pays for it.
func TestSwitchGroups(t *testing.T) {
	x := newSwitchSetup(t, 40)
	s := x.s
	s.exec(t, "UPDATE pgimageai.rules SET rule_group = 'g2' WHERE name = 'vec'")
	ai := newFakeAI(t)
	s.model(t, "cap", ai, `{}`)
	s.rule(t, "captions", "cap", "public.caps", "caption") // the default group
	cfg := s.config(t)
	cfg.Registry.Register("vllm", vllm.Factory)
	s.start(t, cfg)
	g2 := *s
	g2.slot = s.slot + "_g2"
	cfg2 := g2.config(t)
	cfg2.Group = "g2"
	cfg2.Registry.Register("vllm", vllm.Factory)
	g2.start(t, cfg2)
	x.waitA(t, 40)

	x.b.delay.Store(int64(50 * time.Millisecond))
	x.toB(t)
	integration.WaitFor(t, 30*time.Second, "the switch to start", func() bool { return x.b.calls.Load() > 2 })
	for i := 0; i < 4; i++ { // the default group's bridge reloads its rules
		s.exec(t, "UPDATE pgimageai.rules SET enabled = $1 WHERE name = 'captions'", i%2 == 1)
		time.Sleep(200 * time.Millisecond)
	}
	x.waitOutcome(t, "switched", 90*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'vec' AND outcome <> 'switched'"); n != 0 {
		t.Errorf("%d switches of group g2's rule cancelled or aborted by the other group", n)
	}
	if n := x.b.calls.Load(); n > 41 {
		t.Errorf("model b called %d times for 40 rows and a probe", n)
	}
}

// TestSwitchObstacleAfterReady: a view made on the live column after the
// switch was found ready (while its transaction waits for a row of the
// bookkeeping) makes the switch transaction fail; after a few tries the
// bridge starts over from its checkpoint, where the switch is held with
// the view named, the live column whole. Once the view is dropped, it
// switches.
func TestSwitchObstacleAfterReady(t *testing.T) {
	x := newSwitchSetup(t, 30)
	x.start(t)
	s := x.s
	x.waitA(t, 30)
	holder := s.db.Connect(t)
	tx, err := holder.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "SELECT FROM pgimageai.results WHERE rule = 'vec' LIMIT 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	x.toB(t)
	integration.WaitFor(t, 60*time.Second, "the switch transaction waiting", func() bool {
		return queryInt(t, s.conn, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM pgimageai.results WHERE rule = $1'`) > 0
	})
	s.exec(t, "CREATE VIEW public.vecs_view AS SELECT id, v FROM public.vecs")
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	integration.WaitFor(t, 90*time.Second, "the switch held by the view", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches WHERE rule = 'vec' AND state = 'held' AND detail LIKE '%vecs_view%'") == 1
	})
	if typ := vecsColumnType(t, s.conn, "v"); typ != "vector(8)" {
		t.Fatalf("live column %q while held, want vector(8)", typ)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs_view WHERE (v::real[])[1] = 1"); n != 30 {
		t.Errorf("%d rows of model a through the view while held, want 30", n)
	}
	s.exec(t, "DROP VIEW public.vecs_view")
	x.waitOutcome(t, "switched", 60*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = 16"); n != 30 {
		t.Errorf("%d rows of model b after the switch, want 30", n)
	}
}

// TestSwitchImageFaults: rows whose image is NULL or not an image cost the
// new model no call and do not hold the switch (the live column holds NULL
// for them too): it switches unforced, the NULL image with no errors row,
// the unknown one with its unknown_format row, now the rule's.
func TestSwitchImageFaults(t *testing.T) {
	x := newSwitchSetup(t, 10)
	s := x.s
	s.exec(t, "INSERT INTO public.photos (id, img) VALUES (11, NULL), (12, '\\x00010203'::bytea)")
	x.start(t)
	integration.WaitFor(t, 60*time.Second, "10 vectors of model a and the unknown image's error", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE v IS NOT NULL") == 10 &&
			queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'vec' AND reason = 'unknown_format' AND resolved_at IS NULL") == 1
	})
	x.toB(t)
	x.waitOutcome(t, "switched", 60*time.Second)
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE vector_dims(v) = 16"); n != 10 {
		t.Errorf("%d rows of model b, want 10", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.vecs WHERE id IN (11, 12) AND v IS NOT NULL"); n != 0 {
		t.Errorf("%d of the NULL and unknown images have a vector", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE rule = 'vec' AND resolved_at IS NULL AND reason = 'unknown_format' AND source_key = '{\"id\": 12}'"); n != 1 {
		t.Errorf("%d open unknown_format rows of the unknown image after the switch, want 1", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.errors WHERE source_key = '{\"id\": 11}'"); n != 0 {
		t.Errorf("%d errors rows of the NULL image, want none", n)
	}
	if n := x.b.calls.Load(); n != 11 {
		t.Errorf("model b called %d times, want 11 (10 images and the probe)", n)
	}
}
