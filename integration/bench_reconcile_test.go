package integration_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkReconcile measures `pgimageai reconcile` on a source of
// PGIMAGEAI_RECONCILE_ROWS rows (default 1,000,000; images NULL, as only
// keys are read) whose target has 1,000 results of rows no longer in the
// source and lacks 1,000 rows: the keys read per second (source and target
// rows together) against a bare anti-join of the same tables in the same
// run (the two NOT EXISTS queries that find the same rows, run by the
// server alone: what the machine allows), their ratio, and the command's
// peak RSS, which must not grow with the table.
func BenchmarkReconcile(b *testing.B) {
	if b.N > 1 {
		b.Skip("one iteration is the whole measurement; run with -benchtime=1x") // ok-to-skip: benchmark shape
	}
	rows := 1000000
	if v := os.Getenv("PGIMAGEAI_RECONCILE_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil || rows < 2000 {
			b.Fatalf("PGIMAGEAI_RECONCILE_ROWS=%q: want a number of at least 2000", v)
		}
	}
	const drift = 1000
	s := newSource(b)
	s.exec(b, `INSERT INTO pgimageai.models (name, provider, model) VALUES ('local', 'local', 'local')`)
	s.exec(b, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'local', 'Describe', 'public.captions', 'caption')`)
	start := time.Now()
	s.exec(b, fmt.Sprintf(`INSERT INTO public.photos (id) SELECT generate_series(1, %d)`, rows))
	s.exec(b, `CREATE TABLE public.captions (id int PRIMARY KEY, caption text)`)
	s.exec(b, fmt.Sprintf(`INSERT INTO public.captions (id, caption) SELECT i, 'c' FROM generate_series(1, %d) i`, rows-drift))
	s.exec(b, fmt.Sprintf(`INSERT INTO public.captions (id, caption) SELECT i, 'old' FROM generate_series(%d, %d) i`, rows+1, rows+drift))
	s.exec(b, `VACUUM ANALYZE public.photos, public.captions`)
	b.Logf("%d source rows, %d target rows made in %s", rows, rows, time.Since(start).Round(time.Millisecond))
	keys := float64(2 * rows) // source and target keys, each read once

	// What the server alone takes to find the same rows: the best of
	// three runs, warm (the machine is shared).
	var bare time.Duration
	for i := range 3 {
		start = time.Now()
		missing := queryInt(b, s.conn, `SELECT count(*) FROM (SELECT s.id FROM public.photos s WHERE NOT EXISTS (SELECT FROM public.captions t WHERE t.id = s.id)) x`)
		orphans := queryInt(b, s.conn, `SELECT count(*) FROM (SELECT t.id FROM public.captions t WHERE NOT EXISTS (SELECT FROM public.photos s WHERE s.id = t.id)) x`)
		if took := time.Since(start); i == 0 || took < bare {
			bare = took
		}
		if missing != drift || orphans != drift {
			b.Fatalf("anti-join found %d missing and %d orphans, want %d each", missing, orphans, drift)
		}
	}

	cmd := exec.Command(pgimageaiBinary(b), "reconcile", "--dsn", s.db.DSN(), "--slot", s.slot)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("pgimageai reconcile: %v\n%s", err, out.String())
	}
	took := time.Since(start)
	peak := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // kB on Linux
	b.Logf("pgimageai reconcile:\n%s", out.String())
	want := fmt.Sprintf("%d results of rows no longer in the source (%d removed); %d rows without a result", drift, drift, drift)
	if !strings.Contains(out.String(), want) {
		b.Fatalf("output lacks %q", want)
	}
	if n := queryInt(b, s.conn, "SELECT count(*) FROM public.captions"); n != rows-drift {
		b.Fatalf("%d target rows after reconcile, want %d", n, rows-drift)
	}
	rate, bareRate := keys/took.Seconds(), keys/bare.Seconds()
	b.ReportMetric(rate, "keys/s")
	b.ReportMetric(bareRate, "anti-join-keys/s")
	b.ReportMetric(rate/bareRate, "ratio")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.Logf("%d rows: reconcile %s (%.0f keys/s), bare anti-join %s (%.0f keys/s), ratio %.3f, peak RSS %.1f MiB",
		rows, took.Round(time.Millisecond), rate, bare.Round(time.Millisecond), bareRate, rate/bareRate, float64(peak)/(1<<20))
}
