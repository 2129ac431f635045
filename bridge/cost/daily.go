package cost

import (
	"fmt"
	"sync"
	"time"

	"github.com/pgimageai/pgimageai/bridge/rules"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/state"
)

// Daily counts what each model spent on the current UTC day: the calls and
// tokens pgimageai.usage held at start, plus every call since — counted when
// it starts (so calls in flight count) and given back when it got no
// answer. A call that would pass a cap is refused with budget_exhausted. It
// is safe for concurrent use.
type Daily struct {
	mu      sync.Mutex
	now     func() time.Time
	day     time.Time              // the UTC day counted
	spent   map[string]state.Spent // by model name
	metrics *metrics.Metrics
}

// NewDaily returns the count of day, starting from what pgimageai.usage
// held (spent), on the clock now.
func NewDaily(now func() time.Time, day time.Time, spent map[string]state.Spent, m *metrics.Metrics) *Daily {
	if spent == nil {
		spent = map[string]state.Spent{}
	}
	return &Daily{now: now, day: day, spent: spent, metrics: m}
}

// UTCDay returns the start of t's UTC day.
func UTCDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// rollover starts a new day's count when the UTC day changed, and reports
// whether it did. b.mu is held.
func (b *Daily) rollover() bool {
	today := UTCDay(b.now())
	if !today.After(b.day) {
		return false
	}
	b.day, b.spent = today, map[string]state.Spent{}
	return true
}

// NewDay reports whether a UTC day began since the last call (the rows
// refused yesterday may be retried).
func (b *Daily) NewDay() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rollover()
}

// Reserve counts one call of model under cap, or returns the
// budget_exhausted error when the cap is reached.
func (b *Daily) Reserve(model string, cap rules.DailyCap) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rollover()
	s := b.spent[model]
	switch {
	case cap.Calls > 0 && s.Calls >= cap.Calls:
		return b.exhausted(model, fmt.Sprintf("%d calls (max_calls_per_day)", cap.Calls))
	case cap.Tokens > 0 && s.Tokens >= cap.Tokens:
		return b.exhausted(model, fmt.Sprintf("%d tokens (max_tokens_per_day)", cap.Tokens))
	}
	s.Calls++
	b.spent[model] = s
	b.observe(model, s, cap)
	return nil
}

func (b *Daily) exhausted(model, what string) error {
	return &functions.Error{Reason: functions.BudgetExhausted, ImageBytes: -1,
		Detail: fmt.Sprintf("model %s spent its budget of %s for %s UTC; no call was made. The row is retried after 00:00 UTC, or at once by pgimageai retry --reason budget_exhausted once the budget is raised",
			model, what, b.day.Format(time.DateOnly))}
}

// Settle records the end of a reserved call: answered calls keep their
// count and add their tokens; a call without an answer gives its count back.
func (b *Daily) Settle(model string, cap rules.DailyCap, answered bool, tokens int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rollover() {
		return // counted on a day that is over
	}
	s := b.spent[model]
	if answered {
		s.Tokens += tokens
	} else {
		s.Calls--
	}
	b.spent[model] = s
	b.observe(model, s, cap)
}

func (b *Daily) observe(model string, s state.Spent, cap rules.DailyCap) {
	b.metrics.Budget(model, "calls", s.Calls, cap.Calls)
	b.metrics.Budget(model, "tokens", s.Tokens, cap.Tokens)
}

// GiveBack gives back n calls of model reserved at reserved — batch
// requests that got no answer, or whose batch was refused, and that the
// synchronous calls of their rows count again. Calls reserved on a UTC day
// that is over are not given back: they were counted then.
func (b *Daily) GiveBack(model string, cap rules.DailyCap, n int, reserved time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rollover()
	if n <= 0 || !UTCDay(reserved).Equal(b.day) {
		return
	}
	s := b.spent[model]
	s.Calls = max(0, s.Calls-int64(n))
	b.spent[model] = s
	b.observe(model, s, cap)
}
