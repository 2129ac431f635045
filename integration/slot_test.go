package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/integration"
	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/migrations"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/sink"
)

// Slot health and recovery: an invalidated slot stops the bridge with one
// message, pgimageai recover-slot gets it going again, and WAL of tables no
// rule reads never makes the slot hold WAL back.

// wantCLI runs cli and fails unless the exit code is code and the combined
// output holds every one of want.
func wantCLI(t testing.TB, env []string, code int, want []string, args ...string) string {
	t.Helper()
	out, errOut, got := cli(t, env, args...)
	if got != code {
		t.Fatalf("pgimageai %s: exit %d, want %d\n%s%s", strings.Join(args, " "), got, code, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out+errOut, w) {
			t.Errorf("pgimageai %s: output lacks %q:\n%s%s", strings.Join(args, " "), w, out, errOut)
		}
	}
	t.Logf("pgimageai %s (exit %d):\n%s%s", strings.Join(args, " "), got, out, errOut)
	return out + errOut
}

// walStatus reads the slot's wal_status ("" when the slot does not exist).
func walStatus(t testing.TB, conn *pgx.Conn, slot string) string {
	t.Helper()
	var status *string
	err := conn.QueryRow(context.Background(), "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) || status == nil {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return *status
}

// tableRows counts the rows of table in conn's database, 0 while it does not exist.
func tableRows(t testing.TB, conn *pgx.Conn, table string) int {
	t.Helper()
	if queryInt(t, conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", table) == 0 {
		return 0
	}
	return queryInt(t, conn, "SELECT count(*) FROM "+table)
}

// TestSlotInvalidatedRecovery invalidates the slot under a running `pgimageai
// run` (a provider call holds a transaction unacked while a WAL burst passes
// max_slot_wal_keep_size) on a server of its own, with the target in another
// database. The bridge must exit 1 with one message naming recover-slot.
// Rows are updated, inserted and deleted while it is down; recover-slot must
// refuse an active and a healthy slot, and after it a new run must leave the
// target equal to the source's current rows.
func TestSlotInvalidatedRecovery(t *testing.T) {
	pg := integration.StartPostgres(t)
	s := newSourceOn(t, pg.NewDatabase(t))
	target := pg.NewDatabase(t)
	tgt := target.Connect(t)
	ctx := context.Background()
	if _, err := migrations.Apply(ctx, tgt); err != nil {
		t.Fatal(err)
	}
	s.exec(t, "CREATE TABLE public.foreign_wal (id bigserial PRIMARY KEY, pad text)")
	ai := newFakeAI(t)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the fake server closes: no handler stays blocked
	s.model(t, "vision", ai, `{"max_retries": 0}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	env := []string{"PGIMAGEAI_DSN=" + s.db.DSN(), "PGIMAGEAI_TARGET_DSN=" + target.DSN(), "PGIMAGEAI_SLOT=" + s.slot, "PGIMAGEAI_PUBLICATION=" + s.slot}

	want := map[int]string{}
	insertRows(t, s, 1, 21, 10, want)
	p1 := s.runProcess(t, env[1])
	integration.WaitFor(t, 30*time.Second, "20 captions", func() bool { return tableRows(t, tgt, "public.captions") == 20 })
	wantCLI(t, env, 1, []string{"holds its leader lock", "stop it first"}, "recover-slot")

	// Hold a transaction unacked: the slot cannot advance past it.
	ai.Set(0, func(r aiRequest) (int, string) {
		<-gate
		return 200, captionOf(r.DataURL)
	})
	insertRows(t, s, 21, 22, 1, want)
	integration.WaitFor(t, 10*time.Second, "the call for row 21", func() bool { return ai.Count() == 21 })

	for _, sql := range []string{"ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()"} {
		if err := pg.Exec(ctx, "postgres", sql); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	bursts := 0
	integration.WaitFor(t, 30*time.Second, "the slot to lose its WAL", func() bool {
		bursts++
		s.exec(t, "INSERT INTO public.foreign_wal (pad) SELECT repeat('x', 1000) FROM generate_series(1, 1000)")
		s.exec(t, "SELECT pg_switch_wal()")
		s.exec(t, "CHECKPOINT")
		return walStatus(t, s.conn, s.slot) == "lost"
	})
	invalidated := time.Since(t0)
	select {
	case <-p1.done:
	case <-time.After(30 * time.Second):
		t.Fatal("pgimageai run still runs 30s after its slot was invalidated")
	}
	exited := time.Since(t0)
	var exit *exec.ExitError
	if !errors.As(p1.err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("pgimageai run ended with %v, want exit status 1", p1.err)
	}
	log, err := os.ReadFile(p1.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	var advice []string
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if strings.Contains(line, "level=INFO") {
			continue // the start-up line names the database, whose name is the test's
		}
		if strings.Contains(line, "recover-slot") || strings.Contains(line, "invalidated") {
			advice = append(advice, line)
		}
	}
	if len(advice) != 1 || !strings.HasPrefix(advice[0], "pgimageai run: ") || !strings.Contains(advice[0], "pgimageai recover-slot") ||
		strings.Count(advice[0], replication.ErrSlotInvalidated.Error()) != 1 {
		t.Errorf("want one message naming pgimageai recover-slot, got %d:\n%s", len(advice), strings.Join(advice, "\n"))
	}
	t.Logf("slot lost after %s (%d WAL bursts of ~1 MB); pgimageai run exited %s after the first burst with: %s",
		invalidated.Round(time.Millisecond), bursts, exited.Round(time.Millisecond), strings.Join(advice, "\n"))
	release()
	ai.Set(0, nil)

	// While the bridge is down: a new image, deletes, inserts.
	img5 := pngImage(t, 1005)
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 5", img5)
	want[5] = captionOf(magic.DataURL(magic.PNG, img5))
	s.exec(t, "DELETE FROM public.photos WHERE id IN (1, 2, 3)")
	delete(want, 1)
	delete(want, 2)
	delete(want, 3)
	insertRows(t, s, 22, 27, 5, want)

	wantLines(t, wantCLI(t, env, 0, nil, "status"), `^  wal_status +lost$`, `^  safe_wal_size +none \(WAL lost\)$`,
		`^  invalidated +.*pgimageai recover-slot`)
	var doc struct {
		Slot struct{ Health, Advice string } `json:"slot"`
	}
	out, _, _ := cli(t, env, "status", "--format", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	if doc.Slot.Health != "invalidated" || !strings.Contains(doc.Slot.Advice, "pgimageai recover-slot") {
		t.Errorf("status --format json: slot %+v, want health invalidated with advice", doc.Slot)
	}

	t1 := time.Now()
	wantCLI(t, env, 0, []string{"could not stream (wal_status lost", "dropped slot " + s.slot + " and re-created it",
		"forgot the checkpoint", "1 lane checkpoint", "1 backfill state", "deleted 3 rows whose source row no longer exists"}, "recover-slot")
	recovered := time.Since(t1)
	if got := walStatus(t, s.conn, s.slot); got != "reserved" {
		t.Errorf("after recover-slot the slot's wal_status is %q, want reserved", got)
	}
	if n := queryInt(t, tgt, "SELECT count(*) FROM public.captions WHERE id IN (1, 2, 3)"); n != 0 {
		t.Errorf("%d target rows of deleted source rows remain", n)
	}
	if n := tableRows(t, tgt, "public.captions"); n != 17 {
		t.Errorf("%d target rows after recover-slot, want 17 (rows 4 to 20; 21 never got its result)", n)
	}
	if n := queryInt(t, tgt, "SELECT count(*) FROM pgimageai.checkpoints WHERE slot = $1", s.slot) +
		queryInt(t, tgt, "SELECT count(*) FROM pgimageai.lane_checkpoints WHERE slot = $1", s.slot) +
		queryInt(t, tgt, "SELECT count(*) FROM pgimageai.backfills"); n != 0 {
		t.Errorf("the checkpoint or backfill state survived recover-slot")
	}
	wantCLI(t, env, 2, []string{"can stream", "--force"}, "recover-slot")

	before := ai.Count()
	t2 := time.Now()
	p2 := s.runProcess(t, env[1])
	integration.WaitFor(t, 30*time.Second, "the backfill", func() bool {
		return queryInt(t, tgt, "SELECT count(*) FROM pgimageai.backfills WHERE state = 'done'") == 1
	})
	s.sync(t, 30*time.Second)
	caughtUp := time.Since(t2)
	if err := p2.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("graceful stop after the recovery: %v", err)
	}
	assertCaptions(t, captions(t, tgt), want)
	if n := walStatus(t, s.conn, s.slot); n != "reserved" {
		t.Errorf("slot wal_status %q after the new run", n)
	}
	t.Logf("recover-slot took %s; the new run backfilled %d rows with %d provider calls and caught up in %s",
		recovered.Round(time.Millisecond), len(want), ai.Count()-before, caughtUp.Round(time.Millisecond))
}

// TestSlotRecoverForceSameDatabase recovers a healthy slot with --force, in
// one database with a write-back rule beside an ordinary one: only the
// ordinary target loses the rows deleted while the bridge was stopped, and
// the next run brings both up to the source's rows.
func TestSlotRecoverForceSameDatabase(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.exec(t, `INSERT INTO pgimageai.rules VALUES ('wb', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'vision', 'Describe', 'public.photos', 'note')`)
	env := []string{"PGIMAGEAI_DSN=" + s.db.DSN(), "PGIMAGEAI_SLOT=" + s.slot, "PGIMAGEAI_PUBLICATION=" + s.slot}
	want := map[int]string{}
	insertRows(t, s, 1, 11, 5, want)
	_, stop := s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "10 captions", func() bool { return tableRows(t, s.conn, "public.captions") == 10 })
	s.sync(t, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	s.exec(t, "DELETE FROM public.photos WHERE id IN (9, 10)")
	delete(want, 9)
	delete(want, 10)
	img := pngImage(t, 2001)
	s.exec(t, "UPDATE public.photos SET img = $1 WHERE id = 1", img)
	want[1] = captionOf(magic.DataURL(magic.PNG, img))
	insertRows(t, s, 11, 13, 2, want)

	wantCLI(t, env, 2, []string{"can stream (wal_status reserved)", "--force"}, "recover-slot")
	if n := tableRows(t, s.conn, "public.captions"); n != 10 {
		t.Fatalf("a refused recover-slot changed the target: %d rows", n)
	}
	wantCLI(t, env, 0, []string{"recovered because of --force", "public.captions (rules caption): deleted 2 rows",
		"public.photos (rules wb): nothing deleted: write-back", "every enabled rule (caption, wb) backfills"}, "recover-slot", "--force")

	_, stop = s.start(t, s.config(t))
	integration.WaitFor(t, 30*time.Second, "both backfills", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfills WHERE state = 'done'") == 2
	})
	s.sync(t, 30*time.Second)
	s.sync(t, 30*time.Second) // the write-back transactions, read back
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, captions(t, s.conn), want)
	rows, err := s.conn.Query(context.Background(), "SELECT id, coalesce(note, '<NULL>') FROM public.photos")
	if err != nil {
		t.Fatal(err)
	}
	notes := map[int]string{}
	var id int
	var note string
	if _, err := pgx.ForEachRow(rows, []any{&id, &note}, func() error { notes[id] = note; return nil }); err != nil {
		t.Fatal(err)
	}
	assertCaptions(t, notes, want)
}

// TestSlotIdleForeignWAL writes WAL for 10 s into a table no rule reads while
// a bridge runs: the slot must confirm up to within 1 MB of the WAL's end
// right after, so that an idle source never makes it retain WAL.
func TestSlotIdleForeignWAL(t *testing.T) {
	s := newSource(t)
	ai := newFakeAI(t)
	s.model(t, "vision", ai, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.exec(t, "CREATE TABLE public.foreign_wal (id bigserial PRIMARY KEY, pad text)")
	want := map[int]string{}
	insertRows(t, s, 1, 4, 3, want)
	s.start(t, s.config(t))
	s.sync(t, 30*time.Second)

	lsns := func() (current, confirmed, restart replication.LSN) {
		t.Helper()
		err := s.conn.QueryRow(context.Background(), `SELECT pg_current_wal_lsn(), confirmed_flush_lsn, restart_lsn
FROM pg_replication_slots WHERE slot_name = $1`, s.slot).Scan(&current, &confirmed, &restart)
		if err != nil {
			t.Fatal(err)
		}
		return current, confirmed, restart
	}
	start, _, _ := lsns()
	t0 := time.Now()
	inserts := 0
	for time.Since(t0) < 10*time.Second {
		s.exec(t, "INSERT INTO public.foreign_wal (pad) SELECT repeat('x', 500) FROM generate_series(1, 200)")
		inserts++
	}
	end, confirmed, restart := lsns()
	t.Logf("10s of foreign WAL: %d inserts, %d bytes; right after: confirmed_flush_lsn %d bytes and restart_lsn %d bytes behind",
		inserts, end-start, end-confirmed, end-restart)
	const limit = 1 << 20
	t1 := time.Now()
	var current replication.LSN
	for {
		current, confirmed, restart = lsns()
		if current-confirmed <= limit || time.Since(t1) > 3*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after %s: pg_current_wal_lsn %s, confirmed_flush_lsn %s (%d bytes behind), restart_lsn %s (%d bytes behind)",
		time.Since(t1).Round(time.Millisecond), current, confirmed, current-confirmed, restart, current-restart)
	if current-confirmed > limit {
		t.Errorf("confirmed_flush_lsn is %d bytes behind pg_current_wal_lsn() after 10s of foreign WAL, want at most %d", current-confirmed, limit)
	}
	// The WAL the server keeps for the slot is what restart_lsn holds, and
	// PostgreSQL moves it only when the slot decodes a running-transactions
	// record (written every 15 s by the background writer, or at a
	// checkpoint) below a confirmed position. So after one, the WAL of the
	// burst must be released, but for the last half MiB at most: an idle
	// WAL end is stored, and confirmed, only 512 KiB past the last stored
	// (apply.idleStoreBytes).
	const idleBound = 512 << 10
	s.exec(t, "CHECKPOINT")
	t2 := time.Now()
	integration.WaitFor(t, 60*time.Second, "restart_lsn past the foreign WAL", func() bool {
		_, _, restart = lsns()
		return restart+idleBound >= end
	})
	current, _, restart = lsns()
	t.Logf("restart_lsn within %d bytes of the end of %d bytes of foreign WAL %s after a CHECKPOINT; the slot now holds %d bytes",
		max(end, restart)-restart, end-start, time.Since(t2).Round(time.Millisecond), current-restart)
	if ai.Count() != 3 {
		t.Errorf("%d provider calls, want 3: foreign WAL must not reach a provider", ai.Count())
	}
}

// TestSlotOrphansCompositeKey runs sink.DeleteOrphans across two databases
// on a two-column key (text, int) over more than two pages: exactly the
// target rows whose key is missing in the source go.
func TestSlotOrphansCompositeKey(t *testing.T) {
	srcDB, tgtDB := integration.NewDatabase(t), integration.NewDatabase(t)
	src, tgt := srcDB.Connect(t), tgtDB.Connect(t)
	srcDB.Exec(t, `CREATE TABLE "Shop Items" (shop text, sku int, img bytea, PRIMARY KEY (shop, sku));
INSERT INTO "Shop Items" (shop, sku) SELECT s, g FROM unnest(ARRAY['a', 'B', 'c d']) s, generate_series(1, 1000) g
WHERE g % 7 <> 0 OR s = 'B'`)
	tgtDB.Exec(t, `CREATE TABLE results (shop text, sku int, caption text, PRIMARY KEY (shop, sku));
INSERT INTO results SELECT s, g, 'x' FROM unnest(ARRAY['a', 'B', 'c d', 'zz']) s, generate_series(1, 1000) g`)
	ctx := context.Background()
	source, err := catalog.Lookup(ctx, src, `"Shop Items"`)
	if err != nil {
		t.Fatal(err)
	}
	target, err := catalog.Lookup(ctx, tgt, "results")
	if err != nil {
		t.Fatal(err)
	}
	n, err := sink.DeleteOrphans(ctx, src, tgt, source, target)
	if err != nil {
		t.Fatal(err)
	}
	// 'zz' has no source rows; 'a' and 'c d' lack every seventh sku.
	if want := int64(1000 + 2*142); n != want {
		t.Errorf("deleted %d rows, want %d", n, want)
	}
	if got, want := queryInt(t, tgt, "SELECT count(*) FROM results"), queryInt(t, src, `SELECT count(*) FROM "Shop Items"`); got != want {
		t.Errorf("%d target rows left, want %d (the source's)", got, want)
	}
	if k := queryInt(t, tgt, "SELECT count(*) FROM results WHERE shop = 'zz' OR (shop <> 'B' AND sku % 7 = 0)"); k != 0 {
		t.Errorf("%d orphans left", k)
	}
	if n, err := sink.DeleteOrphans(ctx, src, tgt, source, target); err != nil || n != 0 {
		t.Errorf("second run deleted %d, %v; want 0", n, err)
	}
}
