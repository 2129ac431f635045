package integration_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/openai"
)

// TestFailover runs the bridge on a multi-host DSN (primary, then standby,
// target_session_attrs=read-write) against a PostgreSQL 17 primary with a
// physical standby that synchronises failover slots, while rows are inserted
// every 50 ms. The primary is crashed (immediate shutdown) and the standby
// promoted. The bridge must follow by itself — no restart, no manual step —
// with nothing lost (every row on the new primary gets its caption, rows
// inserted after the promotion included) and nothing called twice (each
// image reaches the provider once, except a call that was in flight at the
// crash and whose result therefore never committed).
func TestFailover(t *testing.T) {
	primary, standby := integration.StartStandby(t)
	ctx := context.Background()
	if err := primary.Exec(ctx, "postgres", "CREATE DATABASE app"); err != nil {
		t.Fatal(err)
	}
	dsn := integration.MultiHostDSN("app", primary, standby)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	ai := newFakeAI(t)
	for _, sql := range []string{
		"CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, note text)",
		"INSERT INTO pgimageai.models (name, provider, base_url, model) VALUES ('vision', 'openai', '" + ai.BaseURL() + "', 'gpt-test')",
		`INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image', 'public.captions', 'caption')`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn.Close(ctx)

	reg := provider.NewRegistry()
	reg.Register("openai", openai.Factory)
	const slot = "pgimageai_failover"
	cfg := bridge.Config{
		SourceDSN: dsn, Stream: bridge.Stream{Slot: slot, Publication: slot}, Providers: bridge.Providers{Registry: reg, Env: os.LookupEnv},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Timing: bridge.Timing{StatusInterval: 500 * time.Millisecond, FailoverWait: time.Minute},
	}
	runCtx, stopBridge := context.WithCancel(ctx)
	b := bridge.New(cfg)
	done := make(chan error, 1)
	go func() { done <- b.Run(runCtx) }()
	t.Cleanup(func() {
		stopBridge()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the bridge did not stop within a minute")
		}
	})

	// The inserter: one row every 50 ms, through the same multi-host DSN,
	// reconnecting after errors. A row whose commit failed may or may not
	// exist; the new primary says.
	var mu sync.Mutex
	committed, attempted := 0, map[int]bool{}
	stopInsert := make(chan struct{})
	insertDone := make(chan struct{})
	go func() {
		defer close(insertDone)
		var c *pgx.Conn
		defer func() {
			if c != nil {
				c.Close(context.Background())
			}
		}()
		for id := 1; ; id++ {
			select {
			case <-stopInsert:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if c == nil {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				c, _ = pgx.Connect(cctx, dsn)
				cancel()
				if c == nil {
					id--
					continue
				}
			}
			mu.Lock()
			attempted[id] = true
			mu.Unlock()
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Exec(ictx, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
			cancel()
			if err != nil {
				c.Close(context.Background())
				c = nil
				continue
			}
			mu.Lock()
			committed++
			mu.Unlock()
		}
	}()

	// Wait until the standby holds a synchronised copy of the slot that has
	// moved past the first rows.
	var sconn *pgx.Conn
	integration.WaitFor(t, 30*time.Second, "database app on the standby", func() bool {
		sconn, err = pgx.Connect(ctx, standby.DSN("app")) // replayed, not only flushed
		return err == nil
	})
	integration.WaitFor(t, 90*time.Second, "the standby's copy of the slot, synced and moving", func() bool {
		var synced, failover bool
		var moved bool
		err := sconn.QueryRow(ctx, `SELECT synced, failover, confirmed_flush_lsn > '0/0' AND
  confirmed_flush_lsn >= (SELECT min(confirmed_flush_lsn) FROM pg_replication_slots) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&synced, &failover, &moved)
		mu.Lock()
		n := committed
		mu.Unlock()
		return err == nil && synced && failover && moved && n >= 40
	})
	sconn.Close(ctx)

	crashAt := time.Now()
	if err := primary.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if err := standby.Exec(ctx, "postgres", "SELECT pg_promote(true, 60)"); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("primary crashed; standby promoted %s later", promoted.Sub(crashAt).Round(time.Millisecond))
	// Results flowing again: a caption of a row newer than any captioned
	// at the promotion.
	pconn, err := pgx.Connect(ctx, standby.DSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	top := queryInt(t, pconn, "SELECT coalesce(max(id), 0) FROM public.captions")
	integration.WaitFor(t, 30*time.Second, "a new caption after the promotion", func() bool {
		return queryInt(t, pconn, "SELECT coalesce(max(id), 0) FROM public.captions") > top
	})
	resumed := time.Since(promoted)
	pconn.Close(ctx)
	time.Sleep(2 * time.Second)
	close(stopInsert)
	<-insertDone

	nconn, err := pgx.Connect(ctx, standby.DSN("app"))
	if err != nil {
		t.Fatal(err)
	}
	defer nconn.Close(ctx)
	want := map[int]string{}
	rows, err := nconn.Query(ctx, "SELECT id, img FROM public.photos")
	if err != nil {
		t.Fatal(err)
	}
	var id int
	var img []byte
	if _, err := pgx.ForEachRow(rows, []any{&id, &img}, func() error {
		want[id] = captionOf(magic.DataURL(magic.PNG, img))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := 0
	mu.Lock()
	for id := range want {
		if !attempted[id] {
			t.Errorf("row %d exists but was never inserted", id)
		}
	}
	t.Logf("%d rows inserted and committed, %d on the new primary", committed, len(want))
	mu.Unlock()
	integration.WaitFor(t, 60*time.Second, "every row of the new primary captioned", func() bool {
		got := captions(t, nconn)
		n := 0
		for id, c := range got {
			if want[id] == c {
				n++
			}
		}
		return n == len(want)
	})
	for _, r := range ai.Requests() {
		if r.DataURL != "" {
			after++
		}
	}
	assertCaptions(t, captions(t, nconn), want)
	if n := queryInt(t, nconn, "SELECT count(*) FROM pgimageai.errors WHERE resolved_at IS NULL"); n != 0 {
		t.Errorf("%d open errors rows after the failover", n)
	}
	if n := queryInt(t, nconn, "SELECT count(*) FROM pgimageai.slot_gaps"); n != 0 {
		t.Errorf("%d slot_gaps rows: the failover slot was not followed", n)
	}
	select {
	case err := <-done:
		t.Fatalf("the bridge stopped during the failover: %v", err)
	default:
	}

	// Nothing called twice: each image once, but for calls in flight at
	// the crash (at most the ones started in the last second before it).
	seen := map[string]int{}
	repeated := 0
	for _, r := range ai.Requests() {
		seen[r.DataURL]++
		if seen[r.DataURL] == 2 {
			repeated++
		}
	}
	t.Logf("%d provider calls for %d rows, %d images called twice; results flowed again %s after the promotion",
		after, len(want), repeated, resumed.Round(time.Millisecond))
	if repeated > 1 {
		t.Errorf("%d images were sent to the provider twice, want at most the one in flight at the crash", repeated)
	}
}
