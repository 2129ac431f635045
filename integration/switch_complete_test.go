package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestCompleteModelChangeInPlace: changing the provider's model id in an
// AI_IMAGE_COMPLETE rule's model row (not the rule's model) is a new
// version: every row is computed again, in place (no switch), and each
// stored result records the version that made it. A pacing option is no
// new version: nothing is computed again.
func TestCompleteModelChangeInPlace(t *testing.T) {
	ai := newFakeAI(t)
	s := newSource(t)
	s.model(t, "cap", ai, `{}`)
	s.rule(t, "captions", "cap", "public.caps", "caption")
	cfg := s.config(t)
	s.start(t, cfg)
	for id := 1; id <= 5; id++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
	}
	integration.WaitFor(t, 30*time.Second, "5 captions", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.caps WHERE caption IS NOT NULL") == 5
	})
	var first string
	if err := s.conn.QueryRow(context.Background(), "SELECT version FROM pgimageai.rule_versions WHERE rule = 'captions'").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'captions' AND version = $1", first); n != 5 {
		t.Fatalf("%d results record version %s, want 5", n, first)
	}
	s.exec(t, `UPDATE pgimageai.models SET options = '{"max_concurrency": 2, "requests_per_minute": 6000}' WHERE name = 'cap'`)
	s.sync(t, 30*time.Second)
	time.Sleep(time.Second)
	if n := ai.Count(); n != 5 {
		t.Fatalf("%d calls after a pacing change, want 5 (no new version)", n)
	}
	s.exec(t, "UPDATE pgimageai.models SET model = 'gpt-test-2' WHERE name = 'cap'")
	integration.WaitFor(t, 30*time.Second, "every row computed again by the new model id", func() bool {
		n := 0
		for _, r := range ai.Requests() {
			if r.Model == "gpt-test-2" {
				n++
			}
		}
		return n == 5
	})
	var second string
	integration.WaitFor(t, 30*time.Second, "results of the new version", func() bool {
		if err := s.conn.QueryRow(context.Background(), "SELECT version FROM pgimageai.rule_versions WHERE rule = 'captions'").Scan(&second); err != nil {
			t.Fatal(err)
		}
		return second != first && queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.results WHERE rule = 'captions' AND version = $1", second) == 5
	})
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switches"); n != 0 {
		t.Errorf("an in-place change made %d switches", n)
	}
	var modelID string
	if err := s.conn.QueryRow(context.Background(), "SELECT model_id FROM pgimageai.versions WHERE id = $1", second).Scan(&modelID); err != nil || modelID != "gpt-test-2" {
		t.Errorf("version %s records model id %q (%v)", second, modelID, err)
	}
}

// TestCompleteVersionedSwitch: an AI_IMAGE_COMPLETE rule with switch =
// 'versioned' computes a new prompt's captions into a text shadow column
// and switches once every row has one; the old captions serve meanwhile.
func TestCompleteVersionedSwitch(t *testing.T) {
	ai := newFakeAI(t)
	s := newSource(t)
	s.model(t, "cap", ai, `{}`)
	s.rule(t, "captions", "cap", "public.caps", "caption")
	s.exec(t, "UPDATE pgimageai.rules SET switch = 'versioned' WHERE name = 'captions'")
	cfg := s.config(t)
	s.start(t, cfg)
	for id := 1; id <= 6; id++ {
		s.exec(t, "INSERT INTO public.photos (id, img) VALUES ($1, $2)", id, pngImage(t, id))
	}
	integration.WaitFor(t, 30*time.Second, "6 captions", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.caps WHERE caption IS NOT NULL") == 6
	})
	ai.Set(0, func(r aiRequest) (int, string) {
		if r.Prompt == "Name the colours" {
			return 200, "colours of " + captionOf(r.DataURL)
		}
		return 200, captionOf(r.DataURL)
	})
	s.exec(t, "UPDATE pgimageai.rules SET prompt = 'Name the colours' WHERE name = 'captions'")
	integration.WaitFor(t, 60*time.Second, "the switch", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'captions' AND outcome = 'switched'") == 1
	})
	s.sync(t, 30*time.Second)
	if n := queryInt(t, s.conn, "SELECT count(*) FROM public.caps WHERE caption LIKE 'colours of %'"); n != 6 {
		t.Errorf("%d rows hold the new prompt's caption, want 6", n)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'public.caps'::regclass AND attnum > 0 AND NOT attisdropped"); n != 2 {
		t.Errorf("public.caps has %d columns, want 2", n)
	}
	if n := ai.Count(); n != 12 {
		t.Errorf("%d calls, want 12 (6 per version)", n)
	}
}

// TestCompleteVersionedSwitchBatchAPI: the side work of a versioned switch
// is a backfill, so a model with batch_api sends it through the Batch API
// (one upload, one batch) and makes no synchronous call; the switch waits
// for the batch's answers to be written.
func TestCompleteVersionedSwitchBatchAPI(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	want := map[int]string{}
	insertRows(t, s, 1, 41, 20, want)
	s.model(t, "vision", ai.fakeAI, `{}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	s.exec(t, "UPDATE pgimageai.rules SET switch = 'versioned' WHERE name = 'caption'")
	cfg := s.config(t)
	s.start(t, cfg)
	integration.WaitFor(t, 60*time.Second, "40 captions", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM public.captions WHERE caption IS NOT NULL") == 40
	})
	sync := ai.Count()
	// The new version (a temperature) and the Batch API (which is no new
	// version) in one change.
	s.exec(t, `UPDATE pgimageai.models SET options = '{"batch_api": true, "batch_poll_interval": "100ms", "temperature": 0.2}' WHERE name = 'vision'`)
	integration.WaitFor(t, 60*time.Second, "the batch polled", func() bool { _, _, polls := ai.counts(); return polls >= 2 })
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history"); n != 0 {
		t.Fatalf("switched before the batch finished")
	}
	ai.setRelease()
	integration.WaitFor(t, 60*time.Second, "the switch", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.switch_history WHERE rule = 'caption' AND outcome = 'switched' AND rows_switched = 40") == 1
	})
	if uploads, creates, _ := ai.counts(); uploads != 1 || creates != 1 {
		t.Errorf("%d uploads and %d batches, want 1 and 1", uploads, creates)
	}
	if n := ai.Count(); n != sync {
		t.Errorf("%d synchronous calls during the switch, want none", n-sync)
	}
	s.sync(t, 30*time.Second)
	for id, c := range captions(t, s.conn) {
		if c != want[id] {
			t.Errorf("row %d: %q, want %q", id, c, want[id])
		}
	}
}
