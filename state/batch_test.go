package state_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/state"
)

// TestBatchProgress: a part's page moves its batch's applied_key (and
// applied on its last page) and the backfill's rows_done, never the
// backfill's last_key; a page of another fingerprint moves nothing.
func TestBatchProgress(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	if err := state.StartBackfill(ctx, conn, "r", "fp", []byte(`{"id": 100}`), 0); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 2; seq++ {
		if err := state.SaveBatch(ctx, conn, state.BackfillBatch{Rule: "r", Seq: seq, Fingerprint: "fp", Model: "m", Requests: 10, Status: "in_progress"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name        string
		op          state.BackfillProgress
		wantKey     string // applied_key of batch 2
		wantApplied bool
		wantRows    int
	}{
		{name: "a page of batch 2", op: state.BackfillProgress{Rule: "r", Fingerprint: "fp", Part: 2, LastKey: []byte(`{"id": 55}`), Rows: 5},
			wantKey: `{"id": 55}`, wantRows: 5},
		{name: "its last page", op: state.BackfillProgress{Rule: "r", Fingerprint: "fp", Part: 2, LastKey: []byte(`{"id": 60}`), Rows: 5, PartDone: true},
			wantKey: `{"id": 60}`, wantApplied: true, wantRows: 10},
		{name: "an empty page keeps the key", op: state.BackfillProgress{Rule: "r", Fingerprint: "fp", Part: 2, PartDone: true},
			wantKey: `{"id": 60}`, wantApplied: true, wantRows: 10},
		{name: "another fingerprint's page", op: state.BackfillProgress{Rule: "r", Fingerprint: "old", Part: 2, LastKey: []byte(`{"id": 99}`), Rows: 7},
			wantKey: `{"id": 60}`, wantApplied: true, wantRows: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &pgx.Batch{}
			tt.op.Queue(b)
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				t.Fatal(err)
			}
			batches, err := state.LoadBatches(ctx, conn, "r")
			if err != nil {
				t.Fatal(err)
			}
			if got := string(batches[1].AppliedKey); got != tt.wantKey || batches[1].Applied != tt.wantApplied {
				t.Errorf("batch 2: applied_key %s, applied %v; want %s, %v", got, batches[1].Applied, tt.wantKey, tt.wantApplied)
			}
			if batches[0].AppliedKey != nil || batches[0].Applied {
				t.Errorf("batch 1 moved: %s %v", batches[0].AppliedKey, batches[0].Applied)
			}
			bf, _, err := state.LoadBackfill(ctx, conn, "r")
			if err != nil {
				t.Fatal(err)
			}
			var rows int
			if err := conn.QueryRow(ctx, "SELECT rows_done FROM pgimageai.backfills WHERE rule = 'r'").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if bf.LastKey != nil || bf.State != "running" || rows != tt.wantRows {
				t.Errorf("backfill: last_key %s, state %s, rows_done %d; want none, running, %d", bf.LastKey, bf.State, rows, tt.wantRows)
			}
		})
	}
}

