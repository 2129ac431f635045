package cost

import (
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/state"
)

func TestBudgets(t *testing.T) {
	now := time.Date(2026, 12, 3, 23, 59, 0, 0, time.UTC)
	b := NewDaily(func() time.Time { return now }, UTCDay(now), map[string]state.Spent{"m": {Calls: 3, Tokens: 100}}, nil)
	cap := rules.DailyCap{Calls: 5, Tokens: 1000}
	// 3 calls from pgimageai.usage: 2 more fit, the third is refused.
	for i := range 2 {
		if err := b.Reserve("m", cap); err != nil {
			t.Fatalf("call %d refused: %v", 4+i, err)
		}
	}
	err := b.Reserve("m", cap)
	if functions.ReasonOf(err) != functions.BudgetExhausted {
		t.Fatalf("6th call: %v, want budget_exhausted", err)
	}
	// A call without an answer gives its place back.
	b.Settle("m", cap, false, 0)
	if err := b.Reserve("m", cap); err != nil {
		t.Fatalf("the freed place: %v", err)
	}
	// Tokens: answered calls add theirs; past the cap nothing more starts.
	b.Settle("m", cap, true, 950)
	if err := b.Reserve("m", rules.DailyCap{Tokens: 1000}); functions.ReasonOf(err) != functions.BudgetExhausted {
		t.Fatalf("past the token cap: %v, want budget_exhausted", err)
	}
	if err := b.Reserve("other", cap); err != nil {
		t.Fatalf("another model's budget is its own: %v", err)
	}
	if err := b.Reserve("m", rules.DailyCap{}); err != nil {
		t.Fatalf("no cap: %v", err)
	}
	// A new UTC day starts from nothing, once.
	now = now.Add(2 * time.Minute)
	if !b.NewDay() || b.NewDay() {
		t.Fatal("newDay should report the new day once")
	}
	for i := range 5 {
		if err := b.Reserve("m", cap); err != nil {
			t.Fatalf("new day, call %d: %v", i+1, err)
		}
	}
	if err := b.Reserve("m", cap); functions.ReasonOf(err) != functions.BudgetExhausted {
		t.Fatalf("new day, 6th call: %v", err)
	}
}

func TestGiveBack(t *testing.T) {
	day := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		reserved  time.Time
		n         int
		wantCalls int64 // left counted of the 4
	}{
		{name: "reserved today", reserved: day.Add(9 * time.Hour), n: 3, wantCalls: 1},
		{name: "reserved yesterday", reserved: day.Add(-time.Hour), n: 3, wantCalls: 4},
		{name: "more than counted", reserved: day.Add(time.Hour), n: 9, wantCalls: 0},
		{name: "none", reserved: day.Add(time.Hour), n: 0, wantCalls: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := day.Add(12 * time.Hour)
			b := NewDaily(func() time.Time { return now }, day, map[string]state.Spent{"m": {Calls: 4}}, nil)
			b.GiveBack("m", rules.DailyCap{Calls: 10}, tt.n, tt.reserved)
			if got := b.spent["m"].Calls; got != tt.wantCalls {
				t.Errorf("calls counted = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

// TestDailyCapAtTheBoundary: a model that has spent exactly its cap — of
// calls or of tokens — makes no further call; one below it makes one.
func TestDailyCapAtTheBoundary(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		spent state.Spent
		cap   rules.DailyCap
		ok    bool
	}{
		{name: "tokens at the cap", spent: state.Spent{Calls: 1, Tokens: 1000}, cap: rules.DailyCap{Tokens: 1000}, ok: false},
		{name: "tokens one below the cap", spent: state.Spent{Calls: 1, Tokens: 999}, cap: rules.DailyCap{Tokens: 1000}, ok: true},
		{name: "tokens past the cap", spent: state.Spent{Calls: 1, Tokens: 1001}, cap: rules.DailyCap{Tokens: 1000}, ok: false},
		{name: "calls at the cap", spent: state.Spent{Calls: 5}, cap: rules.DailyCap{Calls: 5}, ok: false},
		{name: "calls one below the cap", spent: state.Spent{Calls: 4}, cap: rules.DailyCap{Calls: 5}, ok: true},
		{name: "no cap", spent: state.Spent{Calls: 1 << 20, Tokens: 1 << 40}, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewDaily(func() time.Time { return now }, UTCDay(now), map[string]state.Spent{"m": tc.spent}, nil)
			err := b.Reserve("m", tc.cap)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && functions.ReasonOf(err) != functions.BudgetExhausted {
				t.Fatalf("reserve = %v, want budget_exhausted", err)
			}
		})
	}
}
