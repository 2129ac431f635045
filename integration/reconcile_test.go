package integration_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
)

// Partition DDL sends nothing through pgoutput, and neither does a table
// dropped and created again: the bridge finds them in the catalog at each
// check (Timing.RecheckInterval) and reconciles.

// partitioned creates public.shots, partitioned by list on part, with
// partitions of every kind: p1 in public, p2 in another schema, p3
// sub-partitioned by range on id (leaves p3a, p3b), and a default
// partition; and a rule captioning it into public.shot_captions.
func partitioned(t *testing.T, s *source, ai *fakeAI) {
	t.Helper()
	s.exec(t, `CREATE SCHEMA archive;
CREATE TABLE public.shots (id int, part int, img bytea, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE public.shots_p1 PARTITION OF public.shots FOR VALUES IN (1);
CREATE TABLE archive.shots_p2 PARTITION OF public.shots FOR VALUES IN (2);
CREATE TABLE public.shots_p3 PARTITION OF public.shots FOR VALUES IN (3) PARTITION BY RANGE (id);
CREATE TABLE public.shots_p3a PARTITION OF public.shots_p3 FOR VALUES FROM (0) TO (1000);
CREATE TABLE public.shots_p3b PARTITION OF public.shots_p3 FOR VALUES FROM (1000) TO (2000);
CREATE TABLE public.shots_other PARTITION OF public.shots DEFAULT`)
	s.model(t, "vision", ai, `{}`)
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('shots', 'public.shots', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe the image', 'public.shot_captions', 'caption')`)
}

// insertShots inserts rows (id, part) with distinct images into table.
func insertShots(t *testing.T, s *source, table string, part int, ids ...int) {
	t.Helper()
	for _, id := range ids {
		s.exec(t, fmt.Sprintf("INSERT INTO %s (id, part, img) VALUES ($1, $2, $3)", table), id, part, pngImage(t, 7000+id))
	}
}

// shotKeys returns the (id, part) keys of public.shot_captions with a
// caption, as "id/part", sorted.
func shotKeys(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id || '/' || part FROM public.shot_captions WHERE caption IS NOT NULL ORDER BY id, part")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// sourceShotKeys returns the keys of public.shots, as shotKeys does.
func sourceShotKeys(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id || '/' || part FROM public.shots ORDER BY id, part")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// waitShots waits until the target's keys are want.
func waitShots(t *testing.T, s *source, want []string, what string) {
	t.Helper()
	sort.Strings(want)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := shotKeys(t, s.conn)
		sort.Strings(got)
		if strings.Join(got, ",") == strings.Join(want, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: target keys %v, want %v", what, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPartitionDDL: a partition attached with rows in it is backfilled
// (3 rows, 3 results); a partition detached, one dropped, one truncated
// and a sub-partition's leaf truncated lose their rows' results, while the
// other partitions keep theirs; the default partition and a partition in
// another schema are followed the same.
func TestPartitionDDL(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	partitioned(t, s, ai)
	insertShots(t, s, "public.shots", 1, 1, 2)
	insertShots(t, s, "public.shots", 2, 3, 4)
	insertShots(t, s, "public.shots", 3, 5, 1005)
	insertShots(t, s, "public.shots", 9, 6, 7)
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	s.start(t, cfg)
	waitShots(t, s, sourceShotKeys(t, s.conn), "the backfill")
	if got := len(shotKeys(t, s.conn)); got != 8 {
		t.Fatalf("%d results after the backfill, want 8", got)
	}

	// ATTACH: a table with 3 rows becomes a partition, in another schema.
	s.exec(t, `CREATE TABLE archive.shots_p4 (id int, part int, img bytea, PRIMARY KEY (id, part))`)
	insertShots(t, s, "archive.shots_p4", 4, 40, 41, 42)
	calls := ai.Count()
	s.exec(t, `ALTER TABLE public.shots ATTACH PARTITION archive.shots_p4 FOR VALUES IN (4)`)
	waitShots(t, s, sourceShotKeys(t, s.conn), "the attached partition's rows")
	if n := ai.Count() - calls; n != 3 {
		t.Errorf("%d calls for the attached partition's 3 rows, want 3", n)
	}
	// Rows streamed into it afterwards go on as usual.
	insertShots(t, s, "public.shots", 4, 43)
	waitShots(t, s, sourceShotKeys(t, s.conn), "a row inserted into the attached partition")

	// A sub-partition attached with rows (a partitioned table attached).
	s.exec(t, `CREATE TABLE public.shots_p5 (id int, part int, img bytea, PRIMARY KEY (id, part)) PARTITION BY RANGE (id);
CREATE TABLE public.shots_p5a PARTITION OF public.shots_p5 FOR VALUES FROM (0) TO (1000)`)
	insertShots(t, s, "public.shots_p5", 5, 50, 51)
	s.exec(t, `ALTER TABLE public.shots ATTACH PARTITION public.shots_p5 FOR VALUES IN (5)`)
	waitShots(t, s, sourceShotKeys(t, s.conn), "the attached sub-partitioned table's rows")

	// DETACH, DROP, TRUNCATE of partitions: 6 rows leave the table.
	calls = ai.Count()
	s.exec(t, `ALTER TABLE public.shots DETACH PARTITION public.shots_p1`)
	s.exec(t, `DROP TABLE archive.shots_p2`)
	s.exec(t, `TRUNCATE public.shots_other`)
	waitShots(t, s, sourceShotKeys(t, s.conn), "the results of the detached, dropped and truncated partitions' rows removed")
	// A leaf of a sub-partition truncated, and the default partition.
	s.exec(t, `TRUNCATE public.shots_p3b`)
	waitShots(t, s, sourceShotKeys(t, s.conn), "the results of a truncated sub-partition leaf's rows removed")
	want := []string{"5/3", "40/4", "41/4", "42/4", "43/4", "50/5", "51/5"}
	if got := shotKeys(t, s.conn); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("target keys %v, want %v", got, want)
	}
	if n := ai.Count() - calls; n != 0 {
		t.Errorf("%d calls for removing results, want 0", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'shots'"); n != len(want) {
		t.Errorf("%d stored inputs, want %d (one per remaining row)", n, len(want))
	}
}

// TestPartitionTruncateNotStreamed shows why the catalog is watched:
// pgoutput sends no TRUNCATE for a partition of a table published through
// its root (publish_via_partition_root), so without the watch its rows'
// results would stay.
func TestPartitionTruncateNotStreamed(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	partitioned(t, s, ai)
	insertShots(t, s, "public.shots", 1, 1, 2)
	insertShots(t, s, "public.shots", 2, 3)
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = time.Hour // no watch: only the stream
	s.start(t, cfg)
	waitShots(t, s, []string{"1/1", "2/1", "3/2"}, "the backfill")
	s.exec(t, `TRUNCATE public.shots_p1`)
	s.sync(t, 30*time.Second)
	if got := shotKeys(t, s.conn); len(got) != 3 {
		t.Fatalf("pgoutput sent the partition's TRUNCATE (target keys %v): the watch is not needed for it", got)
	}
}

// TestSourceDroppedAndCreatedAgain: a source table dropped and created
// again under its name is a new table: the old table's results go — also
// under keys the new table reuses — and the new table is backfilled.
func TestSourceDroppedAndCreatedAgain(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 4, 10, want)
	cfg := s.config(t)
	cfg.Timing.RecheckInterval = 300 * time.Millisecond
	s.start(t, cfg)
	integration.WaitFor(t, 60*time.Second, "the old table's results", func() bool { return len(captions(t, s.conn)) == 3 })

	s.exec(t, `DROP TABLE public.photos`)
	s.exec(t, `CREATE TABLE public.photos (id int PRIMARY KEY, img bytea, note text)`)
	// Key 1 again with another image, key 2 with none; key 3 is not there.
	img := pngImage(t, 501)
	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (1, $1), (2, NULL)`, img)
	want = map[int]string{1: captionOf(magic.DataURL(magic.PNG, img))}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := captions(t, s.conn)
		if len(got) == 2 && got[1] == want[1] && got[2] == "<NULL>" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new table's results only: target keys %s, captions %v, want key 1 with %q and key 2 with NULL", targetIDs(t, s.conn), got, want[1])
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Rows of the new table stream in.
	img = pngImage(t, 502)
	s.exec(t, `INSERT INTO public.photos (id, img) VALUES (7, $1)`, img)
	want[7] = captionOf(magic.DataURL(magic.PNG, img))
	want[2] = "<NULL>"
	s.sync(t, 30*time.Second)
	integration.WaitFor(t, 30*time.Second, "a streamed row of the new table", func() bool { return len(captions(t, s.conn)) == 3 })
	assertCaptions(t, captions(t, s.conn), want)
}

// drifted makes a source and a separate target as a restore of the target
// leaves them: the bridge computed rows 1..6, then stopped; the target is
// restored from a backup that has rows 10 and 11 (gone from the source)
// and lacks rows 2 and 3.
func drifted(t *testing.T) (s *source, target *source, ai *fakeAI, slot string) {
	t.Helper()
	s = newSource(t)
	target = newSource(t)
	ai = newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 7, 10, want)
	cfg := s.config(t)
	cfg.TargetDSN = target.db.DSN()
	_, stop := s.start(t, cfg)
	integration.WaitFor(t, 60*time.Second, "the backfill", func() bool { return len(captions(t, target.conn)) == 6 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	target.exec(t, `INSERT INTO public.captions (id, caption) VALUES (10, 'old ten'), (11, 'old eleven')`)
	target.exec(t, `DELETE FROM public.captions WHERE id IN (2, 3)`)
	target.exec(t, `DELETE FROM pgimageai.results WHERE rule = 'caption' AND source_key IN ('{"id": 2}', '{"id": 3}')`)
	return s, target, ai, s.slot
}

func reconcileCLI(t *testing.T, s, target *source, slot string, args ...string) (string, int) {
	t.Helper()
	all := append([]string{"reconcile", "--dsn", s.db.DSN(), "--target-dsn", target.db.DSN(), "--slot", slot}, args...)
	out, errOut, code := cli(t, nil, all...)
	t.Logf("pgimageai reconcile %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out + errOut, code
}

func targetIDs(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT id FROM public.captions ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ids)
}

// TestReconcileDryRun: --dry-run says what it found and changes nothing.
func TestReconcileDryRun(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s, target, _, slot := drifted(t)
	before := targetIDs(t, target.conn)
	out, code := reconcileCLI(t, s, target, slot, "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"rule caption:", "2 results of rows no longer in the source would be removed", "2 rows without a result would be queued", "dry run: nothing changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if after := targetIDs(t, target.conn); after != before {
		t.Errorf("target keys %s after a dry run, were %s", after, before)
	}
	if n := queryInt(t, target.conn, "SELECT count(*) FROM pgimageai.backfills WHERE state = 'queued'"); n != 0 {
		t.Errorf("%d backfills queued by a dry run", n)
	}
}

// TestReconcile: the results of rows gone from the source are removed, the
// rows without a result are queued as a backfill, which the bridge runs
// when it starts: the target then equals the source's results, with calls
// for the missing rows only. Usage and unknown rules exit 2.
func TestReconcile(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s, target, ai, slot := drifted(t)
	out, code := reconcileCLI(t, s, target, slot)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"2 results of rows no longer in the source (2 removed)", "2 rows without a result (queued as a backfill"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if got := targetIDs(t, target.conn); got != "[1 4 5 6]" {
		t.Errorf("target keys %s after reconcile, want [1 4 5 6]", got)
	}
	if n := queryInt(t, target.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'queued'"); n != 1 {
		t.Fatalf("%d queued backfills, want 1", n)
	}
	calls := ai.Count()
	cfg := s.config(t)
	cfg.TargetDSN = target.db.DSN()
	s.start(t, cfg)
	integration.WaitFor(t, 60*time.Second, "the queued backfill", func() bool { return len(captions(t, target.conn)) == 6 })
	integration.WaitFor(t, 30*time.Second, "the queued backfill done", func() bool {
		return queryInt(t, target.conn, "SELECT count(*) FROM pgimageai.backfills WHERE rule = 'caption' AND state = 'done'") == 1
	})
	if n := ai.Count() - calls; n != 2 {
		t.Errorf("%d calls, want 2 (the missing rows only)", n)
	}
	// A second run finds nothing, while the bridge runs.
	out, code = reconcileCLI(t, s, target, slot)
	if code != 0 || !strings.Contains(out, "0 results of rows no longer in the source; 0 rows without a result") {
		t.Errorf("second reconcile: exit %d, output %q", code, out)
	}
	if _, code = reconcileCLI(t, s, target, slot, "--rule", "nope"); code != 2 {
		t.Errorf("--rule nope: exit %d, want 2", code)
	}
	if _, code = reconcileCLI(t, s, target, slot, "--bogus"); code != 2 {
		t.Errorf("--bogus: exit %d, want 2", code)
	}
}

// TestReconcileWhileStreaming: rows inserted while reconcile removes
// orphans keep their results (the delete is checked against the source
// after the target rows are locked).
func TestReconcileWhileStreaming(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	want := map[int]string{}
	insertRows(t, s, 1, 201, 50, want)
	s.start(t, s.config(t))
	integration.WaitFor(t, 60*time.Second, "the backfill", func() bool { return len(captions(t, s.conn)) == 200 })
	// Orphans under keys that the source is about to reuse.
	s.exec(t, `INSERT INTO public.captions (id, caption) SELECT g, 'stale' FROM generate_series(1000, 1999) g`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		insertRows(t, s, 1000, 2000, 25, want)
	}()
	out, code := reconcileCLI(t, s, s, s.slot)
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	s.sync(t, 60*time.Second)
	integration.WaitFor(t, 60*time.Second, "every row's result", func() bool { return len(captions(t, s.conn)) == len(want) })
	got := captions(t, s.conn)
	for id := 1000; id < 2000; id++ {
		if got[id] == "stale" {
			t.Fatalf("row %d kept its stale result", id)
		}
	}
	assertCaptions(t, got, want)
}
