package integration_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestBatchAPIAppliesEachBatchWhenDone: 100 rows with batch_max_requests 40
// go as three batches, polled at once; the third finishes first and its 20
// answers are applied while the first two still run. `pgimageai run` is then
// SIGKILLed and started again: the applied batch is neither applied nor
// downloaded again, and when the other two finish every row has its batch
// answer — no synchronous call, each output file downloaded once.
func TestBatchAPIAppliesEachBatchWhenDone(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.released[3] = true
	want := map[int]string{}
	insertRows(t, s, 1, 101, 50, want)
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms", "batch_max_requests": 40}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	integration.WaitFor(t, 120*time.Second, "batch 3 to be applied", func() bool {
		return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE rule = 'caption' AND seq = 3 AND applied") == 1
	})
	got := captions(t, s.conn)
	if len(got) != 20 {
		t.Errorf("%d results after batch 3 finished, want its 20", len(got))
	}
	for id := 81; id <= 100; id++ {
		if got[id] != want[id] {
			t.Errorf("row %d: %q, want %q", id, got[id], want[id])
		}
	}
	if st1, st2 := ai.statusOf(1), ai.statusOf(2); st1 != "in_progress" || st2 != "in_progress" {
		t.Fatalf("batches 1 and 2 are %s and %s, want in_progress: batch 3 must not wait for them", st1, st2)
	}
	// status lists the three batches, as they are.
	var doc struct {
		Batches []struct {
			Rule, Status string
			BatchID      string `json:"batch_id"`
			Seq          int
			Requests     int
			Applied      bool
		} `json:"batches"`
	}
	out := runCLI(t, s, "status", "--format", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --format json: %v\n%s", err, out)
	}
	if got := fmt.Sprintf("%+v", doc.Batches); len(doc.Batches) != 3 || doc.Batches[0].BatchID != "batch_1" || doc.Batches[0].Requests != 40 ||
		doc.Batches[0].Applied || !doc.Batches[2].Applied || doc.Batches[2].Requests != 20 {
		t.Errorf("status lists batches %s; want batch_1..3 of 40, 40 and 20 requests, the third applied", got)
	}
	p1.signal(t, syscall.SIGKILL)

	ai.setRelease()
	s.runProcess(t)
	backfillDone(t, s, "caption", 120*time.Second)
	if n := ai.Count(); n != 0 {
		t.Errorf("%d synchronous calls, want 0", n)
	}
	assertCaptions(t, captions(t, s.conn), want)
	uploads, creates, _ := ai.counts()
	if uploads != 3 || creates != 3 {
		t.Errorf("%d uploads, %d batches; want 3 and 3", uploads, creates)
	}
	ai.mu.Lock()
	for id, n := range ai.downloads {
		if n != 1 {
			t.Errorf("file %s downloaded %d times, want once", id, n)
		}
	}
	ai.mu.Unlock()
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE rule = 'caption' AND applied AND downloaded"); n != 3 {
		t.Errorf("%d batches recorded as applied, want 3", n)
	}
	if n := queryInt(t, s.conn, "SELECT coalesce(sum(calls), 0) FROM pgimageai.usage WHERE rule = 'caption'"); n != 100 {
		t.Errorf("usage counts %d calls, want 100: every answer paid once", n)
	}
	if n := queryInt(t, s.conn, "SELECT rows_done::int FROM pgimageai.backfills WHERE rule = 'caption'"); n < 100 {
		t.Errorf("backfill rows_done = %d, want 100 at least", n)
	}
}

// TestBatchAPIRefusedSecondBatch: the provider refuses the second batch for
// good (a 400 at its creation) while the first runs: the first batch's 40
// rows get its answers, the 60 rows after get synchronous calls, its input
// file is deleted, and the refused batch's 40 requests go back to the daily
// budget — 100 calls in all fit max_calls_per_day 100 exactly.
func TestBatchAPIRefusedSecondBatch(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	ai.release = true
	ai.refuseCreate[2] = true
	want := map[int]string{}
	insertRows(t, s, 1, 101, 50, want)
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms", "batch_max_requests": 40, "max_calls_per_day": 100}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	_, stop := s.start(t, s.config(t))
	backfillDone(t, s, "caption", 120*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	uploads, creates, _ := ai.counts()
	if uploads != 2 || creates != 1 {
		t.Errorf("%d uploads, %d batches created; want 2 and 1", uploads, creates)
	}
	if n := ai.Count(); n != 60 {
		t.Errorf("%d synchronous calls, want 60 (rows 41..100)", n)
	}
	assertCaptions(t, captions(t, s.conn), want)
	if errs := openErrors(t, s.conn); len(errs) != 0 {
		t.Errorf("open errors %v, want none (the refused requests were given back to the budget)", errs)
	}
	if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE seq = 2 AND status = 'refused' AND final AND applied"); n != 1 {
		t.Errorf("backfill_batches does not record batch 2 as refused and applied")
	}
	ai.mu.Lock()
	deleted := slices.Contains(ai.deleted, "file-in-2")
	ai.mu.Unlock()
	if !deleted {
		t.Errorf("the refused batch's input file was not deleted at the provider")
	}
}

