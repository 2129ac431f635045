package integration_test

import (
	"context"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestRuleGroups runs two rule groups on one database in two processes (and
// a standby of the second): each processes only its own rules; a SIGKILL of
// the second group's leader is taken over by its standby while the first
// group never pauses.
func TestRuleGroups(t *testing.T) {
	t.Parallel() // a database of its own in the shared server
	s := newSource(t)
	aiA, aiB := newFakeAI(t), newFakeAI(t)
	s.model(t, "a", aiA, `{}`)
	s.model(t, "b", aiB, `{}`)
	s.rule(t, "caption", "a", "public.captions", "caption") // the default group
	s.exec(t, `INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column, rule_group)
VALUES ('thumbs', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'b', 'Describe', 'public.captions2', 'caption', 'g2')`)
	s.runProcess(t)
	g2 := *s
	g2.slot = s.slot + "_g2"
	leader := g2.runProcess(t, "PGIMAGEAI_GROUP=g2")
	g2.runProcess(t, "PGIMAGEAI_GROUP=g2") // its standby
	time.Sleep(time.Second)                // the standby is waiting for the lock

	seen, stopWatching := watchRows(t, s, "public.captions")
	want := map[int]string{}
	committed := map[int]time.Time{}
	var killed time.Time
	for id := 1; id <= 60; id++ {
		insertRows(t, s, id, id+1, 1, want)
		committed[id] = time.Now()
		if id == 20 {
			leader.signal(t, syscall.SIGKILL)
			killed = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The standby takes over the second group's slot.
	var takeover time.Duration
	integration.WaitFor(t, 30*time.Second, "the standby to stream group g2", func() bool {
		n := queryInt(t, s.conn, `SELECT count(*) FROM pg_replication_slots sl JOIN pg_stat_replication r ON r.pid = sl.active_pid
WHERE sl.slot_name = $1 AND r.state = 'streaming' AND sl.active_pid <> $2`, g2.slot, 0)
		if n == 1 && takeover == 0 {
			takeover = time.Since(killed)
		}
		return n == 1
	})
	s.sync(t, 60*time.Second)
	g2.sync(t, 60*time.Second)
	stopWatching()
	var delays []time.Duration
	for id, at := range committed {
		got, ok := seen.get(id)
		if !ok {
			t.Fatalf("row %d has no caption of the default group", id)
		}
		delays = append(delays, got.Sub(at))
	}
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	t.Logf("group g2's leader SIGKILLed: its standby streamed %s later; the default group's results meanwhile: median %s, worst %s after commit",
		takeover.Round(time.Millisecond), delays[len(delays)/2], delays[len(delays)-1])
	if worst := delays[len(delays)-1]; worst > 2*time.Second {
		t.Errorf("a default-group result landed %s after its commit while group g2 failed over: the group paused", worst)
	}
	assertCaptions(t, captions(t, s.conn), want)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.captions2 WHERE caption IS NOT NULL"); n != 60 {
		t.Errorf("group g2's target has %d results, want 60", n)
	}
	// Each group processed only its own rules: model a got exactly one
	// request per row (only the default group's bridge asks it).
	if n := aiA.Count(); n != 60 {
		t.Errorf("model a got %d requests for 60 rows, want 60", n)
	}
	if n := aiB.Count(); n < 60 || n > 60+8 {
		t.Errorf("model b got %d requests for 60 rows, want 60 plus at most those in flight at the kill", n)
	}
	var other string
	s.conn.QueryRow(context.Background(), "SELECT string_agg(rule, ',') FROM pgimageai.errors WHERE resolved_at IS NULL").Scan(&other)
	if other != "" {
		t.Errorf("open errors: %s", other)
	}
}
