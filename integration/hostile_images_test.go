package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/normalize/normtest"
)

// TestHostileImages: a role that may only insert into a source table
// inserts decompression bombs through the running bridge (a process, with
// the default byte budget of 256 MiB): HEIC and AVIF files of under a
// kilobyte whose ispe box says 64 × 64 and whose coded image is 4096 ×
// 4096, and progressive JPEGs of 2,000 scans in 44 KB, four rows of each,
// in one transaction. Each row gets its too_large errors row; the bridge's
// peak RSS stays within the budget and the 64 MiB its memory bound allows
// beyond it; and it keeps streaming: the rows after the bombs (a PNG and a
// real HEIC) get their captions.
func TestHostileImages(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	ctx := context.Background()
	s := newSource(t)
	s.exec(t, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('pixels', 'local', 'any')`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('describe', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'pixels', 'Describe', 'public.captions', 'caption')`)
	s.exec(t, `CREATE ROLE hostile_writer LOGIN`)
	t.Cleanup(func() { s.conn.Exec(context.Background(), `DROP OWNED BY hostile_writer; DROP ROLE hostile_writer`) })
	s.exec(t, `GRANT INSERT ON public.photos TO hostile_writer`)
	p := s.runProcess(t)

	bombs := []struct {
		name string
		img  []byte
	}{
		{"heic 64x64 coded 4096x4096", normtest.HEIC(64, 64, 4096, 4096)},
		{"avif 64x64 coded 4096x4096", normtest.AVIF(64, 64, 4096, 4096)},
		{"jpeg of 2000 scans", normtest.ProgressiveJPEG(2048, 2000)},
	}
	const each = 4
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL ROLE hostile_writer`); err != nil {
		t.Fatal(err)
	}
	id := 0
	for _, b := range bombs {
		for range each {
			id++
			if _, err := tx.Exec(ctx, `INSERT INTO public.photos (id, img, note) VALUES ($1, $2, $3)`, id, b.img, b.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.exec(t, `INSERT INTO public.photos (id, img, note) VALUES (100, $1, 'png'), (101, $2, 'heic')`, pngImage(t, 100), fixture(t, "gradient.heic"))
	integration.WaitFor(t, 2*time.Minute, "the captions of the rows after the bombs", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'captions'") == 1 &&
			queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE id IN (100, 101) AND caption IS NOT NULL") == 2
	})
	took := time.Since(start)
	s.sync(t, time.Minute)
	hwm := vmHWM(t, p.cmd.Process.Pid)

	rows, err := s.conn.Query(ctx, `SELECT p.note, count(e.*) FILTER (WHERE e.reason = 'too_large'), count(e.*)
FROM public.photos p LEFT JOIN pgimageai.errors e ON (e.source_key->>'id')::int = p.id AND e.rule = 'describe'
WHERE p.id <= $1 GROUP BY p.note ORDER BY p.note`, id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for rows.Next() {
		var note string
		var tooLarge, all int64
		if err := rows.Scan(&note, &tooLarge, &all); err != nil {
			t.Fatal(err)
		}
		got[note] = [2]int64{tooLarge, all}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bombs {
		if g := got[b.name]; g[0] != each || g[1] != each {
			t.Errorf("%s: %d too_large errors rows of %d, want %d of %d", b.name, g[0], g[1], each, each)
		}
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE id <= $1 AND caption IS NOT NULL", id); n != 0 {
		t.Errorf("%d bombs got a caption", n)
	}
	var detail string
	if err := s.conn.QueryRow(ctx, `SELECT detail FROM pgimageai.errors WHERE (source_key->>'id')::int = 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	const budget, allowed = 256 << 20, 64 << 20
	t.Logf("%d bombs, then 2 rows captioned %s later; bridge peak RSS %.1f MiB (bound %d MiB); e.g. %s",
		len(bombs)*each, took.Round(time.Millisecond), float64(hwm)/(1<<20), (budget+allowed)>>20, detail)
	if hwm > budget+allowed {
		t.Errorf("bridge peak RSS %d bytes, over the byte budget and 64 MiB (%d)", hwm, budget+allowed)
	}
}