// TestBatchAPIRuleDeleted: a rule deleted while its batch runs has the
// batch cancelled at the provider and its input file deleted — also when
// it is deleted while no bridge runs; so has a rule changed (its new
// backfill sends a batch of its own).
func TestBatchAPIRuleDeleted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		down    bool   // deleted while no bridge runs
		change  string // instead of the delete
		batches int    // batches sent in all
	}{
		{name: "while running", batches: 1},
		{name: "while stopped", down: true, batches: 1},
		{name: "changed", change: "UPDATE pgimageai.rules SET target_column = 'caption2' WHERE name = 'caption'", batches: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSource(t)
			ai := newFakeBatchAI(t)
			want := map[int]string{}
			insertRows(t, s, 1, 31, 30, want)
			s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms"}`)
			s.rule(t, "caption", "vision", "public.captions", "caption")
			p := s.runProcess(t)
			integration.WaitFor(t, 60*time.Second, "the batch to run", func() bool { return ai.statusOf(1) == "in_progress" })
			if tc.down {
				p.signal(t, syscall.SIGKILL)
			}
			if tc.change != "" {
				s.exec(t, tc.change)
			} else {
				s.exec(t, "DELETE FROM pgimageai.rules WHERE name = 'caption'")
			}
			if tc.down {
				s.runProcess(t)
			}
			integration.WaitFor(t, 60*time.Second, "the batch to be cancelled and its file deleted", func() bool {
				ai.mu.Lock()
				defer ai.mu.Unlock()
				return slices.Contains(ai.cancelled, "batch_1") && slices.Contains(ai.deleted, "file-in-1")
			})
			integration.WaitFor(t, 30*time.Second, "the cleanup to be recorded", func() bool {
				return queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.batch_cleanup") == 0
			})
			if st := ai.statusOf(1); st != "cancelled" {
				t.Errorf("batch_1 is %s, want cancelled", st)
			}
			if n := queryInt(t, s.conn, "SELECT count(*) FROM pgimageai.backfill_batches WHERE batch_id = 'batch_1'"); n != 0 {
				t.Errorf("batch_1 is still recorded")
			}
			if tc.change != "" {
				integration.WaitFor(t, 60*time.Second, "the changed rule's batch", func() bool { return ai.statusOf(2) == "in_progress" })
			}
			if uploads, creates, _ := ai.counts(); uploads != tc.batches || creates != tc.batches {
				t.Errorf("%d uploads, %d batches; want %d and %d", uploads, creates, tc.batches, tc.batches)
			}
		})
	}
}

// TestBatchAPIBudgetAcrossRestart: with max_calls_per_day 60, 100 rows go
// as batches of 40 and 20 requests (the 40 rows over the cap get none);
// `pgimageai run` is SIGKILLed while they run. The new process counts the 60
// requests waiting in the batches against the day (they are in no
// pgimageai.usage row yet), so the 40 rows without a request get
// budget_exhausted, not synchronous calls: 60 calls in all, not 100.
func TestBatchAPIBudgetAcrossRestart(t *testing.T) {
	s := newSource(t)
	ai := newFakeBatchAI(t)
	want := map[int]string{}
	insertRows(t, s, 1, 101, 50, want)
	s.model(t, "vision", ai.fakeAI, `{"batch_api": true, "batch_poll_interval": "50ms", "batch_max_requests": 40, "max_calls_per_day": 60}`)
	s.rule(t, "caption", "vision", "public.captions", "caption")
	p1 := s.runProcess(t)
	integration.WaitFor(t, 60*time.Second, "both batches to run", func() bool { return ai.statusOf(2) == "in_progress" })
	p1.signal(t, syscall.SIGKILL)
	if lines := ai.linesOf(); len(lines) != 2 || len(lines[0]) != 40 || len(lines[1]) != 20 {
		t.Fatalf("batches of %d requests, want 40 and 20", len(lines))
	}

	ai.setRelease()
	s.runProcess(t)
	backfillDone(t, s, "caption", 120*time.Second)
	if n := ai.Count(); n != 0 {
		t.Errorf("%d synchronous calls, want 0: the day's 60 calls are in the batches", n)
	}
	got := captions(t, s.conn)
	for id := 1; id <= 60; id++ {
		if got[id] != want[id] {
			t.Errorf("row %d: %q, want the batch's answer", id, got[id])
		}
	}
	errs := openErrors(t, s.conn)
	exhausted := 0
	for id := 61; id <= 100; id++ {
		if errs[id] == "budget_exhausted" {
			exhausted++
		}
	}
	if exhausted != 40 || len(errs) != 40 {
		t.Errorf("%d budget_exhausted rows of rows 61..100 (%d open errors), want 40", exhausted, len(errs))
	}
	if n := queryInt(t, s.conn, "SELECT coalesce(sum(calls), 0) FROM pgimageai.usage WHERE rule = 'caption'"); n != 60 {
		t.Errorf("usage counts %d calls, want 60", n)
	}
}
