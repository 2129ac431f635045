package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/replication"
)

var slotSeq atomic.Int64

// source is a migrated test database with a photos table.
type source struct {
	db   *integration.Database
	conn *pgx.Conn
	slot string
}

// newSource migrates a fresh database and creates public.photos(id int
// primary key, img bytea, note text).
func newSource(t testing.TB) *source {
	t.Helper()
	return newSourceOn(t, integration.NewDatabase(t))
}

// newSourceOn is newSource on a given database.
func newSourceOn(t testing.TB, db *integration.Database) *source {
	t.Helper()
	conn := db.Connect(t)
	if _, err := migrations.Apply(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, note text)`)
	return &source{db: db, conn: conn, slot: fmt.Sprintf("pgimageai_t%d", slotSeq.Add(1))}
}

// exec runs sql on the source and fails the test on error.
func (s *source) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := s.conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// model inserts an openai model row pointing at ai.
func (s *source) model(t testing.TB, name string, ai *fakeAI, options string) {
	t.Helper()
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, base_url, model, options) VALUES ($1, 'openai', $2, 'gpt-test', $3)`,
		name, ai.BaseURL(), options)
}

// rule inserts an AI_IMAGE_COMPLETE rule on public.photos.img.
func (s *source) rule(t testing.TB, name, model, target, column string) {
	t.Helper()
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ($1, 'public.photos', 'img', 'AI_IMAGE_COMPLETE', $2, 'Describe the image', $3, $4)`, name, model, target, column)
}

func (s *source) config(t testing.TB) bridge.Config {
	reg := provider.NewRegistry()
	reg.Register("openai", openai.Factory)
	return bridge.Config{
		SourceDSN: s.db.DSN(), Stream: bridge.Stream{Slot: s.slot, Publication: s.slot}, Providers: bridge.Providers{Registry: reg, Env: os.LookupEnv},
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Timing: bridge.Timing{StatusInterval: 500 * time.Millisecond},
	}
}

// start runs a bridge in this process until the test ends; stop stops it
// gracefully and returns Run's error.
func (s *source) start(t testing.TB, cfg bridge.Config) (b *bridge.Bridge, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b = bridge.New(cfg)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var stopped atomic.Bool
	var runErr error
	stop = func() error {
		if stopped.CompareAndSwap(false, true) {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(60 * time.Second):
				runErr = fmt.Errorf("bridge did not stop within 60s")
			}
		}
		return runErr
	}
	t.Cleanup(func() { stop() })
	s.waitStreaming(t, done)
	return b, stop
}

// waitStreaming waits until a bridge streams from the slot; failed, when it
// yields, means the bridge stopped first.
func (s *source) waitStreaming(t testing.TB, failed <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	// A slot is active already while it is being created; streaming means
	// its consistent point is fixed and START_REPLICATION ran.
	for queryInt(t, s.conn, `SELECT count(*) FROM pg_replication_slots sl JOIN pg_stat_replication r ON r.pid = sl.active_pid
WHERE sl.slot_name = $1 AND r.state = 'streaming'`, s.slot) == 0 {
		select {
		case err := <-failed:
			t.Fatalf("bridge stopped before streaming: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("bridge not streaming after 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sync emits a logical message in its own transaction and waits until the
// slot confirmed it: everything committed before it has been applied.
func (s *source) sync(t testing.TB, timeout time.Duration) {
	t.Helper()
	var lsn replication.LSN
	if err := s.conn.QueryRow(context.Background(), "SELECT pg_logical_emit_message(true, 'pgimageai-test', 'sync')").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	integration.WaitFor(t, timeout, fmt.Sprintf("slot %s to confirm %s", s.slot, lsn), func() bool {
		var confirmed *replication.LSN
		err := s.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = $1", s.slot).Scan(&confirmed)
		return err == nil && confirmed != nil && *confirmed > lsn
	})
}

// queryInt runs a query returning one integer.
func queryInt(t testing.TB, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Test images: real encodings from the standard library, distinct per seed.
func pngImage(t testing.TB, seed int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, testImage(seed)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegImage(t testing.TB, seed int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(seed), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gifImage returns a GIF89a, or with v87 the same image labelled GIF87a (the
// encoder writes no 89a extensions for a single still frame).
func gifImage(t testing.TB, seed int, v87 bool) []byte {
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(seed), nil); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	if v87 {
		copy(out, "GIF87a")
	}
	return out
}

// webpImage returns a lossless WebP container holding a VP8L bitstream
// header; the fake provider checks only the bytes it is sent.
func webpImage(seed int) []byte {
	payload := []byte{0x2f, 0x00, 0x00, 0x00, 0x00, byte(seed), byte(seed >> 8), 0, 0}
	b := []byte("RIFF")
	size := 4 + 8 + len(payload)
	b = append(b, byte(size), byte(size>>8), byte(size>>16), byte(size>>24))
	b = append(b, "WEBPVP8L"...)
	n := len(payload)
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	return append(b, payload...)
}

func testImage(seed int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := 0; x < 8; x++ {
		for y := 0; y < 8; y++ {
			img.Set(x, y, color.RGBA{uint8(seed * 7), uint8(x * 31), uint8(y*29 + seed), 255})
		}
	}
	// The first pixel spells the seed, so that every seed gives distinct bytes.
	img.Set(0, 0, color.RGBA{uint8(seed), uint8(seed >> 8), uint8(seed >> 16), 255})
	return img
}