// TestPendingBatchRequests: the daily budget's count of batch requests
// after a restart — those of the day's batches whose rows are not applied:
// all until the answers are stored, then the answered and failed ones.
func TestPendingBatchRequests(t *testing.T) {
	conn := migrated(t)
	ctx := context.Background()
	if err := state.StartBackfill(ctx, conn, "r", "fp", []byte(`{"id": 1}`), 0); err != nil {
		t.Fatal(err)
	}
	batches := []state.BackfillBatch{
		{Seq: 1, Model: "m", Requests: 40, Status: "in_progress"},                                                                                 // 40
		{Seq: 2, Model: "m", Requests: 40, Status: "expired", BatchAtProvider: state.BatchAtProvider{Completed: 25, Failed: 3, Downloaded: true}}, // 28
		{Seq: 3, Model: "m", Requests: 40, Status: "completed", BatchAtProvider: state.BatchAtProvider{Completed: 40, Downloaded: true}},          // applied below: 0
		{Seq: 4, Model: "m", Requests: 40, Status: state.Refused},                                                                                 // 0
		{Seq: 5, Model: "other", Requests: 7, Status: "validating"},                                                                               // 7
		{Seq: 6, Model: "m", Requests: 9, Status: "in_progress"},                                                                                  // yesterday: 0
		{Seq: 7, Requests: 5, Status: "in_progress"},                                                                                              // no model (older version): 0
	}
	for _, b := range batches {
		b.Rule, b.Fingerprint = "r", "fp"
		if err := state.SaveBatch(ctx, conn, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, sql := range []string{
		"UPDATE pgimageai.backfill_batches SET applied = true WHERE seq = 3",
		"UPDATE pgimageai.backfill_batches SET created_at = now() - interval '1 day' WHERE seq = 6",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var day time.Time
	if err := conn.QueryRow(ctx, "SELECT (now() AT TIME ZONE 'UTC')::date").Scan(&day); err != nil {
		t.Fatal(err)
	}
	got, err := state.PendingBatchRequests(ctx, conn, day)
	if err != nil {
		t.Fatal(err)
	}
	if got["m"] != 68 || got["other"] != 7 || len(got) != 2 {
		t.Errorf("pending = %v, want m: 68, other: 7", got)
	}
}

// TestGiveUpBatches: forgetting a backfill, starting it over, or finding
// batches of a rule that is gone moves its batches that may still hold
// something at the provider to pgimageai.batch_cleanup (not those whose
// answers are stored: their files were deleted then), with their answers
// deleted; the other rules' batches stay.
func TestGiveUpBatches(t *testing.T) {
	tests := []struct {
		name      string
		giveUp    func(ctx context.Context, conn *pgx.Conn) error
		wantRules []string // of the rows in batch_cleanup
	}{
		{name: "forgotten", giveUp: func(ctx context.Context, conn *pgx.Conn) error { return state.ForgetBackfills(ctx, conn, "a") },
			wantRules: []string{"a", "a"}},
		{name: "started over", giveUp: func(ctx context.Context, conn *pgx.Conn) error {
			return state.StartBackfill(ctx, conn, "a", "fp2", []byte(`{"id": 1}`), 0)
		}, wantRules: []string{"a", "a"}},
		{name: "orphans", giveUp: func(ctx context.Context, conn *pgx.Conn) error {
			gone, err := state.GiveUpOrphanBatches(ctx, conn, []string{"b"})
			if err == nil && !slices.Equal(gone, []string{"a"}) {
				t.Errorf("gone = %v, want [a]", gone)
			}
			return err
		}, wantRules: []string{"a", "a"}},
		{name: "no orphans", giveUp: func(ctx context.Context, conn *pgx.Conn) error {
			_, err := state.GiveUpOrphanBatches(ctx, conn, []string{"a", "b"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := migrated(t)
			ctx := context.Background()
			for _, rule := range []string{"a", "b"} {
				if err := state.StartBackfill(ctx, conn, rule, "fp", []byte(`{"id": 1}`), 0); err != nil {
					t.Fatal(err)
				}
				for _, b := range []state.BackfillBatch{
					{Seq: 1, BatchAtProvider: state.BatchAtProvider{BatchID: "batch_1" + rule, InputFileID: "in-1" + rule}, Status: "in_progress", Requests: 1},
					{Seq: 2, BatchAtProvider: state.BatchAtProvider{InputFileID: "in-2" + rule}, Status: "uploaded", Requests: 1},
					{Seq: 3, BatchAtProvider: state.BatchAtProvider{BatchID: "batch_3" + rule, InputFileID: "in-3" + rule, Downloaded: true}, Status: "completed", Requests: 1},
					{Seq: 4, Status: "empty"},
				} {
					b.Rule, b.Fingerprint, b.Model = rule, "fp", "m"
					if err := state.SaveBatch(ctx, conn, b); err != nil {
						t.Fatal(err)
					}
				}
				if err := state.SaveAnswers(ctx, conn, rule, []state.BatchAnswer{{Key: []byte(`{"id": 1}`), InputKey: []byte{0}}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.giveUp(ctx, conn); err != nil {
				t.Fatal(err)
			}
			todo, err := state.BatchCleanups(ctx, conn)
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, c := range todo {
				rules = append(rules, c.Rule)
			}
			if !slices.Equal(rules, tt.wantRules) {
				t.Fatalf("batch_cleanup holds %v, want %v", rules, tt.wantRules)
			}
			if len(todo) == 2 {
				want := []state.BatchCleanup{
					{ID: todo[0].ID, Rule: "a", Model: "m", BatchID: "batch_1a", InputFileID: "in-1a", Files: []string{"in-1a"}},
					{ID: todo[1].ID, Rule: "a", Model: "m", InputFileID: "in-2a", Files: []string{"in-2a"}},
				}
				for i := range want {
					if got := todo[i]; got.Rule != want[i].Rule || got.Model != want[i].Model || got.BatchID != want[i].BatchID ||
						got.InputFileID != want[i].InputFileID || !slices.Equal(got.Files, want[i].Files) {
						t.Errorf("cleanup %d = %+v, want %+v", i, got, want[i])
					}
				}
				left, _ := state.LoadBatches(ctx, conn, "a")
				answers, _, _ := state.LoadAnswers(ctx, conn, "a", []string{`{"id": 1}`}, 1<<20)
				if len(left) != 0 || answers[0] != nil {
					t.Errorf("rule a keeps %d batches and answer %v", len(left), answers[0])
				}
				if err := state.CleanedUp(ctx, conn, todo[0].ID); err != nil {
					t.Fatal(err)
				}
				if n, _ := state.BatchCleanups(ctx, conn); len(n) != 1 {
					t.Errorf("%d cleanups after one was done, want 1", len(n))
				}
			}
			if kept, _ := state.LoadBatches(ctx, conn, "b"); len(kept) != 4 {
				t.Errorf("rule b keeps %d batches, want 4", len(kept))
			}
		})
	}
}
